"""Redrive (failed -> ready) and purge of an RQ queue's failed registry;
the plans of suppress, unsuppress and purge of suppressed jobs too (their
apply: :mod:`jobctl.layouts.rq.suppress`).

Plan: walk ``rq:failed:<q>`` (or jobctl's suppressed zset) (bounded ``ZRANGE`` windows, each job's hash
and newest result read in one pipelined round trip), filter, and keep per
job its registry score as the fence plus its ``origin``.

Apply: one call of ``jobctl/lua/rq_move.lua`` per batch of at most
:data:`DEFAULT_BATCH` jobs, every key in ``KEYS``, several calls a round
trip (:mod:`jobctl.layouts.rq.calls`).  Per job, in one atomic call: the
id must still be in the failed registry with the score the plan saw and its
hash's ``status`` must be ``failed`` (and ``origin`` unchanged), else it is
skipped (``gone``/``changed``); then ``ZREM``, checked to have removed it:

* redrive: ``HSET status queued enqueued_at <now>``, ``started_at`` and
  ``ended_at`` blanked (as RQ's own requeue), the hash made persistent (or
  given its own ``ttl``), ``RPUSH rq:queue:<origin>`` and ``SADD rq:queues``:
  RQ's enqueue.  The pickled ``data`` is never read or rewritten;
* purge: ``DEL`` of the hash, its dependents/dependencies keys, its
  executions registry and its results stream.

RQ's keys share no hash tag, so Redis Cluster refuses these moves
(:mod:`jobctl.cluster`).
"""

from __future__ import annotations

from datetime import datetime, timezone

from jobctl.errors import UsageError
from jobctl.layouts.planning import check_operation, plan_from_walk, records_by_ids
from jobctl.layouts.rq.keys import RqKeys
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.spec import Operation

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan", "RqPlannedJob"]

#: ``(operation, source) -> targets`` (``None``: purge).
TRANSITIONS = {(Operation.REDRIVE, State.DEAD): (State.READY,), (Operation.PURGE, State.DEAD): (None,),
               (Operation.SUPPRESS, State.DEAD): (State.SUPPRESSED,),
               (Operation.UNSUPPRESS, State.SUPPRESSED): (State.DEAD,), (Operation.PURGE, State.SUPPRESSED): (None,)}
#: Jobs per script call: three commands each (HMGET, HSET, PERSIST) plus four a call (ZMSCORE,
#: ZREM, RPUSH, SADD), ~14 us of server CPU a job with the registry read, so a call stays near 1.5 ms.
DEFAULT_BATCH = 100

class RqPlannedJob(PlannedJob):
    """A planned job: ``sha1`` holds its score in the source zset as stored
    (the fence), ``origin`` the queue its hash names, ``info`` its
    suppression record (suppressed jobs)."""

    __slots__ = ("origin", "info")

    def __init__(self, job_id: str, shard: int, position: int | None, score: int | None, sha1: str,
                 origin: str, info: dict | None = None) -> None:
        super().__init__(job_id, shard, position, score, sha1)
        self.origin = origin
        self.info = info


def _keep_origin(plan: Plan):
    def on_match(rec, job: PlannedJob) -> None:
        info = rec.meta.get("suppressed")
        plan.jobs[-1] = RqPlannedJob(job.job_id, job.shard, job.position, job.score, job.sha1,
                                     str(rec.meta.get("origin") or rec.queue), info if isinstance(info, dict) else None)
    return on_match


def plan_operation(layout, spec, now: int) -> Plan:
    """The plan of ``spec`` (one of :data:`TRANSITIONS`) at ``now`` (epoch
    ms).  Reads only.  Raises :class:`~jobctl.errors.UsageError` for another
    operation or ``--reset-attempts``."""
    check_operation(layout.name, TRANSITIONS, spec)
    if spec.reset_attempts:
        raise UsageError(f"layout {layout.name} keeps RQ's retries_left (RQ does not store the original "
                         "retry budget): --reset-attempts is not supported")
    note = ("each job's hash set to status queued with a new enqueued_at, started_at/ended_at blanked, "
            "pushed on rq:queue:<origin> as RQ enqueues; the pickled data is not touched")
    plan = Plan(spec=spec, now_ms=now, redrive_note=f"{note}; {library_version(layout)}")
    dead = spec.source is State.DEAD
    if dead and spec.filter.is_match_all and not spec.ids and spec.fence is None:
        return plan_registry(layout, plan)
    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)
    fence = "failed_registry_score" if dead else "suppressed_score"
    return plan_from_walk(plan, batches, lambda rec: str(rec.meta.get(fence, "")), on_match=_keep_origin(plan))


