"""Planning and applying operations on the reliable-list layout.

Planning reads the source state in bounded windows (LRANGE from the tail of
a list with negative indexes; ZRANGE windows of a zset), loads the envelopes
with one MGET per window, evaluates the filter in Python and records each
match with its fence (:mod:`jobctl.ops.plan`).  From the dead list: an
unfiltered plan is only the tail length (:func:`plan_tail`, a
:class:`~jobctl.ops.plan.TailRange` with a sampled breakdown), a filtered one
evaluates the filter on orjson dicts (:mod:`.lean_plan`).

Applying calls one Lua script per batch (``jobctl/lua/rl_*.lua``); each job
inside a call moves atomically and only if its fence still holds.  The dead
list is the window engine's (:mod:`jobctl.ops.walk`, :func:`dead_sources`):
pipelined the window scripts (``rl_window.lua``, ``rl_tail.lua``, ...) calls walk it from its tail, planned jobs leave
(fence: identity + position), every other element waits on jobctl's hold
list and ``list_restore.lua`` puts it back at the tail, so the jobs that stay
dead keep their order with the newly dead ones at the head, and no call scans
the list.  A redrive is recorded in jobctl's redriven hash; the envelope is
rewritten only with ``--reset-attempts``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from jobctl.errors import UsageError
from jobctl.keys import ReliableListKeys
from jobctl.model import JobRecord, State
from jobctl.ops.plan import JobColumns, Plan, PlannedJob, TailRange, payload_sha1
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl.layouts.moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls, window_mode
from jobctl.layouts.common import batch_result, check_transition, redrive_envelope, score_ms, suppression_record, text
from jobctl.layouts.planning import (TRANSITIONS_WITH_SCHEDULED, plan_from_walk, records_by_ids, require_requeue_scope,
                       shard_index)
from jobctl.layouts.walks import WINDOW, prefetched
from jobctl.ops.redrive_record import source_fields
from jobctl.ops.walk import ListSource, drive, drives

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["plan_operation", "apply_plan", "dead_sources", "reset_payloads", "plan_tail", "unfiltered_tail",
           "TRANSITIONS", "DEFAULT_BATCH", "TAIL_SAMPLE", "TAIL_SAMPLE_MIN"]

#: Jobs (or dead-list pops) per script call: a dead-list window call takes
#: ~1.1-1.3 ms at 128 against ~2 ms at 256 (bench/redrive.py), so this
#: layout keeps one call well under 2 ms with half the common default.
DEFAULT_BATCH = 128
#: How many of the first ids an operation rotated each later call is given,
#: to stop where the walk would come round to them again.
START_IDS = 4

#: (operation, source) -> allowed targets (None: purge)
TRANSITIONS = TRANSITIONS_WITH_SCHEDULED


# -- planning ---------------------------------------------------------------

def _source_walk(layout: "ReliableList", spec: OpSpec, now: int) -> Iterator[list[JobRecord]]:
    """Records of the operation's source, shard by shard: ``spec.ids`` as
    :meth:`inspect` finds them (dead positions counted from the tail, the
    visibility deadline as the score of a processing job), else the
    source's windows (processing: only past the deadline)."""
    if spec.ids:
        for [rec] in records_by_ids(layout, spec):
            if spec.source is State.PROCESSING:
                rec.score = rec.deadline_ms
            elif spec.source is State.DEAD and rec.position is not None:
                # inspect counts dead positions from the head; the walk, from the tail
                keys = next(k for k in layout.shards if k.tag == rec.shard)
                rec.position = layout.client.llen(keys.dead) + layout.client.llen(keys.hold) - 1 - rec.position
            yield [rec]
        return
    for keys in layout.shards:
        if spec.source is State.PROCESSING:
            yield from _walk_deadlines(layout, keys, spec, now)
        else:
            yield from layout.iter_batches_of(keys, spec.source, WINDOW)


def _walk_deadlines(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec,
                    now: int) -> Iterator[list[JobRecord]]:
    """Processing jobs past their deadline (``--stuck``), earliest first."""
    offset = 0
    while True:
        pairs = layout.client.zrange(keys.deadline, "-inf", f"({now}", byscore=True, offset=offset,
                                     num=WINDOW, withscores=True)
        if not pairs:
            return
        offset += len(pairs)
        ids = [text(m) for m, _ in pairs]
        recs = layout._records(keys, ids, State.PROCESSING, [{"score": score_ms(s), "deadline_ms": score_ms(s)}
                                                             for _, s in pairs])
        yield recs


