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

import orjson

from ..errors import UsageError
from ..keys import ReliableListKeys
from ..model import JobRecord, State
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["plan_operation", "apply_plan", "TRANSITIONS", "DEFAULT_BATCH"]

#: Jobs (or dead-list pops) per script call; keeps one call well under 2 ms.
DEFAULT_BATCH = 128
#: How far (in dead-list positions) the walk looks for a planned dead job on
#: either side of the position the plan saw it at; beyond, it was moved by
#: someone else and counts as skipped.
DEAD_SLACK = 64
#: How many of the first ids an operation rotated each later call is given,
#: to stop where the walk would come round to them again.
START_IDS = 4
#: Most new dead jobs one restore call sets aside at the head to reach the
#: rotated ones behind them.
RESTORE_HOLD = 1024

#: (operation, source) -> allowed targets (None: purge)
TRANSITIONS: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    (Operation.REQUEUE, State.PROCESSING): (State.READY,),
    (Operation.REDRIVE, State.DEAD): (State.READY, State.SCHEDULED),
    (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
    (Operation.SUPPRESS, State.DEAD): (State.SUPPRESSED,),
    (Operation.UNSUPPRESS, State.SUPPRESSED): (State.DEAD,),
    (Operation.PURGE, State.DEAD): (None,),
    (Operation.PURGE, State.SUPPRESSED): (None,),
}


def _s(v: bytes | str) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


# -- planning ---------------------------------------------------------------

def _source_walk(layout: "ReliableList", spec: OpSpec, now: int) -> Iterator[tuple[int, list[JobRecord]]]:
    """(shard index, records) windows of the operation's source."""
    if spec.ids:
        for job_id in spec.ids:
            try:
                rec = layout.inspect(job_id)
            except Exception as exc:  # NotFound: counted as not matching
                from ..errors import NotFound

                if isinstance(exc, NotFound):
                    continue
                raise
            if rec.state is spec.source:
                idx = next(i for i, k in enumerate(layout.shards) if k.tag == rec.shard)
                if spec.source is State.PROCESSING:
                    rec.score = rec.deadline_ms
                elif spec.source is State.DEAD and rec.position is not None:
                    # inspect counts dead positions from the head; the walk, from the tail
                    rec.position = layout.client.llen(layout.shards[idx].dead) - 1 - rec.position
                yield idx, [rec]
        return
    for idx, keys in enumerate(layout.shards):
        if spec.source is State.PROCESSING:
            yield from ((idx, b) for b in _walk_deadlines(layout, keys, spec, now))
        else:
            for batch in layout.iter_batches_of(keys, spec.source, 1000):
                yield idx, batch


def _walk_deadlines(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec,
                    now: int) -> Iterator[list[JobRecord]]:
    """Processing jobs past their deadline (``--stuck``), earliest first."""
    offset = 0
    while True:
        pairs = layout.client.zrange(keys.deadline, "-inf", f"({now}", byscore=True, offset=offset,
                                     num=1000, withscores=True)
        if not pairs:
            return
        offset += len(pairs)
        ids = [_s(m) for m, _ in pairs]
        recs = layout._records(keys, ids, State.PROCESSING, [{"score": int(s), "deadline_ms": int(s)}
                                                             for _, s in pairs])
        yield recs


