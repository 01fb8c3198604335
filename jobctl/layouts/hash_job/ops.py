"""Planning and applying operations on the hash-job layout (seed 001).

Operations and what each does to the layout's own keys, per job, in one
atomic script step fenced to the plan (the SHA1 of the hash fields a worker
changes, :data:`~.hash_job.FENCE_FIELDS`):

* requeue (processing -> ready, ``hj_requeue.lua``): ``LREM processing``
  (found first with a bounded ``LPOS`` from the tail), ``LPUSH pending``,
  ``HSET status pending, reclaimed_at_ms now, claim_token "", claimed_at_ms
  0`` -- exactly the seed's reclaimer.  The old claimant's complete/fail then
  fails its own claim-token check.
* redrive (failed -> ready): ``HSET status pending, claim_token "",
  claimed_at_ms 0, redriven_at_ms, redrive_operation, redrive_count`` (+1),
  ``PERSIST`` (a failed hash carries the workers' TTL; a pending job must
  not expire), then the id moves from the failed list's tail to the head of
  ``pending`` (one ``LMOVE``).  ``attempts`` is kept (the worker's next
  failure then fails it for good) unless ``--reset-attempts`` sets it to 0.
* suppress (failed -> suppressed): ``ZADD`` jobctl's suppressed zset, the
  record (who, when, why, the hash's remaining TTL) in jobctl's info hash,
  ``PERSIST`` (kept for audit), then the id leaves the failed list.
  unsuppress puts the id back at the head of ``failed`` and restores the
  remaining TTL.
* purge (failed or suppressed -> gone): the id and the job hash together.

The failed list is the window engine's (:mod:`jobctl.ops.walk`,
:func:`dead_sources`, ``hj_window.lua``), like every
other layout's dead list: pipelined window calls pop it from its tail (the
oldest failures, the right end: workers ``LPUSH`` at the head), a planned
id moves when it is met within :data:`~jobctl.ops.walk.SLACK` positions of
where the plan saw it *and* the SHA1 of its job hash's fence fields is the
plan's (computed server-side; the field list comes from
:data:`~.hash_job.FENCE_FIELDS` as ARGV); every other id waits on jobctl's
hold list (``queue:<n>:jobctl:hold``, counted as failed by every read) and
``list_restore.lua`` puts it back at the tail in order.  No call searches the
list: each costs O(batch) whatever its length.

The workers ``LTRIM`` the failed list to its cap at the tail (50 in the
seed).  An id on the hold is out of their reach: a failure that would have
trimmed it trims the next oldest id still in the list instead (that one
shifts the planned positions towards the tail by one, within the slack),
and the held id stays dead until the restore puts it back at the tail,
where the workers' next ``LTRIM`` drops it as it would have.  jobctl never
trims: the hold keeps such a job dead, and the journal records what the
operation moved and skipped.

Processing is bounded by the workers' concurrency: a requeue call searches
at most :data:`~.moves.REQUEUE_BUDGET` processing elements
(``hj_requeue.lua``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from jobctl.model import JobRecord, State
from jobctl.ops.plan import JobColumns, Plan, PlannedJob
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.common import DEFAULT_BATCH, batch_result, score_ms, suppression_record, text
from jobctl.layouts.planning import TRANSITIONS_WITHOUT_SCHEDULED, check_operation, plan_from_walk, records_by_ids
from jobctl.layouts.moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls
from jobctl.layouts.walks import WINDOW, prefetched, walk_list, walk_zset
from jobctl.ops.walk import ListSource, drive, drives

if TYPE_CHECKING:
    from jobctl.layouts.hash_job.layout import HashJob

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan", "dead_sources"]

#: (operation, source) -> allowed targets (None: purge).  No scheduled state.
TRANSITIONS = TRANSITIONS_WITHOUT_SCHEDULED


def _walk(layout: "HashJob", spec: OpSpec) -> Iterator[list[tuple[JobRecord, dict]]]:
    """(record, hash) windows of the source state, each hash read once."""
    if spec.ids:
        for [rec] in records_by_ids(layout, spec):
            if spec.source is State.DEAD and rec.position is not None:
                rec.position = layout.depth(State.DEAD) - 1 - rec.position  # inspect counts from the newest
            yield [(rec, layout.load([rec.job_id])[0])]
        return
    if spec.source is State.SUPPRESSED:
        for _, pairs in walk_zset(layout.client, layout.keys.suppressed):
            ids = [text(m) for m, _ in pairs]
            fields = layout.load(ids)
            yield [(layout.record(i, f, spec.source, score=score_ms(s)), f) for i, f, (_, s) in zip(ids, fields, pairs)]
        return
    if spec.source is State.PROCESSING:
        windows = walk_list(layout.client, layout.keys.processing, from_right=True)
    else:  # the hold first, then the failed list: the window engine's tail positions
        windows = layout.dead_windows(WINDOW)
    for start, chunk in windows:
        ids = [text(x) for x in chunk]
        fields = layout.load(ids)
        yield [(layout.record(i, f, spec.source, position=start + n), f)
               for n, (i, f) in enumerate(zip(ids, fields))]


def _alone(spec: OpSpec, fields) -> bool:
    """Whether a walked job is one whose key is not a hash and ``spec``
    plans it whatever its filter (the filter cannot rule it out, its key
    being unreadable): an operation from dead, not fenced by ids or a file."""
    from jobctl.layouts.hash_job.layout import WrongTypeHash

    return (isinstance(fields, WrongTypeHash) and spec.source is State.DEAD and not spec.ids
            and spec.fence is None)


def _plan_wrong_type(plan: Plan, rec: JobRecord) -> bool:
    """Plan ``rec`` (its key is not a hash: the apply's per-job step fails
    it alone, ``wrongtype``, and moves the others); True when ``--limit`` is
    reached."""
    from jobctl.layouts.hash_job.layout import WRONGTYPE_BREAKDOWN

    plan.scanned += 1
    plan.jobs.append(PlannedJob(job_id=rec.job_id, shard=0, position=rec.position, score=rec.score, sha1=""))
    plan.breakdown[WRONGTYPE_BREAKDOWN] += 1
    if rec.position is not None:
        plan.walked[0] = max(plan.walked.get(0, 0), rec.position + 1)
    if plan.spec.limit is not None and plan.planned >= plan.spec.limit:
        plan.truncated = True
        return True
    return False


def plan_operation(layout: "HashJob", spec: OpSpec, now: int) -> Plan:
    """Walk the source and record every match with its fence.  Raises
    :class:`~jobctl.errors.UsageError` for an operation the layout lacks."""
    from jobctl.layouts.hash_job.layout import fence_of

    check_operation(layout.name, TRANSITIONS, spec)
    hashes: dict[str, dict] = {}  # the current window's hashes: memory does not grow with the source

    def batches():
        walk = _walk(layout, spec)
        if not spec.ids and spec.source is State.DEAD:
            walk = prefetched(walk)  # the next window is read while this one is filtered
        for window in walk:
            hashes.clear()
            run: list = []
            for rec, fields in window:
                if _alone(spec, fields):  # planned here, in walk order: the records before it first
                    if run:
                        yield run
                        run = []
                    if _plan_wrong_type(plan, rec):
                        return
                    continue
                hashes[rec.job_id] = fields
                run.append(rec)
            if run:
                yield run

    def fence(rec) -> str:
        fields = hashes.get(rec.job_id)
        return fence_of(fields) if fields else ""

    note = ("job hashes get status pending, redriven_at_ms, redrive_operation and redrive_count (+1), claim_token "
            "cleared, " + ("attempts reset to 0" if spec.reset_attempts else "attempts kept"))
    from jobctl.layouts.hash_job.plan import TailPlan, lean_failed_plan, plan_failed_lean, plan_failed_tail, \
        tail_failed_plan

    if tail_failed_plan(spec):  # unfiltered: a tail range, fenced as hj_tail.lua pops each job
        return plan_failed_tail(layout, TailPlan(spec=spec, now_ms=now, redrive_note=note))
    plan = Plan(spec=spec, now_ms=now, redrive_note=note, jobs=JobColumns() if spec.source is State.DEAD else [])
    if lean_failed_plan(spec):  # unfiltered, --reset-attempts: no record per job
        return plan_failed_lean(layout, plan)
    return plan_from_walk(plan, batches(), fence,
                          is_stuck=lambda rec: rec.deadline_ms is not None and rec.deadline_ms < now)


def apply_plan(layout: "HashJob", plan: Plan, *, batch: int = DEFAULT_BATCH) -> Iterator[BatchResult]:
    """One script call per chunk of planned jobs; yields each call's result."""
    from jobctl.layouts.base import now_ms
    from jobctl.layouts.hash_job.layout import FENCE_FIELDS

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
    if spec.source is State.DEAD:
        yield from drive(dead_sources(layout, spec), plan, batch=batch, depth=1)
        return
    for i in range(0, len(jobs), batch):  # suppressed: unsuppress, purge
        chunk = jobs[i:i + batch]
        mode = "purge" if spec.operation is Operation.PURGE else "unsuppress"
        args: list = [mode, " ".join(FENCE_FIELDS), len(chunk)]
        for j in chunk:
            args += [j.job_id, str(j.score), j.sha1]
        yield move_result(call_move(layout.client, "hj_suppressed_move",
                                    [k.suppressed, k.suppressed_info, k.failed] + [k.job(j.job_id) for j in chunk],
                                    args))


