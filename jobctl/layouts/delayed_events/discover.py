"""Discovery of delayed-events services (layouts.md section 5; seed 003):
the recognizer :mod:`jobctl.discovery` calls."""

from __future__ import annotations

from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import DELAYED_EVENTS_ZSET, DelayedEventsKeys, split_delayed_event_member
from jobctl.layouts.common import text

__all__ = ["recognize"]


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Delayed-events services in a scanned keyspace (:mod:`jobctl.discovery`).

    Evidence: a zset ``<prefix>delayed_events`` and a hash ``<prefix>events``
    side by side; with a client, the zset's first members must look like
    ``<class>###<id>``.  Claims the lock, jobctl's keys and the type lists
    of the sampled classes (written to the config as ``event_lists``).
    """
    out = []
    for key, typ in sorted(keys.items()):
        if typ != b"zset" or not key.endswith(DELAYED_EVENTS_ZSET):
            continue
        prefix = key[: -len(DELAYED_EVENTS_ZSET)]
        k = DelayedEventsKeys(prefix)
        if keys.get(k.events) != b"hash":
            continue
        evidence = [k.zset, k.events]
        opts: dict[str, Any] = {}
        if prefix:
            opts["prefix"] = prefix
        if client is not None:
            sample = [text(m) for m in client.zrange(k.zset, 0, 99)]
            if not sample or not all(split_delayed_event_member(m) for m in sample):
                continue
            classes = {split_delayed_event_member(m)[0] for m in sample}  # type: ignore[index]
            lists = sorted({k.type_list(c) for c in classes if keys.get(k.type_list(c)) == b"list"})
            if lists:
                opts["event_lists"] = lists
                evidence += lists
        for extra, want in ((k.lock, b"string"), (k.suppressed, b"zset"), (k.suppressed_info, b"hash"),
                            (k.journal, b"stream")):
            if keys.get(extra) == want:
                evidence.append(extra)
        name = f"{prefix}delayed_events"
        out.append((QueueConfig(name=name, layout="delayed-events", options=opts, discovered=True), evidence))
    return out
