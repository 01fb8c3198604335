"""Redis Cluster helpers: which node holds a key, every primary, slots.

On a ``redis.RedisCluster`` client, single-key commands, scripts (routed by
their first key; every key in KEYS) and non-transactional pipelines are
routed by redis-py.  What it does not do for jobctl:

* ``SCAN`` with a pattern that carries a hash tag (``job:{email:03}:*``)
  must run on the one node that owns the tag's slot: :func:`node_for`;
* a keyspace-wide ``SCAN`` (discovery) must run on every primary:
  :func:`primaries`;
* a layout whose keys carry no common hash tag cannot run a multi-key
  script: :func:`slots_of` / :func:`require_one_slot` say so before anything
  runs.

On any other client these helpers are no-ops: :func:`node_for` returns the
client itself, :func:`primaries` ``[client]``.
"""

from __future__ import annotations

from typing import Any, Iterable

from .errors import UsageError

__all__ = ["is_cluster", "key_slot", "slots_of", "node_for", "primaries", "require_one_slot", "one_slot", "scan_pages"]


def is_cluster(client: Any) -> bool:
    """True for a ``redis.RedisCluster`` client."""
    try:
        from redis.cluster import RedisCluster
    except ImportError:  # pragma: no cover
        return False
    return isinstance(client, RedisCluster)


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster slot (0..16383) of ``key`` (CRC16 of its hash tag, ``CLUSTER KEYSLOT``)."""
    from redis.crc import key_slot as _slot

    return _slot(key.encode("utf-8", "surrogateescape") if isinstance(key, str) else key)


def slots_of(keys: Iterable[str | bytes]) -> set[int]:
    """The set of slots ``keys`` map to."""
    return {key_slot(k) for k in keys}


def one_slot(keys: Iterable[str | bytes]) -> bool:
    """True when every key of ``keys`` maps to one slot."""
    return len(slots_of(keys)) <= 1


def require_one_slot(client: Any, keys: Iterable[str | bytes], what: str) -> None:
    """On a cluster, raise :class:`UsageError` (exit 2) when ``keys`` span
    several slots: ``what`` (e.g. ``"redrive of queue q (hash-job)"``) would
    fail with CROSSSLOT.  Nothing is checked on a single server."""
    if not is_cluster(client):
        return
    keys = list(keys)
    if not one_slot(keys):
        raise UsageError(f"{what} cannot run on a Redis Cluster: the queue's keys ({len(keys)}) span "
                         f"{len(slots_of(keys))} slots (this layout's keys carry no common hash tag)")


def node_for(client: Any, key: str | bytes) -> Any:
    """A plain ``redis.Redis`` on the primary that owns ``key``'s slot (a
    pattern with a hash tag maps to the tag's slot); ``client`` itself when it
    is no cluster client."""
    if not is_cluster(client):
        return client
    return client.get_redis_connection(client.get_node_from_key(key))


def primaries(client: Any) -> list[Any]:
    """A plain ``redis.Redis`` per primary of the cluster (``[client]`` elsewhere)."""
    if not is_cluster(client):
        return [client]
    return [client.get_redis_connection(n) for n in client.get_primaries()]


def _has_hash_tag(pattern: str) -> bool:
    start = pattern.find("{")
    end = pattern.find("}", start + 1)
    return start >= 0 and end > start + 1 and not any(c in pattern[start + 1:end] for c in "*?[")


def scan_pages(client: Any, match: str, count: int):
    """Yield the pages (lists of key names, bytes) of ``SCAN MATCH match
    COUNT count`` over the node that owns ``match``'s hash tag, or over every
    primary when the pattern has none (one server: the client itself)."""
    nodes = [node_for(client, match)] if _has_hash_tag(match) else primaries(client)
    for node in nodes:
        cursor = 0
        while True:
            cursor, found = node.scan(cursor=cursor, match=match, count=count)
            yield found
            if cursor == 0:
                break


def layout_keys(layout: Any) -> list[str]:
    """The key names a multi-key script of ``layout`` may touch together:
    its :meth:`~jobctl.layouts.facts.LayoutFacts.slot_keys` (a keyed
    layout: its key names but the journal, plus a sample ``job("<id>")``
    key; ``[]`` for the sharded layouts, whose keys are hash-tagged by
    design)."""
    return layout.slot_keys()


def cross_slot_note(layout: Any) -> str | None:
    """On a cluster, the one-line warning for a queue whose keys span several
    slots (multi-key operations refused, reads still work); else ``None``."""
    if not is_cluster(layout.client):
        return None
    keys = layout_keys(layout)
    slots = slots_of(keys)
    if len(slots) <= 1:
        return None
    return (f"Redis Cluster: the keys of queue {layout.queue.name!r} ({layout.name}) span {len(slots)} slots "
            "(no common hash tag): operations and check --repair are refused on this queue; reads work")


def refuse_cross_slot(layout: Any, what: str) -> None:
    """Raise :class:`UsageError` (exit 2) when :func:`cross_slot_note` has a
    note: ``what`` is a multi-key operation that would fail with CROSSSLOT."""
    if cross_slot_note(layout):
        raise UsageError(f"{what} {layout.queue.name} refused: on a Redis Cluster this {layout.name} queue's keys "
                         f"span {len(slots_of(layout_keys(layout)))} slots (no common hash tag), so a multi-key "
                         "script cannot run (reads still work)")