# -- the failed list -------------------------------------------------------------

#: Failed-list positions one window call pops when ``--batch`` sets none: a
#: moved job costs one HMGET (fence fields + the payload), a SHA1, PTTL, HSET
#: and LMOVE plus the walk's LINDEX (~12-14 µs of server time measured in
#: SLOWLOG at 100k-200k, pinned: calls of 64 had a p50 of 0.9 ms and a p99
#: of 1.6 ms).  Two round trips of one call are in flight
#: (:data:`~jobctl.ops.walk.TAIL_AHEAD`), so another client may wait
#: behind two calls: at 200k, isolated, three interleaved runs each
#: (2026-11-25), apply median 4.21 s at one call of 40 in flight, 3.22 s at
#: two of 20 and 3.09 s at two of 28, PING p99 0.82, 0.71 and 0.84 ms.
HJ_WINDOW = 20
#: Failed-list positions one ``hj_tail.lua`` call pops (an unfiltered plan)
#: when ``--batch`` sets none.
HJ_TAIL_WINDOW = 100
#: Server time of a tail position relative to a reliable-list one
#: (:attr:`~jobctl.ops.walk.source.ListSource.cost`): HMGET, a cjson decode
#: (redrive), PTTL and HSET a job; 2.75-2.9x measured (docs/performance.md,
#: hash-job).  It sets the calls a round trip when ``--batch`` is small.
HJ_TAIL_COST = 3

