"""Planning and applying operations on the delayed-events layout
(layouts.md section 5; seed 003): promote sets the score to now; redrive
resets ``attempt`` to 1 and sets the score to now (``--to scheduled``: now
+ ``--delay``); suppress moves the member and its envelope to jobctl's keys;
unsuppress restores both; purge removes the member and the envelope
together.  One ``de_move.lua`` call per batch, each job fenced by its score
and its envelope's SHA1; a call waits while the dispatcher holds its lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob, payload_sha1
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import DEFAULT_BATCH, suppression_record
from jobctl.layouts.moves import call_move, move_result

if TYPE_CHECKING:
    from jobctl.layouts.delayed_events.layout import DelayedEvents

__all__ = ["plan_operation", "apply_plan", "TRANSITIONS", "LOCK_RETRIES", "LOCK_RETRY_S"]

#: A batch refused because the dispatcher held its lock is retried this
#: many times, :data:`LOCK_RETRY_S` apart (the library's lock lives <= 2 s).
LOCK_RETRIES = 60
LOCK_RETRY_S = 0.05

TRANSITIONS: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
    (Operation.REDRIVE, State.DEAD): (State.READY, State.SCHEDULED),
    (Operation.SUPPRESS, State.DEAD): (State.SUPPRESSED,),
    (Operation.UNSUPPRESS, State.SUPPRESSED): (State.DEAD,),
    (Operation.PURGE, State.DEAD): (None,),
    (Operation.PURGE, State.SUPPRESSED): (None,),
}


def plan_operation(layout: DelayedEvents, spec: OpSpec, now: int | None = None) -> Plan:
    """Plan ``spec`` (promote, redrive, suppress, unsuppress, purge); reads
    only.  Raises :class:`UsageError` for requeue (a handler's claim is not
    in Redis) or ``--priority``."""
    from jobctl.layouts.planning import plan_by_payload

    plan = plan_by_payload(layout, spec, now_ms() if now is None else now, TRANSITIONS)
    plan.redrive_note = ("the envelope's attempt is reset to 1 (as the library creates an event) and nothing "
                         "else is added (its reader rejects unknown fields): the journal records the redrive")
    return plan


def apply_plan(layout: DelayedEvents, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
    """Apply ``plan``, one ``de_move.lua`` call per batch; a batch refused
    because the dispatcher held its lock is retried (:data:`LOCK_RETRIES`)."""
    batch = batch or DEFAULT_BATCH
    spec = plan.spec
    for i in range(0, len(plan.jobs), batch):
        chunk = plan.jobs[i:i + batch]
        pending = list(chunk)
        result = BatchResult()
        for _ in range(LOCK_RETRIES + 1):
            br = _call(layout, spec, pending)
            locked = [j for j in pending if br.reasons.get(j.job_id) == "locked"]
            result.moved += br.moved
            result.failed += br.failed
            result.skipped += [j for j in br.skipped if br.reasons[j] != "locked"]
            result.reasons.update({j: r for j, r in br.reasons.items() if r != "locked"})
            pending = locked
            if not pending:
                break
            time.sleep(LOCK_RETRY_S)
        for j in pending:
            result.skipped.append(j.job_id)
            result.reasons[j.job_id] = "locked"
        yield result


def _call(layout: DelayedEvents, spec: OpSpec, jobs: list[PlannedJob]) -> BatchResult:
    now = now_ms()
    raws: list[Any] = [None] * len(jobs)
    if spec.operation is Operation.PURGE:
        mode, at = ("purge_suppressed" if spec.source is State.SUPPRESSED else "purge"), now
    elif spec.operation is Operation.SUPPRESS:
        mode, at = "suppress", now
    elif spec.operation is Operation.UNSUPPRESS:
        mode, at = "unsuppress", now
    else:
        mode = "score"
        at = now + spec.delay_ms if spec.target is State.SCHEDULED else now
        if spec.operation is Operation.REDRIVE:
            raws = layout.client.hmget(layout.keys.events, [j.job_id for j in jobs])
    args: list = [mode, at, len(jobs)]
    for j, raw in zip(jobs, raws):
        new = b""
        if raw is not None and payload_sha1(raw) == j.sha1:
            new = _reset_attempt(raw)
        info = suppression_record(spec, now) if mode == "suppress" else b""
        args += [j.job_id, str(j.score), j.sha1, new, info]
    k = layout.keys
    return move_result(call_move(layout.client, "de_move",
                                 [k.zset, k.events, k.lock, k.suppressed, k.suppressed_info], args))


def _reset_attempt(raw: bytes) -> bytes:
    """The envelope with ``attempt`` back to 1, as the library creates it;
    nothing else changes (the library's JSON reader rejects unknown fields,
    so the redrive is recorded in jobctl's journal only)."""
    doc = orjson.loads(raw)
    doc["attempt"] = 1
    return orjson.dumps(doc)
