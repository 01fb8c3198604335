"""Suppress (failed -> jobctl's suppressed zset), unsuppress and purge of
suppressed RQ jobs.

A suppressed job leaves RQ's failed registry for jobctl's
``jobctl:rq:<q>:suppressed`` zset (id -> suppressed-at ms) with a record in
``jobctl:rq:<q>:suppressed:info`` (who, when, why, plus the registry score
and the hash's remaining TTL it had); its hash is made persistent, so RQ's
cleanup neither drops nor expires it.  Unsuppress puts it back in the failed
registry with its expiry shifted by the time it spent suppressed and its
hash's TTL restored.  Every move is fenced as a redrive is: the job must
still be where the plan saw it with the same score, its hash ``failed`` with
the same ``origin``; the removal is checked before anything is written.
"""

from __future__ import annotations

from jobctl.layouts.common import suppression_record
from jobctl.layouts.moves import call_move, move_result
from jobctl.ops.spec import Operation

__all__ = ["apply_suppress"]


def _restore(job, now: int) -> str:
    """``"<registry score>|<hash TTL ms>"`` of an unsuppress: the expiry it
    had, shifted by the time spent suppressed (``+inf`` stays), and the TTL."""
    info = getattr(job, "info", None) or {}
    try:
        score = float(info.get("failed_score", "inf"))
        at = int(info.get("at_ms", now))
        ttl = int(info.get("ttl_ms", -1))
    except (TypeError, ValueError):
        score, at, ttl = float("inf"), now, -1
    if score != float("inf"):
        score += max(0, now - at) / 1000
    return f"{'+inf' if score == float('inf') else repr(score)}|{ttl}"


def apply_suppress(layout, plan, *, batch: int, now: int):
    """Apply a suppress, unsuppress or purge-of-suppressed ``plan`` at
    ``now`` (epoch ms): one ``jobctl/lua/rq_suppress.lua`` call per ``batch``
    jobs; yields one :class:`~jobctl.ops.result.BatchResult` each.  Raises
    :class:`~jobctl.errors.DataError` when a fixed key has the wrong type."""
    k, spec = layout.keys, plan.spec
    mode = {Operation.SUPPRESS: "suppress", Operation.UNSUPPRESS: "unsuppress"}.get(spec.operation, "purge")
    record = suppression_record(spec, now).decode() if mode == "suppress" else ""
    jobs = list(plan.jobs)
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        keys, args = [k.failed, k.suppressed, k.suppressed_info], [mode, now, len(chunk)]
        for job in chunk:
            keys += [k.job(job.job_id)] + k.job_side_keys(job.job_id)
            extra = _restore(job, now) if mode == "unsuppress" else record
            args += [job.job_id, job.sha1, getattr(job, "origin", k.name), extra]
        yield move_result(call_move(layout.client, "rq_suppress", keys, args))
