"""``jobctl migrate SRC DST`` and ``jobctl drain SRC --to DST`` between two
reliable-list queues (issue 14; seed 000 section 1: "migrate, and re-drive
safely"), without the workers' cooperation.

Two queues have two hash tags, so a job crosses Redis Cluster slots: it
moves by copy-then-delete, in three fenced, bounded steps per batch, with a
crash journal in jobctl-owned keys so that a rerun finishes and no job ends
in two queues:

1. **take out** (source slot, ``rl_pause_move.lua``): each planned job whose
   payload SHA1 is unchanged leaves the source's ready list (windowed, as
   ``jobctl pause`` does) or scheduled zset (fenced by its due time) for the
   source's ``jobctl:migrating`` list, oldest at its served end, with a
   record ``{dst, from, score, operation, by, at_ms}``.  Workers no longer
   see it; ``jobctl check`` counts it as a state of the source.
2. **copy in** (destination slot, ``rl_migrate_in.lua``): the payload is
   written and the id made ready (``LPUSH``, the producers' end) or
   scheduled (its due time), once: a marker ``id -> take-out operation id``
   in the destination's ``jobctl:migrated-in`` hash makes a rerun skip a
   job already copied.  An existing payload key without that marker is
   another job with the same id (``conflict``): nothing is overwritten and
   the job goes back to the source.
3. **delete out** (source slot, ``rl_migrate_out.lua``): the job leaves the
   migrating list's served end and its source payload key is deleted; then
   the destination marker is removed (``HDEL``).

``jobctl drain SRC --export-to DIR`` takes the same path without step 2:
the operations core first writes (or finishes) the export in DIR and fences
the plan to its rows (:func:`jobctl.export.fence.export_fence`, as ``purge
--export-to`` does); step 1 takes out only the exported jobs whose payload
SHA1 (or due time) is still the exported one, with the record's ``dst``
``export:DIR``, and step 3 deletes them.  A job killed between 1 and 3 is
in the export and in the migrating list: the next ``drain --export-to DIR``
deletes it first; a ``migrate`` (or a drain into another export) refuses
until then.

Between steps 2 and 3 a job exists in both queues; a crash there (kill -9)
leaves it in the source's migrating list, and the next ``jobctl migrate``
(or ``drain``) of the same source finishes those jobs first (step 2 finds
the marker, step 3 deletes).  Migrated jobs keep their order: the oldest
is copied first and each is pushed at the destination's producers' end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from jobctl.errors import UsageError
from jobctl.keys import ReliableListKeys
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl.layouts.common import check_transition, text
from jobctl.layouts.reliable_list.pause import plan_moves, take_out_ready, take_out_scheduled
from jobctl.layouts.sharding import shard_rule
from jobctl.layouts.walks import WINDOW, walk_list

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["MIGRATE_TRANSITIONS", "plan_operation", "apply_plan", "migrating", "DEFAULT_BATCH", "EXPORT_DST"]

#: (operation, source) -> allowed targets: a job keeps its state.
MIGRATE_TRANSITIONS: dict[tuple[Operation, State], tuple[State, ...]] = {
    (Operation.MIGRATE, State.READY): (State.READY,),
    (Operation.MIGRATE, State.SCHEDULED): (State.SCHEDULED,),
    (Operation.DRAIN, State.READY): (None,),
    (Operation.DRAIN, State.SCHEDULED): (None,),
}

DEFAULT_BATCH = 128
#: ``PlannedJob.score`` of a job an interrupted run left in the migrating list.
LEFTOVER = -1
#: The ``dst`` of a take-out record of ``drain --export-to DIR``: ``export:DIR``.
EXPORT_DST = "export:"


def _destination(layout: "ReliableList", spec: OpSpec) -> "ReliableList | None":
    """The destination queue's layout; ``None`` for ``drain --export-to``."""
    if spec.operation is Operation.DRAIN:
        return None
    dst = spec.destination
    if dst is None:
        raise UsageError("migrate needs a destination queue")
    if dst.name != layout.name:
        raise UsageError(f"migrate from {layout.name} to layout {dst.name} is not supported: both queues must be "
                         f"{layout.name}")
    if dst.queue_name == layout.queue_name and len(dst.shards) == len(layout.shards):
        raise UsageError("the source and the destination are the same queue")
    if len(dst.shards) > 1:
        shard_rule(dst.queue)  # a sharded destination needs the producers' rule (UsageError)
    if dst.queue.priorities:
        raise UsageError(f"{dst.queue_name} has priority lists: migrating into a priority queue is not supported")
    return dst


