"""Planning and applying operations on the reliable-list layout.

Planning reads the source state in bounded windows (LRANGE from the tail of
a list with negative indexes; ZRANGE windows of a zset), loads the envelopes
with one MGET per window, evaluates the filter in Python and records each
match with its fence (:mod:`jobctl.ops.plan`).

Applying calls one Lua script per batch (``jobctl/lua/rl_*.lua``); each job
inside a call moves atomically and only if its fence still holds.  The dead
list is walked from its tail by ``rl_dead_window.lua``: planned jobs leave,
every other element is rotated to the head, so no call scans the list
(``LREM`` on a million-element list costs ~10 ms; a window of 256 pops does
not depend on the list's length).  The walk covers the tail positions up to
the newest planned job only; then ``rl_dead_restore.lua`` moves the rotated
elements back from the head to the tail, newest rotation first, setting
aside (and pushing back) any job dead-lettered meanwhile.  So after an
operation the jobs that stayed dead are in their old relative order with
the newly dead ones at the head, and at every instant each element is in
the list exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..keys import ReliableListKeys
from ..model import JobRecord, State
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls
from .common import batch_result, check_transition, redrive_envelope, suppression_record, text
from .dead_walk import DEAD_SLACK, RESTORE_HOLD, drop_passed, position, skip_all, walk_then_restore
from .planning import (TRANSITIONS_WITH_SCHEDULED, plan_from_walk, records_by_ids, require_requeue_scope,
                       shard_index)
from .walks import WINDOW

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["plan_operation", "apply_plan", "TRANSITIONS", "DEFAULT_BATCH"]

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
                rec.position = layout.client.llen(keys.dead) - 1 - rec.position
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
        recs = layout._records(keys, ids, State.PROCESSING, [{"score": int(s), "deadline_ms": int(s)}
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
    return plan_from_walk(Plan(spec=spec, now_ms=now), _source_walk(layout, spec, now),
                          lambda rec: payload_sha1(rec.raw), shard_of=shard_index(layout.shards))


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
    from .base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    by_shard: dict[int, list[PlannedJob]] = {}
    for job in plan.jobs:
        by_shard.setdefault(job.shard, []).append(job)
    for shard, jobs in by_shard.items():
        keys = layout.shards[shard]
        if spec.source is State.DEAD:
            yield from _apply_dead(layout, keys, plan, jobs, plan.walked.get(shard, 0), batch, now_fn)
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
    """(rl_dead_window mode, target key) of a dead-list operation."""
    if spec.operation is Operation.PURGE:
        return "purge", keys.dead
    if spec.target is State.SUPPRESSED:
        return "suppressed", keys.suppressed
    if spec.target is State.SCHEDULED:
        return "scheduled", keys.scheduled
    return "ready", _target_ready(layout, keys, spec)


def _apply_dead(layout: "ReliableList", keys: ReliableListKeys, plan: Plan, jobs: list[PlannedJob],
                walk: int, batch: int, now_fn) -> Iterator[BatchResult]:
    """Walk the dead list's tail (``rl_dead_window.lua``), then put the jobs
    that stay dead back in their order (``rl_dead_restore.lua``), also when
    the walk stops early (:func:`~.dead_walk.walk_then_restore`)."""
    rotated: list[str] = []
    yield from walk_then_restore(
        _walk_dead(layout, keys, plan.spec, sorted(jobs, key=position), walk, batch, now_fn, rotated),
        lambda: _restore_dead(layout, keys, rotated, batch))


def _walk_dead(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec, jobs: list[PlannedJob],
               walk: int, batch: int, now_fn, rotated: list[str]) -> Iterator[BatchResult]:
    """Pop the ``walk`` planned tail positions, at most ``batch`` per call.

    A planned job is handed to the script from ``DEAD_SLACK`` positions
    before its planned position (jobs below it may have left the list since
    the plan) until the walk is ``DEAD_SLACK`` positions past it (jobs may
    have been put back below it); a job not met by then, or by the time the
    walk has gone all the way round the list, was moved by someone else and
    counts as skipped (``moved``).  Ids the script rotated to the head are
    appended to ``rotated``.
    """
    mode, target = _dead_mode(layout, keys, spec)
    redrive = spec.operation is Operation.REDRIVE
    window = script(layout.client, "rl_dead_window")
    nxt = 0
    pending: list[PlannedJob] = []
    raws: dict[str, bytes | None] = {}  # redrive: stored payloads of pending jobs, as read
    cursor = 0
    while True:
        result = BatchResult()
        pending = drop_passed(pending, cursor, result)
        min_pop = min(batch, max(0, walk - cursor))
        max_pop = batch
        if cursor >= walk:
            max_pop = min(batch, max((position(j) for j in pending), default=cursor) + DEAD_SLACK + 1 - cursor)
        horizon = cursor + max_pop + DEAD_SLACK
        while nxt < len(jobs) and position(jobs[nxt]) < horizon:
            pending.append(jobs[nxt])
            nxt += 1
        if max_pop <= 0 or not (pending or nxt < len(jobs)):
            if result.skipped:
                yield result
            return
        now = now_fn()
        due = now + spec.delay_ms if mode == "scheduled" else None
        passed: list[tuple[PlannedJob, bytes]] = []
        if redrive:
            # The new envelope is built here from the stored one; the script
            # writes it only if the stored one is still the one the plan saw,
            # so a payload read in an earlier call may be reused.
            fetch = [j for j in pending if j.job_id not in raws]
            if fetch:
                for j, raw in zip(fetch, layout.client.mget([keys.job(j.job_id) for j in fetch])):
                    raws[j.job_id] = raw
            for j in pending:
                raw = raws[j.job_id]
                if raw is None:
                    skip_all(result, [j], "gone")
                elif payload_sha1(raw) != j.sha1:
                    skip_all(result, [j], "changed")
                else:
                    passed.append((j, redrive_envelope(raw, spec, now, due)))
        else:
            passed = [(j, b"") for j in pending]
        info = suppression_record(spec, now) if mode == "suppressed" else b""
        start = rotated[:START_IDS]
        args: list = [max_pop, min_pop, mode, str(due if due is not None else now), len(start), *start,
                      len(passed)]
        for j, new in passed:
            args += [j.job_id, j.sha1, new, info]
        res = window(keys=[keys.dead, target, keys.suppressed_info] + [keys.job(j.job_id) for j, _ in passed],
                     args=args)
        popped, n_met, ended = int(res[0]), int(res[2]), int(res[3])
        met = batch_result(res[4:4 + 2 * n_met])
        rotated.extend(text(x) for x in res[4 + 2 * n_met:])
        result.moved += met.moved
        result.skipped += met.skipped
        result.reasons.update(met.reasons)
        seen = set(met.moved) | set(met.skipped)
        pending = [j for j, _ in passed if j.job_id not in seen]
        raws = {j.job_id: raws[j.job_id] for j in pending} if redrive else raws
        cursor += popped
        if ended:  # the list is empty, or the walk went all the way round it
            skip_all(result, pending + jobs[nxt:], "gone" if ended == 1 else "moved")
            yield result
            return
        yield result


def _restore_dead(layout: "ReliableList", keys: ReliableListKeys, rotated: list[str], batch: int) -> int:
    """Move the ids rotated to the head back to the tail, newest rotation
    first, so that the dead list's order is what it was minus the jobs that
    left.  Returns how many expected ids were dealt with.  Gives up (the
    jobs stay dead, at the head) when more than ``RESTORE_HOLD`` new dead
    jobs sit in front of the next one."""
    seen: set[str] = set()
    expected: list[str] = []
    for job_id in reversed(rotated):  # an id rotated twice (the walk wrapped) counts once, at its last rotation
        if job_id not in seen:
            seen.add(job_id)
            expected.append(job_id)
    if not expected:
        return 0
    restore = script(layout.client, "rl_dead_restore")
    index = {job_id: n for n, job_id in enumerate(expected)}
    batch = max(batch, DEFAULT_BATCH)  # moves no job between states: --rate does not apply
    i = 0
    while i < len(expected):
        consumed = int(restore(keys=[keys.dead], args=[batch, RESTORE_HOLD, *expected[i:i + 2 * batch]])[0])
        if consumed:
            i += consumed
            continue
        head = layout.client.lindex(keys.dead, 0)
        at = index.get(text(head)) if head is not None else None
        if at is None or at <= i:
            break
        i = at  # the ones before it left the list in the meantime
    return i
