"""The unfiltered plan of a BullMQ redrive or purge of failed jobs: ids and
scores in bounded ``ZRANGE`` windows, and per window read-only script calls
(several a round trip) for only what the move needs:

* redrive: ``jobctl/lua/bullmq_fence.lua``, one SHA1 per job of the fields
  the move re-checks (finishedOn, failedReason, parentKey, deid) and its
  parentKey: a :class:`~jobctl.layouts.bullmq.ops.BullFencedJob` each; a
  flow child (its parent's keys go in the move's ``KEYS``) is read as for
  a purge;
* purge: ``jobctl/lua/bullmq_read.lua``, ``HMGET`` of :data:`FIELDS`: a
  :class:`~jobctl.layouts.bullmq.ops.BullPlannedJob` each.

No ``data``, ``stacktrace`` or envelope is read; the breakdown comes from
the first :data:`SAMPLE` jobs (``plan.breakdown_sampled``)."""

from __future__ import annotations

from jobctl.layouts.bullmq.ops import BullFencedJob, BullPlannedJob, plan_fields
from jobctl.layouts.planning import breakdown_key
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.spec import Operation

__all__ = ["plan_failed", "SAMPLE", "FIELDS", "READ_BATCH", "ZSET_WINDOW"]

#: Failed jobs read whole for the breakdown of an unfiltered plan.
SAMPLE = 1000
#: The hash fields a planned job of a purge needs (the order of :func:`plan_fields`'s document).
FIELDS = ("finishedOn", "failedReason", "parentKey", "deid", "opts")
#: Jobs read per script call (a bounded call: ~1 ms of server time); several calls a round trip.
READ_BATCH = 500
#: Ids and scores per ``ZRANGE`` window (~2 ms of server time).
ZSET_WINDOW = 4000


def _calls(layout, name: str, ids: list[str], args: list) -> list:
    """``jobctl/lua/<name>.lua`` on ``ids``' hashes, :data:`READ_BATCH` keys a
    call, every call in one round trip; the replies joined."""
    from jobctl.layouts.bullmq.calls import read_calls

    return read_calls(layout.client, name, [[layout.keys.job(j) for j in ids[i:i + READ_BATCH]]
                                            for i in range(0, len(ids), READ_BATCH)], args)


def _read(layout, ids: list[str]) -> list[list]:
    """Each id's :data:`FIELDS` (``None`` for each when it has no hash)."""
    flat = _calls(layout, "bullmq_read", ids, list(FIELDS))
    step = len(FIELDS) + 1
    return [flat[n:n + len(FIELDS)] if flat[n + len(FIELDS)] else [None] * len(FIELDS)
            for n in range(0, len(flat), step)]


def _full(layout, plan: Plan, jobs: list[PlannedJob]) -> list[PlannedJob]:
    """``jobs`` as :class:`BullPlannedJob` (their fields read now); a job without a hash is dangling."""
    out = []
    for job, values in zip(jobs, _read(layout, [j.job_id for j in jobs])):
        if not any(v is not None for v in values):
            plan.dangling.append(job.job_id)  # no hash (or not a hash): the move would skip it
            continue
        doc = {f: v.decode("utf-8", "surrogateescape") for f, v in zip(FIELDS, values) if v is not None}
        out.append(BullPlannedJob(job, plan_fields(doc)))
    return out


def _fenced(layout, plan: Plan, jobs: list[PlannedJob]) -> list[PlannedJob]:
    """``jobs`` as :class:`BullFencedJob`, in order; a flow child as :class:`BullPlannedJob`."""
    flat = _calls(layout, "bullmq_fence", [j.job_id for j in jobs], [])
    children = [job for job, fence, parent in zip(jobs, flat[0::2], flat[1::2]) if fence and parent]
    full = {j.job_id: j for j in _full(layout, plan, children)} if children else {}
    out: list[PlannedJob] = []
    for job, fence, parent in zip(jobs, flat[0::2], flat[1::2]):
        if not fence:
            plan.dangling.append(job.job_id)  # no hash (or not a hash): the move would skip it
        elif not parent:
            out.append(BullFencedJob(job, fence.decode("ascii")))
        elif job.job_id in full:
            out.append(full[job.job_id])
    return out


def _windows(client, key: str):
    """``failed``'s ``(member, score text)`` pairs, :data:`ZSET_WINDOW` a ``ZRANGE``
    (raw: no per-score conversion by the client library)."""
    total = client.zcard(key)
    for start in range(0, total, ZSET_WINDOW):
        reply = client.execute_command("ZRANGE", key, start, start + ZSET_WINDOW - 1, "WITHSCORES")
        if not reply:
            return
        if isinstance(reply[0], list):  # RESP3: [member, score] pairs, the score a double
            yield [(m, repr(sc)) for m, sc in reply]
        else:
            yield [(m, sc.decode("ascii")) for m, sc in zip(reply[0::2], reply[1::2])]


def plan_failed(layout, plan: Plan) -> Plan:
    """Fill ``plan`` (unfiltered, no ids or fence) with every failed job and return it."""
    limit = plan.spec.limit
    per_window = _full if plan.spec.operation is Operation.PURGE else _fenced
    for pairs in _windows(layout.client, layout.keys.failed):
        jobs = [PlannedJob(m.decode("utf-8", "surrogateescape"), 0, None, None, sc) for m, sc in pairs]
        if limit is not None:
            jobs = jobs[:limit - len(plan.jobs)]
        plan.scanned += len(jobs)
        plan.jobs.extend(per_window(layout, plan, jobs))
        if limit is not None and len(plan.jobs) >= limit:
            plan.truncated = True
            break
    for n, job in enumerate(plan.jobs):
        job.position = n
    head = [j.job_id for j in plan.jobs[:SAMPLE]]
    for rec in layout.records(head, State.DEAD, [{} for _ in head]):
        if rec.raw is not None:
            plan.breakdown[breakdown_key(rec)] += 1
    plan.breakdown_sampled = len(head) if len(head) < len(plan.jobs) else 0
    return plan
