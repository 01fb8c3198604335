"""Redrive (dead -> queue), promote (schedule or retry -> queue) and purge
of Sidekiq jobs.

Plan: walk the source set(s) in bounded ``ZRANGE`` windows, filter (an
unfiltered plan: :mod:`~jobctl.layouts.sidekiq.lean`), and keep per job the exact member bytes and its score as stored (the fence:
a job that failed again since the plan is another member, so it is never
moved twice).  The plan (hence the journal) names the Sidekiq version.

Apply: one call of ``jobctl/lua/sk_move.lua`` per batch of at most
:data:`DEFAULT_BATCH` jobs of one set: ``ZREM`` of the exact member, and
only when it removed it ``LPUSH queue:<job's queue>`` + ``SADD queues``,
as Sidekiq's own ``Client.push``.  The pushed bytes are the stored ones
edited client-side as Sidekiq's own retry edits them
(:func:`~jobctl.layouts.sidekiq.job.redrive_bytes`: ``enqueued_at`` now,
``retry_count`` - 1; every other byte, 64-bit integers included, as
stored): the queue's latency (Sidekiq reads the oldest ``enqueued_at``)
stays true and a redriven job keeps its retry budget as with Sidekiq's
own retry.
"""

from __future__ import annotations

from jobctl.clock import now_ms
from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.planning import check_operation, plan_from_walk, records_by_ids
from jobctl.layouts.sidekiq.edit import redrive_bytes
from jobctl.layouts.sidekiq.job import job_doc, ms_clock
from jobctl.layouts.sidekiq.status import library_version
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan", "SkPlannedJob"]

#: ``(operation, source) -> targets`` (``None``: purge).
TRANSITIONS = {(Operation.REDRIVE, State.DEAD): (State.READY,), (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
               (Operation.PURGE, State.DEAD): (None,), (Operation.PURGE, State.SCHEDULED): (None,)}
#: Jobs per script call (at most): a bounded call, whatever ``--batch`` asks.
DEFAULT_BATCH = 100


class SkPlannedJob(PlannedJob):
    """A planned job: ``sha1`` holds its score as stored (the fence),
    ``member`` the exact stored bytes, ``key`` its set, ``sk_queue`` its
    ``queue`` field (Sidekiq's default ``default`` when missing)."""

    __slots__ = ("member", "key", "sk_queue")

    def __init__(self, job: PlannedJob, member: bytes, key: str, sk_queue: str) -> None:
        super().__init__(job.job_id, job.shard, job.position, job.score, job.sha1)
        self.member, self.key, self.sk_queue = member, key, sk_queue


def _version_note(layout, sample: bytes | None) -> str:
    """The Sidekiq version (a live process's ``info``), else what the job times' unit tells."""
    version = library_version(layout)
    if version:
        return version
    doc = job_doc(sample) if sample else None
    shape = "" if doc is None else ("; job times in epoch ms (Sidekiq 8 or later)" if ms_clock(doc)
                                    else "; job times in epoch seconds (Sidekiq 7 or earlier)")
    return f"Sidekiq version unknown (no live process){shape}"


def plan_operation(layout, spec, now: int) -> Plan:
    """The plan of ``spec`` (one of :data:`TRANSITIONS`) at ``now`` (epoch
    ms).  Reads only.  Raises :class:`~jobctl.errors.UsageError` for another operation."""
    check_operation(layout.name, TRANSITIONS, spec)
    plan = Plan(spec=spec, now_ms=now)
    moving = spec.operation is not Operation.PURGE
    if spec.filter.is_match_all and not spec.ids and spec.fence is None:
        from jobctl.layouts.sidekiq.lean import plan_all

        plan_all(layout, plan, moving)
    else:
        batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)

        def keep(rec, job: PlannedJob) -> None:
            doc = rec.envelope.document or {}
            queue = doc.get("queue") if isinstance(doc.get("queue"), str) and doc.get("queue") else "default"
            plan.jobs[-1] = SkPlannedJob(job, rec.raw, rec.meta["state_key"], queue)
        plan_from_walk(plan, batches, lambda rec: rec.meta.get("set_score", ""), on_match=keep)
    first = plan.jobs[0].member if len(plan.jobs) else None
    if moving:
        attempts = "retry_count removed" if spec.reset_attempts else "retry_count - 1"
        plan.redrive_note = (f"each job LPUSHed to queue:<its queue> (and SADD queues) with its stored bytes but "
                             f"enqueued_at = now and {attempts}, as Sidekiq's own retry; "
                             f"{_version_note(layout, first)}")
    else:
        plan.redrive_note = _version_note(layout, first)
    return plan


def _chunks(jobs, batch: int):
    """Runs of at most ``batch`` planned jobs of one set, in plan order."""
    chunk: list[SkPlannedJob] = []
    for job in jobs:
        if chunk and (len(chunk) >= batch or job.key != chunk[0].key):
            yield chunk
            chunk = []
        chunk.append(job)
    if chunk:
        yield chunk


def apply_plan(layout, plan: Plan, *, batch: int = DEFAULT_BATCH):
    """Apply ``plan``: one script call per ``batch`` jobs of one set; yields
    one :class:`~jobctl.ops.result.BatchResult` each.  Raises
    :class:`~jobctl.errors.DataError` when a set or ``queues`` has the wrong
    type (that call wrote nothing)."""
    k = layout.keys
    purge = plan.spec.operation is Operation.PURGE
    for chunk in _chunks(plan.jobs, batch):
        keys, args = [chunk[0].key, k.queues], ["purge" if purge else "redrive", 0]
        now, unedited = now_ms(), []
        for job in chunk:
            if purge:
                args += [job.job_id, job.member, job.sha1, "", ""]
                continue
            try:
                pushed = redrive_bytes(job.member, now, reset_attempts=plan.spec.reset_attempts)
            except ValueError:  # not a UTF-8 JSON object: never pushed, left where it is
                unedited.append(job.job_id)
                continue
            keys.append(k.queue(job.sk_queue))
            args += [job.job_id, job.member, job.sha1, job.sk_queue, pushed]
        args[1] = (len(args) - 2) // 5
        result = move_result(call_move(layout.client, "sk_move", keys, args)) if args[1] else BatchResult()
        for job_id in unedited:
            result.failed.append(job_id)
            result.reasons[job_id] = "malformed"
        yield result
