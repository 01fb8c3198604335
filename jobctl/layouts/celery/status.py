"""``status`` of a Celery queue: one pipelined round trip over the ready
lists and kombu's in-flight keys, then the unacked entries of this queue
(at most :data:`UNACKED_CAP` read, in windows of the index).

Ready = the four priority lists; processing = this queue's ``unacked``
entries; stuck = those past delivery time + visibility timeout (kombu's own
restore would redeliver them).  Celery keeps no dead-letter store in Redis
(a failed task is acked and dropped): status says so, dead stays 0.
Celery messages carry no enqueue time: the oldest ready age is unknown.
With ``replay_results = 1``, dead = this queue's failed result records not
yet replayed (:mod:`.results`; at most :data:`RESULT_SCAN_CAP` keys
examined), with a line for each kind of record replay cannot use.
"""

from __future__ import annotations

from redis.exceptions import ResponseError

from jobctl.layouts.celery.records import walk_unacked
from jobctl.layouts.celery.results import NOT_OPTED_IN, RESULT_SCAN_CAP, RecordTally, opted_in, walk_failed
from jobctl.layouts.common import status_replies
from jobctl.model import QueueStatus

__all__ = ["queue_status", "UNACKED_CAP", "NO_DEAD_NOTE", "AGE_BUCKETS", "RESULT_SCAN_CAP"]

#: Unacked entries (all queues) status reads at most.
UNACKED_CAP = 10_000
#: Said in every status of the layout.
NO_DEAD_NOTE = "dead n/a: Celery keeps no dead-letter store in Redis (a failed task is acked and dropped)"
#: The unacked age histogram's buckets: (label, upper bound in ms).
AGE_BUCKETS = (("<1m", 60_000), ("1-10m", 600_000), ("10-60m", 3_600_000), (">1h", None))


def age_histogram(ages_ms: list[int]) -> dict[str, int]:
    """``{bucket label: count}`` of unacked ages (ms) over :data:`AGE_BUCKETS`."""
    out = {label: 0 for label, _ in AGE_BUCKETS}
    for age in ages_ms:
        out[next(label for label, hi in AGE_BUCKETS if hi is None or age < hi)] += 1
    return out


def _fold_unacked(layout, st: QueueStatus, now: int) -> None:
    seen, ages, eta_late = 0, [], 0
    for recs in walk_unacked(layout, batch=1000):
        for rec in recs:
            st.processing += 1
            ages.append(max(0, now - (rec.score or now)))
            if rec.deadline_ms is not None and rec.deadline_ms <= now:
                st.stuck += 1
            elif rec.deadline_ms is not None and (st.next_deadline_ms is None or rec.deadline_ms < st.next_deadline_ms):
                st.next_deadline_ms = rec.deadline_ms
            eta_late += bool(rec.meta.get("eta_beyond_visibility"))
        seen += 1000
        if seen >= UNACKED_CAP:
            st.warnings.append(f"unacked: only the {UNACKED_CAP:,} oldest deliveries (all queues) were read")
            break
    if eta_late:
        st.warnings.append(f"{eta_late:,} unacked task(s) have an ETA/countdown beyond the visibility timeout: "
                           "kombu will redeliver them before they run (they may run twice)")
    if st.stuck:
        st.warnings.append(f"{st.stuck:,} unacked message(s) past the visibility timeout (kombu redelivers them; "
                           "jobctl requeue --stuck does it now); unacked ages: "
                           + " ".join(f"{k} {v:,}" for k, v in age_histogram(ages).items()))


def queue_status(layout, now: int) -> QueueStatus:
    """The :class:`QueueStatus` of ``layout`` (a Celery layout) at ``now`` (epoch ms)."""
    k = layout.keys
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now)
    pipe = layout.client.pipeline(transaction=False)
    names = []
    for _, key in k.ready_lists():
        pipe.llen(key)
        names.append(key)
    pipe.exists(k.unacked_mutex)
    names.append(k.unacked_mutex)
    replies = status_replies(st, pipe.execute(raise_on_error=False), names)
    depths = [x or 0 for x in replies[:-1]]
    st.ready = sum(depths)
    if any(depths[1:]):
        st.ready_by_priority = {str(step): n for (step, _), n in zip(k.ready_lists(), depths) if n}
    try:
        _fold_unacked(layout, st, now)
    except ResponseError as exc:  # a wrong-typed unacked or unacked_index: said, the rest still shown
        if "WRONGTYPE" not in str(exc):
            raise
        st.errors.append(f"{k.unacked} / {k.unacked_index}: wrong Redis type, unacked messages not read")
    if replies[-1]:
        st.warnings.append("kombu's unacked_mutex is held: a worker is restoring overdue messages now")
    if opted_in(layout):
        _fold_results(layout, st)
    else:
        st.warnings += [NO_DEAD_NOTE, NOT_OPTED_IN]
    return st


def _fold_results(layout, st: QueueStatus) -> None:
    """Dead = this queue's failed result records not yet replayed, with what replay cannot use."""
    tally = RecordTally()
    try:
        st.dead = sum(len(recs) for recs in walk_failed(layout, tally, cap=RESULT_SCAN_CAP))
    except ResponseError as exc:  # a wrong-typed replay hash: said, the rest still shown
        if "WRONGTYPE" not in str(exc):
            raise
        st.errors.append(f"{layout.keys.replayed}: wrong Redis type, failed result records not read")
        return
    st.warnings.append(f"dead = Celery's failed result records of this queue (replay_results = 1), not a "
                       f"dead-letter store; {tally.replayed:,} more already replayed by jobctl")
    st.warnings += tally.notes()
    if tally.partial:
        st.warnings.append(f"result records: only the first {RESULT_SCAN_CAP:,} keys of the keyspace were scanned")
