"""The unfiltered plan of a BullMQ redrive or purge of failed jobs:

* redrive: ids and failed scores in raw ``ZRANGE`` windows of
  :data:`ZSET_WINDOW`, then ``jobctl/lua/bullmq_fence.lua`` on their job
  hashes (:data:`READ_BATCH` a call, several calls a round trip) answers per
  job one SHA1 of the fields the move re-checks (finishedOn, failedReason,
  parentKey, deid) and its parentKey, kept as returned in a
  :class:`~jobctl.layouts.bullmq.columns.FencedColumns` (no object per
  job); a flow child (its parent's keys go in the move's ``KEYS``) is read
  as for a purge;
* purge: ids and scores in bounded ``ZRANGE`` windows, then
  ``jobctl/lua/bullmq_read.lua``, ``HMGET`` of :data:`FIELDS`: a
  :class:`~jobctl.layouts.bullmq.ops.BullPlannedJob` each.

No ``data``, ``stacktrace`` or envelope is read; the breakdown comes from
the first :data:`SAMPLE` jobs (``plan.breakdown_sampled``)."""

from __future__ import annotations

from jobctl.layouts.bullmq.columns import FencedColumns
from jobctl.layouts.bullmq.ops import BullPlannedJob, plan_fields
from jobctl.layouts.planning import breakdown_key
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.spec import Operation

__all__ = ["plan_failed", "raw_windows", "SAMPLE", "FIELDS", "READ_BATCH", "ZSET_WINDOW"]

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


def _fence_windows(layout, total: int):
    """``(ids, scores, fences, parents)`` of each :data:`ZSET_WINDOW`-rank
    window of ``failed`` up to ``total`` ranks: ids and scores from a raw
    ``ZRANGE``, fences and parentKeys from ``bullmq_fence.lua`` on the job
    hashes (every key in ``KEYS``), all as the server returned them."""
    from jobctl.layouts.bullmq.calls import read_calls

    base = layout.keys.job("").encode()
    for ids, scores in raw_windows(layout.client, layout.keys.failed, total):
        keys = [base + i for i in ids]
        flat = read_calls(layout.client, "bullmq_fence",
                          [keys[n:n + READ_BATCH] for n in range(0, len(keys), READ_BATCH)], [])
        yield ids, scores, flat[0::2], flat[1::2]


def _plan_fenced(layout, plan: Plan, limit: int | None) -> None:
    """Fill ``plan`` (a redrive) from :func:`_fence_windows`: ``plan.jobs`` a
    :class:`FencedColumns`; a job without a hash is dangling."""
    cols = plan.jobs = FencedColumns()
    for ids, scores, fences, parents in _fence_windows(layout, layout.client.zcard(layout.keys.failed)):
        if limit is not None:
            ids = ids[:limit - len(cols)]
        plan.scanned += len(ids)
        if None not in fences[:len(ids)] and not any(parents[:len(ids)]):  # no dangling job, no flow child
            cols.extend(ids, scores[:len(ids)], fences[:len(ids)])
        else:
            _add_window(layout, plan, cols, list(zip(ids, scores, fences, parents)))
        if limit is not None and len(cols) >= limit:
            plan.truncated = True
            return


def _add_window(layout, plan: Plan, cols: FencedColumns, rows: list[tuple]) -> None:
    """Add one window's ``(id, score, fence, parentKey)`` rows in order: a flow
    child read whole (dropped if its hash went meanwhile), a job without a hash dangling."""
    children = [PlannedJob(i.decode("utf-8", "surrogateescape"), 0, None, None, sc.decode("ascii"))
                for i, sc, fence, parent in rows if fence is not None and parent]
    full = {j.job_id: j for j in _full(layout, plan, children)} if children else {}
    for raw, score, fence, parent in rows:
        job_id = raw.decode("utf-8", "surrogateescape")
        if fence is None:
            plan.dangling.append(job_id)  # no hash (or not a hash): the move would skip it
        elif not parent:
            cols.extend([raw], [score], [fence])
        elif job_id in full:
            cols.add_child(raw, full[job_id])


def raw_windows(client, key: str, total: int):
    """``(members, score texts)`` of ``key``'s first ``total`` ranks,
    :data:`ZSET_WINDOW` a raw ``ZRANGE`` (no per-score conversion by the
    client library; under RESP3 a score's ``%.17g``: an integral score
    as its digits, as RESP2 gives it)."""
    for start in range(0, total, ZSET_WINDOW):
        reply = client.execute_command("ZRANGE", key, start, min(start + ZSET_WINDOW, total) - 1, "WITHSCORES")
        if not reply:
            return
        if isinstance(reply[0], list):  # RESP3: [member, score] pairs, the score a double
            yield [m for m, _ in reply], [b"%.17g" % sc for _, sc in reply]
        else:
            yield reply[0::2], reply[1::2]


def _windows(client, key: str):
    """``failed``'s ``(member, score text)`` pairs, window by window (:func:`raw_windows`)."""
    for members, scores in raw_windows(client, key, client.zcard(key)):
        yield [(m, sc.decode("ascii")) for m, sc in zip(members, scores)]


def _plan_purge(layout, plan: Plan, limit: int | None) -> None:
    """Fill ``plan`` (a purge) from ``failed``'s ``ZRANGE`` windows: a :class:`BullPlannedJob` each."""
    for pairs in _windows(layout.client, layout.keys.failed):
        jobs = [PlannedJob(m.decode("utf-8", "surrogateescape"), 0, None, None, sc) for m, sc in pairs]
        if limit is not None:
            jobs = jobs[:limit - len(plan.jobs)]
        plan.scanned += len(jobs)
        plan.jobs.extend(_full(layout, plan, jobs))
        if limit is not None and len(plan.jobs) >= limit:
            plan.truncated = True
            break
    for n, job in enumerate(plan.jobs):
        job.position = n


def plan_failed(layout, plan: Plan) -> Plan:
    """Fill ``plan`` (unfiltered, no ids or fence) with every failed job and return it."""
    if plan.spec.operation is Operation.PURGE:
        _plan_purge(layout, plan, plan.spec.limit)
    else:
        _plan_fenced(layout, plan, plan.spec.limit)
    head = [j.job_id for j in plan.jobs[:SAMPLE]]
    for rec in layout.records(head, State.DEAD, [{} for _ in head]):
        if rec.raw is not None:
            plan.breakdown[breakdown_key(rec)] += 1
    plan.breakdown_sampled = len(head) if len(head) < len(plan.jobs) else 0
    return plan