def _shard_of(dst: "ReliableList"):
    """``job id -> the destination shard's keys`` by the producers' rule."""
    if len(dst.shards) == 1:
        return lambda job_id: dst.shards[0]
    rule, n = shard_rule(dst.queue), len(dst.shards)
    return lambda job_id: dst.shards[rule(job_id, n)]


#: A job id no producer uses: the write probe of a destination's payload keys.
PROBE_ID = "jobctl-access-probe"


def _require_destination_access(dst: "ReliableList") -> None:
    """Every key a copy-in reads or writes on each destination shard is
    allowed to this user, before the first take-out (:func:`jobctl.ops.access.require_access`)."""
    from jobctl.errors import AuthFailed
    from jobctl.ops.access import denied, require_access

    move_in = script(dst.client, "rl_migrate_in")
    for dkeys in dst.shards:
        reads = [dkeys.ready, dkeys.scheduled, dkeys.migrated_in, dkeys.job(PROBE_ID)]
        writes = [f"{dkeys.migrated_in}:{PROBE_ID}", dkeys.job(PROBE_ID)]
        require_access(dst.client, reads, writes, dst.queue_name)
        try:  # no job: the server checks the call's keys (read and write) and the script writes nothing
            move_in(keys=[dkeys.ready, dkeys.scheduled, dkeys.migrated_in], args=[0])
        except Exception as exc:
            if denied(exc):
                raise AuthFailed(f"permission denied: this user may not write {dkeys.ready}, {dkeys.scheduled} "
                                 f"and {dkeys.migrated_in} (queue {dst.queue_name}); nothing was changed") from None
            raise


def migrating(layout: "ReliableList", keys: ReliableListKeys, limit: int) -> list[tuple[str, dict[str, Any]]]:
    """The ``limit`` jobs at the served end of the shard's migrating list,
    served end first, with their records."""
    ids = [text(x) for x in reversed(layout.client.lrange(keys.migrating, -limit, -1))]
    if not ids:
        return []
    out = []
    for job_id, raw in zip(ids, layout.client.hmget(keys.migrating_info, ids)):
        try:
            doc = orjson.loads(raw) if raw is not None else {}
        except orjson.JSONDecodeError:
            doc = {}
        out.append((job_id, doc if isinstance(doc, dict) else {}))
    return out


def plan_operation(layout: "ReliableList", spec: OpSpec, now: int) -> Plan:
    """Plan the move of the matching ready (or scheduled) jobs of ``layout``
    to ``spec.destination``.  Reads only.  Raises :class:`UsageError` for
    another layout or state, a sharded destination, ``--ids``, or an
    unfinished migrate of this source to another queue."""
    check_transition(layout.name, MIGRATE_TRANSITIONS, spec)
    dst = _destination(layout, spec)
    if spec.ids or spec.priority is not None:
        raise UsageError(f"{spec.operation.value} takes --filter, not --ids or --priority")
    name = _dst_name(spec, dst)
    for keys in layout.shards:
        left = migrating(layout, keys, 1)
        was = left[0][1].get("dst") if left else None
        same_export = _export_dir(was) is not None and _export_dir(was) == _export_dir(name)
        if was not in (None, name) and not same_export:
            again = (f"drain {layout.queue_name} --export-to {was[len(EXPORT_DST):]}"
                     if str(was).startswith(EXPORT_DST) else f"migrate {layout.queue_name} {was}")
            raise UsageError(f"an earlier `jobctl {again}` did not finish: run it again first")
    plan = plan_moves(layout, spec, now)
    if dst is not None and dst.queue_name == layout.queue_name:  # reshard: only the jobs whose shard changes
        target = _shard_of(dst)
        plan.jobs = [j for j in plan.jobs if target(j.job_id).tag != layout.shards[j.shard].tag]
    # jobs an interrupted run left between the queues are finished first: planned too
    for n, keys in enumerate(layout.shards):
        for _, chunk in walk_list(layout.client, keys.migrating, from_right=True, batch=WINDOW):
            left = [PlannedJob(job_id=text(x), shard=n, position=None, score=LEFTOVER, sha1="") for x in chunk]
            plan.jobs.extend(left)
            for job in left:  # a drain's export fence holds them: not "no longer ready", they are planned
                plan.fence_skipped.pop(job.job_id, None)
    return plan