def plan_operation(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """Walk the source and record every match with its fence.

    Raises :class:`UsageError` for a transition the layout does not have.
    """
    if (spec.operation, spec.source) not in TRANSITIONS or \
            spec.target not in TRANSITIONS[(spec.operation, spec.source)]:
        raise UsageError(f"{spec.operation.value} from {spec.source.value} to "
                         f"{spec.target.value if spec.target else 'nowhere'} is not possible in "
                         f"layout {layout.name}")
    if spec.operation is Operation.REQUEUE and not spec.stuck_only and not spec.ids:
        raise UsageError("requeue needs --stuck or --ids")
    if spec.target is State.READY:
        _target_ready(layout, layout.shards[0], spec)  # a bad --priority fails here, before anything moves
    elif spec.priority is not None:
        raise UsageError(f"--priority applies to a move to ready, not to {spec.operation.value}")
    plan = Plan(spec=spec, now_ms=now)
    flt = spec.filter
    fence, fenced_seen = spec.fence, set()
    for shard, batch in _source_walk(layout, spec, now):
        for rec in batch:
            plan.scanned += 1
            if fence is not None:  # only fenced ids, and only while unchanged
                if rec.job_id not in fence:
                    continue
                fenced_seen.add(rec.job_id)
                if fence[rec.job_id] != payload_sha1(rec.raw):
                    plan.fence_skipped[rec.job_id] = "changed since export"
                    continue
            if rec.raw is None:
                plan.dangling.append(rec.job_id)
                continue
            env = rec.envelope
            if env.problems and (spec.skips_malformed or flt.needs_payload):
                plan.malformed.append(rec.job_id)
                continue
            if not flt.matches(rec, now):
                continue
            plan.jobs.append(PlannedJob(job_id=rec.job_id, shard=shard, position=rec.position,
                                        score=rec.score, sha1=payload_sha1(rec.raw)))
            plan.breakdown[(env.job_type or "?", env.last_error_code or "-")] += 1
            if rec.position is not None and spec.source is State.DEAD:
                plan.walked[shard] = max(plan.walked.get(shard, 0), rec.position + 1)
            if spec.limit is not None and plan.planned >= spec.limit:
                plan.truncated = True
                return plan
    for job_id in sorted((fence or {}).keys() - fenced_seen):
        plan.fence_skipped[job_id] = f"no longer {spec.source.value}"
    return plan


# -- applying ---------------------------------------------------------------

def _redrive_payload(raw: bytes, spec: OpSpec, now: int, due: int | None) -> bytes:
    """The envelope with jobctl's redrive record (seed 000 section 22)."""
    doc = orjson.loads(raw)
    doc["redrivenAtEpochMs"] = now
    doc["redriveOperation"] = spec.op_id
    prev = doc.get("redriveCount")
    doc["redriveCount"] = (prev if isinstance(prev, int) and not isinstance(prev, bool) else 0) + 1
    if spec.reset_attempts:
        doc["attempt"] = 0
    if due is not None:
        doc["nextAttemptAtEpochMs"] = due
    return orjson.dumps(doc)


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
            for i in range(0, len(jobs), batch):
                chunk = jobs[i:i + batch]
                args: list = [len(chunk)]
                for j in chunk:
                    args += [j.job_id, "" if j.score is None else str(j.score)]
                res = script(layout.client, "rl_requeue")(keys=[keys.processing, keys.deadline, target],
                                                          args=args)
                yield _codes(res)
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
                res = script(layout.client, "rl_zset_move")(
                    keys=[src, target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args=args)
                yield _codes(res)


def _codes(res: list) -> BatchResult:
    out = BatchResult()
    for i in range(0, len(res), 2):
        job_id, code = _s(res[i]), _s(res[i + 1])
        if code == "moved":
            out.moved.append(job_id)
        else:
            out.skipped.append(job_id)
            out.reasons[job_id] = code
    return out


def _dead_mode(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec) -> tuple[str, str]:
    """(rl_dead_window mode, target key) of a dead-list operation."""
    if spec.operation is Operation.PURGE:
        return "purge", keys.dead
    if spec.target is State.SUPPRESSED:
        return "suppressed", keys.suppressed
    if spec.target is State.SCHEDULED:
        return "scheduled", keys.scheduled
    return "ready", _target_ready(layout, keys, spec)


def _pos(job: PlannedJob) -> int:
    return job.position or 0


def _apply_dead(layout: "ReliableList", keys: ReliableListKeys, plan: Plan, jobs: list[PlannedJob],
                walk: int, batch: int, now_fn) -> Iterator[BatchResult]:
    """Walk the dead list's tail (``rl_dead_window.lua``), then put the jobs
    that stay dead back in their order (``rl_dead_restore.lua``).

    The restore also runs when the caller stops early (the generator is
    closed) or a call fails, as far as the server lets it; not after a
    second Ctrl-C (``KeyboardInterrupt``): the jobs then stay dead, only
    their order in the list has changed.
    """
    rotated: list[str] = []
    try:
        yield from _walk_dead(layout, keys, plan.spec, sorted(jobs, key=_pos), walk, batch, now_fn, rotated)
    except KeyboardInterrupt:
        raise
    except BaseException:  # GeneratorExit (stopped between calls) or a failed call
        try:
            _restore_dead(layout, keys, rotated, batch)
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        raise
    _restore_dead(layout, keys, rotated, batch)


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
        still: list[PlannedJob] = []
        for j in pending:
            if cursor - _pos(j) > DEAD_SLACK:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "moved"
            else:
                still.append(j)
        pending = still
        min_pop = min(batch, max(0, walk - cursor))
        max_pop = batch
        if cursor >= walk:
            max_pop = min(batch, max((_pos(j) for j in pending), default=cursor) + DEAD_SLACK + 1 - cursor)
        horizon = cursor + max_pop + DEAD_SLACK
        while nxt < len(jobs) and _pos(jobs[nxt]) < horizon:
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
                    result.skipped.append(j.job_id)
                    result.reasons[j.job_id] = "gone"
                elif payload_sha1(raw) != j.sha1:
                    result.skipped.append(j.job_id)
                    result.reasons[j.job_id] = "changed"
                else:
                    passed.append((j, _redrive_payload(raw, spec, now, due)))
        else:
            passed = [(j, b"") for j in pending]
        info = orjson.dumps({"by": spec.operator, "at_ms": now, "reason": spec.reason,
                             "operation": spec.op_id}) if mode == "suppressed" else b""
        start = rotated[:START_IDS]
        args: list = [max_pop, min_pop, mode, str(due if due is not None else now), len(start), *start,
                      len(passed)]
        for j, new in passed:
            args += [j.job_id, j.sha1, new, info]
        res = window(keys=[keys.dead, target, keys.suppressed_info] + [keys.job(j.job_id) for j, _ in passed],
                     args=args)
        popped, n_met, ended = int(res[0]), int(res[2]), int(res[3])
        met = _codes(res[4:4 + 2 * n_met])
        rotated.extend(_s(x) for x in res[4 + 2 * n_met:])
        result.moved += met.moved
        result.skipped += met.skipped
        result.reasons.update(met.reasons)
        seen = set(met.moved) | set(met.skipped)
        pending = [j for j, _ in passed if j.job_id not in seen]
        raws = {j.job_id: raws[j.job_id] for j in pending} if redrive else raws
        cursor += popped
        if ended:  # the list is empty, or the walk went all the way round it
            for j in pending + jobs[nxt:]:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "gone" if ended == 1 else "moved"
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
        at = index.get(_s(head)) if head is not None else None
        if at is None or at <= i:
            break
        i = at  # the ones before it left the list in the meantime
    return i
