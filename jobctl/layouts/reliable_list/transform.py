"""``jobctl migrate QUEUE --transform FILE`` on the reliable-list layout:
rewrite matching envelopes in place (:mod:`jobctl.ops.transform`), fenced
by the payload SHA1 the plan saw, one ``rl_transform.lua`` call per batch;
each replaced envelope is kept in ``queue:{t}:jobctl:envelopes-before``
(field: the job id) as a stack of layers, newest first, each with the
operation id, so that transformations stack: ``--rollback OPERATION``
restores a job's envelope while OPERATION's layer is on top of its stack
and the job still holds what OPERATION wrote.  A rollback of an older
transformation while a newer one is live on any of its jobs is refused
(exit 2, naming the newer operation): roll back newest first.  The jobs
stay where they are (ready, scheduled, dead or paused).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobctl.errors import UsageError
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob, payload_sha1
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.common import check_transition, text
from jobctl.layouts.moves import call_move, move_result, shard_chunks
from jobctl.layouts.planning import plan_from_walk, shard_index
from jobctl.layouts.walks import WINDOW

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["TRANSFORM_TRANSITIONS", "plan_operation", "apply_plan", "DEFAULT_BATCH", "KeptLayer", "kept_layers"]

#: (operation, source) -> allowed targets: the job keeps its state.
TRANSFORM_TRANSITIONS = {(Operation.TRANSFORM, s): (s,) for s in
                         (State.READY, State.SCHEDULED, State.DEAD, State.PAUSED, State.SUPPRESSED)}

DEFAULT_BATCH = 128


@dataclass(frozen=True)
class KeptLayer:
    """One layer of a job's kept stack: ``operation`` replaced ``before``
    (the envelope's bytes as they were) at ``at_ms`` (epoch ms) with an
    envelope whose SHA1 is ``after_sha1``."""

    operation: str
    at_ms: int
    after_sha1: str
    before: bytes


def kept_layers(value: bytes) -> list[KeptLayer]:
    """The layers of a kept stack (a field value of the envelopes-before
    hash, written by ``rl_transform.lua``: ``T1\\n<operation>\\n<at_ms>\\n
    <after_sha1>\\n<length>\\n<before bytes>`` per layer, newest first),
    newest first; parsing stops at the first bytes that are not a layer."""
    out: list[KeptLayer] = []
    pos = 0
    while pos < len(value):
        head, start = [], pos
        for _ in range(5):
            nl = value.find(b"\n", start)
            if nl < 0:
                return out
            head.append(value[start:nl])
            start = nl + 1
        end = start + int(head[4]) if head[4].isdigit() else -1
        if head[0] != b"T1" or not head[2].isdigit() or end < start or end > len(value):
            return out
        out.append(KeptLayer(text(head[1]), int(head[2]), text(head[3]), value[start:end]))
        pos = end
    return out


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
    op = _rollback_of(spec)
    if op:
        return _plan_rollback(layout, plan, op)

    def walk():
        for keys in layout.shards:
            yield from layout.iter_batches_of(keys, spec.source, WINDOW)

    return plan_from_walk(plan, walk(), lambda rec: payload_sha1(rec.raw), shard_of=shard_index(layout.shards))


def _plan_rollback(layout: "ReliableList", plan: Plan, op: str) -> Plan:
    """The jobs whose kept stack holds a layer of ``op``.  Raises
    :class:`UsageError` when a newer transformation's layer lies over it on
    a job that still holds what that newer one wrote (it must be rolled
    back first); reads only."""
    newer: list[tuple[int, str, KeptLayer]] = []
    tops: list[tuple[int, str, KeptLayer]] = []
    for n, keys in enumerate(layout.shards):
        for field, raw in layout.client.hscan_iter(keys.envelopes_before, count=WINDOW):
            layers = kept_layers(raw)
            if not any(layer.operation == op for layer in layers):
                continue
            plan.scanned += 1
            job = PlannedJob(job_id=text(field), shard=n, position=None, score=None, sha1="")
            plan.jobs.append(job)
            (tops if layers[0].operation == op else newer).append((n, job.job_id, layers[0]))
    _set_aside_rewritten(layout, plan, tops)
    live = _live_newer(layout, newer)
    if live:
        names = ", ".join(f"{name} ({count} job(s))" for name, count in live.most_common())
        raise UsageError(f"--rollback {op}: envelopes it replaced were transformed again since by {names}: "
                         "roll that back first (nothing changed)")
    return plan


def _live_newer(layout: "ReliableList", newer: list[tuple[int, str, KeptLayer]]) -> Counter:
    """Operation -> how many of ``newer``'s jobs (shard, id, top layer)
    still hold what that top layer's operation wrote."""
    live: Counter = Counter()
    for shard, chunk in shard_chunks([_Newer(*t) for t in newer], WINDOW):
        keys = layout.shards[shard]
        raws = layout.client.mget([keys.job(j.job_id) for j in chunk])
        for j, raw in zip(chunk, raws):
            if isinstance(raw, bytes) and payload_sha1(raw) == j.top.after_sha1:
                live[j.top.operation] += 1
    return live


def _set_aside_rewritten(layout: "ReliableList", plan: Plan, tops: list[tuple[int, str, KeptLayer]]) -> None:
    """Leave out of ``plan`` the jobs whose envelope no longer holds what the
    rolled-back transformation wrote, in ``plan.fence_skipped`` with why:
    ``moved`` (a worker finished it: its payload is gone) or ``rewritten
    since the transform`` (a worker rewrote it: no original to put back
    over it).  One ``MGET`` per :data:`WINDOW` jobs."""
    aside: dict[str, str] = {}
    for shard, chunk in shard_chunks([_Newer(*t) for t in tops], WINDOW):
        keys = layout.shards[shard]
        for j, raw in zip(chunk, layout.client.mget([keys.job(j.job_id) for j in chunk])):
            if raw is None:
                aside[j.job_id] = "moved"  # a worker finished it: taken since, nothing to put back
            elif not isinstance(raw, bytes) or payload_sha1(raw) != j.top.after_sha1:
                aside[j.job_id] = "rewritten since the transform"
    if aside:
        plan.jobs = [j for j in plan.jobs if j.job_id not in aside]
        plan.fence_skipped.update(aside)


@dataclass(frozen=True)
class _Newer:
    shard: int
    job_id: str
    top: KeptLayer


def _rollback_of(spec: OpSpec) -> str | None:
    from jobctl.ops.transform import Rollback

    return spec.transform.operation if isinstance(spec.transform, Rollback) else None


def apply_plan(layout: "ReliableList", plan: Plan, *, batch: int = DEFAULT_BATCH,
               now_fn=None) -> Iterator[BatchResult]:
    """Replace (or, for a rollback, restore) the planned envelopes one
    ``rl_transform.lua`` call per ``batch`` jobs of a shard.  Raises
    :class:`~jobctl.errors.DataError` when the envelopes-before hash holds
    another type (that call wrote nothing)."""
    from jobctl.layouts.base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    rollback = _rollback_of(spec)
    for shard, chunk in shard_chunks(plan.jobs, batch):
        keys = layout.shards[shard]
        if rollback:
            result, sent, args = BatchResult(), chunk, [x for j in chunk for x in (j.job_id, "", "")]
        else:
            result, sent, args = _transform_args(layout, keys, spec, chunk)
        if sent:
            reply = call_move(layout.client, "rl_transform",
                              [keys.envelopes_before, *[keys.job(j.job_id) for j in sent]],
                              ["rollback" if rollback else "apply", rollback or spec.op_id, now_fn(), len(sent),
                               *args])
            got = move_result(reply)
            result.moved += got.moved
            result.skipped += got.skipped
            result.failed += got.failed
            result.reasons.update(got.reasons)
        yield result


def _transform_args(layout: "ReliableList", keys, spec: OpSpec, chunk: list[PlannedJob]
                    ) -> tuple[BatchResult, list[PlannedJob], list]:
    """``(result with the jobs skipped here, jobs to send, their ARGV)``:
    each job's new envelope computed from its current payload, when that is
    still the one the plan saw."""
    result = BatchResult()
    args: list = []
    sent: list[PlannedJob] = []
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
    return result, sent, args
