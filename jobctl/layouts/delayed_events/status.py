"""``jobctl status`` of a delayed-events service: the zset split into
ready, scheduled and dead by each envelope's ``attempt``, exact up to
:data:`EXACT_BOUND` members, estimated from :data:`SAMPLE_WINDOWS` random
windows beyond (layouts.md section 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobctl.model import QueueStatus, State
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import score_ms, text, wrongtype_errors
from jobctl.layouts.delayed_events.layout import READY_BOUND, attempt_of
from jobctl.layouts.walks import WINDOW, window_starts

if TYPE_CHECKING:
    from jobctl.layouts.delayed_events.layout import DelayedEvents

__all__ = ["queue_status", "EXACT_BOUND", "SAMPLE_WINDOWS"]

#: The zset is split into scheduled/dead exactly up to this many members.
EXACT_BOUND = 10_000
#: Beyond it, this many random windows of :data:`WINDOW` members are read.
SAMPLE_WINDOWS = 10


def queue_status(layout: DelayedEvents, now: int | None = None) -> QueueStatus:
    """The counts of every state: one pipeline (``ZCARD`` of the zset and the
    suppressed zset, ``LLEN`` of each type list), then the zset split into
    ready/scheduled/dead (:func:`_split_zset`).  A key of the wrong type is
    an error and stops there."""
    now = now_ms() if now is None else now
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now)
    lists = layout.event_lists()
    pipe = layout.client.pipeline(transaction=False)
    pipe.zcard(layout.keys.zset)
    pipe.zcard(layout.keys.suppressed)
    for key in lists:
        pipe.llen(key)
    res = pipe.execute(raise_on_error=False)
    st.errors.extend(wrongtype_errors(res, [layout.keys.zset, layout.keys.suppressed] + lists))
    if st.errors:
        return st
    total, st.suppressed = res[0], res[1]
    st.ready = sum(res[2:])
    if total:
        _split_zset(layout, st, total, now)
    return st


def _split_zset(layout: DelayedEvents, st: QueueStatus, total: int, now: int) -> None:
    """Classify the zset's members (two pipelined round trips: the
    ``ZRANGE`` windows, then their ``HMGET``s); only ``attempt`` is read."""
    shadow, complete = layout.dispatched()
    if not complete:
        st.warnings.append(f"type lists read up to {READY_BOUND:,} entries each: events dispatched beyond "
                           "that are counted in their zset state too")
    exact = total <= EXACT_BOUND
    starts, _ = window_starts(total, WINDOW, None if exact else (SAMPLE_WINDOWS, WINDOW))
    pipe = layout.client.pipeline(transaction=False)
    for start in starts:
        pipe.zrange(layout.keys.zset, start, start + WINDOW - 1, withscores=True)
    windows = [[(text(m), score_ms(sc)) for m, sc in pairs] for pairs in pipe.execute()]
    pipe = layout.client.pipeline(transaction=False)
    for pairs in windows:
        if pairs:
            pipe.hmget(layout.keys.events, [m for m, _ in pairs])
    raws = iter(pipe.execute())
    counts = {State.READY: 0, State.SCHEDULED: 0, State.DEAD: 0}
    read = 0
    oldest_due = next_due = None
    for pairs in windows:
        if not pairs:
            continue
        for (member, score), raw in zip(pairs, next(raws)):
            read += 1
            if member in shadow:
                continue  # its list copy is counted as ready
            attempt = attempt_of(raw)
            if attempt is not None and attempt >= layout.max_attempts:
                counts[State.DEAD] += 1
            elif score <= now:
                counts[State.READY] += 1
                oldest_due = score if oldest_due is None else min(oldest_due, score)
            else:
                counts[State.SCHEDULED] += 1
                next_due = score if next_due is None else min(next_due, score)
    if exact:
        st.dead, st.scheduled = counts[State.DEAD], counts[State.SCHEDULED]
        st.ready += counts[State.READY]
    else:
        scale = total / max(1, read)
        st.dead = round(counts[State.DEAD] * scale)
        st.scheduled = round(counts[State.SCHEDULED] * scale)
        st.ready += round(counts[State.READY] * scale)
        st.warnings.append(f"{total:,} members: ready/scheduled/dead split estimated from {read:,} envelopes")
    st.next_due_ms = next_due
    if oldest_due is not None:
        st.oldest_ready_since_ms = oldest_due
        st.oldest_ready_age_ms = max(0, now - oldest_due)
