"""Discovery of delay zsets (layouts.md section 6; seed 004).  Redisson's
delayed queues have their own recogniser
(:mod:`jobctl.layouts.redisson_delayed_queue.discover`), which runs first;
their keys carry a hash tag, which a delay zset's never does."""

from __future__ import annotations

import re
from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import DelayZsetKeys
from jobctl.layouts.delay_zset.common import EPOCH_MS_RANGE

__all__ = ["recognize"]

_DELAY_NAME_RE = re.compile(r"delay", re.IGNORECASE)


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Delay zsets in a scanned keyspace (:mod:`jobctl.discovery`): a zset
    whose name contains ``delay`` and no hash tag; with a client, its
    lowest and highest scores must be epoch-ms due times
    (:data:`EPOCH_MS_RANGE`).
    """
    out = []
    lo, hi = EPOCH_MS_RANGE
    for key, typ in sorted(keys.items()):
        if typ != b"zset" or "{" in key or ":jobctl:" in key or not _DELAY_NAME_RE.search(key):
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
