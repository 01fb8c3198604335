"""Redrive (failed -> wait/prioritized) and purge of a BullMQ queue's
failed jobs.

Plan of a purge, or of a redrive of ``--ids`` or a fence file: walk
``failed`` (bounded ``ZRANGE`` windows, the jobs' hashes read in one
pipelined round trip each), filter, and keep per job its failed
score (the fence) plus the hash fields the move re-checks and needs:
``finishedOn``, the SHA1 of ``failedReason``, ``parentKey``, ``deid`` and
``opts.lifo``.  The plan (hence the journal) names ``meta.version``; an
untested major version is refused with one line.

An unfiltered redrive plans from ``failed``'s ids and scores plus one
fence per job computed server-side (:mod:`jobctl.layouts.bullmq.lean`), a
filtered one from the hash fields the fence and the filter read, no record
per job (:mod:`jobctl.layouts.bullmq.filtered`); both keep their jobs
column-wise.

Apply: one call of ``jobctl/lua/bullmq_move.lua`` per
batch of at most :data:`DEFAULT_BATCH` jobs (``bullmq_redrive.lua`` per
:data:`FENCED_BATCH` fenced jobs), several calls a round trip, every key in ``KEYS``
(BullMQ's order of writes, its own score rule for ``prioritized``, the
``marker`` unless the queue is paused or at its concurrency, the
``waiting`` event with ``prev=failed``).
"""

from __future__ import annotations

import hashlib
import json

from jobctl.errors import DataError
from jobctl.layouts.bullmq.job import TESTED_MAJORS, version_major
from jobctl.layouts.common import text
from jobctl.layouts.planning import check_operation, plan_from_walk, records_by_ids
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.spec import Operation

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "FENCED_BATCH", "plan_operation", "apply_plan", "BullPlannedJob",
           "BullFencedJob", "library_version",
           "plan_fields"]

#: ``(operation, source) -> targets`` (``None``: purge).
TRANSITIONS = {(Operation.REDRIVE, State.DEAD): (State.READY,), (Operation.PURGE, State.DEAD): (None,)}
#: Jobs per ``bullmq_move.lua`` call (at most): a bounded call, whatever ``--batch`` asks.
DEFAULT_BATCH = 100
#: Jobs per ``bullmq_redrive.lua`` call: ~2 ms of server time on a quiet server (~10 us a job).
FENCED_BATCH = 200


class BullFencedJob(PlannedJob):
    """A planned job of an unfiltered redrive: ``sha1`` holds its failed
    score as stored, ``fence`` the SHA1 of its fenced hash fields
    (``jobctl/lua/prelude/bullmq_fence.lua``), checked by ``bullmq_redrive.lua``."""

    __slots__ = ("fence",)

    def __init__(self, job: PlannedJob, fence: str) -> None:
        super().__init__(job.job_id, job.shard, job.position, job.score, job.sha1)
        self.fence = fence


class BullPlannedJob(PlannedJob):
    """A planned job: ``sha1`` holds its failed score as stored (the
    fence); ``fields`` the hash fields the script re-checks and uses:
    ``(finishedOn, sha1 of failedReason, LPUSH|RPUSH, parentKey, deid)``."""

    __slots__ = ("fields",)

    def __init__(self, job: PlannedJob, fields: tuple[str, str, str, str, str]) -> None:
        super().__init__(job.job_id, job.shard, job.position, job.score, job.sha1)
        self.fields = fields


def plan_fields(doc: dict) -> tuple[str, str, str, str, str]:
    """The fenced fields of a job (``doc``: its hash fields as text) as :attr:`BullPlannedJob.fields`."""
    reason = str(doc.get("failedReason") or "").encode("utf-8", "surrogateescape")
    try:
        opts = json.loads(doc.get("opts") or "{}")
    except ValueError:
        opts = {}
    lifo = isinstance(opts, dict) and bool(opts.get("lifo"))
    return (str(doc.get("finishedOn") or ""), hashlib.sha1(reason).hexdigest(), "RPUSH" if lifo else "LPUSH",
            str(doc.get("parentKey") or ""), str(doc.get("deid") or ""))


def library_version(layout) -> str:
    """``meta.version`` in words.  Raises :class:`DataError` when it names
    a major version outside :data:`TESTED_MAJORS`."""
    raw = layout.client.hget(layout.keys.meta, "version")
    version = text(raw) if raw else None
    major = version_major(version)
    if version is None:
        return "BullMQ version unknown (no meta.version)"
    if major not in TESTED_MAJORS:
        tested = ", ".join(f"{m}.x" for m in TESTED_MAJORS)
        raise DataError(f"queue {layout.queue_name}: BullMQ version {version} (meta.version) is not tested "
                        f"with jobctl (tested: {tested}); nothing planned")
    return f"BullMQ {version} (meta.version)"


