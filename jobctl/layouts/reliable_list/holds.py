"""Holds of ``jobctl pause --hold`` on the reliable-list layout: a record
``{filter, reason, by, since_ms}`` in the hash ``queue:{t}:jobctl:holds``
of every shard (:meth:`~jobctl.keys.ReliableListKeys.holds`).  While it
exists, hold cycles (``jobctl pause --hold`` in the foreground, ``jobctl
hold run``) pause newly ready matching jobs with the spec of
:func:`hold_spec` (:func:`plan_cycle`: the jobs that arrived at the head of
the ready lists since the last cycle, a full walk now and then); each of
their script calls moves nothing once the record is gone
(``rl_pause_move.lua`` checks it).  ``jobctl resume`` lifts the holds of
its filter (:func:`lift_holds`), compared by the filter's normalized form
(:attr:`jobctl.filter.Filter.normalized`, kept as ``key`` in the record):
``tenant=t2`` lifts the hold of ``tenant = 't2'``.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from jobctl.model import State
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.common import text

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["holds_of", "holds", "add_hold", "lift_holds", "drop_holds", "hold_spec", "filter_key", "hold_key",
           "CycleMarks", "plan_cycle", "FULL_EVERY_S"]

#: A hold's cycles walk every ready list in full at least this often (seconds).
FULL_EVERY_S = 1.0
#: Positions from the head one incremental cycle reads per ready list, at most.
SCAN_CAP = 8192
#: The first read of an incremental cycle (positions from the head).
FIRST_READ = 128
#: Ids a hold remembers as read (per ready list) before it forgets the oldest half.
MARKS_CAP = 200_000


def filter_key(filter_text: str | None) -> str:
    """The normalized form of ``filter_text`` (``""``: every job) that
    identifies a hold's filter.  Raises :class:`~jobctl.filter.FilterError`
    for a filter that does not compile."""
    from jobctl.filter import compile_filter

    return compile_filter(filter_text).normalized if filter_text else ""


def hold_key(hold: dict[str, Any]) -> str:
    """A hold record's filter key: its ``key``, or for a record written
    without one, its filter normalized (its text when that no longer compiles)."""
    from jobctl.filter import FilterError

    if isinstance(hold.get("key"), str):
        return hold["key"]
    try:
        return filter_key(hold.get("filter"))
    except FilterError:
        return hold.get("filter") or ""


def holds_of(reply: dict, now: int) -> list[dict[str, Any]]:
    """The holds of an ``HGETALL queue:{t}:jobctl:holds`` reply, oldest
    first: ``[{id, filter, reason, by, since_ms, age_ms}]`` (``status``'s
    ``held_filters``)."""
    out = []
    for hid, raw in (reply or {}).items():
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = {}
        doc = doc if isinstance(doc, dict) else {}
        since = doc.get("since_ms")
        out.append({"id": text(hid), "filter": doc.get("filter"), "key": doc.get("key"), "reason": doc.get("reason"),
                    "by": doc.get("by"), "since_ms": since,
                    "age_ms": max(0, now - since) if isinstance(since, int) else None})
    return sorted(out, key=lambda h: (h["since_ms"] or 0, h["id"]))


def holds(layout: "ReliableList", now: int | None = None) -> list[dict[str, Any]]:
    """The active holds of the queue (read from its first shard): :func:`holds_of`."""
    from jobctl.layouts.base import now_ms

    return holds_of(layout.client.hgetall(layout.shards[0].holds), now_ms() if now is None else now)


def add_hold(layout: "ReliableList", filter_text: str | None, reason: str, operator: str,
             now: int | None = None) -> dict[str, Any]:
    """Record a hold on every shard (``HSET queue:{t}:jobctl:holds``); returns
    it: ``{id, filter, key, reason, by, since_ms}`` (``key``: the filter's
    normalized form, :func:`filter_key`).  Raises
    :class:`~jobctl.filter.FilterError` for a filter that does not compile."""
    from jobctl.layouts.base import now_ms

    now = now_ms() if now is None else now
    hold = {"id": f"hold-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now / 1000))}-{uuid.uuid4().hex[:8]}",
            "filter": filter_text or None, "key": filter_key(filter_text), "reason": reason, "by": operator,
            "since_ms": now}
    pipe = layout.client.pipeline(transaction=False)
    for keys in layout.shards:
        pipe.hset(keys.holds, hold["id"], orjson.dumps({k: v for k, v in hold.items() if k != "id"}))
    pipe.execute()
    return hold


def lift_holds(layout: "ReliableList", filter_text: str | None, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Remove the holds whose filter is equivalent to ``filter_text`` (same
    :func:`filter_key`; ``None``: every hold) from every shard; returns
    them (``dry_run``: only lists them).  Raises
    :class:`~jobctl.filter.FilterError` for a filter that does not compile."""
    key = None if filter_text is None else filter_key(filter_text)
    lifted = [h for h in holds(layout) if key is None or hold_key(h) == key]
    if not dry_run:
        drop_holds(layout, [h["id"] for h in lifted])
    return lifted