def _export_dir(dst_name: Any) -> str | None:
    """The absolute export directory of an ``export:DIR`` record ``dst``
    (``None`` for a queue): a rerun may name DIR relatively or absolutely."""
    import os

    if not str(dst_name).startswith(EXPORT_DST):
        return None
    return os.path.abspath(str(dst_name)[len(EXPORT_DST):])


def _dst_name(spec: OpSpec, dst: "ReliableList | None") -> str:
    """The take-out record's ``dst``: the destination queue, or ``export:DIR``."""
    return dst.queue_name if dst is not None else f"{EXPORT_DST}{spec.destination}"


def _record(dst_name: str):
    def record(spec: OpSpec, now: int, source_key: str, score: int | None) -> bytes:
        return orjson.dumps({"dst": dst_name, "from": source_key, "score": score, "operation": spec.op_id,
                             "by": spec.operator, "at_ms": now})
    return record


def apply_plan(layout: "ReliableList", plan: Plan, *, batch: int = DEFAULT_BATCH,
               now_fn=None) -> Iterator[BatchResult]:
    """Apply ``plan``: per shard, first finish the jobs an interrupted run
    left in the migrating list, then take out, copy in and delete out one
    batch at a time.  Stopping between calls leaves every job in one state
    of one queue, or in the migrating list (a rerun finishes it)."""
    from jobctl.layouts.base import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    dst = _destination(layout, spec)
    if dst is not None:  # before the first take-out (not in the plan: a dry run sends no write command)
        _require_destination_access(dst)
    record = _record(_dst_name(spec, dst))
    by_group: dict[tuple[int, int], list[PlannedJob]] = {}
    for job in plan.jobs:
        if job.score == LEFTOVER:
            by_group.setdefault((job.shard, LEFTOVER), [])
            continue
        sub = job.score if spec.source is State.READY else 0
        by_group.setdefault((job.shard, sub or 0), []).append(job)
    planned = {j.job_id for j in plan.jobs}
    finished: set[int] = set()
    for (shard, sub), jobs in sorted(by_group.items()):
        keys = layout.shards[shard]
        into = (keys.migrating, keys.migrating_info)
        if shard not in finished:
            finished.add(shard)
            yield from _finish(layout, keys, dst, batch, planned=planned)
        if sub == LEFTOVER:
            continue
        if spec.source is State.SCHEDULED:
            outs = take_out_scheduled(layout, keys, spec, jobs, batch, now_fn, into=into, record=record)
        else:
            src = layout.ready_lists(keys)[sub].key
            outs = take_out_ready(layout, keys, spec, src, jobs, batch, now_fn, into=into, record=record)
        for taken in outs:
            # taken out is not moved yet: only the skips count here
            yield BatchResult(skipped=taken.skipped, reasons=taken.reasons)
            yield from _finish(layout, keys, dst, batch, planned=planned)


def _copy_in(move_in, per_shard: dict[str, tuple[ReliableListKeys, list[str], list[Any]]]
             ) -> tuple[dict[str, str], set[str], BaseException | None]:
    """Step 2, one ``rl_migrate_in`` call per destination slot: ``({id:
    code}, the ids not copied because the ACL refused their slot's call (and
    every later slot's), that refusal)``.  Any other error is raised."""
    from jobctl.ops.access import denied

    codes: dict[str, str] = {}
    slots = list(per_shard.values())
    for n, (dkeys, ids, args) in enumerate(slots):
        try:
            reply = move_in(keys=[dkeys.ready, dkeys.scheduled, dkeys.migrated_in, *[dkeys.job(i) for i in ids]],
                            args=[len(ids), *args])
        except Exception as exc:
            if not denied(exc):
                raise
            return codes, {i for _, later, _ in slots[n:] for i in later}, exc
        codes.update({text(reply[i]): text(reply[i + 1]) for i in range(0, len(reply), 2)})
    return codes, set(), None


