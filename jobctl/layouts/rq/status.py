"""``status`` of an RQ queue: one pipelined round trip over RQ's keys plus
one ``HGET`` for the oldest ready job's ``enqueued_at``.

RQ's zset scores are epoch seconds: the failed and finished registries'
are *expiry* times (``failure_ttl``/``result_ttl`` from when the job ended),
the scheduled registry's the run-at time, ``wip``'s the heartbeat expiry
(a started job whose heartbeat lapsed counts as stuck).
"""

from __future__ import annotations

from jobctl.layouts.common import status_replies, text
from jobctl.layouts.rq.job import iso_ms
from jobctl.model import QueueStatus

__all__ = ["queue_status", "EXPIRING_WITHIN_S"]

#: Failed jobs whose registry entry (and hash) expire within this many seconds count as expiring.
EXPIRING_WITHIN_S = 3600


def _first_score(reply) -> float | None:
    return float(reply[0][1]) if reply else None


def queue_status(layout, now: int) -> QueueStatus:
    """The :class:`QueueStatus` of ``layout`` (an RQ layout) at ``now`` (epoch ms)."""
    k = layout.keys
    now_s = now / 1000
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now)
    pipe = layout.client.pipeline(transaction=False)
    reads = [
        (k.queue, lambda p: p.llen(k.queue)), (k.queue, lambda p: p.lindex(k.queue, 0)),
        (k.intermediate, lambda p: p.llen(k.intermediate)),
        (k.wip, lambda p: p.zcard(k.wip)), (k.wip, lambda p: p.zcount(k.wip, "-inf", now_s)),
        (k.wip, lambda p: p.zrangebyscore(k.wip, f"({now_s}", "+inf", start=0, num=1, withscores=True)),
        (k.failed, lambda p: p.zcard(k.failed)),
        (k.failed, lambda p: p.zcount(k.failed, "-inf", now_s + EXPIRING_WITHIN_S)),
        (k.failed, lambda p: p.zrange(k.failed, 0, 0, withscores=True)),
        (k.scheduled, lambda p: p.zcard(k.scheduled)), (k.scheduled, lambda p: p.zcount(k.scheduled, "-inf", now_s)),
        (k.scheduled, lambda p: p.zrange(k.scheduled, 0, 0, withscores=True)),
        (k.finished, lambda p: p.zcard(k.finished)),
        (k.deferred, lambda p: p.zcard(k.deferred)), (k.canceled, lambda p: p.zcard(k.canceled)),
        (k.suppressed, lambda p: p.zcard(k.suppressed)),
    ]
    for _, read in reads:
        read(pipe)
    v = status_replies(st, pipe.execute(raise_on_error=False), [name for name, _ in reads])
    (ready, head, inter, wip, stuck, next_hb, dead, expiring, first_fail, sched, overdue, first_due,
     finished, deferred, canceled, suppressed) = [x if x is not None else 0 for x in v]
    st.suppressed = suppressed
    st.ready, st.processing, st.stuck = ready, inter + wip, stuck
    st.next_deadline_ms = int(_first_score(next_hb) * 1000) if next_hb else None
    st.dead, st.history, st.scheduled, st.scheduled_overdue = dead, finished, sched, overdue
    _fold_failed(st, expiring, _first_score(first_fail), now)
    due = _first_score(first_due)
    if due is not None and due != float("inf"):
        st.next_due_ms = int(due * 1000)
        if overdue:
            st.scheduled_overdue_max_age_ms = max(0, now - st.next_due_ms)
    if deferred or canceled:
        st.warnings.append(f"{deferred:,} deferred (waiting on dependencies) and {canceled:,} canceled job(s) "
                           "in RQ's own registries: not counted above (inspect shows them)")
    if head:
        enqueued = iso_ms(layout.client.hget(k.job(text(head)), "enqueued_at"))
        if enqueued is None:
            st.warnings.append(f"oldest ready job {text(head)}: no job hash or no enqueued_at")
        else:
            st.oldest_ready_since_ms, st.oldest_ready_age_ms = enqueued, max(0, now - enqueued)
    return st


def _fold_failed(st: QueueStatus, expiring: int, first_expiry: float | None, now: int) -> None:
    """The failed registry's expiries: RQ's cleanup drops an entry (and its
    hash expires) at its score."""
    if not st.dead:
        return
    st.dead_expiring = expiring
    if first_expiry is not None and first_expiry != float("inf"):
        st.dead_min_ttl_ms = max(0, int(first_expiry * 1000) - now)
