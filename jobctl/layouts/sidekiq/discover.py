"""Discovery of Sidekiq instances (:func:`recognize`)."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.layouts.sidekiq.keys import SETS, SidekiqKeys

__all__ = ["recognize"]


def _prefixes(keys: dict[str, bytes]) -> list[str]:
    """The namespaces (``""`` or ``"<ns>:"``) with a ``queues`` set."""
    return sorted(k[:-len("queues")] for k, t in keys.items()
                  if t == b"set" and (k == "queues" or k.endswith(":queues")))


def _evidence(keys: dict[str, bytes], prefix: str, client) -> list[str]:
    """Sidekiq's keys under ``prefix`` beside its ``queues`` set: the sets
    and ``processes`` of Sidekiq's types, and the ``queue:<q>`` lists of
    the set's members (read with ``client`` when given); ``[]`` when none."""
    found = [prefix + n for n in SETS if keys.get(prefix + n) == b"zset"]
    if keys.get(prefix + "processes") == b"set":
        found.append(prefix + "processes")
    lists = sorted(k for k, t in keys.items() if t == b"list" and k.startswith(prefix + "queue:"))
    if lists and client is not None:
        members = {m.decode("utf-8", "surrogateescape") for m in client.smembers(prefix + "queues")}
        lists = [k for k in lists if k[len(prefix + "queue:"):] in members]
    elif not found:
        lists = []  # without the members, bare lists named queue:* prove nothing
    return found + lists


def recognize(keys: dict[str, bytes], *, client=None) -> list[tuple[QueueConfig, list[str]]]:
    """Sidekiq instances among ``keys`` (key name -> TYPE reply).

    An instance counts when its ``queues`` set exists beside one of
    ``dead``/``retry``/``schedule`` (zsets), ``processes`` (a set) or a
    ``queue:<q>`` list whose ``q`` is a member of the set; ``<ns>:``
    prefixes (redis-namespace) are found the same way.  Named ``sidekiq``
    (``sidekiq-<ns>`` under a namespace).  Evidence: those keys, plus
    jobctl's journal of it."""
    out = []
    for prefix in _prefixes(keys):
        found = _evidence(keys, prefix, client)
        if not found:
            continue
        ns = prefix[:-1]
        own = SidekiqKeys(ns)
        evidence = sorted([prefix + "queues", *found] + ([own.journal] if own.journal in keys else []))
        name = f"sidekiq-{ns}" if ns else "sidekiq"
        out.append((QueueConfig(name=name, layout="sidekiq", discovered=True,
                                options={"namespace": ns} if ns else {}), evidence))
    return out
