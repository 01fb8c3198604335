"""``jobctl migrate QUEUE --transform FILE`` on the reliable-list layout:
rewrite matching envelopes in place (:mod:`jobctl.ops.transform`), fenced
by the payload SHA1 the plan saw, one ``rl_transform.lua`` call per batch;
each replaced envelope is kept in ``queue:{t}:jobctl:envelopes-before``
with the operation id, so that ``--rollback OPERATION`` restores it while
the job still holds what the transform wrote.  The jobs stay where they are
(ready, scheduled, dead or paused).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import orjson

from ..errors import UsageError
from ..model import State
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .common import batch_result, check_transition, text
from .moves import shard_chunks
from .planning import plan_from_walk, shard_index
from .walks import WINDOW

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["TRANSFORM_TRANSITIONS", "plan_operation", "apply_plan", "DEFAULT_BATCH"]

#: (operation, source) -> allowed targets: the job keeps its state.
TRANSFORM_TRANSITIONS = {(Operation.TRANSFORM, s): (s,) for s in
                         (State.READY, State.SCHEDULED, State.DEAD, State.PAUSED, State.SUPPRESSED)}

DEFAULT_BATCH = 128


def plan_operation(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """Plan the envelopes of ``spec.source`` matching the filter, each fenced
    by its payload SHA1; malformed envelopes are excluded (nothing to
    transform).  With a :class:`~jobctl.ops.transform.Rollback` as
    ``spec.transform``: the jobs whose envelope that operation replaced.
    Reads only."""
    check_transition(layout.name, TRANSFORM_TRANSITIONS, spec)
    if spec.transform is None and not _rollback_of(spec):
        raise UsageError("migrate --transform needs a transformation file")
    plan = Plan(spec=spec, now_ms=now)
    if _rollback_of(spec):
        op = _rollback_of(spec)
        for n, keys in enumerate(layout.shards):
            for field, raw in layout.client.hscan_iter(keys.envelopes_before, count=WINDOW):
                try:
                    doc = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(doc, dict) and doc.get("operation") == op:
                    plan.scanned += 1
                    plan.jobs.append(PlannedJob(job_id=text(field), shard=n, position=None, score=None, sha1=""))
        return plan

    def walk():
        for keys in layout.shards:
            yield from layout.iter_batches_of(keys, spec.source, WINDOW)

    return plan_from_walk(plan, walk(), lambda rec: payload_sha1(rec.raw), shard_of=shard_index(layout.shards))


def _rollback_of(spec: OpSpec) -> str | None:
    from ..ops.transform import Rollback

    return spec.transform.operation if isinstance(spec.transform, Rollback) else None


def apply_plan(layout: "ReliableList", plan: Plan, *, batch: int = DEFAULT_BATCH,
               now_fn=None) -> Iterator[BatchResult]:
    """Replace (or, for a rollback, restore) the planned envelopes one
    script call per ``batch`` jobs."""
    from .base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    rollback = _rollback_of(spec)
    call = script(layout.client, "rl_transform")
    for shard, chunk in shard_chunks(plan.jobs, batch):
        keys = layout.shards[shard]
        result = BatchResult()
        args: list = []
        sent: list[PlannedJob] = []
        if rollback:
            for j in chunk:
                args += [j.job_id, "", ""]
                sent.append(j)
        else:
            raws = layout.client.mget([keys.job(j.job_id) for j in chunk])
            for j, raw in zip(chunk, raws):
                new = spec.transform.apply_raw(raw) if raw is not None else None
                if raw is None:
                    reason = "gone"
                elif payload_sha1(raw) != j.sha1:
                    reason = "changed"
                elif new is None:
                    reason = "malformed"
                else:
                    args += [j.job_id, j.sha1, new]
                    sent.append(j)
                    continue
                result.skipped.append(j.job_id)
                result.reasons[j.job_id] = reason
        if sent:
            res = call(keys=[keys.envelopes_before, *[keys.job(j.job_id) for j in sent]],
                       args=["rollback" if rollback else "apply", rollback or spec.op_id, now_fn(),
                             len(sent), *args])
            got = batch_result(res)
            result.moved += got.moved
            result.skipped += got.skipped
            result.reasons.update(got.reasons)
        yield result
