"""``jobctl check`` for the rq layout: RQ's invariants, report only.

* every id of the ready list, the failed and scheduled registries and
  jobctl's suppressed zset has its job hash (``dangling``: RQ's own cleanup drops a failed
  or finished entry once its score passes; one whose hash went first, or a
  ready id without a hash, is reported);
* the hash's ``status`` matches where the id is (``status_mismatch``:
  ``queued`` on the ready list, ``failed`` in the failed registry and
  the suppressed zset, ``scheduled`` in the scheduled registry);
* no id is both ready and failed (``multiple_states``);
* no orphan: a job hash of this queue (``origin``) whose status is
  ``queued`` or ``failed`` is on the ready list, in the failed registry or
  suppressed (``orphan_job``).  RQ's own ``FailedJobRegistry.requeue`` removes the id
  from the registry, then saves and enqueues the job in separate steps: a
  crash between them leaves exactly this.

Nothing is repaired (which state is right is not knowable; ``redrive
--ids`` or RQ's own API fixes a finding).  Before a finding is reported
its job is read again in one ``MULTI``/``EXEC``; one that no longer holds
is counted as ``transient``.  Cost: the lists and registries are read in
windows of 1,000, statuses with pipelined ``HMGET``, and ``rq:job:*`` is
SCANned: linear in the keyspace, in bounded commands.
"""

from __future__ import annotations

from jobctl.cluster import scan_pages
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import CheckReport, Problem
from jobctl.layouts.rq.keys import JOB_PREFIX
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

__all__ = ["check_queue"]

#: The hash status each of RQ's structures implies.
_WANT = {"ready": "queued", "failed": "failed", "scheduled": "scheduled", "suppressed": "failed"}


def _places(layout) -> dict[str, set[str]]:
    """``{id: {"ready", "failed", "scheduled"}}`` from bounded windows."""
    k = layout.keys
    where: dict[str, set[str]] = {}
    for _, chunk in walk_list(layout.client, k.queue, from_right=False, batch=WINDOW):
        for raw in chunk:
            where.setdefault(text(raw), set()).add("ready")
    for name, key in (("failed", k.failed), ("scheduled", k.scheduled), ("suppressed", k.suppressed)):
        for _, pairs in walk_zset(layout.client, key, batch=WINDOW):
            for raw, _ in pairs:
                where.setdefault(text(raw), set()).add(name)
    return where


def _statuses(layout, ids: list[str]) -> list[tuple]:
    """``(status, origin)`` of each id's hash (``(None, None)``: no hash)."""
    out: list[tuple] = []
    for i in range(0, len(ids), WINDOW):
        pipe = layout.client.pipeline(transaction=False)
        for job_id in ids[i:i + WINDOW]:
            pipe.hmget(layout.keys.job(job_id), "status", "origin")
        out += [tuple(None if v is None else text(v) for v in r) if isinstance(r, list) else (None, None)
                for r in pipe.execute(raise_on_error=False)]
    return out


def _problems(job_id: str, places: set[str], status: str | None) -> list[Problem]:
    """The findings (all but orphans) of one id in ``places`` whose hash has ``status``."""
    out = []
    if {"ready", "failed"} <= places:
        out.append(Problem("multiple_states", "", job_id, "on the ready list and in the failed registry"))
    for place in sorted(places):
        if status is None:
            out.append(Problem("dangling", "", job_id, f"{place}: no job hash"))
        elif status != _WANT[place]:
            out.append(Problem("status_mismatch", "", job_id, f"{place}: hash status {status!r}"))
    return out


def _orphan(job_id: str, status: str | None) -> Problem:
    return Problem("orphan_job", "", job_id, f"hash status {status!r} in no list or registry")


def _findings(layout, where: dict[str, set[str]]) -> list[Problem]:
    ids = sorted(where)
    return [p for job_id, (status, _) in zip(ids, _statuses(layout, ids))
            for p in _problems(job_id, where[job_id], status)]


def _orphans(layout, where: dict[str, set[str]], report: CheckReport) -> list[Problem]:
    out = []
    for found in scan_pages(layout.client, f"{JOB_PREFIX}*", WINDOW):
        ids = [i for i in (text(raw)[len(JOB_PREFIX):] for raw in found) if ":" not in i]
        report.payload_keys += len(ids)
        ids = [i for i in ids if i not in where]
        for job_id, (status, origin) in zip(ids, _statuses(layout, ids)):
            if origin == layout.keys.name and status in ("queued", "failed"):
                out.append(_orphan(job_id, status))
    return out


def _still_holds(layout, p: Problem) -> bool:
    """Re-read ``p``'s job in one transaction: does the finding still hold?"""
    k = layout.keys
    pipe = layout.client.pipeline(transaction=True)
    pipe.lpos(k.queue, p.job_id)
    pipe.zscore(k.failed, p.job_id)
    pipe.zscore(k.scheduled, p.job_id)
    pipe.zscore(k.suppressed, p.job_id)
    pipe.hmget(k.job(p.job_id), "status", "origin")
    ready, failed, scheduled, suppressed, (status, _) = pipe.execute()
    places = {n for n, v in (("ready", ready), ("failed", failed), ("scheduled", scheduled),
                             ("suppressed", suppressed)) if v is not None}
    status = None if status is None else text(status)
    if p.kind == "orphan_job":
        return not places and status in ("queued", "failed")
    return p in _problems(p.job_id, places, status)


def check_queue(layout, *, repair: bool = False) -> CheckReport:
    """The check report of an rq queue (``repair`` repairs nothing: every
    finding is report only)."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    where = _places(layout)
    report.checked_ids = len(where)
    for p in _findings(layout, where) + _orphans(layout, where, report):
        if _still_holds(layout, p):
            report.problems.append(p)
        else:
            report.transient += 1
    return report