def _refusal(layout: "ReliableList", dst: "ReliableList", exc: BaseException, given_back: int):
    """The error of a copy-in the ACL refused mid-run (exit 4)."""
    from jobctl.errors import AuthFailed

    return AuthFailed(f"permission denied writing queue {dst.queue_name} ({str(exc).splitlines()[0][:120]}): "
                      f"{given_back:,} job(s) of this batch given back to {layout.queue_name}, the ones already "
                      "copied finished; the jobs before them stay moved, the rest were not touched")


def _finish(layout: "ReliableList", keys: ReliableListKeys, dst: "ReliableList | None", batch: int,
            planned: set[str] | None = None) -> Iterator[BatchResult]:
    """Copy in and delete out every job of the shard's migrating list, served
    end first, ``batch`` per call pair (``dst`` ``None``: a drain into an
    export, delete out only).  Jobs left by an earlier run count
    as moved only when ``planned`` is None or holds them (they were planned
    again: the rerun's plan does not see them, so they are reported apart)."""
    client = layout.client
    target_of = _shard_of(dst) if dst is not None else None
    move_in = script(dst.client, "rl_migrate_in") if dst is not None else None
    move_out = script(client, "rl_migrate_out")
    while True:
        entries = migrating(layout, keys, batch)
        if not entries:
            return
        raws = client.mget([keys.job(i) for i, _ in entries]) if dst is not None else []
        per_shard: dict[str, tuple[ReliableListKeys, list[str], list[Any]]] = {}
        for (job_id, doc), raw in zip(entries, raws):
            if raw is None:
                continue  # a dangling id: deleted out below, nothing to copy
            scheduled = doc.get("from") == keys.scheduled and doc.get("score") is not None
            dkeys = target_of(job_id)
            _, ids, args = per_shard.setdefault(dkeys.tag, (dkeys, [], []))
            ids.append(job_id)
            args += [job_id, raw, str(doc.get("operation") or ""), "scheduled" if scheduled else "ready",
                     str(doc["score"]) if scheduled else ""]
        codes, refused, refusal = _copy_in(move_in, per_shard) if dst is not None else ({}, set(), None)
        out_args: list[Any] = []
        for job_id, doc in entries:
            back = codes.get(job_id) == "conflict" or job_id in refused
            due = doc.get("score") if doc.get("from") == keys.scheduled else None
            out_args += [job_id, "back" if back else "delete", "" if due is None else str(due)]
        target = layout.ready_lists(keys)[-1].key
        reply = move_out(keys=[keys.migrating, keys.migrating_info, target, keys.scheduled,
                               *[keys.job(i) for i, _ in entries]], args=[len(entries), *out_args])
        result = BatchResult()
        done_in: list[str] = []
        for i in range(0, len(reply), 2):
            job_id, code = text(reply[i]), text(reply[i + 1])
            if code == "moved":
                if codes.get(job_id) in ("copied", "done"):
                    done_in.append(job_id)
                if planned is None or job_id in planned:
                    result.moved.append(job_id)
            elif code == "back":
                result.skipped.append(job_id)
                result.reasons[job_id] = "refused by the ACL" if job_id in refused else "conflict"
        by_tag: dict[str, list[str]] = {}
        for job_id in done_in:
            by_tag.setdefault(target_of(job_id).migrated_in, []).append(job_id)
        for marker, ids in by_tag.items():  # (none when draining into an export)
            dst.client.hdel(marker, *ids)
        yield result
        if refusal is not None:
            raise _refusal(layout, dst, refusal, len(refused))
        if not any(text(reply[i + 1]) in ("moved", "back") for i in range(0, len(reply), 2)):
            return  # the list's served end is not what was read: leave it to a rerun
