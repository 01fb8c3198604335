"""Batched walks of one stream-group shard (``iter_batches``, the planner's
source): streams and the PEL in id order, the dead list from its tail,
zsets by rank; every window one bounded read plus one ``MGET``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from jobctl.keys import StreamGroupKeys
from jobctl.model import JobRecord, State
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import score_ms, text
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["walk_shard"]


def walk_shard(layout: StreamGroup, keys: StreamGroupKeys, state: State, batch: int = 1000, *,
               cap: int | None = None, sample: tuple[int, int] | None = None,
               idle: int | None = None, now: int | None = None) -> Iterator[list[JobRecord]]:
    """Walk one shard's ``state`` in windows of ``batch``.  Streams and
    the PEL are walked in id order (``cap``: stop after that many, the
    sample of a large state); the dead list from its tail (``position``
    counts from the tail); zsets by rank (random windows when ``sample``).
    ``idle`` restricts the PEL to entries idle at least that long."""
    now = now_ms() if now is None else now
    batch = max(1, min(batch, WINDOW))
    if state is State.READY:
        g = layout.group_info(keys)
        if g is not None:
            yield from _walk_stream(layout, keys, keys.stream, f"({g.last_id}", batch, cap, state)
        return
    if state is State.PROCESSING:
        start, seen = "-", 0
        while cap is None or seen < cap:
            rows = layout._xpending(keys, start, batch, idle=idle)
            if not rows:
                return
            yield layout._records(keys, layout._pending_items(keys, rows, now), state)
            seen += len(rows)
            start = f"({text(rows[-1]['message_id'])}"
        return
    if state is State.DEAD and layout.dead_kind == "stream":
        yield from _walk_stream(layout, keys, keys.dead_stream, "-", batch, cap, state)
        return
    if state is State.DEAD:
        # from the tail with negative indexes: LPUSHes at the head do not shift them;
        # jobctl's hold (set aside by a window-engine walk) first: it is the oldest part
        base = 0
        for key in (keys.hold, keys.dead):
            for start, chunk in walk_list(layout.client, key, from_right=True, batch=batch, sample=sample):
                yield layout._records(keys, [{"job_id": text(x), "position": base + start + n}
                                           for n, x in enumerate(chunk)], state)
            base = layout.client.llen(keys.hold)
        return
    key = keys.scheduled if state is State.SCHEDULED else keys.suppressed
    for _, pairs in walk_zset(layout.client, key, batch=batch, sample=sample):
        recs = layout._records(keys, [{"job_id": text(m), "score": score_ms(s)} for m, s in pairs], state)
        if state is State.SUPPRESSED:
            layout._attach_suppressed_info(keys, recs)
        yield recs


def _walk_stream(layout: StreamGroup, keys: StreamGroupKeys, stream: str, start: str, batch: int,
                 cap: int | None, state: State) -> Iterator[list[JobRecord]]:
    """Records of the entries of ``stream`` from ``start`` (an ``XRANGE``
    bound) in id order, ``batch`` per ``XRANGE``, until ``cap`` entries.
    Ready entries get ``position`` (from the first undelivered one);
    dead-stream entries ``dead_entry_id`` and ``dead_since_ms``."""
    seen = 0
    while cap is None or seen < cap:
        entries = layout.client.xrange(stream, start, "+", count=batch)
        if not entries:
            return
        items = layout._entry_items(entries)
        for it in items:
            if state is State.DEAD:
                it["dead_entry_id"] = it.pop("entry_id")
                it["dead_since_ms"] = it.pop("entered_ms")
                it["position"] = None
            else:
                it["position"] += seen
        yield layout._records(keys, items, state)
        seen += len(entries)
        start = f"({text(entries[-1][0])}"
