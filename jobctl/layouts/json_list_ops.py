"""Planning and applying operations on the json-list layout (seed 002).

Every move takes the byte-identical job string (the workers ``LREM`` by
bytes); the fence of a planned job is the SHA1 of those bytes, re-checked by
the script (``redis.sha1hex``).  Per job, in one atomic script step:

* requeue (processing -> ready): the claim time is still the plan's, ``LREM
  processing -1 <bytes>`` (from the tail, where the oldest claims are; found
  first with ``LPOS ... MAXLEN``, at most :data:`~.moves.REQUEUE_BUDGET`
  elements searched per call, ``jl_requeue.lua``),
  ``ZREM processing:times``, ``RPUSH pending`` -- the end the seed's own
  recovery (its nack) puts a job back at, so it is claimed next.  Attempts
  are not counted: jobctl undoes the claim, it does not fail the job.
* redrive (dead -> ready): ``LPUSH pending`` (behind the backlog, like a
  new job); the ``attempts`` entry is kept (the next failure dead-letters it
  again) unless ``--reset-attempts`` deletes it.  The string itself cannot
  carry a redrive mark; the journal records the operation.
* suppress (dead -> suppressed): the id into jobctl's zset, the bytes into
  jobctl's raw hash, who/when/why into its info hash; unsuppress RPUSHes
  the bytes back at the dead list's newest end.
* purge (dead or suppressed -> gone): the string and the id's ``attempts``
  and ``errors`` entries.

Costs.  Processing is bounded by the workers' concurrency; each requeued
job is one ``LREM`` over it, and a call takes at most ``LREM_BUDGET /
length`` jobs.  The dead list, which nobody pops and which may be long, is
never searched: ``jl_dead_window.lua`` walks it from its oldest end (the
left, where the workers' RPUSHes do not shift positions), ``batch`` elements
per call, taking planned strings out and rotating every other one to the
tail; ``jl_dead_restore.lua`` then moves the rotated ones back to the head,
newest rotation first, setting aside (and pushing back) any string
dead-lettered meanwhile.  So each call costs O(batch) whatever the list's
length, at every instant each string is in the list exactly once, and after
the operation the strings that stayed dead keep their order.  The walk goes
no further than the newest planned position (plus a slack of
:data:`DEAD_SLACK`) and never past the list's length when the apply began.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import JobRecord, State
from ..ops.plan import Plan, PlannedJob
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls
from .common import DEFAULT_BATCH, batch_result, suppression_record, text
from .dead_walk import DEAD_SLACK, RESTORE_HOLD, drop_passed, position, skip_all, walk_then_restore
from .planning import TRANSITIONS_WITHOUT_SCHEDULED, check_operation, plan_from_walk, records_by_ids
from .walks import WINDOW, lrem_chunk

if TYPE_CHECKING:
    from .json_list import JsonList

__all__ = ["JsonListPlan", "TRANSITIONS", "DEFAULT_BATCH", "DEAD_SLACK", "plan_operation", "apply_plan"]

#: (operation, source) -> allowed targets (None: purge).  No scheduled state.
TRANSITIONS = TRANSITIONS_WITHOUT_SCHEDULED


@dataclass
class JsonListPlan(Plan):
    """A :class:`Plan` that also keeps, for requeue, the exact bytes and the
    claim time (``processing:times`` score as text, "" for none) of each
    planned string, by its SHA1 (``PlannedJob.sha1``).  Dead-list positions
    (``PlannedJob.position``) count from the list's oldest end (the left)."""

    raws: dict[str, bytes] = field(default_factory=dict)
    claims: dict[str, str] = field(default_factory=dict)


def _source(layout: "JsonList", spec: OpSpec) -> Iterator[list[JobRecord]]:
    if not spec.ids:
        yield from layout.iter_batches(spec.source, WINDOW)
        return
    dead_len = layout.client.llen(layout.keys.dead) if spec.source is State.DEAD else 0
    for [rec] in records_by_ids(layout, spec):
        if spec.source is State.DEAD and rec.position is not None:
            rec.position = dead_len - 1 - rec.position  # inspect counts from the newest end
        yield [rec]


def plan_operation(layout: "JsonList", spec: OpSpec, now: int) -> JsonListPlan:
    """Walk the source and record every match with its fence.  Raises
    :class:`~jobctl.errors.UsageError` for an operation the layout lacks."""
    check_operation(layout.name, TRANSITIONS, spec)
    plan = JsonListPlan(spec=spec, now_ms=now)

    def keep(rec: JobRecord, job: PlannedJob) -> None:
        if spec.source is State.PROCESSING:
            plan.raws[job.sha1] = rec.raw
            claimed = rec.meta.get("claimed_at_s")
            plan.claims[job.sha1] = "" if claimed is None else repr(float(claimed))

    plan_from_walk(plan, _source(layout, spec), lambda rec: rec.meta["sha1"],
                   is_stuck=lambda rec: rec.deadline_ms is not None and rec.deadline_ms < now, on_match=keep)
    return plan


