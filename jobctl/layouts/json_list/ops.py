"""Planning and applying operations on the json-list layout (seed 002).

Every move takes the byte-identical job string (the workers ``LREM`` by
bytes); the fence of a planned job is the SHA1 of those bytes, re-checked by
the script (``redis.sha1hex``).  Per job, in one atomic script step:

* requeue (processing -> ready): the claim time is still the plan's, ``LREM
  processing -1 <bytes>`` (from the tail, where the oldest claims are; found
  first with ``LPOS ... MAXLEN``, at most :data:`~.moves.REQUEUE_BUDGET`
  elements searched per call, ``jl_requeue.lua``),
  ``ZREM processing:times``, ``RPUSH pending`` -- the end the seed's own
  recovery (its nack) puts a job back at, so it is claimed next.  Attempts
  are not counted: jobctl undoes the claim, it does not fail the job.
* redrive (dead -> ready): ``LPUSH pending`` (behind the backlog, like a
  new job); the ``attempts`` entry is kept (the next failure dead-letters it
  again) unless ``--reset-attempts`` deletes it.  The string itself cannot
  carry a redrive mark; the journal records the operation.
* suppress (dead -> suppressed): the id into jobctl's zset, the bytes into
  jobctl's raw hash, who/when/why into its info hash; unsuppress RPUSHes
  the bytes back at the dead list's newest end.
* purge (dead or suppressed -> gone): the string and the id's ``attempts``
  and ``errors`` entries.

Costs.  Processing is bounded by the workers' concurrency; each requeued
job is one ``LREM`` over it, and a call takes at most ``LREM_BUDGET /
length`` jobs.  The dead list, which nobody pops and which may be long, is
never searched: it is the window engine's (:mod:`jobctl.ops.walk`,
:func:`dead_sources`): pipelined ``jl_window.lua`` calls walk it from its
oldest end (the left, where the workers' RPUSHes do not shift positions),
take planned strings out (fence: the string's SHA1 + its position) and park
every other one on jobctl's hold list, which ``list_restore.lua`` puts back
at the left in order.  Each call costs O(batch) whatever the list's length,
at every instant each string is in the dead list or the hold (both read as
dead), and the strings that stayed dead keep their order.  An unfiltered
redrive or purge plans as a count of tail positions
(:mod:`.tail_plan`) and is walked in tail mode (``jl_tail.lua``): each
string is moved only while it is the byte-identical string read just
before its round trip, in runs of one ``LPOP``/``LPUSH``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobctl.model import JobRecord, State
from jobctl.ops.plan import JobColumns, Plan, PlannedJob
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl.layouts.moves import REQUEUE_BUDGET, call_move, move_result, requeue_calls, window_mode
from jobctl.layouts.common import DEFAULT_BATCH, batch_result, suppression_record, text
from jobctl.layouts.planning import TRANSITIONS_WITHOUT_SCHEDULED, check_operation, plan_from_walk, records_by_ids
from jobctl.layouts.walks import WINDOW, lrem_chunk
from jobctl.ops.redrive_record import source_fields
from jobctl.ops.walk import ListSource, drive, drives
from jobctl.layouts.json_list.tail_plan import JsonTailRange, plan_tail, tail_applies

if TYPE_CHECKING:
    from jobctl.layouts.json_list.layout import JsonList

__all__ = ["JsonListPlan", "TRANSITIONS", "DEFAULT_BATCH", "plan_operation", "apply_plan", "dead_sources"]

#: (operation, source) -> allowed targets (None: purge).  No scheduled state.
TRANSITIONS = TRANSITIONS_WITHOUT_SCHEDULED


@dataclass
class JsonListPlan(Plan):
    """A :class:`Plan` that also keeps, for requeue, the exact bytes and the
    claim time (``processing:times`` score as text, "" for none) of each
    planned string, by its SHA1 (``PlannedJob.sha1``).  Dead-list positions
    (``PlannedJob.position``) count from the list's oldest end (the left)."""

    raws: dict[str, bytes] = field(default_factory=dict)
    claims: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """As :meth:`Plan.describe`; an unfiltered plan of the dead list
        (:class:`~.tail_plan.JsonTailRange`) says what its walk takes."""
        text_ = super().describe()
        if not isinstance(self.jobs, JsonTailRange):
            return text_
        text_ = text_.split(f"; the {self.planned:,} oldest dead job(s) by position")[0]
        text_ += (f"; the {self.planned:,} oldest dead job(s) by position, each moved only while its string is "
                  f"the one read just before (breakdown from a sample of {self.breakdown_sampled:,})")
        if self.spec.skips_malformed:
            seen = f" ({len(self.malformed):,} among the oldest)" if self.malformed else ""
            text_ += f"; malformed job strings{seen} stay dead, not counted"
        return text_