def dead_sources(layout: "HashJob", spec: OpSpec) -> list[ListSource]:
    """The window-engine source of the failed list for ``spec`` (an
    operation from dead; ``[]`` otherwise): ids (kind ``"hj"``), the job hash
    of each in KEYS, fenced by the SHA1 of :data:`~.hash_job.FENCE_FIELDS`
    (passed to ``hj_window.lua`` as ARGV) on top of identity + position."""
    from jobctl.layouts.hash_job.layout import FENCE_FIELDS
    from jobctl.layouts.hash_job.plan import tail_failed_plan

    if not drives(spec):
        return []
    k = layout.keys
    if spec.operation is Operation.PURGE:
        mode, target = "purge", k.failed
    elif spec.operation is Operation.SUPPRESS:
        mode, target = "suppressed", k.suppressed
    else:
        mode, target = "ready", k.pending
    info = (lambda now: suppression_record(spec, now)) if mode == "suppressed" else None
    return [ListSource(client=layout.client, kind="hj", tag=k.name, shard=0, dead=k.failed, hold=k.hold,
                       walk=k.walk, lease=k.lease, redriven=k.suppressed_info, info_hash=k.suppressed_info,
                       target=target, mode=mode, payload_key=k.job, info=info, reset_attempts=spec.reset_attempts,
                       fence_fields=FENCE_FIELDS, window=HJ_TAIL_WINDOW if tail_failed_plan(spec) else HJ_WINDOW,
                       cost=HJ_TAIL_COST)]
