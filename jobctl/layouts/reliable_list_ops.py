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
not depend on the list's length).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from ..errors import UsageError
from ..keys import ReliableListKeys
from ..model import JobRecord, State, parse_envelope
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["plan_operation", "apply_plan", "TRANSITIONS", "DEFAULT_BATCH"]

#: Jobs (or dead-list pops) per script call; keeps one call well under 2 ms.
DEFAULT_BATCH = 256
#: Planned dead jobs not met in their window are looked for in later windows,
#: at most this many at a time; beyond it they count as skipped.
CARRY_LIMIT = 512

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
    plan = Plan(spec=spec, now_ms=now)
    flt = spec.filter
    for shard, batch in _source_walk(layout, spec, now):
        for rec in batch:
            plan.scanned += 1
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


def _apply_dead(layout: "ReliableList", keys: ReliableListKeys, plan: Plan, jobs: list[PlannedJob],
                walk: int, batch: int, now_fn) -> Iterator[BatchResult]:
    spec = plan.spec
    if spec.operation is Operation.PURGE:
        mode, target = "purge", keys.dead
    elif spec.target is State.SUPPRESSED:
        mode, target = "suppressed", keys.suppressed
    elif spec.target is State.SCHEDULED:
        mode, target = "scheduled", keys.scheduled
    else:
        mode, target = "ready", _target_ready(layout, keys, spec)
    jobs = sorted(jobs, key=lambda j: j.position or 0)
    nxt = 0
    carry: list[PlannedJob] = []
    cursor = 0
    while cursor < walk or carry:
        window_end = cursor + batch
        members = list(carry)
        while nxt < len(jobs) and (jobs[nxt].position or 0) < window_end:
            members.append(jobs[nxt])
            nxt += 1
        result = BatchResult()
        if len(members) > CARRY_LIMIT:
            for j in members[CARRY_LIMIT:]:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "moved"
            members = members[:CARRY_LIMIT]
        now = now_fn()
        due = now + spec.delay_ms if mode == "scheduled" else None
        raws = layout.client.mget([keys.job(j.job_id) for j in members]) if members else []
        passed: list[tuple[PlannedJob, bytes]] = []
        for j, raw in zip(members, raws):
            if raw is None:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "gone"
            elif payload_sha1(raw) != j.sha1:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "changed"
            else:
                passed.append((j, raw))
        args: list = [batch, mode, str(due if due is not None else now), len(passed)]
        for j, raw in passed:
            new = _redrive_payload(raw, spec, now, due) if spec.operation is Operation.REDRIVE else b""
            info = orjson.dumps({"by": spec.operator, "at_ms": now, "reason": spec.reason,
                                 "operation": spec.op_id}) if mode == "suppressed" else b""
            args += [j.job_id, j.sha1, new, info]
        res = script(layout.client, "rl_dead_window")(
            keys=[keys.dead, target, keys.suppressed_info] + [keys.job(j.job_id) for j, _ in passed], args=args)
        popped = int(res[0])
        met = _codes(res[2:])
        result.moved += met.moved
        result.skipped += met.skipped
        result.reasons.update(met.reasons)
        seen = set(met.moved) | set(met.skipped)
        carry = [j for j, _ in passed if j.job_id not in seen]
        cursor += popped
        if popped < batch:  # the list ran out: nothing further to meet
            for j in carry + jobs[nxt:]:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "gone"
            carry, nxt = [], len(jobs)
            cursor = walk
        elif cursor >= walk and carry:
            # walked every planned position; what is still unmet moved elsewhere
            for j in carry:
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = "moved"
            carry = []
        yield result