def plan_operation(layout, spec, now: int) -> Plan:
    """The plan of ``spec`` (one of :data:`TRANSITIONS`) at ``now`` (epoch
    ms).  Reads only.  Raises :class:`~jobctl.errors.UsageError` for another
    operation, :class:`DataError` for an untested BullMQ version."""
    check_operation(layout.name, TRANSITIONS, spec)
    version = library_version(layout)
    attempts = "atm reset" if spec.reset_attempts else "atm (attemptsMade) kept"
    note = ("each job back to wait (LPUSH, lifo RPUSH) or prioritized by its priority, finishedOn, "
            f"failedReason, stacktrace, returnvalue and processedOn cleared, {attempts}, the marker pushed "
            "unless paused, a waiting event; data and opts are not touched")
    plan = Plan(spec=spec, now_ms=now, redrive_note=f"{note}; {version}")
    if spec.filter.is_match_all and not spec.ids and spec.fence is None:
        from jobctl.layouts.bullmq.lean import plan_failed

        return plan_failed(layout, plan)
    if spec.operation is Operation.REDRIVE and not spec.ids and spec.fence is None:
        from jobctl.layouts.bullmq.filtered import plan_filtered, read_fields

        fields = read_fields(spec.filter)
        if fields is not None:
            return plan_filtered(layout, plan, fields)
    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)

    def keep(rec, job: PlannedJob) -> None:
        plan.jobs[-1] = BullPlannedJob(job, plan_fields(rec.envelope.document or {}))
    return plan_from_walk(plan, batches, lambda rec: str(rec.meta.get("score", "")), on_match=keep)


def _job_keys(k, job: BullPlannedJob, purge: bool) -> list[str]:
    key = k.job(job.job_id)
    if purge:
        deid = job.fields[4]
        return [key, *k.job_side_keys(job.job_id), k.dedup(deid) if deid else key]
    parent = job.fields[3]
    if not parent:
        return [key] * 5
    return [key, parent, f"{parent}:unsuccessful", f"{parent}:failed", f"{parent}:dependencies"]


def _fenced_calls(layout, cols, start: int, stop: int, reset: str, fixed: list[str]):
    """``bullmq_redrive.lua`` calls of places ``start..stop`` of a
    :class:`~jobctl.layouts.bullmq.columns.FencedColumns`, :data:`FENCED_BATCH`
    a call, ids, scores and fences passed on as the plan holds them."""
    prefix = layout.keys.base.encode("utf-8", "surrogateescape")
    for i in range(start, stop, FENCED_BATCH):
        j = min(i + FENCED_BATCH, stop)
        ids = cols.ids[i:j]
        per_job: list = [None] * (3 * len(ids))
        per_job[0::3], per_job[1::3], per_job[2::3] = ids, cols.scores[i:j], cols.fences[i:j]
        yield "bullmq_redrive", fixed + [prefix + x for x in ids], [reset, len(ids), *per_job], ids


def _move_calls(k, jobs: list, batch: int, purge: bool, reset: str, fixed: list[str]):
    """``bullmq_move.lua`` calls of ``jobs`` (:class:`BullPlannedJob`), ``batch`` a call."""
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        keys = list(fixed)
        args = ["purge" if purge else "redrive", reset, len(chunk)]
        for job in chunk:
            keys += _job_keys(k, job, purge)
            args += [job.job_id, job.sha1, *job.fields]
        yield "bullmq_move", keys, args, None


def _calls(layout, plan: Plan, batch: int):
    """``(script name, keys, args, ids)`` per call, in plan order
    (:mod:`jobctl.layouts.bullmq.calls`): the jobs of an unfiltered
    redrive's :class:`~jobctl.layouts.bullmq.columns.FencedColumns` go to
    ``bullmq_redrive.lua`` (:data:`FENCED_BATCH` a call), flow children and
    any other plan's jobs to ``bullmq_move.lua`` (``batch`` a call)."""
    from jobctl.layouts.bullmq.columns import FencedColumns

    k = layout.keys
    purge = plan.spec.operation is Operation.PURGE
    reset = "1" if plan.spec.reset_attempts else "0"
    fixed = [k.failed, k.wait, k.prioritized, k.pc, k.marker, k.meta, k.events, k.active, k.paused]
    cols = plan.jobs
    if not isinstance(cols, FencedColumns):
        yield from _move_calls(k, list(cols), batch, purge, reset, fixed)
        return
    for start, stop, child in cols.runs():
        if child:
            yield from _move_calls(k, [cols.children[p] for p in range(start, stop)], batch, purge, reset, fixed)
        else:
            yield from _fenced_calls(layout, cols, start, stop, reset, fixed)


def apply_plan(layout, plan: Plan, *, batch: int = DEFAULT_BATCH):
    """Apply ``plan``: one script call per ``batch`` jobs, several calls a
    round trip (:func:`~jobctl.layouts.bullmq.calls.run_calls`); yields one
    :class:`~jobctl.ops.result.BatchResult` each.  Raises
    :class:`DataError` when a queue key has the wrong type (that call wrote nothing)."""
    from jobctl.layouts.bullmq.calls import run_calls

    return run_calls(layout.client, _calls(layout, plan, batch))
