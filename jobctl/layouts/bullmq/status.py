"""``status`` of a BullMQ queue: one pipelined round trip over its keys
plus one ``HGET`` of the next waiting job's ``timestamp``.

ready = ``wait`` + ``prioritized``; scheduled = ``delayed`` (due =
score >> 12, ms); processing = ``active`` (stuck: no ``<id>:lock``); dead = ``failed``; history =
``completed``.  ``waiting-children`` and a pause (``meta.paused``) are
warnings: they have no jobctl state.
"""

from __future__ import annotations

from jobctl.layouts.bullmq.job import TESTED_MAJORS, int_field, version_major
from jobctl.layouts.common import status_replies, text
from jobctl.model import QueueStatus

__all__ = ["queue_status", "version_note", "DELAY_SHIFT"]

#: A delayed score is ``due_ms * DELAY_SHIFT + sequence``.
DELAY_SHIFT = 0x1000


def version_note(version: str | None) -> str | None:
    """A warning when ``meta.version`` names an untested major version (``None``: fine or unknown)."""
    major = version_major(version)
    if major is None or major in TESTED_MAJORS:
        return None
    tested = ", ".join(f"{m}.x" for m in TESTED_MAJORS)
    return f"BullMQ version {version} (meta.version) is not tested with jobctl (tested: {tested})"


#: Active jobs whose lock status reads (more are counted as not stuck).
LOCK_CHECKS = 1000


def _unlocked(layout, active: int) -> int:
    """Active jobs (the first :data:`LOCK_CHECKS`) without their ``<id>:lock`` key:
    stalled, for BullMQ's own stalled-job check to move back (jobctl never does)."""
    if not active:
        return 0
    ids = layout.client.lrange(layout.keys.active, 0, LOCK_CHECKS - 1)
    pipe = layout.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.exists(layout.keys.job(text(job_id)) + ":lock")
    return sum(1 for r in pipe.execute(raise_on_error=False) if r == 0)


def queue_status(layout, now: int) -> QueueStatus:
    """The :class:`QueueStatus` of ``layout`` (a BullMQ layout) at ``now`` (epoch ms)."""
    k = layout.keys
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now)
    due_now = now * DELAY_SHIFT + DELAY_SHIFT - 1
    reads = [
        (k.wait, lambda p: p.llen(k.wait)), (k.wait, lambda p: p.lindex(k.wait, -1)),
        (k.prioritized, lambda p: p.zcard(k.prioritized)), (k.delayed, lambda p: p.zcard(k.delayed)),
        (k.delayed, lambda p: p.zcount(k.delayed, "-inf", due_now)),
        (k.delayed, lambda p: p.zrange(k.delayed, 0, 0, withscores=True)),
        (k.active, lambda p: p.llen(k.active)), (k.failed, lambda p: p.zcard(k.failed)),
        (k.completed, lambda p: p.zcard(k.completed)), (k.waiting_children, lambda p: p.zcard(k.waiting_children)),
        (k.paused, lambda p: p.llen(k.paused)), (k.meta, lambda p: p.hmget(k.meta, "paused", "version")),
    ]
    pipe = layout.client.pipeline(transaction=False)
    for _, read in reads:
        read(pipe)
    v = status_replies(st, pipe.execute(raise_on_error=False), [name for name, _ in reads])
    wait, head, prio, delayed, overdue, first, active, failed, completed, children, legacy, meta = v
    wait, prio, legacy = wait or 0, prio or 0, legacy or 0
    st.ready, st.ready_by_priority = wait + prio + legacy, {"wait": wait, "prioritized": prio}
    st.scheduled, st.scheduled_overdue, st.processing = delayed or 0, overdue or 0, active or 0
    st.dead, st.history = failed or 0, completed or 0
    if first:
        st.next_due_ms = int(first[0][1]) // DELAY_SHIFT
        if overdue:
            st.scheduled_overdue_max_age_ms = max(0, now - st.next_due_ms)
    paused, version = (meta or [None, None])
    if paused:
        st.warnings.append("queue paused (meta.paused): BullMQ's workers take no job until it is resumed")
    if legacy:
        st.warnings.append(f"{legacy:,} job(s) in the legacy paused list (counted as ready)")
    if children:
        st.warnings.append(f"{children:,} flow parent(s) in waiting-children: not counted above (inspect shows them)")
    note = version_note(text(version) if version else None)
    if note:
        st.warnings.append(note)
    st.stuck = _unlocked(layout, st.processing)
    if head:
        since = int_field(layout.client.hget(k.job(text(head)), "timestamp"))
        if since is not None:
            st.oldest_ready_since_ms, st.oldest_ready_age_ms = since, max(0, now - since)
    return st