def drop_holds(layout: "ReliableList", ids: list[str]) -> None:
    """Remove the hold records ``ids`` from every shard (one pipelined round trip)."""
    if ids:
        pipe = layout.client.pipeline(transaction=False)
        for keys in layout.shards:
            pipe.hdel(keys.holds, *ids)
        pipe.execute()


def hold_spec(layout: "ReliableList", hold: dict[str, Any], budget: int) -> OpSpec:
    """The pause one hold cycle plans: ready jobs of the hold's filter, at
    most ``budget``, fenced to the hold record."""
    from jobctl.filter import MATCH_ALL, compile_filter

    flt = MATCH_ALL if not hold.get("filter") else compile_filter(hold["filter"])
    return OpSpec(Operation.PAUSE, layout.queue_name, State.READY, State.PAUSED, filter=flt, limit=budget,
                  reason=hold.get("reason"), hold_id=hold["id"])


class CycleMarks:
    """What one hold's cycles have read: per ready list the ids an earlier
    cycle evaluated (insertion order; at most :data:`MARKS_CAP`, then the
    oldest half is forgotten) and when the last full walk ran."""

    def __init__(self) -> None:
        self.lists: dict[str, dict[str, None]] = {}
        self.full_at: float | None = None

    def of(self, key: str) -> dict[str, None]:
        """The marks of ready list ``key``."""
        marks = self.lists.setdefault(key, {})
        if len(marks) > MARKS_CAP:
            for old in list(marks)[:len(marks) // 2]:
                del marks[old]
        return marks

    def full_due(self, now: float) -> bool:
        """Whether the next cycle walks every ready list in full (the first,
        then every :data:`FULL_EVERY_S`); records it when so."""
        if self.full_at is None or now - self.full_at >= FULL_EVERY_S:
            self.full_at = now
            return True
        return False


def _walk_new(layout: "ReliableList", keys, idx: int, key: str, marks: dict[str, None]):
    """The records of the jobs pushed at the head of the ready list ``key``
    since the last cycle: read from the head (with the list's length in one
    MULTI: each job's position from the tail) down to the first id an
    earlier cycle read, at most :data:`SCAN_CAP` positions."""
    start, width = 0, FIRST_READ
    while start < SCAN_CAP:
        pipe = layout.client.pipeline(transaction=True)
        pipe.llen(key)
        pipe.lrange(key, start, start + width - 1)
        length, chunk = pipe.execute()
        ids, extra, met = [], [], False
        for n, raw in enumerate(chunk):
            job_id = text(raw)
            if job_id in marks:  # below: what earlier cycles read
                met = True
                break
            marks[job_id] = None
            ids.append(job_id)
            extra.append({"position": length - 1 - (start + n), "list_index": idx})
        if ids:
            yield layout._records(keys, ids, State.READY, extra)
        if met or len(chunk) < width:
            return
        start, width = start + width, 1000


def plan_cycle(layout: "ReliableList", hold: dict[str, Any], marks: CycleMarks, budget: int,
               now: int | None = None) -> Any:
    """The plan of one hold cycle (:func:`hold_spec`, at most ``budget``
    jobs): a full walk of the ready lists when :meth:`CycleMarks.full_due`,
    else only the jobs that arrived at their heads since the last cycle
    (:func:`_walk_new`).  Reads only; returns a
    :class:`~jobctl.ops.plan.Plan`."""
    from jobctl.layouts.base import now_ms
    from jobctl.layouts.reliable_list.pause import plan_moves

    spec = hold_spec(layout, hold, budget)
    now = now_ms() if now is None else now
    if marks.full_due(time.monotonic()):
        plan = plan_moves(layout, spec, now)
        for job in plan.jobs:  # what the full walk paused need not be read again
            marks.of(layout.ready_lists(layout.shards[job.shard])[job.score or 0].key)[job.job_id] = None
        return plan

    def walk():
        for keys in layout.shards:
            for idx, ref in enumerate(layout.ready_lists(keys)):
                yield from _walk_new(layout, keys, idx, ref.key, marks.of(ref.key))

    return plan_moves(layout, spec, now, walk=walk())
