"""Purge of planned ready messages of a Celery queue, fenced by their
exact bytes (``jobctl purge QUEUE --state ready``).

Plan: walk the priority lists (oldest first, bounded windows), filter, and
keep each match's list, its distance from the list's tail (oldest end) and
its exact bytes (its fence: kombu gives every message a unique delivery
tag).  An export first (the core's purge policy) fences the plan to the
exported messages.

Apply: ``jobctl/lua/cel_purge.lua``, one window of :data:`WINDOW` elements
of one list per call, from the deepest planned distance toward the tail.
Workers only pop the tail (``BRPOP``) and producers push the head, so a
message only gets closer to the tail and the walk meets every planned
message still queued; each found is removed by its bytes, no other element
moves.  A planned message the walk did not meet was taken by a worker
(``gone``: it runs).  A call costs O(window) whatever the list's length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobctl.layouts.moves import call_move
from jobctl.layouts.planning import plan_from_walk, records_by_ids
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.result import BatchResult

__all__ = ["PurgePlan", "plan_purge", "apply_purge", "WINDOW"]

#: List elements one call reads (LRANGE) and compares: about 1 ms of server time for 1 KB messages.
WINDOW = 250


@dataclass
class PurgePlan(Plan):
    """A purge plan: ``raws`` the exact bytes and ``lists`` the list of each
    planned message, by ``PlannedJob.sha1`` (the SHA1 of its bytes);
    ``PlannedJob.position`` is its distance from the list's tail."""

    raws: dict[str, bytes] = field(default_factory=dict)
    lists: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return (f"{super().describe()}; each removed by its exact bytes, the lists walked from the oldest end "
                "in windows; a message a worker takes meanwhile runs")


def plan_purge(layout, spec, now: int) -> Plan:
    """The plan of a purge of ready messages (reads only)."""
    plan = PurgePlan(spec=spec, now_ms=now)

    def keep(rec, job: PlannedJob) -> None:
        plan.raws[job.sha1], plan.lists[job.sha1] = rec.raw, rec.meta["list"]

    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)
    return plan_from_walk(plan, batches, lambda rec: rec.meta["sha1"], on_match=keep)


def _walk_list(layout, plan: PurgePlan, key: str, jobs: list[PlannedJob], window: int):
    """The calls over one list: windows from the deepest planned distance to the tail."""
    pending = {job.sha1: job for job in jobs}
    hi = max(job.position or 0 for job in jobs) + 1
    stone = f"jobctl:purge-tombstone:{plan.spec.op_id}"
    while hi > 0 and pending:
        lo = max(0, hi - window)
        here = [job for job in pending.values() if (job.position or 0) >= lo]
        if here:
            args = [lo, hi, stone, len(here)] + [plan.raws[job.sha1] for job in here]
            res = BatchResult()
            for i in call_move(layout.client, "cel_purge", [key], args):
                job = here[int(i) - 1]
                pending.pop(job.sha1, None)
                res.moved.append(job.job_id)
            yield res
        hi = lo
    if pending:
        gone = BatchResult()
        for job in pending.values():
            gone.skipped.append(job.job_id)
            gone.reasons[job.job_id] = "gone"
        yield gone


def apply_purge(layout, plan: PurgePlan, *, batch: int, window: int = WINDOW):
    """Apply ``plan``: ``cel_purge.lua`` calls per list (``batch`` is not
    used: a call's cost is its window); yields one
    :class:`~jobctl.ops.result.BatchResult` each, then one of the planned
    messages no longer queued (``gone``)."""
    by_list: dict[str, list[PlannedJob]] = {}
    for job in plan.jobs:
        by_list.setdefault(plan.lists[job.sha1], []).append(job)
    for key, jobs in by_list.items():
        yield from _walk_list(layout, plan, key, jobs, window)
