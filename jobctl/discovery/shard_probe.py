"""The shard count of a sharded queue that a partial scan found: its shard
hash tags are computable (``<tag>:00``, ``<tag>:01``, ...), so every tag the
scan may have missed is checked key by key (single-key ``EXISTS``, which a
slot being migrated answers, where a multi-key one gets ``TRYAGAIN``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..keys.common import fixed_key_names

if TYPE_CHECKING:
    from ..config import QueueConfig

__all__ = ["probe_shards", "probed_count"]

#: The config's bound on ``shards``.
MAX_SHARDS = 1024


def _width(queue: "QueueConfig") -> int:
    """The digits of the found shard tags (``<tag>:00`` .. : 2 below 101 shards)."""
    return max(2, len(str(queue.shards - 1)))


def _shard_keys(keys_class: type, tag: str, priorities: int | None) -> list[str]:
    """The fixed key names of one shard tag, priority lists included."""
    keys = keys_class(tag)
    names = fixed_key_names(keys)
    per_priority = getattr(keys, "ready_priority", None)
    if callable(per_priority) and priorities:
        names += [per_priority(p) for p in range(priorities)]
    return names


def probed_count(client: Any, queue: "QueueConfig", keys_class: type) -> int:
    """The shard count of ``queue`` (``queue.shards`` as found, a lower
    bound): one more than the highest shard index, among the tags of the
    found width, whose keys exist.  Cost: one pipelined ``EXISTS`` per key
    of each tag above the found ones (at most ~100 tags at two digits).
    Raises redis-py errors unchanged."""
    width = _width(queue)
    top = min(MAX_SHARDS, 10 ** width if width > 2 else 100)
    if queue.shards >= top:
        return queue.shards
    pipe = client.pipeline(transaction=False)
    owners: list[int] = []
    for i in range(queue.shards, top):
        for key in _shard_keys(keys_class, f"{queue.base_tag}:{i:0{width}d}", queue.priorities):
            pipe.exists(key)
            owners.append(i)
    found = [i for i, n in zip(owners, pipe.execute()) if n]
    return max(found) + 1 if found else queue.shards


def probe_shards(client: Any, queues: list["QueueConfig"]) -> tuple[list["QueueConfig"], dict[str, tuple[int, int]]]:
    """``queues`` with each sharded one's ``shards`` from :func:`probed_count`,
    and ``{queue: (shards found by the scan, shards after the probe)}`` for
    every queue probed.  Raises redis-py errors unchanged."""
    from ..layouts import layout_class

    out, probed = [], {}
    for q in queues:
        keys_class = getattr(layout_class(q.layout), "keys_class", None) if q.shards else None
        if keys_class is None:
            out.append(q)
            continue
        count = probed_count(client, q, keys_class)
        probed[q.name] = (q.shards, count)
        out.append(replace(q, shards=count))
    return out, probed
