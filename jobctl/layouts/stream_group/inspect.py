"""Finding one job of a stream-group queue (``jobctl inspect``, ``--ids``):
the job's payload key, scheduled and suppressed scores, its place in the
dead list (``LPOS``) or dead stream, and the newest stream entry carrying
its id (``XRANGE``/``XREVRANGE`` windows, at most
:data:`~jobctl.layouts.stream_group.layout.SEARCH_BOUND` entries), pending or not
(``XPENDING``).  Reads only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobctl.errors import DataError
from jobctl.keys import StreamGroupKeys
from jobctl.model import JobRecord, State
from jobctl.layouts.common import score_ms, text, wrongtype_errors
from jobctl.layouts.stream_group.layout import SEARCH_BOUND, STREAM_ID_RE, entry_fields, entry_ms, id_after
from jobctl.layouts.stream_group.replies import missing_stream_or_group
from jobctl.layouts.walks import WINDOW

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["inspect_shard"]


def inspect_shard(layout: StreamGroup, keys: StreamGroupKeys, job_id: str, now: int) -> JobRecord | None:
    """The record of ``job_id`` in one shard (its first state, the others in
    ``meta["also_in"]``), ``None`` when the shard does not hold it.  Raises
    :class:`~jobctl.errors.DataError` for a key of the wrong type."""
    pipe = layout._pipeline()
    pipe.get(keys.job(job_id))
    pipe.zscore(keys.scheduled, job_id)
    pipe.zscore(keys.suppressed, job_id)
    if layout.dead_kind == "list":
        pipe.lpos(keys.dead, job_id)
        pipe.lpos(keys.hold, job_id)  # the hold is the dead list's oldest part
        pipe.llen(keys.dead)
    res = pipe.execute(raise_on_error=False)
    errors = wrongtype_errors(res, [keys.job(job_id), keys.scheduled, keys.suppressed, keys.dead, keys.hold,
                                    keys.dead][:len(res)])
    if errors:
        raise DataError(errors[0])
    raw, sched, supp = res[0], score_ms(res[1]), score_ms(res[2])
    states: list[tuple[State, dict[str, Any]]] = []
    stream_item = _find_in_stream(layout, keys, job_id, now)
    if stream_item is not None:
        states.append(stream_item)
    if sched is not None:
        states.append((State.SCHEDULED, {"job_id": job_id, "score": sched, "state_key": keys.scheduled}))
    if layout.dead_kind == "list":
        if res[3] is not None:
            states.append((State.DEAD, {"job_id": job_id, "position": res[3], "state_key": keys.dead}))
        elif res[4] is not None:
            states.append((State.DEAD, {"job_id": job_id, "position": res[5] + res[4], "state_key": keys.hold}))
    else:
        dead = _find_entry(layout, keys.dead_stream, job_id, "-", SEARCH_BOUND)
        if dead is not None:
            eid, fields = dead
            states.append((State.DEAD, {"job_id": job_id, "dead_entry_id": eid, "fields": fields,
                                        "dead_since_ms": entry_ms(eid), "state_key": keys.dead_stream}))
    if supp is not None:
        states.append((State.SUPPRESSED, {"job_id": job_id, "score": supp, "state_key": keys.suppressed}))
    history = None
    if states and states[0][0] is None:
        history = states.pop(0)[1]
    if raw is None and not states:
        return None  # at most an acknowledged entry: the job is gone
    state, item = states[0] if states else (None, dict(history or {"job_id": job_id}))
    rec = layout._records(keys, [dict(item, job_id=job_id)], state)[0]
    if state is State.SUPPRESSED:
        layout._attach_suppressed_info(keys, [rec])
    rec.meta["payload_key"] = keys.job(job_id)
    if len(states) > 1:
        rec.meta["also_in"] = [s.value for s, _ in states[1:]]
    if history is not None:
        rec.meta["acknowledged_entry"] = history.get("entry_id")
    if state is None and raw is not None and history is None:
        rec.meta["problem"] = "orphan payload: no state holds this id"
    return rec


def _find_entry(layout: StreamGroup, stream: str, job_id: str, start: str,
                bound: int) -> tuple[str, dict] | None:
    """The newest entry of ``stream`` whose ``jobId`` is ``job_id`` among
    its newest ``bound`` entries (``XREVRANGE`` windows)."""
    if STREAM_ID_RE.match(job_id):
        hit = layout.client.xrange(stream, job_id, job_id)
        if hit:
            return text(hit[0][0]), entry_fields(hit[0][1])
    end = "+"
    seen = 0
    while seen < bound:
        entries = layout.client.xrevrange(stream, end, start, count=WINDOW)
        if not entries:
            return None
        for eid, raw_fields in entries:
            fields = entry_fields(raw_fields)
            if fields.get("jobId") == job_id:
                return text(eid), fields
        seen += len(entries)
        end = f"({text(entries[-1][0])}"
        if len(entries) < WINDOW:
            return None
    return None


def _find_in_stream(layout: StreamGroup, keys: StreamGroupKeys, job_id: str,
                    now: int) -> tuple[Any, dict] | None:
    """(READY | PROCESSING | None for an acknowledged entry, item) of the
    newest stream entry carrying ``job_id``; the PEL is searched too."""
    try:
        hit = _find_entry(layout, keys.stream, job_id, "-", SEARCH_BOUND)
    except Exception as exc:  # noqa: BLE001
        if missing_stream_or_group(exc):
            return None
        raise
    g = layout.group_info(keys)
    if hit is None and g is not None and g.pending:
        hit = _find_pending(layout, keys, job_id)
    if hit is None:
        return None
    eid, fields = hit
    item: dict[str, Any] = {"job_id": job_id, "entry_id": eid, "fields": fields, "entered_ms": entry_ms(eid),
                            "state_key": keys.stream}
    if g is not None and id_after(eid, g.last_id):
        n = len(layout.client.xrange(keys.stream, f"({g.last_id}", f"({eid}", count=WINDOW))
        item["position"] = n if n < WINDOW else None
        return State.READY, item
    pel = _xpending_one(layout, keys, eid)
    if pel is not None:
        item.update(layout._pending_items(keys, [pel], now)[0])
        item["fields"] = fields
        return State.PROCESSING, item
    return None, item


def _xpending_one(layout: StreamGroup, keys: StreamGroupKeys, eid: str) -> dict | None:
    try:
        rows = layout.client.xpending_range(keys.stream, layout.group, eid, eid, 1)
    except Exception as exc:  # noqa: BLE001
        if missing_stream_or_group(exc):
            return None
        raise
    return rows[0] if rows else None


def _find_pending(layout: StreamGroup, keys: StreamGroupKeys, job_id: str) -> tuple[str, dict] | None:
    start, seen = "-", 0
    while seen < SEARCH_BOUND:
        rows = layout._xpending(keys, start, WINDOW)
        if not rows:
            return None
        pipe = layout._pipeline()
        for r in rows:
            eid = text(r["message_id"])
            pipe.xrange(keys.stream, eid, eid)
        for entry in pipe.execute():
            if entry:
                fields = entry_fields(entry[0][1])
                if fields.get("jobId") == job_id:
                    return text(entry[0][0]), fields
        seen += len(rows)
        start = f"({text(rows[-1]['message_id'])}"
        if len(rows) < WINDOW:
            return None
    return None
