"""``jobctl pause`` / ``jobctl resume`` on the reliable-list layout (seed 000
sections 1, 17 and 19: "pause low-priority queues during incidents",
"per-tenant pause flags"), without the workers' cooperation.

The paused state is jobctl's own: per shard a list ``queue:{t}:jobctl:paused``
(in ready order: head newest, tail the job a worker would have taken first)
and a hash ``queue:{t}:jobctl:paused:info`` (id -> JSON ``{by, at_ms,
reason, operation, from, score, hold}``: who, when, why, and where the job
was paused from: a ready list, or the scheduled zset with its due time).
Workers never look at these keys, so a paused job is out of their reach.

Pause (ready -> paused) plans by walking each ready list from its served end
(positions counted from the tail) and applies with ``rl_pause_move.lua``:
one call reads one bounded window of the list (at most :data:`MAX_SPAN` +
2 x :data:`SLACK` positions), overwrites the planned jobs whose payload SHA1
is unchanged with a tombstone, removes the tombstones with one ``LREM`` that
stops at the window's depth, and pushes the jobs on the paused list, oldest
first.  Workers pop the tail meanwhile, so positions shift towards the tail
by the same amount for every job of a list: the shift seen in one call
places the next window; when a call finds none of its jobs, the windows
below it are searched down to the served end.  A planned job not found is a
job a worker claimed (skipped, ``moved``).  Scheduled jobs (``--state
scheduled``) move while their due time is the planned one.

Resume (paused -> ready) walks the paused list from its head (newest first)
and ``RPUSH``es each job on the ready list it came from, newest first, so the
oldest paused job is at the served end: the original order is restored, and
resumed jobs are served before the jobs that arrived while they were paused
(they were ready first).  Jobs paused from the scheduled zset go back to it
with their due time.

Holds (``pause --hold``): :mod:`jobctl.layouts.reliable_list.holds`; a
hold cycle is a pause whose spec carries the hold's id, and each of its
script calls moves nothing once the hold record is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from jobctl.errors import UsageError
from jobctl.keys import ReliableListKeys
from jobctl.model import JobRecord, State
from jobctl.ops.plan import Plan, PlannedJob, payload_sha1
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.common import check_transition, text
from jobctl.layouts.planning import plan_from_walk, shard_index
from jobctl.layouts.walks import WINDOW, walk_list
from jobctl.layouts.reliable_list.pause_window import (MAX_SPAN, SLACK, apply_scheduled, apply_window,
                                                        pause_record, take_out_ready, take_out_scheduled)

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["PAUSE_TRANSITIONS", "plan_operation", "apply_plan", "replan_after_lift", "holds", "add_hold", "lift_holds",
           "hold_spec", "holds_of", "pause_info", "pause_record", "take_out_ready", "take_out_scheduled", "plan_moves", "DEFAULT_BATCH", "SLACK", "MAX_SPAN"]

#: (operation, source) -> allowed targets of pause and resume.
PAUSE_TRANSITIONS: dict[tuple[Operation, State], tuple[State, ...]] = {
    (Operation.PAUSE, State.READY): (State.PAUSED,),
    (Operation.PAUSE, State.SCHEDULED): (State.PAUSED,),
    (Operation.RESUME, State.PAUSED): (State.READY,),
}

#: Jobs per script call.
DEFAULT_BATCH = 128


# -- planning ------------------------------------------------------------------

def _walk_ready(layout: "ReliableList", keys: ReliableListKeys, idx: int, key: str) -> Iterator[list[JobRecord]]:
    """A ready list's records, walked from the head (producers' end) so that
    workers popping the tail meanwhile never make the walk skip a job; each
    window is read with its list length in one MULTI, which gives each job's
    position from the tail at that instant.  A job read twice (producers
    pushed meanwhile) is yielded once."""
    seen: set[str] = set()
    start = 0
    while True:
        pipe = layout.client.pipeline(transaction=True)
        pipe.llen(key)
        pipe.lrange(key, start, start + WINDOW - 1)
        length, chunk = pipe.execute()
        if not chunk:
            return
        ids, extra = [], []
        for n, raw in enumerate(chunk):
            job_id = text(raw)
            if job_id in seen:
                continue
            seen.add(job_id)
            ids.append(job_id)
            extra.append({"position": length - 1 - (start + n), "list_index": idx})
        yield layout._records(keys, ids, State.READY, extra)
        start += len(chunk)


def _walk(layout: "ReliableList", spec: OpSpec) -> Iterator[list[JobRecord]]:
    client = layout.client
    for keys in layout.shards:
        if spec.source is State.READY:
            for idx, ref in enumerate(layout.ready_lists(keys)):
                yield from _walk_ready(layout, keys, idx, ref.key)
        elif spec.source is State.SCHEDULED:
            yield from layout.iter_batches_of(keys, State.SCHEDULED, WINDOW)
        else:
            seen: set[str] = set()
            for start, chunk in walk_list(client, keys.paused, from_right=False, batch=WINDOW):
                ids = [text(x) for x in chunk]
                fresh = [(n, i) for n, i in enumerate(ids) if i not in seen]
                seen.update(ids)
                yield layout._records(keys, [i for _, i in fresh], State.PAUSED,
                                      [{"position": start + n} for n, _ in fresh])


def plan_operation(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """Plan a pause (ready or scheduled -> paused) or a resume (paused ->
    where each job was paused from).  Reads only.  Each match is fenced by
    its payload SHA1 and its position (ready: from the list's tail; paused:
    from the head) or due time (scheduled).  Raises :class:`UsageError` for
    another transition, ``--ids`` or ``--priority``."""
    check_transition(layout.name, PAUSE_TRANSITIONS, spec)
    if spec.priority is not None:
        raise UsageError(f"--priority does not apply to {spec.operation.value}: jobs go back to the list "
                         "they were paused from")
    if spec.ids:
        raise UsageError(f"{spec.operation.value} takes --filter, not --ids")
    return plan_moves(layout, spec, now)


def plan_moves(layout: "ReliableList", spec: OpSpec, now: int,
               walk: Iterator[list[JobRecord]] | None = None) -> Plan:
    """The plan of the matching jobs of ``spec.source`` (ready: walked from
    the head, each with its position from the tail and its ready list;
    scheduled: with its due time; paused: its position from the head),
    each fenced by its payload SHA1.  ``walk``: the records to plan from
    (default: every one of ``spec.source``; a hold cycle's: only new
    arrivals).  Reads only."""
    def on_match(rec: JobRecord, pj: PlannedJob) -> None:
        if spec.source is State.READY:  # which ready list of the shard (serving order)
            pj.score = rec.meta.get("list_index", 0)

    return plan_from_walk(Plan(spec=spec, now_ms=now), _walk(layout, spec) if walk is None else walk,
                          lambda rec: payload_sha1(rec.raw), shard_of=shard_index(layout.shards), on_match=on_match)


# -- applying ------------------------------------------------------------------

def apply_plan(layout: "ReliableList", plan: Plan, *, batch: int = DEFAULT_BATCH,
               now_fn=None) -> Iterator[BatchResult]:
    """Apply ``plan`` one script call at a time, under the queue's lease
    (:class:`~jobctl.ops.queue_lease.QueueLease`: a pause, a resume, a hold
    cycle and a dead-list walk of one queue never interleave); yields each
    call's result.  Stopping between calls leaves every job in exactly one
    state.  Raises :class:`~jobctl.errors.Busy` (nothing changed) when
    another operation keeps the lease longer than
    :data:`~jobctl.ops.queue_lease.WAIT_S`."""
    from jobctl.ops.queue_lease import QueueLease

    with QueueLease(layout, plan.spec.op_id) as lease:
        for result in _apply_groups(layout, plan, batch, now_fn):
            yield result
            lease.renew_if_due()


def replan_after_lift(layout: "ReliableList", plan: Plan, lifted: list[str], now: int) -> None:
    """A resume's ``plan`` once the holds ``lifted`` (their ids) are gone,
    read under the queue's lease: re-planned in place with the jobs of the
    plan still paused, plus the matching jobs the cycles of those holds
    paused since the plan was made (their pause record names the hold),
    each at its position now; within ``plan.spec.limit``.  Reads only."""
    from dataclasses import replace

    old = set(plan.job_ids())
    fresh = plan_moves(layout, replace(plan.spec, limit=None), now)
    late = [j for j in fresh.jobs if j.job_id not in old]
    held = _paused_by(layout, late, set(lifted))
    jobs = [j for j in fresh.jobs if j.job_id in old or j.job_id in held]
    plan.jobs = jobs[:plan.spec.limit] if plan.spec.limit is not None else jobs


def _paused_by(layout: "ReliableList", jobs: list[PlannedJob], hold_ids: set[str]) -> set[str]:
    """The ids of ``jobs`` (paused) whose pause record names one of ``hold_ids``."""
    if not jobs or not hold_ids:
        return set()
    pipe = layout.client.pipeline(transaction=False)
    for job in jobs:
        pipe.hget(layout.shards[job.shard].paused_info, job.job_id)
    out = set()
    for job, raw in zip(jobs, pipe.execute()):
        try:
            doc = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("hold") in hold_ids:
            out.add(job.job_id)
    return out


def _apply_groups(layout: "ReliableList", plan: Plan, batch: int, now_fn) -> Iterator[BatchResult]:
    """:func:`apply_plan`'s calls, shard by shard and list by list."""
    from jobctl.layouts.base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    groups: dict[tuple[int, int], list[PlannedJob]] = {}
    for job in plan.jobs:
        sub = job.score if spec.source is State.READY else 0
        groups.setdefault((job.shard, sub or 0), []).append(job)
    for (shard, sub), jobs in groups.items():
        keys = layout.shards[shard]
        if spec.source is State.SCHEDULED:
            yield from apply_scheduled(layout, keys, spec, jobs, batch, now_fn)
        elif spec.source is State.READY:
            src = layout.ready_lists(keys)[sub].key
            yield from apply_window(layout, keys, spec, "pause", src, jobs, batch, now_fn)
        else:
            yield from apply_window(layout, keys, spec, "resume", keys.paused, jobs, batch, now_fn)


def pause_info(client, keys: ReliableListKeys, job_id: str) -> Any:
    """The record kept with a paused job (:func:`pause_record`), ``None`` when missing."""
    raw = client.hget(keys.paused_info, job_id)
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return text(raw)


# holds: jobctl.layouts.reliable_list.holds (re-exported for callers of this module)
from jobctl.layouts.reliable_list.holds import add_hold, hold_spec, holds, holds_of, lift_holds  # noqa: E402,F401
