"""Discovery of RQ queues (:func:`recognize`)."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.layouts.rq.keys import JOB_PREFIX, QUEUES, RQ_KEY_RE, RqKeys

__all__ = ["recognize"]

#: The Redis type of each per-queue RQ key kind.
_TYPES = {"queue": b"list", "failed": b"zset", "scheduled": b"zset", "wip": b"zset", "finished": b"zset",
          "deferred": b"zset", "canceled": b"zset"}


def recognize(keys: dict[str, bytes], *, client=None, rejected: list[str] | None = None
              ) -> list[tuple[QueueConfig, list[str]]]:
    """RQ queues among ``keys`` (key name -> TYPE reply).

    A queue name counts when one of its ``rq:queue:<q>`` (list) or
    ``rq:<registry>:<q>`` (zset) keys exists with RQ's type and RQ's own
    evidence is there too: the ``rq:queues`` set or a ``rq:job:<id>`` hash.
    Keys named like them but of another type go to ``rejected``.  Evidence:
    the queue's keys, plus jobctl's journal of it."""
    rq_evidence = keys.get(QUEUES) == b"set" or any(
        k.startswith(JOB_PREFIX) and t == b"hash" for k, t in keys.items())
    found: dict[str, list[str]] = {}
    odd: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = RQ_KEY_RE.match(key)
        if not m:
            continue
        kind, name = m.group(1), m.group(2)
        want = b"list" if m.group(3) else _TYPES[kind]
        (found if typ == want else odd).setdefault(name, []).append(key)
    if not rq_evidence:
        return []
    out = []
    for name in sorted(found):
        if rejected is not None:
            rejected.extend(sorted(odd.get(name, [])))
        own = RqKeys(name)
        evidence = sorted(found[name]) + ([own.journal] if own.journal in keys else [])
        out.append((QueueConfig(name=name, layout="rq", tag=name, discovered=True), evidence))
    return out
