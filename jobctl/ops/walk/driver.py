"""The walk driver's entry point (:func:`drive`): apply a plan on its dead
lists, one source (shard) at a time, leases taken for all of them first and
each hold given back as soon as its walk ends (on a Redis Cluster, the
shards of each primary in a process of their own: :mod:`.parallel`).  The walk mode follows the
plan: a :class:`~jobctl.ops.plan.TailRange` (unfiltered, or a
:class:`~jobctl.ops.plan.PredicateRange`'s windows) is walked in tail mode
(:class:`~.tail.TailWalk`), any other plan per job
(:class:`~.per_job.PerJobWalk`).  The widths below are the driver's knobs;
their measurements are in docs/performance.md."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..lease import acquire, lease_value
from ..plan import Plan, PredicateRange, TailRange
from ..result import BatchResult
from .lifecycle import Renewal, done_with, give_back, renewing
from .parallel import by_primary, walk_in_parallel, walk_on_primary
from .per_job import Jobs, PerJobWalk, shard_orders
from .source import ListSource
from .tail import TailWalk

__all__ = ["drive", "drive_tail", "tail_depth", "DEPTH", "ROUND_TRIP_POSITIONS", "MAX_TAIL_DEPTH", "WINDOW",
           "TAIL_WINDOW", "TAIL_AHEAD"]

#: Window calls per pipelined round trip of a per-job walk: another client's
#: command waits behind a whole round trip, so one call keeps that wait near
#: one call's time (same throughput within noise).
DEPTH = 1
#: Tail positions per pipelined round trip in tail mode and for a
#: :class:`~jobctl.ops.plan.PredicateRange` plan's windows (~1-1.5 µs of
#: server time a position): two round trips in flight may queue in front of
#: another client, so they are half as wide as one would be.
ROUND_TRIP_POSITIONS = 120
#: At most this many calls a round trip whatever ``--batch`` (a call costs
#: ~20 µs of its own).
MAX_TAIL_DEPTH = 8
#: Tail positions one window call of a per-job walk pops when ``--batch``
#: sets none (~0.15-0.45 ms of server time a call; half as wide as with one
#: round trip in flight).
WINDOW = 64
#: Tail positions one window call of an unfiltered plan (tail mode) pops
#: when ``--batch`` sets none (~0.25-0.4 ms of server time a call).
TAIL_WINDOW = 120
#: Round trips in flight: the client packs the next one while the server
#: runs this one; a stop lands one round trip later.
TAIL_AHEAD = 2


def tail_depth(depth: int | None, batch: int, cost: int = 1) -> int:
    """Calls per round trip in tail mode: ``depth`` when given, else
    :data:`ROUND_TRIP_POSITIONS` over ``batch`` times the sources' relative
    ``cost``, at least 1 and at most :data:`MAX_TAIL_DEPTH`."""
    return max(1, depth if depth else min(ROUND_TRIP_POSITIONS // (batch * max(1, cost)), MAX_TAIL_DEPTH))


def drive(sources: list[ListSource], plan: Plan, *, batch: int | None = None, depth: int | None = None,
          now_fn: Callable[[], int] | None = None, stop: Callable[[], bool] | None = None,
          ahead: int | None = None) -> Iterator[BatchResult]:
    """Apply ``plan`` on ``sources`` (one per shard with planned jobs);
    yields one :class:`BatchResult` per window call.

    ``batch`` tail positions per call (default :data:`WINDOW`, tail mode
    :data:`TAIL_WINDOW`), ``depth`` calls per round trip (default:
    :data:`DEPTH` for a per-job walk, :func:`tail_depth` in tail mode),
    ``ahead`` round trips in flight (default :data:`TAIL_AHEAD`; the walk
    then polls ``stop()`` before each one it sends behind another).  Memory:
    a few bytes per planned job beyond the plan's own (no object per job
    when the plan keeps :class:`~jobctl.ops.plan.JobColumns`).  Raises
    :class:`~jobctl.errors.Busy` (lease held) or
    :class:`~jobctl.errors.DataError` (a key of the wrong type: that call
    wrote nothing; a script refused again after the cache was reloaded),
    after restoring the hold.
    """
    from ...clock import now_ms

    now_fn = now_fn or now_ms
    value = lease_value(plan.spec.op_id)
    ahead = ahead or TAIL_AHEAD
    if isinstance(plan.jobs, TailRange):
        cost = max(s.cost for s in sources)
        if isinstance(plan.jobs, PredicateRange):  # the plan's windows: its digests and match bitmaps
            batch = max(1, min(batch or plan.jobs.window, 1000))  # a call takes <= 1,000 (one RPOP)
            yield from drive_tail(sources, plan.jobs.walked, value, plan.spec.queue, batch,
                                  tail_depth(depth, batch, cost), now_fn, windows=plan.jobs.windows,
                                  plan_window=plan.jobs.window, stop=stop, ahead=ahead)
            return
        batch = max(1, batch or min([s.window for s in sources if s.window] or [TAIL_WINDOW]))
        yield from drive_tail(sources, plan.jobs.walked, value, plan.spec.queue, batch,
                              tail_depth(depth, batch, cost), now_fn, stop=stop, ahead=ahead)
        return
    depth = max(1, depth or DEPTH)
    batch = max(1, batch or min([s.window for s in sources if s.window] or [WINDOW]))
    jobs = Jobs(plan.jobs)
    orders = shard_orders(jobs)
    met = bytearray(len(jobs))
    def walk(s: ListSource, halted=stop) -> PerJobWalk:
        return PerJobWalk(s, value, jobs, orders[s.shard], met, plan.walked.get(s.shard, 0), batch, depth, now_fn,
                          halted, ahead)

    yield from _walk_all([s for s in sources if s.shard in orders], walk, value, plan.spec.queue, stop, ahead == 1)


def drive_tail(sources: list[ListSource], walked: dict[int, int], value: str, queue: str, batch: int,
               depth: int, now_fn, windows: dict[int, list[tuple[str, bytes, bytes]]] | None = None,
               plan_window: int = 1, stop: Callable[[], bool] | None = None, ahead: int = 1) -> Iterator[BatchResult]:
    """:func:`drive` of a :class:`~jobctl.ops.plan.TailRange` plan: each
    source's ``walked[shard]`` tail positions, every one of them planned
    (:class:`~.tail.TailWalk`; ``windows``: a
    :class:`~jobctl.ops.plan.PredicateRange`'s, per shard, of
    ``plan_window`` positions each)."""
    def walk(s: ListSource, halted=stop) -> TailWalk:
        return TailWalk(s, value, walked[s.shard], batch, depth, now_fn,
                        windows[s.shard] if windows is not None else None, plan_window, halted, ahead)

    yield from _walk_all([s for s in sources if walked.get(s.shard)], walk, value, queue, stop, ahead == 1)


def _walk_all(todo: list[ListSource], walk, value: str, queue: str,
              stop: Callable[[], bool] | None, paced: bool = False) -> Iterator[BatchResult]:
    """Walk every source (``walk(src, stop)``).  On one server: every
    source's lease taken first, then each walked in turn, the leases of those
    waiting renewed and each hold given back as its walk ends; on a cluster,
    each primary's shards on a connection of their own, one process per
    primary when there are several (:mod:`.parallel`; ``paced``: the caller
    paces after each result, so none is merged).  Every hold goes back
    however the run ends."""
    from ...cluster import is_cluster

    groups = by_primary(todo)
    if len(groups) > 1:
        yield from walk_in_parallel(groups, walk, value, queue, stop, paced)
        return
    if todo and is_cluster(todo[0].client):  # one primary: its own connection, calls in flight
        yield from walk_on_primary(todo, walk, value, queue, stop)
        return
    taken: list[ListSource] = []
    try:
        for src in todo:
            acquire(src, value, queue)
            taken.append(src)
        renewal = Renewal()  # one for the run: the waiting leases are renewed across shards
        for src in todo:
            yield from renewing(iter(walk(src)), taken, value, renewal)
            done_with(src, taken, value, give_back)
    finally:
        give_back(taken, value)
