"""Holds of ``jobctl pause --hold`` on the reliable-list layout: a record
``{filter, reason, by, since_ms}`` in the hash ``queue:{t}:jobctl:holds``
of every shard (:meth:`~jobctl.keys.ReliableListKeys.holds`).  While it
exists, hold cycles (``jobctl pause --hold`` in the foreground, ``jobctl
hold run``) pause newly ready matching jobs with the spec of
:func:`hold_spec`; each of their script calls moves nothing once the record
is gone (``rl_pause_move.lua`` checks it).  ``jobctl resume`` lifts the
holds of its filter (:func:`lift_holds`).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..model import State
from ..ops.spec import Operation, OpSpec
from .common import text

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["holds_of", "holds", "add_hold", "lift_holds", "hold_spec"]


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
        out.append({"id": text(hid), "filter": doc.get("filter"), "reason": doc.get("reason"),
                    "by": doc.get("by"), "since_ms": since,
                    "age_ms": max(0, now - since) if isinstance(since, int) else None})
    return sorted(out, key=lambda h: (h["since_ms"] or 0, h["id"]))


def holds(layout: "ReliableList", now: int | None = None) -> list[dict[str, Any]]:
    """The active holds of the queue (read from its first shard): :func:`holds_of`."""
    from .base import now_ms

    return holds_of(layout.client.hgetall(layout.shards[0].holds), now_ms() if now is None else now)


def add_hold(layout: "ReliableList", filter_text: str | None, reason: str, operator: str,
             now: int | None = None) -> dict[str, Any]:
    """Record a hold on every shard (``HSET queue:{t}:jobctl:holds``); returns it."""
    from .base import now_ms

    now = now_ms() if now is None else now
    hold = {"id": f"hold-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now / 1000))}-{uuid.uuid4().hex[:8]}",
            "filter": filter_text or None, "reason": reason, "by": operator, "since_ms": now}
    pipe = layout.client.pipeline(transaction=False)
    for keys in layout.shards:
        pipe.hset(keys.holds, hold["id"], orjson.dumps({k: v for k, v in hold.items() if k != "id"}))
    pipe.execute()
    return hold


def lift_holds(layout: "ReliableList", filter_text: str | None, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Remove the holds whose filter is ``filter_text`` (``None``: every
    hold) from every shard; returns them (``dry_run``: only lists them)."""
    lifted = [h for h in holds(layout) if filter_text is None or (h["filter"] or None) == (filter_text or None)]
    if lifted and not dry_run:
        pipe = layout.client.pipeline(transaction=False)
        for keys in layout.shards:
            pipe.hdel(keys.holds, *[h["id"] for h in lifted])
        pipe.execute()
    return lifted


def hold_spec(layout: "ReliableList", hold: dict[str, Any], budget: int) -> OpSpec:
    """The pause one hold cycle plans: ready jobs of the hold's filter, at
    most ``budget``, fenced to the hold record."""
    from ..filter import MATCH_ALL, compile_filter

    flt = MATCH_ALL if not hold.get("filter") else compile_filter(hold["filter"])
    return OpSpec(Operation.PAUSE, layout.queue_name, State.READY, State.PAUSED, filter=flt, limit=budget,
                  reason=hold.get("reason"), hold_id=hold["id"])
