"""``jobctl status`` of a stream-group queue: the counts of every state, the
stuck entries, the oldest ready entry and the next visibility deadline,
read in two pipelined round trips whatever the queue's size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobctl.keys import StreamGroupKeys
from jobctl.model import QueueStatus
from jobctl.scripts import script
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import SCHEDULED_READS, fold_count, fold_scheduled, read_scheduled, text, wrongtype_errors
from jobctl.layouts.stream_group.layout import COUNT_BOUND, entry_ms
from jobctl.layouts.stream_group.replies import missing_stream_or_group

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["queue_status"]


def queue_status(layout: StreamGroup, now: int | None = None) -> QueueStatus:
    """The counts of every state summed over the shards (see
    :mod:`.stream_group`): per shard one pipeline (``XINFO GROUPS``,
    ``sg_pel_summary.lua`` for the stuck entries, the scheduled reads,
    ``LLEN``/``XLEN`` of the dead key and the hold, ``ZCARD``), then, for the
    ready entries, the group's lag or a bounded count after its
    last-delivered id (``sg_count_after.lua``).  A missing stream or group
    is a warning; a key of the wrong type an error."""
    now = now_ms() if now is None else now
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now, shards=len(layout.shards))
    pipe, plan = _shard_reads(layout, now)
    groups = _fold_shards(layout, st, plan, pipe.execute(raise_on_error=False), now)
    if groups:
        _fold_ready(layout, st, groups)
    if st.oldest_ready_since_ms is not None:
        st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
    return st


def _shard_reads(layout: StreamGroup, now: int) -> tuple[Any, list[tuple[str, str, StreamGroupKeys]]]:
    """The first round trip's pipeline (not executed) and, per command,
    ``(what, key, shard keys)``."""
    vt = layout.visibility_timeout_ms
    pipe = layout._pipeline()
    plan: list[tuple[str, str, StreamGroupKeys]] = []
    summary = script(layout.client, "sg_pel_summary")
    for keys in layout.shards:
        pipe.xinfo_groups(keys.stream)
        plan.append(("groups", keys.stream, keys))
        summary(keys=[keys.stream], args=[layout.group, vt, COUNT_BOUND], client=pipe)
        plan.append(("pel", keys.stream, keys))
        plan.extend((what, keys.scheduled, keys) for what in read_scheduled(pipe, keys.scheduled, now))
        dead = layout.dead_key(keys)
        (pipe.xlen if layout.dead_kind == "stream" else pipe.llen)(dead)
        plan.append(("dead", dead, keys))
        if layout.dead_kind == "list":  # jobctl's hold (a window-engine walk set those aside): still dead
            pipe.llen(keys.hold)
            plan.append(("dead", keys.hold, keys))
        pipe.zcard(keys.suppressed)
        plan.append(("suppressed", keys.suppressed, keys))
    return pipe, plan


def _fold_shards(layout: StreamGroup, st: QueueStatus, plan: list[tuple[str, str, StreamGroupKeys]],
                 results: list, now: int) -> list[tuple[StreamGroupKeys, Any]]:
    """Fold the first round trip's ``results`` into ``st``; each shard's
    group record (:meth:`StreamGroup.group_info`'s shape) for the ready count."""
    groups: list[tuple[StreamGroupKeys, Any]] = []
    for (what, key, keys), res in zip(plan, results):
        if isinstance(res, Exception):
            _fold_error(layout, st, what, key, res)
        elif fold_count(st, what, res):  # dead, suppressed
            continue
        elif what == "groups":
            g = layout._group_from(res)
            if g is not None:
                groups.append((keys, g))
                st.processing += g.pending
        elif what == "pel":
            _fold_pel(layout, st, key, res, now)
        elif what in SCHEDULED_READS:
            fold_scheduled(st, what, res, now)
    return groups


def _fold_error(layout: StreamGroup, st: QueueStatus, what: str, key: str, res: Exception) -> None:
    """A missing stream or group is a warning; any other error (a wrong type) an error."""
    if not missing_stream_or_group(res):
        st.errors.extend(wrongtype_errors([res], [key]))
    elif what == "groups":
        st.warnings.append(f"stream {key} does not exist")
    elif what == "pel" and not any(w.startswith(f"stream {key} ") for w in st.warnings):
        st.warnings.append(f"consumer group {layout.group} does not exist on {key}")


def _fold_pel(layout: StreamGroup, st: QueueStatus, key: str, res, now: int) -> None:
    """``sg_pel_summary.lua``'s reply: stuck count, truncated flag, max idle ms."""
    stuck, truncated, max_idle = (int(x) for x in res)
    st.stuck += stuck
    if truncated:
        st.warnings.append(f"stuck entries of {key} counted up to {COUNT_BOUND:,}")
    if max_idle >= 0:
        d = now - max_idle + layout.visibility_timeout_ms
        st.next_deadline_ms = d if st.next_deadline_ms is None else min(st.next_deadline_ms, d)


def _fold_ready(layout: StreamGroup, st: QueueStatus, groups: list[tuple[StreamGroupKeys, Any]]) -> None:
    """The second round trip: each group's ready count (its lag, else a
    bounded count after its last-delivered id) and the oldest ready entry."""
    pipe = layout._pipeline()
    count_after = script(layout.client, "sg_count_after")
    for keys, g in groups:
        if g.lag is None:
            count_after(keys=[keys.stream], args=[g.last_id, COUNT_BOUND], client=pipe)
        pipe.xrange(keys.stream, f"({g.last_id}", "+", count=1)
    res = iter(pipe.execute())
    for keys, g in groups:
        ready = g.lag
        if ready is None:
            ready = int(next(res))
            if ready >= COUNT_BOUND:
                st.warnings.append(f"ready entries of {keys.stream} counted up to {COUNT_BOUND:,} "
                                   "(the server reports no lag)")
        st.ready += ready
        first = next(res)
        if first:
            since = entry_ms(text(first[0][0]))
            if st.oldest_ready_since_ms is None or since < st.oldest_ready_since_ms:
                st.oldest_ready_since_ms = since
