"""The unfiltered plan of a BullMQ redrive or purge of failed jobs: ids
and scores in bounded ``ZRANGE`` windows, and per window one read-only
script call (``jobctl/lua/bullmq_read.lua``: ``HMGET`` of each job) for
only the fields the move re-checks (no ``data``, no ``stacktrace``, no
envelope); the breakdown comes from the first
:data:`SAMPLE` jobs (``plan.breakdown_sampled``)."""

from __future__ import annotations

from jobctl.layouts.bullmq.ops import BullPlannedJob, plan_fields
from jobctl.layouts.planning import breakdown_key
from jobctl.layouts.walks import walk_zset
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.scripts import script as registered

__all__ = ["plan_failed", "SAMPLE", "FIELDS"]

#: Failed jobs read whole for the breakdown of an unfiltered plan.
SAMPLE = 1000
#: The hash fields a planned job needs (the order of :func:`plan_fields`'s document).
FIELDS = ("finishedOn", "failedReason", "parentKey", "deid", "opts")


#: Jobs read per script call (a bounded call: ~1 ms of server time).
READ_BATCH = 250


def _read(layout, ids: list[str]) -> list[list]:
    """Each id's :data:`FIELDS` (``None`` for each when it has no hash): one
    ``jobctl/lua/bullmq_read.lua`` call per :data:`READ_BATCH`."""
    script = registered(layout.client, "bullmq_read")
    flat: list = []
    for i in range(0, len(ids), READ_BATCH):
        flat += script(keys=[layout.keys.job(j) for j in ids[i:i + READ_BATCH]], args=list(FIELDS))
    step = len(FIELDS) + 1
    return [flat[n:n + len(FIELDS)] if flat[n + len(FIELDS)] else [None] * len(FIELDS)
            for n in range(0, len(flat), step)]


def _window(layout, plan: Plan, pairs: list) -> bool:
    """Add one window's jobs to ``plan``; ``True`` once ``spec.limit`` is reached."""
    ids = [member.decode("utf-8", "surrogateescape") for member, _ in pairs]
    limit = plan.spec.limit
    for job_id, (_, score), values in zip(ids, pairs, _read(layout, ids)):
        plan.scanned += 1
        if not any(v is not None for v in values):
            plan.dangling.append(job_id)  # no hash (or not a hash): the move would skip it
            continue
        doc = {f: v.decode("utf-8", "surrogateescape") for f, v in zip(FIELDS, values) if v is not None}
        job = PlannedJob(job_id, 0, len(plan.jobs), None, repr(float(score)))
        plan.jobs.append(BullPlannedJob(job, plan_fields(doc)))
        if limit is not None and len(plan.jobs) >= limit:
            plan.truncated = True
            return True
    return False


def plan_failed(layout, plan: Plan) -> Plan:
    """Fill ``plan`` (unfiltered, no ids or fence) with every failed job and return it."""
    for _, pairs in walk_zset(layout.client, layout.keys.failed, batch=1000):
        if _window(layout, plan, pairs):
            break
    head = [j.job_id for j in plan.jobs[:SAMPLE]]
    for rec in layout.records(head, State.DEAD, [{} for _ in head]):
        if rec.raw is not None:
            plan.breakdown[breakdown_key(rec)] += 1
    plan.breakdown_sampled = len(head) if len(head) < len(plan.jobs) else 0
    return plan
