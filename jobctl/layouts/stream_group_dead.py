"""Moves out of a stream-group dead *list* (``dead = "list"``): redrive to
the stream or the scheduled zset, suppress, purge; every call bounded.

``sg_dead_window.lua`` walks the list from its tail (its oldest end:
workers ``LPUSH`` new dead ids at the head, so tail positions do not shift),
at most ``batch`` pops per call: a planned job whose payload SHA1 is still
the plan's is moved; every other element is rotated to the head.  Then
``sg_dead_restore.lua`` moves the rotated ids back to the tail, newest
rotation first, setting aside (and pushing back) any id dead-lettered
meanwhile.  So no call searches the list (no ``LPOS``/``LREM``: a call costs
O(batch) whatever the length), every id is in the list exactly once at
every instant (a crash leaves the rotated ones dead, at the head), and after
the operation the ids that stayed dead keep their order.  The walk covers
the tail positions up to the newest planned one plus :data:`DEAD_SLACK`.

A redrive rewrites the envelope (the seed 000 redrive record,
:func:`~.common.redrive_envelope`) in the same atomic step.  The dead-stream
kind needs no walk: ``sg_dead_move.lua`` deletes an entry by its id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..keys import StreamGroupKeys
from ..ops.plan import PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..model import State
from .common import redrive_envelope, suppression_record, text
from .moves import call_move, move_result

if TYPE_CHECKING:
    from .stream_group import StreamGroup

__all__ = ["apply_dead_list", "DEAD_WINDOW", "DEAD_SLACK", "RESTORE_HOLD"]

#: Dead-list pops per window call when ``--batch`` sets none: a call of
#: 128 takes ~1-1.5 ms against ~2.5-4.5 ms at 256 (bench/bounded_moves.py).
DEAD_WINDOW = 128
#: How far (in dead-list positions) a planned job is looked for on either
#: side of the position the plan saw it at; beyond, someone else moved it.
DEAD_SLACK = 64
#: Most new dead ids one restore call sets aside to reach the rotated ones.
RESTORE_HOLD = 1024
#: How many of the first ids an operation rotated each later call is given,
#: to stop where the walk would come round to them again.
START_IDS = 4


def _position(job: PlannedJob) -> int:
    return job.position or 0


def _skip(result: BatchResult, jobs, reason: str) -> None:
    for j in jobs:
        result.skipped.append(j.job_id)
        result.reasons[j.job_id] = reason


def apply_dead_list(layout: "StreamGroup", keys: StreamGroupKeys, spec: OpSpec, jobs: list[PlannedJob],
                    walk: int, batch: int) -> Iterator[BatchResult]:
    """Walk the dead list ``keys.dead`` for ``jobs`` (planned positions
    counted from the tail; ``walk``: the furthest planned position + 1),
    yielding one :class:`BatchResult` per window call; then restore the
    order of the ids that stay, also when the caller stops early or a call
    fails (not after a second Ctrl-C: the ids then stay dead, at the head).
    Raises :class:`~jobctl.errors.DataError` for a key of the wrong type
    (nothing moved by that call)."""
    rotated: list[str] = []
    try:
        yield from _walk(layout, keys, spec, sorted(jobs, key=_position), walk, batch, rotated)
    except KeyboardInterrupt:
        raise
    except BaseException:  # GeneratorExit (stopped between calls) or a failed call
        try:
            _restore(layout, keys, rotated, batch)
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        raise
    _restore(layout, keys, rotated, batch)


def _mode(keys: StreamGroupKeys, spec: OpSpec) -> tuple[str, str]:
    if spec.operation is Operation.PURGE:
        return "purge", keys.dead
    if spec.target is State.SUPPRESSED:
        return "suppressed", keys.suppressed
    if spec.target is State.SCHEDULED:
        return "scheduled", keys.scheduled
    return "ready", keys.stream


def _walk(layout: "StreamGroup", keys: StreamGroupKeys, spec: OpSpec, jobs: list[PlannedJob], walk: int,
          batch: int, rotated: list[str]) -> Iterator[BatchResult]:
    """Pop the ``walk`` planned tail positions, at most ``batch`` per call;
    a planned job is handed to the script from :data:`DEAD_SLACK` positions
    before its planned position until the walk is that far past it."""
    from .base import now_ms

    mode, target = _mode(keys, spec)
    redrive = spec.operation is Operation.REDRIVE
    nxt, cursor = 0, 0
    pending: list[PlannedJob] = []
    raws: dict[str, bytes | None] = {}
    while True:
        result = BatchResult()
        still = []
        for j in pending:
            if cursor - _position(j) > DEAD_SLACK:
                _skip(result, [j], "moved")
            else:
                still.append(j)
        pending = still
        min_pop = min(batch, max(0, walk - cursor))
        max_pop = batch
        if cursor >= walk:
            max_pop = min(batch, max((_position(j) for j in pending), default=cursor) + DEAD_SLACK + 1 - cursor)
        horizon = cursor + max_pop + DEAD_SLACK
        while nxt < len(jobs) and _position(jobs[nxt]) < horizon:
            pending.append(jobs[nxt])
            nxt += 1
        if max_pop <= 0 or not (pending or nxt < len(jobs)):
            if result.skipped:
                yield result
            return
        now = now_ms()
        due = now + spec.delay_ms if mode == "scheduled" else None
        passed: list[tuple[PlannedJob, bytes]] = []
        if redrive:  # the new envelope, written only if the stored one is still the plan's
            fetch = [j for j in pending if j.job_id not in raws]
            if fetch:
                for j, raw in zip(fetch, layout.client.mget([keys.job(j.job_id) for j in fetch])):
                    raws[j.job_id] = raw
            for j in pending:
                raw = raws[j.job_id]
                if raw is None:
                    _skip(result, [j], "gone")
                elif payload_sha1(raw) != j.sha1:
                    _skip(result, [j], "changed")
                else:
                    passed.append((j, redrive_envelope(raw, spec, now, due)))
        else:
            passed = [(j, b"") for j in pending]
        info = suppression_record(spec, now) if mode == "suppressed" else b""
        start = rotated[:START_IDS]
        args: list = [max_pop, min_pop, mode, str(due if due is not None else now), len(start), *start, len(passed)]
        for j, new in passed:
            args += [j.job_id, j.sha1, new, info]
        res = call_move(layout.client, "sg_dead_window",
                        [keys.dead, target, keys.suppressed_info] + [keys.job(j.job_id) for j, _ in passed], args)
        popped, n_met, ended = int(res[0]), int(res[2]), int(res[3])
        met = move_result(res[4:4 + 2 * n_met])
        rotated.extend(text(x) for x in res[4 + 2 * n_met:])
        result.moved += met.moved
        result.skipped += met.skipped
        result.failed += met.failed
        result.reasons.update(met.reasons)
        seen = set(met.moved) | set(met.skipped) | set(met.failed)
        pending = [j for j, _ in passed if j.job_id not in seen]
        if redrive:
            raws = {j.job_id: raws[j.job_id] for j in pending}
        cursor += popped
        if ended:  # the list is empty, or the walk went all the way round it
            _skip(result, pending + jobs[nxt:], "gone" if ended == 1 else "moved")
            yield result
            return
        yield result


def _restore(layout: "StreamGroup", keys: StreamGroupKeys, rotated: list[str], batch: int) -> int:
    """Move the ids rotated to the head back to the tail, newest rotation
    first; returns how many expected ids were dealt with.  Gives up (they
    stay dead, at the head) when more than :data:`RESTORE_HOLD` new dead ids
    sit in front of the next one."""
    seen: set[str] = set()
    expected: list[str] = []
    for job_id in reversed(rotated):  # an id rotated twice (the walk wrapped) counts once, at its last rotation
        if job_id not in seen:
            seen.add(job_id)
            expected.append(job_id)
    index = {job_id: n for n, job_id in enumerate(expected)}
    batch = max(batch, 128)  # moves no job between states: --rate does not apply
    i = 0
    while i < len(expected):
        consumed = int(call_move(layout.client, "sg_dead_restore", [keys.dead],
                                 [batch, RESTORE_HOLD, *expected[i:i + 2 * batch]])[0])
        if consumed:
            i += consumed
            continue
        head = layout.client.lindex(keys.dead, 0)
        at = index.get(text(head)) if head is not None else None
        if at is None or at <= i:
            break
        i = at  # the ones before it left the list in the meantime
    return i
