"""The shards of a queue on several Redis Cluster primaries walked at once:
one process per primary (forked: :mod:`.processes`; a thread where fork is
not used) walks that primary's shards in turn, each shard's lease taken
when its walk starts and its hold given back when it ends; their results
reach the caller on one iterator (one progress, one stop, one rate: the
caller's), through a bounded pipe or queue, so a caller that paces or stops
holds every walk back.  The first error stops the other walks at their next
round trip; their results still reach the caller, then the error is
raised."""

from __future__ import annotations

import functools
import queue as queue_mod
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..lease import acquire, held_by_walkers
from ..result import LATE_RESULTS, BatchResult, merged
from .lifecycle import done_with, give_back, renewing
from .processes import FORKS, run_forked
from .source import ListSource

__all__ = ["by_primary", "walk_in_parallel", "walk_on_primary", "plan_in_parallel", "primary_name", "pinned_client",
           "RESULTS_WAITING"]

#: Results a walk may have waiting for the caller before it waits itself.
RESULTS_WAITING = 16

_DONE = object()


class _Failed:
    """A walk thread's error, carried to the caller's thread."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def by_primary(sources: list[ListSource]) -> list[list[ListSource]]:
    """``sources`` grouped by the primary that owns each one's dead list, in
    their order (one group for a client that is not a cluster client)."""
    from ...cluster import is_cluster

    groups: dict[str, list[ListSource]] = {}
    for src in sources:
        name = primary_name(src) if is_cluster(src.client) else ""
        groups.setdefault(name, []).append(src)
    return list(groups.values())


def primary_name(src: ListSource) -> str:
    """``host:port`` of the primary that owns ``src``'s dead list."""
    return src.client.get_node_from_key(src.dead).name


def pinned_client(client, key: str):
    """A client on one connection of its own to the primary that owns
    ``key``, from a pool of its own (nothing shared with ``client``'s pools,
    whose locks another thread may hold when a process forks): calls stay in
    flight as on one server (a redirection during a resharding then ends the
    walk: the rerun finishes)."""
    import redis

    pool = client.get_redis_connection(client.get_node_from_key(key)).connection_pool
    own = redis.ConnectionPool(connection_class=pool.connection_class, **pool.connection_kwargs)
    return redis.Redis(connection_pool=own, single_connection_client=True)


def _group_results(group: list[ListSource], make_walk: Callable[[ListSource, Callable[[], bool]], Any], value: str,
                   queue: str, halted: Callable[[], bool]) -> Iterator[BatchResult]:
    """One primary's walk: its shards walked in turn (the body of the
    sequential walk for one shard) on a connection of its own; every hold
    given back however it ends."""
    import dataclasses

    taken: list[ListSource] = []
    pinned = pinned_client(group[0].client, group[0].dead)
    try:
        for src in [dataclasses.replace(s, client=pinned) for s in group]:
            if halted():
                break
            acquire(src, value, queue)
            taken.append(src)
            yield from renewing(iter(make_walk(src, halted)), taken, value)
            done_with(src, taken, value, give_back)
    finally:
        give_back(taken, value)
        pinned.close()


def walk_on_primary(group: list[ListSource], make_walk, value: str, queue: str,
                    stop: Callable[[], bool] | None) -> Iterator[BatchResult]:
    """The shards of one primary of a cluster walked in the caller, on a
    connection of its own (calls in flight as on one server)."""
    yield from _group_results(group, make_walk, value, queue, stop or (lambda: False))


def _walk_group(group: list[ListSource], make_walk, value: str, queue: str, out: queue_mod.Queue,
                halted: Callable[[], bool]) -> None:
    """One primary's thread: :func:`_group_results` put on ``out``, then the end."""
    try:
        for br in _group_results(group, make_walk, value, queue, halted):
            out.put(br)
    except BaseException as exc:  # noqa: BLE001 - carried to the caller, raised there
        out.put(_Failed(exc))
    finally:
        out.put(_DONE)


def walk_in_parallel(groups: list[list[ListSource]], make_walk, value: str, queue: str,
                     stop: Callable[[], bool] | None, paced: bool = False) -> Iterator[BatchResult]:
    """Walk each group of :func:`by_primary` in a process of its own
    (:data:`~.processes.FORKS`, else a thread); ``make_walk(src, stop)``
    builds one shard's walk (an iterator of :class:`BatchResult`).  Yields
    every walk's results as they come (a forked walk's merged a few to a
    message unless ``paced``: the caller paces by ``--rate`` after each);
    raises the first walk's error after every walk ended."""
    if FORKS:
        tasks = [functools.partial(_group_results, g, make_walk, value, queue) for g in groups]
        with held_by_walkers(value):
            # once halted, every result says more follow: the caller counts them all
            yield from run_forked(tasks, [primary_name(g[0]) for g in groups], stop,
                                  halting=lambda br: setattr(br, "more", True), merge=None if paced else merged)
        return
    out: queue_mod.Queue = queue_mod.Queue(maxsize=RESULTS_WAITING)
    failed = threading.Event()

    def halted() -> bool:
        return failed.is_set() or bool(stop and stop())

    threads = [threading.Thread(target=_walk_group, args=(g, make_walk, value, queue, out, halted),
                                name=f"jobctl-walk-{i}", daemon=True) for i, g in enumerate(groups)]
    for t in threads:
        t.start()
    running, error = len(threads), None
    try:
        while running:
            item = out.get()
            if item is _DONE:
                running -= 1
            elif isinstance(item, _Failed):
                error = error or item.exc
                failed.set()
            else:
                yield item
    finally:
        failed.set()  # the caller stopped early: the walks end at their next round trip
        late = LATE_RESULTS.get()
        while running:  # drain: a walk waiting on a full queue must reach its end
            item = out.get()
            if item is _DONE:
                running -= 1
            elif late is not None and isinstance(item, BatchResult):  # moved after the caller stopped reading
                late(item)
        for t in threads:
            t.join()
    if error is not None:
        raise error


def plan_in_parallel(client, items: list[tuple[str, Any]], scan: Callable[[Any, list[Any]], Iterator[Any]]
                     ) -> Iterator[Any] | None:
    """A plan's reads split by primary: ``items`` are ``(a key of the
    shard, item)``; ``scan(pinned client, that primary's items, halted)``
    (``halted()``: stop at the next read, e.g. on Ctrl-C) runs in a
    forked process per primary and what it yields reaches the caller as it
    comes; the items of one primary are read in the caller, on a connection
    of its own.  ``None`` (plan with ``client`` itself) unless ``client`` is
    a cluster client and the items live on one primary or fork is used."""
    from ...cluster import is_cluster

    if not is_cluster(client):
        return None
    groups: dict[str, list[tuple[str, Any]]] = {}
    for key, item in items:
        groups.setdefault(client.get_node_from_key(key).name, []).append((key, item))
    if len(groups) == 1:  # one primary: read in the caller, on a connection of its own
        return _scan_group(client, next(iter(groups.values())), scan, lambda: False)
    if not FORKS:
        return None
    tasks = [functools.partial(_scan_group, client, group, scan) for group in groups.values()]
    return run_forked(tasks, list(groups), None)


def _scan_group(client, group: list[tuple[str, Any]], scan, halted: Callable[[], bool]) -> Iterator[Any]:
    pinned = pinned_client(client, group[0][0])
    try:
        yield from scan(pinned, [item for _, item in group], halted)
    finally:
        pinned.close()