def apply_plan(layout: "JsonList", plan: Plan, *, batch: int = DEFAULT_BATCH) -> Iterator[BatchResult]:
    """Apply ``plan`` (a :class:`JsonListPlan`); yields each script call's result."""
    spec = plan.spec
    k = layout.keys
    if spec.source is State.DEAD:
        yield from _apply_dead(layout, plan, batch)
        return
    jobs = plan.jobs
    if spec.source is State.PROCESSING:
        def requeue(chunk: list[PlannedJob]) -> list:
            args: list = [REQUEUE_BUDGET, len(chunk)]
            for j in chunk:
                args += [j.job_id, plan.raws[j.sha1], plan.claims[j.sha1]]  # type: ignore[attr-defined]
            return call_move(layout.client, "jl_requeue", [k.processing, k.processing_times, k.pending], args)

        yield from requeue_calls(jobs, batch, lambda j: j.job_id, requeue)
        return
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        args = ["purge" if spec.operation is Operation.PURGE else "unsuppress", len(chunk)]
        for j in chunk:
            args += [j.job_id, str(j.score), j.sha1]
        yield move_result(call_move(layout.client, "jl_suppressed_move",
                                    [k.suppressed, k.suppressed_raw, k.suppressed_info, k.dead, k.attempts,
                                     k.errors], args))


# -- the dead list ---------------------------------------------------------------

def _apply_dead(layout: "JsonList", plan: Plan, batch: int) -> Iterator[BatchResult]:
    """Walk the dead list, then restore the order of the strings that stay,
    also when the walk stops early (:func:`~.dead_walk.walk_then_restore`)."""
    rotated: list[str] = []
    yield from walk_then_restore(_walk_dead(layout, plan, batch, rotated),
                                 lambda: _restore_dead(layout, rotated, batch))


def _walk_dead(layout: "JsonList", plan: Plan, batch: int, rotated: list[str]) -> Iterator[BatchResult]:
    """Pop the planned positions from the left, ``batch`` per call; the SHA1s
    of the strings rotated to the tail are appended to ``rotated``."""
    from .base import now_ms

    spec = plan.spec
    k = layout.keys
    if spec.operation is Operation.PURGE:
        mode, target = "purge", k.dead
    elif spec.operation is Operation.SUPPRESS:
        mode, target = "suppress", k.suppressed
    else:
        mode, target = "redrive", k.pending
    window = script(layout.client, "jl_dead_window")
    jobs = sorted(plan.jobs, key=position)
    walk = plan.walked.get(0, 0)
    length = layout.client.llen(k.dead)  # never walk past the strings there now
    nxt, cursor = 0, 0
    pending: list[PlannedJob] = []
    while True:
        result = BatchResult()
        pending = drop_passed(pending, cursor, result)
        if cursor < walk:
            want = min(batch, walk - cursor)
        elif pending:
            want = min(batch, max(position(j) for j in pending) + DEAD_SLACK + 1 - cursor)
        else:
            want = 0
        want = min(want, length - cursor)
        horizon = cursor + want + DEAD_SLACK
        while nxt < len(jobs) and position(jobs[nxt]) < horizon:
            pending.append(jobs[nxt])
            nxt += 1
        if want <= 0:  # walked as far as the list reaches: what is unmet left it
            skip_all(result, pending + jobs[nxt:], "gone")
            if result.skipped:
                yield result
            return
        if not pending and nxt >= len(jobs):  # every planned string met
            if result.skipped:
                yield result
            return
        now = now_ms()
        info = suppression_record(spec, now) if mode == "suppress" else b""
        args: list = [want, mode, now, "1" if spec.reset_attempts else "0", info, len(pending)]
        for j in pending:
            args += [j.job_id, j.sha1]
        res = window(keys=[k.dead, target, k.suppressed_raw, k.suppressed_info, k.attempts, k.errors], args=args)
        popped, n_met = int(res[0]), int(res[1])
        met_idx = set()
        for m in range(n_met):
            idx, code = int(res[2 + 2 * m]) - 1, text(res[3 + 2 * m])
            job = pending[idx]
            met_idx.add(idx)
            if code == "moved":
                result.moved.append(job.job_id)
            else:
                result.skipped.append(job.job_id)
                result.reasons[job.job_id] = code
        rotated.extend(text(x) for x in res[2 + 2 * n_met:])
        pending = [j for n, j in enumerate(pending) if n not in met_idx]
        cursor += popped
        if popped < want:  # the list ran out: nothing further to meet
            skip_all(result, pending + jobs[nxt:], "gone")
            yield result
            return
        yield result


def _restore_dead(layout: "JsonList", rotated: list[str], batch: int) -> int:
    """Move the strings rotated to the tail back to the head, newest rotation
    first; returns how many were dealt with.  Gives up (they stay dead, at
    the tail) when more than :data:`RESTORE_HOLD` new dead strings sit behind
    the next one."""
    expected = list(reversed(rotated))
    i = 0
    restore = script(layout.client, "jl_dead_restore")
    while i < len(expected):
        consumed = int(restore(keys=[layout.keys.dead], args=[batch, RESTORE_HOLD, *expected[i:i + 2 * batch]])[0])
        if not consumed:
            break
        i += consumed
    return i
