"""The planning loop shared by layouts: walked records in, a fenced
:class:`~jobctl.ops.plan.Plan` out.

A layout walks the operation's source state (bounded windows) and hands the
records here; this module applies the filter, sets dangling and malformed
jobs aside, counts the breakdown and records each match with the fence the
layout computes for it (what the apply re-checks atomically).  Reads nothing
from Redis itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..errors import NotFound, UsageError
from ..model import JobRecord, State
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.spec import Operation, OpSpec

__all__ = ["plan_from_walk", "records_by_ids", "require_requeue_scope", "refuse_priority", "breakdown_key"]


def breakdown_key(rec: JobRecord) -> tuple[str, str]:
    """``(job type, error)`` of a plan's breakdown: the envelope's type and
    last error code, else its last error message (first 40 characters)."""
    env = rec.envelope
    err = env.last_error_code or (env.last_error_message[:40] if env.last_error_message else None)
    return env.job_type or "?", err or "-"


def require_requeue_scope(spec: OpSpec) -> None:
    """Requeue touches claimed jobs: it needs ``--stuck`` or ``--ids``
    (raises :class:`UsageError`)."""
    if spec.operation is Operation.REQUEUE and not spec.stuck_only and not spec.ids:
        raise UsageError("requeue needs --stuck or --ids")


def refuse_priority(layout_name: str, spec: OpSpec) -> None:
    """Raise :class:`UsageError` when ``--priority`` is given to a layout
    without priority lists."""
    if spec.priority is not None:
        raise UsageError(f"layout {layout_name} has no priority lists (--priority)")


def records_by_ids(layout, spec: OpSpec) -> Iterable[list[JobRecord]]:
    """``[record]`` for each of ``spec.ids`` that :meth:`inspect` finds in
    the source state; ids not found or in another state are skipped."""
    for job_id in spec.ids:
        try:
            rec = layout.inspect(job_id)
        except NotFound:
            continue
        if rec.state is spec.source:
            yield [rec]


def plan_from_walk(plan: Plan, batches: Iterable[list[JobRecord]], fence: Callable[[JobRecord], str], *,
                   is_stuck: Callable[[JobRecord], bool] | None = None,
                   on_match: Callable[[JobRecord, PlannedJob], None] | None = None) -> Plan:
    """Fill ``plan`` (``plan.spec`` says what is asked) from the walked
    ``batches`` and return it.

    * a record whose ``raw`` is ``None`` is a dangling id (``plan.dangling``);
    * a malformed envelope is excluded when the operation never takes one
      (redrive, promote) or the filter reads the envelope (``plan.malformed``);
    * with ``spec.stuck_only``, records for which ``is_stuck`` is false are
      not counted at all;
    * with ``spec.fence`` (``{id: payload SHA1}``, from an export or a
      redrive plan), only those ids are planned, each only while
      :func:`~jobctl.ops.plan.payload_sha1` of its ``raw`` is unchanged;
      the others are listed in ``plan.fence_skipped``;
    * every match becomes a :class:`PlannedJob` whose ``sha1`` is
      ``fence(record)``, ``position``/``score`` the record's; ``on_match``
      may keep more (e.g. the exact bytes to move).

    Stops at ``spec.limit`` (``plan.truncated``).  ``plan.walked[0]`` is the
    furthest dead-list position matched, plus one.
    """
    spec = plan.spec
    flt = spec.filter
    now = plan.now_ms
    id_fence = getattr(spec, "fence", None)
    fenced_seen: set[str] = set()
    for batch in batches:
        for rec in batch:
            if spec.stuck_only and is_stuck is not None and not is_stuck(rec):
                continue
            plan.scanned += 1
            if id_fence is not None:
                if rec.job_id not in id_fence:
                    continue
                fenced_seen.add(rec.job_id)
                if id_fence[rec.job_id] != payload_sha1(rec.raw):
                    plan.fence_skipped[rec.job_id] = "changed since export"
                    continue
            if rec.raw is None:
                plan.dangling.append(rec.job_id)
                continue
            env = rec.envelope
            if env.problems and (spec.skips_malformed or flt.needs_payload):
                plan.malformed.append(rec.job_id)
                continue
            if not flt.matches(rec, now):
                continue
            job = PlannedJob(job_id=rec.job_id, shard=0, position=rec.position, score=rec.score,
                             sha1=fence(rec))
            plan.jobs.append(job)
            if on_match is not None:
                on_match(rec, job)
            plan.breakdown[breakdown_key(rec)] += 1
            if rec.position is not None and spec.source is State.DEAD:
                plan.walked[0] = max(plan.walked.get(0, 0), rec.position + 1)
            if spec.limit is not None and plan.planned >= spec.limit:
                plan.truncated = True
                return plan
    for job_id in sorted((id_fence or {}).keys() - fenced_seen):
        plan.fence_skipped[job_id] = f"no longer {spec.source.value}"
    return plan
