"""Requeue (processing -> ready) of a Celery queue's unacked messages past
their visibility timeout: what kombu's ``restore_visible`` does, fenced
and bounded.

Plan: walk this queue's ``unacked`` entries (windows of ``unacked_index``,
one ``HMGET`` each), keep the overdue ones (delivery time + visibility
timeout before the plan's time) that the filter matches, each with its
fence: its index score as stored and the SHA1 of its ``unacked`` value,
plus where the message sits inside that value and the list kombu restores
it to (the queue's list of the message's priority step).

Apply: one ``jobctl/lua/cel_requeue.lua`` call per batch of at most
:data:`DEFAULT_BATCH`.  Per message, atomically: the index score and the
value's SHA1 are still the plan's and the server's clock says it is
overdue, else it is skipped (``gone``/``changed``/``not_overdue``); then
``HDEL`` and ``ZREM``, and only when the ``HDEL`` removed it, ``RPUSH`` of
the message's stored bytes to its list (the end ``BRPOP`` serves first, as
kombu's restore).  kombu also marks the message ``redelivered``; jobctl
moves the bytes unchanged and journals the requeue instead.

A worker that still runs a requeued message (a task longer than the
visibility timeout, or an ETA task it holds) would run it twice: kombu's
own restore does the same; that is what the visibility timeout means.
Purge of ready messages: :mod:`.purge`; replay of failed tasks from
Celery's result records (opt-in): :mod:`.replay`.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobctl.errors import UsageError
from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.planning import check_operation, plan_from_walk, records_by_ids
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.spec import Operation

__all__ = ["TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan", "CeleryPlannedJob", "CeleryPlan"]

#: ``(operation, source) -> targets``.
TRANSITIONS = {(Operation.REQUEUE, State.PROCESSING): (State.READY,), (Operation.PURGE, State.READY): (None,),
               (Operation.REPLAY, State.HISTORY): (State.READY,)}
#: Messages per script call (a few commands each, plus the copy of the message's bytes).
DEFAULT_BATCH = 100
#: Said in every plan.
NOTE = ("each overdue message's stored bytes pushed back to its priority list, where kombu's own restore puts "
        "them (served next), and removed from unacked; a worker still running one would run it again")
NO_DEAD_REFUSAL = ("layout celery has no dead-letter store in Redis (Celery acks a failed task and drops it; "
                   "its failed result records are Celery's: jobctl replays them, never deletes them)")


class CeleryPlannedJob(PlannedJob):
    """A planned message: ``sha1`` = SHA1 of its ``unacked`` value, ``tag``
    its delivery tag, ``index_score`` its ``unacked_index`` score as text,
    ``span`` the message's byte offsets in the value, ``target`` its list."""

    __slots__ = ("tag", "index_score", "span", "target")

    def __init__(self, job: PlannedJob, tag: str, index_score: str, span: tuple[int, int], target: str) -> None:
        super().__init__(job.job_id, job.shard, job.position, job.score, job.sha1)
        self.tag, self.index_score, self.span, self.target = tag, index_score, span, target


@dataclass
class CeleryPlan(Plan):
    """A requeue plan; :meth:`describe` says what the move does."""

    def describe(self) -> str:
        return f"{super().describe()}; {NOTE}"


def _overdue(layout, spec, now: int):
    """The source walk: only messages past their deadline at ``now``."""
    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(State.PROCESSING)
    for recs in batches:
        yield [r for r in recs if r.deadline_ms is not None and r.deadline_ms <= now]


def plan_operation(layout, spec, now: int) -> Plan:
    """The plan of a requeue at ``now`` (epoch ms).  Reads only.  Raises
    :class:`UsageError` for another operation (a purge: one line saying
    what to use instead) or without ``--stuck``/``--ids``."""
    if spec.operation is Operation.PURGE and spec.source is not State.READY:
        raise UsageError(NO_DEAD_REFUSAL)
    if spec.operation is Operation.REPLAY:
        from jobctl.layouts.celery.replay import plan_replay

        return plan_replay(layout, spec, now)
    check_operation(layout.name, TRANSITIONS, spec)
    if spec.operation is Operation.PURGE:
        from jobctl.layouts.celery.purge import plan_purge

        return plan_purge(layout, spec, now)
    plan = CeleryPlan(spec=spec, now_ms=now)

    def keep(rec, job: PlannedJob) -> None:
        m = rec.meta
        plan.jobs[-1] = CeleryPlannedJob(job, m["delivery_tag"], m["unacked_index_score"], tuple(m["span"]),
                                         m["list"])

    return plan_from_walk(plan, _overdue(layout, spec, now), lambda rec: rec.meta["unacked_sha1"],
                          is_stuck=lambda rec: True, on_match=keep)


def apply_plan(layout, plan: Plan, *, batch: int = DEFAULT_BATCH):
    """Apply ``plan``: one ``cel_requeue.lua`` call per ``batch`` messages;
    yields one :class:`~jobctl.ops.result.BatchResult` each (ids: task ids).
    Raises :class:`~jobctl.errors.DataError` when ``unacked`` or
    ``unacked_index`` has the wrong type."""
    if plan.spec.operation is Operation.PURGE:
        from jobctl.layouts.celery.purge import apply_purge

        yield from apply_purge(layout, plan, batch=batch)
        return
    if plan.spec.operation is Operation.REPLAY:
        from jobctl.layouts.celery.replay import apply_replay

        yield from apply_replay(layout, plan, batch=batch)
        return
    k = layout.keys
    vt_s = repr(layout.visibility_ms / 1000)
    jobs = list(plan.jobs)
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        keys, args = [k.unacked, k.unacked_index], [vt_s, len(chunk)]
        for job in chunk:
            keys.append(job.target)
            args += [job.job_id, job.tag, job.index_score, job.sha1, job.span[0] + 1, job.span[1]]
        yield move_result(call_move(layout.client, "cel_requeue", keys, args))
