"""Discovery of Redisson's delayed queues (layouts.md section 6; seed 004):
their keys have fixed names."""

from __future__ import annotations

from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import REDISSON_DELAY_KEY_RE

__all__ = ["recognize"]


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Redisson delayed queues in a scanned keyspace (:mod:`jobctl.discovery`):
    ``redisson_delay_queue_timeout:{name}`` (zset) or
    ``redisson_delay_queue:{name}`` (list); the destination list ``name``
    is claimed with them.
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
    return out
