"""Planning and applying operations on the hash-job layout (seed 001).

Operations and what each does to the layout's own keys, per job, in one
atomic script step fenced to the plan (the SHA1 of the hash fields a worker
changes, :data:`~.hash_job.FENCE_FIELDS`):

* requeue (processing -> ready, ``hj_requeue.lua``): ``LREM processing``
  (found first with a bounded ``LPOS`` from the tail), ``LPUSH pending``,
  ``HSET status pending, reclaimed_at_ms now, claim_token "", claimed_at_ms
  0`` -- exactly the seed's reclaimer.  The old claimant's complete/fail then
  fails its own claim-token check.
* redrive (failed -> ready): ``LREM failed``, ``LPUSH pending``, ``HSET
  status pending, claim_token "", claimed_at_ms 0, redriven_at_ms,
  redrive_operation``, ``HINCRBY redrive_count``, ``PERSIST`` (a failed hash
  carries the workers' TTL; a pending job must not expire).  ``attempts`` is
  kept (the worker's next failure then fails it for good) unless
  ``--reset-attempts`` sets it to 0.
* suppress (failed -> suppressed): ``LREM failed``, ``ZADD`` jobctl's
  suppressed zset, the record (who, when, why, the hash's remaining TTL) in
  jobctl's info hash, ``PERSIST`` (kept for audit).  unsuppress puts the id
  back at the head of ``failed`` and restores the remaining TTL.
* purge (failed or suppressed -> gone): the id and the job hash together.

Cost: each job is one ``LREM`` on the source list, O(length): the failed
list is capped by the workers (``LTRIM``, 50 in the seed) and processing by
their concurrency; a requeue call searches at most
:data:`~.moves.REQUEUE_BUDGET` processing elements, any other call takes at
most ``LREM_BUDGET / length`` jobs
(:func:`~.walks.lrem_chunk`), so a call stays bounded even on a long list.
``LREM`` keeps the order of the jobs that stay, which the workers' ``LTRIM``
relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..model import JobRecord, State
from ..ops.plan import Plan
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .common import DEFAULT_BATCH, batch_result, suppression_record, text
from .planning import TRANSITIONS_WITHOUT_SCHEDULED, check_operation, plan_from_walk, records_by_ids
from .moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls
from .walks import lrem_chunk, walk_list, walk_zset

if TYPE_CHECKING:
    from .hash_job import HashJob

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan"]

#: (operation, source) -> allowed targets (None: purge).  No scheduled state.
TRANSITIONS = TRANSITIONS_WITHOUT_SCHEDULED


def _walk(layout: "HashJob", spec: OpSpec) -> Iterator[list[tuple[JobRecord, dict]]]:
    """(record, hash) windows of the source state, each hash read once."""
    if spec.ids:
        for [rec] in records_by_ids(layout, spec):
            yield [(rec, layout.load([rec.job_id])[0])]
        return
    if spec.source is State.SUPPRESSED:
        for _, pairs in walk_zset(layout.client, layout.keys.suppressed):
            ids = [text(m) for m, _ in pairs]
            fields = layout.load(ids)
            yield [(layout.record(i, f, spec.source, score=int(s)), f) for i, f, (_, s) in zip(ids, fields, pairs)]
        return
    key = layout.keys.processing if spec.source is State.PROCESSING else layout.keys.failed
    for start, chunk in walk_list(layout.client, key, from_right=True):
        ids = [text(x) for x in chunk]
        fields = layout.load(ids)
        yield [(layout.record(i, f, spec.source, position=start + n), f)
               for n, (i, f) in enumerate(zip(ids, fields))]


def plan_operation(layout: "HashJob", spec: OpSpec, now: int) -> Plan:
    """Walk the source and record every match with its fence.  Raises
    :class:`~jobctl.errors.UsageError` for an operation the layout lacks."""
    from .hash_job import fence_of

    check_operation(layout.name, TRANSITIONS, spec)
    fences: dict[str, str] = {}

    def batches():
        for window in _walk(layout, spec):
            for rec, fields in window:
                fences[rec.job_id] = fence_of(fields) if fields else ""
            yield [rec for rec, _ in window]

    note = ("job hashes get status pending, redriven_at_ms, redrive_operation and redrive_count (+1), claim_token "
            "cleared, " + ("attempts reset to 0" if spec.reset_attempts else "attempts kept"))
    return plan_from_walk(Plan(spec=spec, now_ms=now, redrive_note=note), batches(), lambda rec: fences[rec.job_id],
                          is_stuck=lambda rec: rec.deadline_ms is not None and rec.deadline_ms < now)


def apply_plan(layout: "HashJob", plan: Plan, *, batch: int = DEFAULT_BATCH) -> Iterator[BatchResult]:
    """One script call per chunk of planned jobs; yields each call's result."""
    from .base import now_ms
    from .hash_job import FENCE_FIELDS

    spec = plan.spec
    k = layout.keys
    jobs = plan.jobs
    if spec.source is State.PROCESSING:
        def requeue(chunk: list) -> list:
            args: list = [REQUEUE_BUDGET, now_ms(), " ".join(FENCE_FIELDS), len(chunk)]
            for j in chunk:
                args += [j.job_id, j.sha1]
            return call_move(layout.client, "hj_requeue", [k.processing, k.pending] + [k.job(j.job_id) for j in chunk],
                             args)

        yield from requeue_calls(jobs, batch, lambda j: j.job_id, requeue)
        return
    i = 0
    while i < len(jobs):
        if spec.source is State.SUPPRESSED:
            chunk = jobs[i:i + batch]
            mode = "purge" if spec.operation is Operation.PURGE else "unsuppress"
            args: list = [mode, " ".join(FENCE_FIELDS), len(chunk)]
            for j in chunk:
                args += [j.job_id, str(j.score), j.sha1]
            res = call_move(layout.client, "hj_suppressed_move",
                            [k.suppressed, k.suppressed_info, k.failed] + [k.job(j.job_id) for j in chunk], args)
            i += len(chunk)
            yield move_result(res)
            continue
        else:
            source = k.failed
            chunk = jobs[i:i + lrem_chunk(batch, layout.client.llen(source))]
            now = now_ms()
            if spec.operation is Operation.PURGE:
                mode, info = "purge", b""
            elif spec.operation is Operation.SUPPRESS:
                mode, info = "suppress", suppression_record(spec, now)
            else:
                mode, info = "redrive", b""
            args = [mode, now, spec.op_id, "1" if spec.reset_attempts else "0", info, len(chunk)]
            for j in chunk:
                args += [j.job_id, j.sha1]
            res = script(layout.client, "hj_list_move")(
                keys=[source, k.pending, k.suppressed, k.suppressed_info] + [k.job(j.job_id) for j in chunk],
                args=args)
        i += len(chunk)
        yield move_result(res)
