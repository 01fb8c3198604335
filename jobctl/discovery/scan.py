"""The bounded keyspace scan behind discovery: ``SCAN`` (never ``KEYS``)
with a pipelined ``TYPE`` per page, one budget per primary, so a bound
reached on one node of a Redis Cluster never leaves another unscanned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cluster import is_cluster

__all__ = ["NodeScan", "scan_nodes"]


@dataclass(frozen=True)
class NodeScan:
    """What the scan of one server (one cluster primary) examined:
    ``node`` its ``host:port`` (or socket path), ``scanned`` keys,
    ``complete`` False when the scan stopped at its per-node bound,
    ``unreadable`` keys whose TYPE the ACL refused (skipped)."""

    node: str
    scanned: int
    complete: bool
    unreadable: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "scanned": self.scanned, "complete": self.complete, "unreadable": self.unreadable}


def named_primaries(client: Any) -> list[tuple[str, Any]]:
    """``(host:port, plain client)`` per primary: the client itself on one
    server, every primary of a cluster (``CLUSTER SHARDS`` as redis-py knows it)."""
    if is_cluster(client):
        return [(n.name, client.get_redis_connection(n)) for n in client.get_primaries()]
    kw = client.connection_pool.connection_kwargs
    return [(kw["path"] if "path" in kw else f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}", client)]


def _typed(node: Any, page: list[bytes], types: dict[str, bytes]) -> int:
    """The TYPE of each key of ``page`` into ``types``; returns how many the
    ACL refused (``NOPERM``: skipped, the rest kept).  Raises any other error."""
    from redis.exceptions import NoPermissionError

    pipe = node.pipeline(transaction=False)
    for raw in page:
        pipe.type(raw)
    refused = 0
    for raw, typ in zip(page, pipe.execute(raise_on_error=False)):
        if isinstance(typ, NoPermissionError):
            refused += 1
            continue
        if isinstance(typ, Exception):
            raise typ
        types[raw.decode("utf-8", "replace")] = typ if isinstance(typ, bytes) else str(typ).encode()
    return refused


def scan_node(node: Any, types: dict[str, bytes], *, limit: int, count: int,
              match: str | None) -> tuple[int, bool, int]:
    """Scan one server into ``types`` (key -> TYPE reply): ``(keys scanned,
    complete, keys whose TYPE the ACL refused)``; stops after the page that
    reaches ``limit`` keys.  Cost: ``ceil(keys/count)`` SCAN calls plus one
    pipelined TYPE batch per page.  Raises redis-py errors unchanged."""
    cursor, scanned, refused = 0, 0, 0
    while True:
        cursor, page = node.scan(cursor=cursor, match=match, count=count)
        if page:
            refused += _typed(node, page, types)
        scanned += len(page)
        if cursor == 0:
            return scanned, True, refused
        if scanned >= limit:
            return scanned, False, refused


def scan_nodes(client: Any, *, limit: int, count: int = 1000,
               match: str | None = None) -> tuple[dict[str, bytes], list[NodeScan]]:
    """``({key: TYPE reply}, one NodeScan per primary)``: every primary
    scanned up to ``limit`` keys of its own.  Raises redis-py errors unchanged."""
    types: dict[str, bytes] = {}
    nodes = []
    for name, node in named_primaries(client):
        nodes.append(NodeScan(name, *scan_node(node, types, limit=limit, count=count, match=match)))
    return types, nodes
