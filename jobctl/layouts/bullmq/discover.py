"""Discovery of BullMQ queues (:func:`recognize`)."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.layouts.bullmq.keys import DEFAULT_PREFIX, KEY_RE, STATE_KINDS, BullKeys

__all__ = ["recognize"]


def recognize(keys: dict[str, bytes], *, client=None, rejected: list[str] | None = None
              ) -> list[tuple[QueueConfig, list[str]]]:
    """BullMQ queues among ``keys`` (key name -> TYPE reply).

    A ``(prefix, queue)`` counts when its ``meta`` hash or ``id`` counter
    exists with BullMQ's type (every ``Queue`` writes them) beside at least
    one other of its keys of BullMQ's type (``wait``, ``failed``,
    ``events``, ...).  Keys named like them but of another type go to
    ``rejected``.  Evidence: those keys, plus jobctl's journal of it."""
    found: dict[tuple[str, str], list[str]] = {}
    odd: dict[tuple[str, str], list[str]] = {}
    for key, typ in keys.items():
        m = KEY_RE.match(key)
        if m:
            (found if typ == STATE_KINDS[m.group(3)] else odd).setdefault((m.group(1), m.group(2)), []).append(key)
    out = []
    for (prefix, name), names in sorted(found.items()):
        kinds = {n.rsplit(":", 1)[1] for n in names}
        if not kinds & {"meta", "id"} or len(kinds) < 2:
            continue
        if rejected is not None:
            rejected.extend(sorted(odd.get((prefix, name), [])))
        own = BullKeys(prefix, name)
        evidence = sorted(names) + ([own.journal] if own.journal in keys else [])
        options = {} if prefix == DEFAULT_PREFIX else {"prefix": prefix}
        out.append((QueueConfig(name=name, layout="bullmq", tag=name, discovered=True, options=options), evidence))
    return out