def plan_operation(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """Walk the source and record every match with its fence (the payload
    SHA1) through :func:`~.planning.plan_from_walk`.

    Raises :class:`UsageError` for a transition the layout does not have, a
    requeue without ``--stuck``/``--ids`` or a bad ``--priority``.
    """
    check_transition(layout.name, TRANSITIONS, spec)
    require_requeue_scope(spec)
    if spec.target is State.READY:
        _target_ready(layout, layout.shards[0], spec)  # a bad --priority fails here, before anything moves
    elif spec.priority is not None:
        raise UsageError(f"--priority applies to a move to ready, not to {spec.operation.value}")
    dead = spec.source is State.DEAD  # the window engine: columnar plan, redrives in the redriven hash
    if dead and unfiltered_tail(spec):
        return plan_tail(layout, spec, now)
    if dead and not spec.ids and spec.fence is None:
        from jobctl.layouts.reliable_list.lean_plan import plan_dead_filtered
        from jobctl.layouts.reliable_list.predicate_plan import plan_dead_predicate, predicate_applies

        if predicate_applies(spec):  # the filter run server-side, else client-side below
            plan = plan_dead_predicate(layout, spec, now)
            if plan is not None:
                return plan

        return plan_dead_filtered(layout, spec, now)
    plan = Plan(spec=spec, now_ms=now, redrive_record="hash" if dead else "envelope",
                jobs=JobColumns() if dead else [])
    walk = _source_walk(layout, spec, now)
    if not spec.ids:
        walk = prefetched(walk)  # the next window is read while this one is filtered
    # the dead list's fence is identity + position: the payload SHA1 only where the payload is rewritten
    fence = payload_sha1 if not dead or spec.reset_attempts else (lambda raw: "")
    return plan_from_walk(plan, walk, lambda rec: fence(rec.raw), shard_of=shard_index(layout.shards))


#: (windows, size) of the envelope sample behind an unfiltered plan's
#: breakdown: the queue's, its shards sharing it (each reads ``size /
#: shards`` a window, at least :data:`TAIL_SAMPLE_MIN`)
TAIL_SAMPLE = (4, 250)
TAIL_SAMPLE_MIN = 16


def unfiltered_tail(spec: OpSpec) -> bool:
    """Whether a dead-list ``spec`` plans as a :class:`~jobctl.ops.plan.TailRange`:
    no filter, no ``--ids``, no fence file, no ``--reset-attempts``."""
    return (spec.filter.is_match_all and not spec.ids and spec.fence is None and not spec.reset_attempts
            and not spec.stuck_only)


def plan_tail(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """The plan of an unfiltered dead-list operation without reading every
    envelope: per shard the tail length ``W`` (``LLEN`` of the dead list
    plus jobctl's hold), capped by ``spec.limit`` (``plan.truncated``); the
    breakdown and sample ids come from a bounded sample of
    :data:`TAIL_SAMPLE` envelopes shared by the shards (``plan.breakdown_sampled``).
    Memory does not grow with the DLQ.  The window engine then takes
    exactly those ``W`` tail positions; dangling ids stay dead (``gone``),
    malformed envelopes move (they were dead already)."""
    from jobctl.layouts.planning import breakdown_key

    plan = Plan(spec=spec, now_ms=now, redrive_record="hash")
    pipe = layout.client.pipeline(transaction=False)
    for keys in layout.shards:
        pipe.llen(keys.dead)
        pipe.llen(keys.hold)
    lens = pipe.execute()
    walked: dict[int, int] = {}
    left = spec.limit
    for shard in range(len(layout.shards)):
        w = lens[2 * shard] + lens[2 * shard + 1]
        if left is not None:
            if w > left:
                plan.truncated = True
            w = min(w, left)
            left -= w
        if w:
            walked[shard] = w
    sample: list[str] = []
    windows, size = TAIL_SAMPLE
    share = (windows, max(TAIL_SAMPLE_MIN, size // max(1, len(walked))))
    for shard, keys in enumerate(layout.shards):
        if shard not in walked:
            continue
        for batch in layout.iter_batches_of(keys, State.DEAD, WINDOW, sample=share):
            for rec in batch:
                if rec.position is not None and rec.position >= walked[shard]:
                    continue
                plan.breakdown_sampled += 1
                if rec.raw is not None:
                    plan.breakdown[breakdown_key(rec)] += 1
                    if len(sample) < 10:
                        sample.append(rec.job_id)
    plan.jobs = TailRange(walked, sample)
    plan.walked = dict(walked)
    plan.scanned = len(plan.jobs)
    return plan


# -- applying ---------------------------------------------------------------

def _target_ready(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec) -> str:
    prios = layout.queue.priorities
    if not prios:
        if spec.priority is not None:
            raise UsageError(f"queue {layout.queue_name} has no priority lists")
        return keys.ready
    p = prios - 1 if spec.priority is None else spec.priority
    if not 0 <= p < prios:
        raise UsageError(f"queue {layout.queue_name} has priorities p0..p{prios - 1}, not p{p}")
    return keys.ready_priority(p)


def apply_plan(layout: "ReliableList", plan: Plan, *, batch: int = DEFAULT_BATCH,
               now_fn=None) -> Iterator[BatchResult]:
    """Apply ``plan`` one script call at a time; yields each call's result.

    The caller may stop iterating between calls (Ctrl-C, ``--rate``): every
    job is then either moved or untouched.
    """
    from jobctl.layouts.base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    if spec.source is State.DEAD:
        yield from drive(dead_sources(layout, spec), plan, batch=batch, depth=1, now_fn=now_fn)
        return
    by_shard: dict[int, list[PlannedJob]] = {}
    for job in plan.jobs:
        by_shard.setdefault(job.shard, []).append(job)
    for shard, jobs in by_shard.items():
        keys = layout.shards[shard]
        if spec.source is State.DEAD:
            continue  # the window engine: dead_sources()
        elif spec.source is State.PROCESSING:
            target = _target_ready(layout, keys, spec)

            def requeue(chunk: list[PlannedJob], keys=keys, target=target) -> list:
                args: list = [REQUEUE_BUDGET, len(chunk)]
                for j in chunk:
                    args += [j.job_id, "" if j.score is None else str(j.score)]
                return call_move(layout.client, "rl_requeue", [keys.processing, keys.deadline, target], args)

            yield from requeue_calls(jobs, batch, lambda j: j.job_id, requeue)
        else:
            if spec.operation is Operation.PURGE:
                mode, target = "purge", keys.suppressed
            elif spec.source is State.SCHEDULED:
                mode, target = "lpush", _target_ready(layout, keys, spec)
            else:  # unsuppress: back to the dead list's head (newest)
                mode, target = "lpush", keys.dead
            src = keys.scheduled if spec.source is State.SCHEDULED else keys.suppressed
            for i in range(0, len(jobs), batch):
                chunk = jobs[i:i + batch]
                args = [mode, len(chunk)]
                for j in chunk:
                    args += [j.job_id, str(j.score), j.sha1]
                res = call_move(layout.client, "rl_zset_move",
                                [src, target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args)
                yield move_result(res)


def _dead_mode(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec) -> tuple[str, str]:
    """(window-script mode, target key) of a dead-list operation."""
    mode = window_mode(spec)
    if mode == "ready":
        return mode, _target_ready(layout, keys, spec)
    return mode, {"purge": keys.dead, "suppressed": keys.suppressed, "scheduled": keys.scheduled}[mode]


def dead_sources(layout: "ReliableList", spec: OpSpec) -> list[ListSource]:
    """One window-engine source per shard's dead list for ``spec`` (an
    operation from dead); ``[]`` for any other source state."""
    if not drives(spec):
        return []
    from jobctl.layouts.base import now_ms

    now = now_ms()
    out = []
    for shard, keys in enumerate(layout.shards):
        mode, target = _dead_mode(layout, keys, spec)
        new_payloads = None
        if spec.operation is Operation.REDRIVE and spec.reset_attempts:
            new_payloads = reset_payloads(layout.client, keys, spec, mode)
        info = (lambda now: suppression_record(spec, now)) if mode == "suppressed" else None
        out.append(ListSource(
            client=layout.client, kind="rl", tag=keys.tag, shard=shard, dead=keys.dead, hold=keys.hold,
            walk=keys.walk, lease=keys.lease, **source_fields(layout.client, keys, now),
            info_hash=keys.suppressed_info,
            target=target, mode=mode, payload_key=keys.job, new_payloads=new_payloads, info=info,
            delay_ms=spec.delay_ms if mode == "scheduled" else 0))
    return out


def reset_payloads(client, keys, spec: OpSpec, mode: str):
    """``new_payloads`` of a ``--reset-attempts`` redrive: the envelopes
    read now, rewritten (:func:`~.common.redrive_envelope`), fenced to the
    SHA1 the plan saw (a payload changed since is skipped as ``changed``)."""
    def build(jobs: list[PlannedJob], now: int, walk_client=None) -> dict[str, tuple[bytes, str]]:
        out: dict[str, tuple[bytes, str]] = {}
        if not jobs:
            return out
        due = now + spec.delay_ms if mode == "scheduled" else None
        reader = walk_client or client  # the walk's own connection when it passes one
        for j, raw in zip(jobs, reader.mget([keys.job(j.job_id) for j in jobs])):
            try:
                if raw is not None and payload_sha1(raw) == j.sha1:
                    out[j.job_id] = (redrive_envelope(raw, spec, now, due), j.sha1)
                    continue
            except ValueError:
                pass
            out[j.job_id] = (b"-", "changed")  # never a SHA1: the script skips it (gone / changed)
        return out
    return build
