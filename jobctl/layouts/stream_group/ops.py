"""Planning and applying operations on the stream-group layout (layouts.md
section 2; seed 000 sections 11-13).

* requeue (processing -> ready) acknowledges the pending entry and appends a
  fresh entry with the same fields (``sg_requeue.lua``), fenced to the PEL
  row the plan saw (consumer, delivery count);
* promote (scheduled -> ready) appends the due id to the stream as the
  seed's scheduler does; unsuppress and purge of suppressed jobs take the
  zset member back (``sg_zset_move.lua``);
* redrive, suppress and purge from a dead *list* are the window engine's
  (:mod:`jobctl.ops.walk`, :func:`dead_sources`); from a dead *stream*
  they are ``sg_dead_move.lua`` calls fenced to the dead entry id.

Each job moves atomically and only if its fence still holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobctl.keys import StreamGroupKeys
from jobctl.model import JobRecord, State
from jobctl.ops.plan import Plan, PlannedJob, payload_sha1
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import DEFAULT_BATCH, check_transition, redrive_envelope, suppression_record
from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.planning import TRANSITIONS_WITH_SCHEDULED
from jobctl.layouts.stream_group.inspect import inspect_shard
from jobctl.layouts.stream_group.walk import walk_shard
from jobctl.layouts.walks import WINDOW

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["StreamPlannedJob", "plan_operation", "apply_plan", "dead_sources", "TRANSITIONS", "SG_WINDOW",
           "SG_TAIL_WINDOW"]

#: (operation, source) -> allowed targets (None: purge)
TRANSITIONS = TRANSITIONS_WITH_SCHEDULED

#: Dead-list positions a per-job window call takes when ``--batch`` sets none.
SG_WINDOW = 60
#: Positions a tail call (an unfiltered plan) takes when ``--batch`` sets
#: none: an ``XADD`` a job makes a position ~1.6x a reliable-list one, so 80
#: keep a call's server time near a reliable-list call of 120 (~0.4 ms); 60
#: cost ~1 µs more server and ~0.6 µs more client CPU a job on the shared
#: core (docs/performance.md, stream-group).
SG_TAIL_WINDOW = 80


@dataclass(slots=True)
class StreamPlannedJob(PlannedJob):
    """A planned stream-group job: ``entry_id`` is the pending entry
    (requeue) or the dead-stream entry (dead moves), else ``""``;
    ``consumer`` and ``deliveries`` are the PEL fence of a requeue."""

    entry_id: str
    consumer: str
    deliveries: int


def plan_operation(layout: StreamGroup, spec: OpSpec, now: int | None = None) -> Plan:
    """Plan ``spec``: walk the source, filter, fence each match
    (:func:`~jobctl.layouts.planning.plan_from_walk`).  Reads only.

    Raises :class:`UsageError` for a transition the layout does not have
    (see :data:`TRANSITIONS`) or a ``--priority``."""
    from jobctl.layouts.planning import plan_from_walk, refuse_priority, require_requeue_scope, shard_index

    now = now_ms() if now is None else now
    if spec.operation.value == "replay":  # jobctl replay: stream_group_replay
        from jobctl.layouts.stream_group.replay import plan_replay

        return plan_replay(layout, spec, now)
    check_transition(layout.name, TRANSITIONS, spec)
    refuse_priority(layout.name, spec)
    require_requeue_scope(spec)
    on_engine = spec.source is State.DEAD and layout.dead_kind == "list"  # the window engine
    if on_engine:  # unfiltered: the tail length only, ids read by the engine (reliable-list's TailRange)
        from jobctl.layouts.reliable_list.ops import plan_tail, unfiltered_tail

        if unfiltered_tail(spec):
            return plan_tail(layout, spec, now)
    plan = Plan(spec=spec, now_ms=now, redrive_record="hash" if on_engine else "envelope")

    def fence(rec: JobRecord) -> str:
        return "" if rec.meta.get("payload_in_entry") else payload_sha1(rec.raw)

    def keep(rec: JobRecord, job: PlannedJob) -> None:
        entry = rec.meta.get("entry_id" if spec.source is State.PROCESSING else "dead_entry_id") or ""
        plan.jobs[-1] = StreamPlannedJob(
            job_id=job.job_id, shard=job.shard, position=rec.position,
            score=rec.deadline_ms if spec.source is State.PROCESSING else rec.score, sha1=job.sha1,
            entry_id=entry, consumer=rec.meta.get("consumer", ""),
            deliveries=int(rec.meta.get("delivery_count") or 0))

    return plan_from_walk(plan, _source_walk(layout, spec, now), fence, shard_of=shard_index(layout.shards),
                          is_stuck=lambda r: r.deadline_ms is not None and r.deadline_ms <= now,
                          on_match=keep)


def _source_walk(layout: StreamGroup, spec: OpSpec, now: int) -> Iterator[list[JobRecord]]:
    """The source's records: ``spec.ids`` looked up in every shard, else
    every shard walked (the PEL only past the visibility timeout with
    ``--stuck``).  Dead-list positions count from the tail."""
    if spec.ids:
        for job_id in spec.ids:
            for keys in layout.shards:
                rec = inspect_shard(layout, keys, job_id, now)
                if rec is None or rec.state is not spec.source:
                    continue
                if spec.source is State.DEAD and layout.dead_kind == "list" and rec.position is not None:
                    rec.position = layout.client.llen(keys.dead) + layout.client.llen(keys.hold) - 1 - rec.position
                yield [rec]
        return
    idle = layout.visibility_timeout_ms if spec.stuck_only else None
    for keys in layout.shards:
        yield from walk_shard(layout, keys, spec.source, WINDOW, idle=idle, now=now)


def dead_sources(layout: StreamGroup, spec: OpSpec) -> list:
    """The window-engine sources (one per shard) of an operation from a
    dead *list* (``dead = "list"``): ids as reliable-list's, a redrive
    to ready is an ``XADD jobId <id>`` to the stream.  ``[]`` otherwise."""
    from jobctl.ops.walk import ListSource, drives

    if not drives(spec) or layout.dead_kind != "list":
        return []
    from jobctl.layouts.common import suppression_record
    from jobctl.ops.redrive_record import source_fields
    from jobctl.layouts.reliable_list.ops import reset_payloads, unfiltered_tail

    now = now_ms()
    out = []
    for shard, keys in enumerate(layout.shards):
        if spec.operation is Operation.PURGE:
            mode, target = "purge", keys.dead
        elif spec.target is State.SUPPRESSED:
            mode, target = "suppressed", keys.suppressed
        elif spec.target is State.SCHEDULED:
            mode, target = "scheduled", keys.scheduled
        else:
            mode, target = "stream", keys.stream
        reset = spec.operation is Operation.REDRIVE and spec.reset_attempts
        out.append(ListSource(
            client=layout.client, kind="rl", tag=keys.tag, shard=shard, dead=keys.dead, hold=keys.hold,
            walk=keys.walk, lease=keys.lease, **source_fields(layout.client, keys, now),
            info_hash=keys.suppressed_info,
            target=target, mode=mode, payload_key=keys.job,
            new_payloads=reset_payloads(layout.client, keys, spec, mode) if reset else None,
            info=(lambda now: suppression_record(spec, now)) if mode == "suppressed" else None,
            delay_ms=spec.delay_ms if mode == "scheduled" else 0,
            window=SG_TAIL_WINDOW if unfiltered_tail(spec) else SG_WINDOW, cost=2))
    return out


def apply_plan(layout: StreamGroup, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
    """Apply ``plan`` one script call at a time; yields each call's result.
    Each job moves atomically and only if its fence still holds.  A
    dead list is the window engine's (:meth:`sources`)."""
    spec = plan.spec
    if spec.operation.value == "replay":
        from jobctl.layouts.stream_group.replay import apply_replay

        yield from apply_replay(layout, plan, batch=batch or DEFAULT_BATCH)
        return
    if spec.source is State.DEAD and layout.dead_kind == "list":
        from jobctl.ops.walk import drive

        yield from drive(layout.sources(spec), plan, batch=batch, depth=1)
        return
    batch = batch or DEFAULT_BATCH
    by_shard: dict[int, list[StreamPlannedJob]] = defaultdict(list)
    for job in plan.jobs:
        by_shard[job.shard].append(job)  # type: ignore[arg-type]
    for shard, jobs in by_shard.items():
        keys = layout.shards[shard]
        for i in range(0, len(jobs), batch):
            chunk = jobs[i:i + batch]
            if spec.source is State.PROCESSING:
                args: list = [layout.group, len(chunk)]
                for j in chunk:
                    args += [j.job_id, j.entry_id, j.consumer, j.deliveries]
                yield move_result(call_move(layout.client, "sg_requeue", [keys.stream], args))
            elif spec.source is State.DEAD:
                yield _apply_dead(layout, keys, spec, chunk)
            else:
                if spec.source is State.SCHEDULED:
                    mode, src, target = "promote", keys.scheduled, keys.stream
                elif spec.operation is Operation.PURGE:
                    mode, src, target = "purge", keys.suppressed, keys.suppressed
                else:
                    mode, src, target = "unsuppress", keys.suppressed, layout.dead_key(keys)
                args = [mode, layout.dead_kind, len(chunk)]
                for j in chunk:
                    args += [j.job_id, str(j.score), j.sha1]
                yield move_result(call_move(
                    layout.client, "sg_zset_move",
                    [src, target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args))


def _apply_dead(layout: StreamGroup, keys: StreamGroupKeys, spec: OpSpec,
                chunk: list[StreamPlannedJob]) -> BatchResult:
    now = now_ms()
    if spec.operation is Operation.PURGE:
        mode, target, at = "purge", layout.dead_key(keys), now
    elif spec.target is State.SUPPRESSED:
        mode, target, at = "suppressed", keys.suppressed, now
    elif spec.target is State.SCHEDULED:
        mode, target, at = "scheduled", keys.scheduled, now + spec.delay_ms
    else:
        mode, target, at = "ready", keys.stream, now
    raws = layout.client.mget([keys.job(j.job_id) for j in chunk]) if spec.operation is Operation.REDRIVE \
        else [None] * len(chunk)
    args: list = [mode, layout.dead_kind, at, len(chunk)]
    for j, raw in zip(chunk, raws):
        locator = j.entry_id if layout.dead_kind == "stream" else str((j.position or 0) + 1)
        new = b""
        if raw is not None and payload_sha1(raw) == j.sha1:
            new = redrive_envelope(raw, spec, now, at if mode == "scheduled" else None)
        info = suppression_record(spec, now) if mode == "suppressed" else b""
        args += [j.job_id, locator, j.sha1, new, info]
    return move_result(call_move(
        layout.client, "sg_dead_move",
        [layout.dead_key(keys), target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args))
