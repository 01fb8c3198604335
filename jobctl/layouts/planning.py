"""The planning loop shared by layouts: walked records in, a fenced
:class:`~jobctl.ops.plan.Plan` out.

A layout walks the operation's source state (bounded windows) and hands the
records here; this module applies the filter, sets dangling and malformed
jobs aside, counts the breakdown and records each match with the fence the
layout computes for it (what the apply re-checks atomically).  Every
layout plans through :func:`plan_from_walk`.  Reads nothing from Redis
itself, except through the layout (:func:`records_by_ids`,
:func:`plan_by_payload`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..errors import NotFound, UsageError
from ..model import JobRecord, State
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.spec import Operation, OpSpec
from .common import check_transition

__all__ = ["plan_from_walk", "plan_by_payload", "records_by_ids", "require_requeue_scope", "refuse_priority",
           "check_operation", "breakdown_key", "shard_index", "TRANSITIONS_WITH_SCHEDULED",
           "TRANSITIONS_WITHOUT_SCHEDULED"]

#: Transitions are facts of the operations core (one place): re-exported here.
from ..ops.catalog import TRANSITIONS_WITH_SCHEDULED, TRANSITIONS_WITHOUT_SCHEDULED, group_key  # noqa: E402
from ..ops.catalog import require_requeue_scope as _requeue_scope  # noqa: E402


def breakdown_key(rec: JobRecord) -> tuple[str, str]:
    """``(job type, error)`` of a plan's breakdown: the envelope's type and
    last error code, else its last error message (first 40 characters): the
    triage's key (:func:`jobctl.ops.catalog.group_key`), ``"?"``/``"-"`` when missing."""
    job_type, err = group_key(rec.envelope)
    return job_type or "?", err or "-"


def require_requeue_scope(spec: OpSpec) -> None:
    """Requeue touches claimed jobs: it needs ``--stuck`` or ``--ids``
    (raises :class:`UsageError`)."""
    _requeue_scope(spec)  # the rule lives in jobctl.ops.catalog


def refuse_priority(layout_name: str, spec: OpSpec) -> None:
    """Raise :class:`UsageError` when ``--priority`` is given to a layout
    without priority lists."""
    if spec.priority is not None:
        raise UsageError(f"layout {layout_name} has no priority lists (--priority)")


def check_operation(layout_name: str, transitions: dict, spec: OpSpec) -> None:
    """Raise :class:`UsageError` unless the layout ``layout_name`` can do
    ``spec``: its transition is in ``transitions``
    (:func:`~.common.check_transition`), a requeue has a scope
    (:func:`require_requeue_scope`), no ``--priority`` is given
    (:func:`refuse_priority`); checked in that order."""
    check_transition(layout_name, transitions, spec)
    require_requeue_scope(spec)
    refuse_priority(layout_name, spec)


def shard_index(shards) -> Callable[[JobRecord], int]:
    """``shard_of`` for :func:`plan_from_walk`: a record's index in
    ``shards`` (key objects with a ``tag``), found by its ``shard`` tag."""
    index = {keys.tag: n for n, keys in enumerate(shards)}
    return lambda rec: index[rec.shard]


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
                   shard_of: Callable[[JobRecord], int] | None = None,
                   is_stuck: Callable[[JobRecord], bool] | None = None,
                   on_match: Callable[[JobRecord, PlannedJob], None] | None = None,
                   breakdown: Callable[[JobRecord], tuple[str, str]] = breakdown_key) -> Plan:
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
      the others are listed in ``plan.fence_skipped``; a redrive plans an
      id once, a further entry of it is skipped as ``"duplicate entry"``;
    * every match becomes a :class:`PlannedJob` whose ``shard`` is
      ``shard_of(record)`` (default 0: one shard), ``sha1``
      ``fence(record)``, ``position``/``score`` the record's; ``on_match``
      may keep more (e.g. the exact bytes to move) or replace
      ``plan.jobs[-1]``; ``plan.breakdown`` counts it under
      ``breakdown(record)`` (default :func:`breakdown_key`).

    Stops at ``spec.limit`` (``plan.truncated``).  ``plan.walked[shard]`` is
    the furthest dead-list position matched in that shard, plus one.
    """
    spec = plan.spec
    flt = spec.filter
    now = plan.now_ms
    id_fence = spec.fence
    fenced_seen: set[str] = set()
    for batch in batches:
        for rec in batch:
            if spec.stuck_only and is_stuck is not None and not is_stuck(rec):
                continue
            plan.scanned += 1
            if id_fence is not None:
                if rec.job_id not in id_fence:
                    continue
                if rec.job_id in fenced_seen and spec.operation is Operation.REDRIVE:
                    plan.fence_skipped.setdefault(rec.job_id, "duplicate entry")  # a job is redriven once
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
            shard = 0 if shard_of is None else shard_of(rec)
            job = PlannedJob(job_id=rec.job_id, shard=shard, position=rec.position, score=rec.score,
                             sha1=fence(rec))
            plan.jobs.append(job)
            if on_match is not None:
                on_match(rec, job)
            plan.breakdown[breakdown(rec)] += 1
            if rec.position is not None and spec.source is State.DEAD:
                plan.walked[shard] = max(plan.walked.get(shard, 0), rec.position + 1)
            if spec.limit is not None and plan.planned >= spec.limit:
                plan.truncated = True
                return plan
    for job_id in sorted((id_fence or {}).keys() - fenced_seen):
        plan.fence_skipped[job_id] = f"no longer {spec.source.value}"
    return plan


def plan_by_payload(layout, spec: OpSpec, now: int, transitions: dict) -> Plan:
    """The plan of ``spec`` for a layout that walks the source with
    ``iter_batches`` (``spec.ids``: :func:`records_by_ids`) and fences each
    job by :func:`~jobctl.ops.plan.payload_sha1` of its ``raw``
    (delay-zset, delayed-events).  Raises :class:`UsageError` as
    :func:`check_operation` does."""
    check_operation(layout.name, transitions, spec)
    batches = records_by_ids(layout, spec) if spec.ids else layout.iter_batches(spec.source)
    return plan_from_walk(Plan(spec=spec, now_ms=now), batches, lambda rec: payload_sha1(rec.raw))
