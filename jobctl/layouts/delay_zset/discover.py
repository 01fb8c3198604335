"""Discovery of the delay layouts of layouts.md section 6 (seed 004):
Redisson's delayed queues first (their keys have fixed names), then delay
zsets; one recognizer for both, so a Redisson timeout zset is never taken
for a delay zset."""

from __future__ import annotations

import re
from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import REDISSON_DELAY_KEY_RE, DelayZsetKeys
from jobctl.layouts.delay_zset.common import EPOCH_MS_RANGE

__all__ = ["recognize"]

_DELAY_NAME_RE = re.compile(r"delay", re.IGNORECASE)


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Redisson delayed queues and delay zsets in a scanned keyspace
    (:mod:`jobctl.discovery`).

    Redisson: ``redisson_delay_queue_timeout:{name}`` (zset) or
    ``redisson_delay_queue:{name}`` (list); the destination list ``name``
    is claimed with them.  Delay zset: a zset whose name contains ``delay``
    and no hash tag; with a client, its lowest and highest scores must be
    epoch-ms due times (:data:`EPOCH_MS_RANGE`).
    """
    out = []
    redisson: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = REDISSON_DELAY_KEY_RE.match(key)
        if m and typ == (b"zset" if m.group(1) else b"list"):
            redisson.setdefault(m.group(2), []).append(key)
    for name, evidence in sorted(redisson.items()):
        if keys.get(name) == b"list":
            evidence.append(name)
        out.append((QueueConfig(name=name, layout="redisson-delayed-queue", tag=name, discovered=True),
                    sorted(evidence)))
    taken = {k for _, ev in out for k in ev}
    lo, hi = EPOCH_MS_RANGE
    for key, typ in sorted(keys.items()):
        if typ != b"zset" or key in taken or "{" in key or ":jobctl:" in key or not _DELAY_NAME_RE.search(key):
            continue
        if client is not None:
            first = client.zrange(key, 0, 0, withscores=True)
            last = client.zrange(key, -1, -1, withscores=True)
            if not first or not all(lo <= p[0][1] < hi for p in (first, last)):
                continue
        evidence = [key]
        if keys.get(DelayZsetKeys(key).journal) == b"stream":
            evidence.append(DelayZsetKeys(key).journal)
        out.append((QueueConfig(name=key, layout="delay-zset", tag=key, discovered=True), evidence))
    return out
