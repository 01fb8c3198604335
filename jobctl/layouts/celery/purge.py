"""Purge of planned ready messages of a Celery queue, fenced by their
exact bytes (``jobctl purge QUEUE --state ready``).

Plan: walk the priority lists (oldest first, bounded windows), filter, and
keep each match's list and exact bytes (its fence: kombu gives every
message a unique delivery tag).  An export first (the core's purge policy)
fences the plan to the exported messages.

Apply: ``jobctl/lua/cel_purge.lua``, one call per batch of one list:
``LREM list -1 <bytes>`` per message, from the tail where the workers'
``BRPOP`` takes them.  A message a worker took since the plan is answered
``gone`` (it runs); no other message is touched, so exactly the planned
messages still queued are removed.  Each ``LREM`` scans the list from its
oldest end: a call takes at most ``LREM_BUDGET / length`` messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.planning import plan_from_walk, records_by_ids
from jobctl.layouts.walks import lrem_chunk
from jobctl.ops.plan import Plan, PlannedJob

__all__ = ["PurgePlan", "plan_purge", "apply_purge"]


@dataclass
class PurgePlan(Plan):
    """A purge plan: ``raws`` the exact bytes and ``lists`` the list of each
    planned message, by ``PlannedJob.sha1`` (the SHA1 of its bytes)."""

    raws: dict[str, bytes] = field(default_factory=dict)
    lists: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return (f"{super().describe()}; each removed by its exact bytes (LREM from the oldest end), "
                "a message a worker takes meanwhile runs")


def plan_purge(layout, spec, now: int) -> Plan:
    """The plan of a purge of ready messages (reads only)."""
    plan = PurgePlan(spec=spec, now_ms=now)

    def keep(rec, job: PlannedJob) -> None:
        plan.raws[job.sha1], plan.lists[job.sha1] = rec.raw, rec.meta["list"]

    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)
    return plan_from_walk(plan, batches, lambda rec: rec.meta["sha1"], on_match=keep)


def apply_purge(layout, plan: PurgePlan, *, batch: int):
    """One ``cel_purge.lua`` call per at most ``batch`` messages of one list;
    yields one :class:`~jobctl.ops.result.BatchResult` each."""
    by_list: dict[str, list[PlannedJob]] = {}
    for job in plan.jobs:
        by_list.setdefault(plan.lists[job.sha1], []).append(job)
    for key, jobs in by_list.items():
        step = lrem_chunk(batch, layout.client.llen(key))
        for i in range(0, len(jobs), step):
            args: list = [len(jobs[i:i + step])]
            for job in jobs[i:i + step]:
                args += [job.job_id, plan.raws[job.sha1]]
            yield move_result(call_move(layout.client, "cel_purge", [key], args))