def library_version(layout) -> str:
    """Which RQ serves the queue, in words, from the ``version`` field of up
    to 5 of its registered workers' hashes (the plan, hence the journal,
    records it)."""
    members = layout.client.srandmember(layout.keys.workers, 5) or []
    pipe = layout.client.pipeline(transaction=False)
    for member in members:
        pipe.hget(member, "version")
    versions = sorted({v.decode("utf-8", "replace") for v in pipe.execute(raise_on_error=False)
                       if isinstance(v, bytes)}) if members else []
    if not versions:
        return "RQ version unknown (no worker registered on the queue)"
    return f"RQ {', '.join(versions)} (its workers' version)"


#: Failed jobs read for the breakdown of an unfiltered plan.
REGISTRY_SAMPLE = 1000
#: Registry entries per ``ZRANGE ... WITHSCORES`` of an unfiltered plan (~0.5 ms of server time).
REGISTRY_WINDOW = 1000


def registry_window(client, key: str, start: int, size: int) -> tuple[list[bytes], list[str]]:
    """``(members, scores)`` of ranks ``start..start+size-1`` of the zset
    ``key`` in one ``ZRANGE ... WITHSCORES``; a score as the server wrote it
    when the client passes the reply through, else the ``repr`` of its float
    (the move script compares both as text, then as numbers)."""
    from jobctl.ops.walk.wire import texts

    raw = client.execute_command("ZRANGE", key, start, start + size - 1, "WITHSCORES")
    if raw and isinstance(raw[0], (list, tuple)):  # paired (and the score cast) by the client
        return [m for m, _ in raw], [sc.decode() if isinstance(sc, bytes) else repr(float(sc)) for _, sc in raw]
    return raw[0::2], texts(raw[1::2])


def plan_registry(layout, plan: Plan) -> Plan:
    """An unfiltered plan from the failed registry alone: every id with its
    score (the fence) in ``ZRANGE`` windows of :data:`REGISTRY_WINDOW`, no
    job hash read; the breakdown and sample ids come from the first
    :data:`REGISTRY_SAMPLE` jobs (``plan.breakdown_sampled``).  ``origin``
    is taken to be the queue itself: the script skips a job whose hash names
    another (``changed``) or whose hash is gone (``gone``), so a dangling id
    stays in the registry."""
    from jobctl.layouts.planning import breakdown_key
    from jobctl.ops.walk.wire import texts

    client, key, origin = layout.client, layout.keys.failed, layout.keys.name
    limit = plan.spec.limit
    total = client.zcard(key)
    if limit is not None:
        plan.truncated, total = total > limit, min(total, limit)
    for start in range(0, total, REGISTRY_WINDOW):
        members, scores = registry_window(client, key, start, min(REGISTRY_WINDOW, total - start))
        append, n = plan.jobs.append, len(plan.jobs)
        for i, (job_id, score) in enumerate(zip(texts(members), scores), n):
            append(RqPlannedJob(job_id, 0, i, None, score, origin))
    plan.scanned = len(plan.jobs)
    head = [j.job_id for j in plan.jobs[:REGISTRY_SAMPLE]]
    for rec in layout.records(head, State.DEAD, [{} for _ in head]):
        if rec.raw is not None:
            plan.breakdown[breakdown_key(rec)] += 1
    plan.breakdown_sampled = len(head) if len(head) < len(plan.jobs) else 0
    return plan


def rq_now() -> str:
    """Now in RQ's timestamp format (``enqueued_at``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def apply_plan(layout, plan: Plan, *, batch: int = DEFAULT_BATCH):
    """Apply ``plan``: one ``rq_move.lua`` call per ``batch`` jobs (a
    suppress, unsuppress or purge of suppressed jobs:
    :func:`~jobctl.layouts.rq.suppress.apply_suppress`); yields one
    :class:`~jobctl.ops.result.BatchResult` each.  Raises
    :class:`~jobctl.errors.DataError` when a fixed key has the wrong type."""
    spec = plan.spec
    if spec.operation in (Operation.SUPPRESS, Operation.UNSUPPRESS) or spec.source is State.SUPPRESSED:
        from jobctl.clock import now_ms
        from jobctl.layouts.rq.suppress import apply_suppress

        yield from apply_suppress(layout, plan, batch=batch, now=now_ms())
        return
    from jobctl.layouts.rq.calls import pipelined_moves

    yield from pipelined_moves(layout.client, "rq_move", move_calls(layout.keys, plan, batch))


def move_calls(k: RqKeys, plan: Plan, batch: int):
    """``(keys, args)`` of each ``rq_move.lua`` call applying ``plan``,
    ``batch`` jobs a call, built as they are sent."""
    purge = plan.spec.operation is Operation.PURGE
    mode, targets = "purge" if purge else "redrive", {}
    jobs = plan.jobs
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        keys, args = [k.failed, k.queues], [mode, rq_now(), len(chunk)]
        for job in chunk:
            origin = getattr(job, "origin", k.name)
            if purge:
                keys += [k.job(job.job_id), *k.job_side_keys(job.job_id)]
            else:
                target = targets.get(origin) or targets.setdefault(origin, RqKeys(origin).queue)
                keys += [k.job(job.job_id), target]
            args += [job.job_id, job.sha1, origin]
        yield keys, args