def _source(layout: "JsonList", spec: OpSpec) -> Iterator[list[JobRecord]]:
    if not spec.ids:
        yield from layout.iter_batches(spec.source, WINDOW)
        return
    dead_len = layout.depth(State.DEAD) if spec.source is State.DEAD else 0
    for [rec] in records_by_ids(layout, spec):
        if spec.source is State.DEAD and rec.position is not None:
            rec.position = dead_len - 1 - rec.position  # inspect counts from the newest end
        yield [rec]


def plan_operation(layout: "JsonList", spec: OpSpec, now: int) -> JsonListPlan:
    """Walk the source and record every match with its fence.  Raises
    :class:`~jobctl.errors.UsageError` for an operation the layout lacks."""
    check_operation(layout.name, TRANSITIONS, spec)
    note = ("each redrive recorded in jobctl's redriven hash (operation, time, count); the job string moves "
            "byte-identical, " + ("its attempts entry deleted (jobs:attempts)" if spec.reset_attempts
                                  else "its attempts entry kept"))
    plan = JsonListPlan(spec=spec, now_ms=now, redrive_record="hash", redrive_note=note,
                        jobs=JobColumns() if spec.source is State.DEAD else [])
    if tail_applies(spec):  # unfiltered: a count of tail positions (jl_tail.lua), no column per job
        return plan_tail(layout, plan)

    def keep(rec: JobRecord, job: PlannedJob) -> None:
        if spec.source is State.PROCESSING:
            plan.raws[job.sha1] = rec.raw
            claimed = rec.meta.get("claimed_at_s")
            plan.claims[job.sha1] = "" if claimed is None else repr(float(claimed))

    plan_from_walk(plan, _source(layout, spec), lambda rec: rec.meta["sha1"],
                   is_stuck=lambda rec: rec.deadline_ms is not None and rec.deadline_ms < now, on_match=keep)
    return plan


def apply_plan(layout: "JsonList", plan: Plan, *, batch: int = DEFAULT_BATCH) -> Iterator[BatchResult]:
    """Apply ``plan`` (a :class:`JsonListPlan`); yields each script call's result."""
    spec = plan.spec
    k = layout.keys
    if spec.source is State.DEAD:
        yield from drive(dead_sources(layout, spec), plan, batch=batch, depth=1)
        return
    jobs = plan.jobs
    if spec.source is State.PROCESSING:
        def requeue(chunk: list[PlannedJob]) -> list:
            args: list = [REQUEUE_BUDGET, len(chunk)]
            for j in chunk:
                args += [j.job_id, plan.raws[j.sha1], plan.claims[j.sha1]]  # type: ignore[attr-defined]
            return call_move(layout.client, "jl_requeue", [k.processing, k.processing_times, k.pending], args)

        yield from requeue_calls(jobs, batch, lambda j: j.job_id, requeue)
        return
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        args = ["purge" if spec.operation is Operation.PURGE else "unsuppress", len(chunk)]
        for j in chunk:
            args += [j.job_id, str(j.score), j.sha1]
        yield move_result(call_move(layout.client, "jl_suppressed_move",
                                    [k.suppressed, k.suppressed_raw, k.suppressed_info, k.dead, k.attempts,
                                     k.errors], args))


# -- the dead list ---------------------------------------------------------------

def dead_sources(layout: "JsonList", spec: OpSpec) -> list[ListSource]:
    """The window-engine source of the dead list for ``spec`` (an operation
    from dead; ``[]`` otherwise).  A planned string is identified by its
    SHA1 (``PlannedJob.sha1``) and moved byte for byte."""
    if not drives(spec):
        return []
    from jobctl.layouts.base import now_ms

    k, now = layout.keys, now_ms()
    mode = window_mode(spec)  # json-list has no scheduled state
    target = {"purge": k.dead, "suppressed": k.suppressed, "ready": k.pending}[mode]
    info = (lambda now: suppression_record(spec, now)) if mode == "suppressed" else None
    return [ListSource(client=layout.client, kind="jl", tag=k.prefix, shard=0, dead=k.dead, hold=k.hold,
                       walk=k.walk, lease=k.lease, **source_fields(layout.client, k, now),
                       info_hash=k.suppressed_info, target=target, mode=mode, raw=k.suppressed_raw,
                       attempts=k.attempts, errors=k.errors,
                       ident=lambda j: j.sha1, info=info, reset_attempts=spec.reset_attempts,
                       element_id=_tail_id(spec.skips_malformed))]


def _tail_id(skip_malformed: bool):
    """A tail walk's id of a dead string (:attr:`ListSource.element_id`):
    its job id, "" for a malformed one when the operation skips those."""
    from jobctl.layouts.json_list.layout import element_id

    if not skip_malformed:
        return lambda raw: element_id(raw)[0]

    def name(raw: bytes) -> str:
        job_id, malformed = element_id(raw)
        return "" if malformed else job_id

    return name
