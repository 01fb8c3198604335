"""``status`` of a Sidekiq instance: two pipelined round trips (the sets
and the ``queues``/``processes`` members, then each queue's ``LLEN`` and
oldest job and each live process's work count and ``info``).

The sets' scores are epoch seconds (float) in every Sidekiq version;
the ``dead`` set is trimmed by Sidekiq to :data:`DEAD_CAP` entries (the
oldest dropped) on every death.
"""

from __future__ import annotations

from jobctl.layouts.common import status_replies, text
from jobctl.layouts.sidekiq.job import job_doc, time_ms
from jobctl.model import QueueStatus

__all__ = ["instance_status", "DEAD_CAP", "library_version"]

#: Sidekiq's ``ZREMRANGEBYRANK dead 0 -dead_max_jobs`` keeps this many (dead_max_jobs 10,000).
DEAD_CAP = 9_999


def _first(reply) -> float | None:
    return float(reply[0][1]) if reply else None


def _sets(layout, st: QueueStatus, now: int) -> list:
    """Counts of the sets; returns ``[queue names, process identities]``."""
    k = layout.keys
    now_s = now / 1000
    pipe = layout.client.pipeline(transaction=False)
    reads = [(k.queues, lambda p: p.smembers(k.queues)), (k.processes, lambda p: p.smembers(k.processes))]
    for key in (k.schedule, k.retry):
        reads += [(key, lambda p, key=key: p.zcard(key)), (key, lambda p, key=key: p.zcount(key, "-inf", now_s)),
                  (key, lambda p, key=key: p.zrange(key, 0, 0, withscores=True))]
    reads += [(k.dead, lambda p: p.zcard(k.dead))]
    for _, read in reads:
        read(pipe)
    v = status_replies(st, pipe.execute(raise_on_error=False), [name for name, _ in reads])
    queues, procs, sched, sched_due, sched_first, retry, retry_due, retry_first, dead = v
    st.scheduled, st.scheduled_overdue, st.dead = (sched or 0) + (retry or 0), (sched_due or 0) + (retry_due or 0), dead or 0
    firsts = [f for f in (_first(sched_first), _first(retry_first)) if f is not None]
    if firsts:
        st.next_due_ms = int(min(firsts) * 1000)
        if st.scheduled_overdue:
            st.scheduled_overdue_max_age_ms = max(0, now - st.next_due_ms)
    if retry:
        st.warnings.append(f"{retry:,} of the scheduled jobs are failed jobs waiting for Sidekiq's next retry "
                           "(the retry set)")
    if st.dead >= DEAD_CAP:
        st.warnings.append(f"the dead set is at Sidekiq's cap ({DEAD_CAP:,}): Sidekiq drops the oldest dead job "
                           "on every new death")
    return [sorted(text(q) for q in queues or ()), sorted(text(p) for p in procs or ())]


def library_version(layout, procs: list[str] | None = None) -> str | None:
    """The Sidekiq version in words, from a live process's ``info`` JSON
    (``version``, written by recent Sidekiq versions); ``None`` when no
    process runs."""
    if procs is None:
        procs = sorted(text(p) for p in layout.client.smembers(layout.keys.processes))
    for ident in procs:
        info = job_doc(layout.client.hget(layout.keys.process(ident), "info") or b"") or {}
        if isinstance(info.get("version"), str):
            return f"Sidekiq {info['version']} (a live process's info)"
    return "Sidekiq version not in the live process's info (an older Sidekiq)" if procs else None


def instance_status(layout, now: int) -> QueueStatus:
    """The :class:`QueueStatus` of ``layout`` (a Sidekiq layout) at ``now`` (epoch ms)."""
    st = QueueStatus(queue=layout.queue_name, layout=layout.name, now_ms=now)
    queues, procs = _sets(layout, st, now)
    if st.errors:
        return st
    pipe = layout.client.pipeline(transaction=False)
    names = []
    for q in queues:
        key = layout.keys.queue(q)
        pipe.llen(key)
        pipe.lindex(key, -1)
        names += [key, key]
    for ident in procs:
        for key in layout.keys.work(ident):
            pipe.hlen(key)
            names.append(key)
    v = status_replies(st, pipe.execute(raise_on_error=False), names)
    oldest = []
    for n, q in enumerate(queues):
        depth, head = v[2 * n], v[2 * n + 1]
        st.ready += depth or 0
        st.ready_by_priority[q] = depth or 0
        since = time_ms((job_doc(head) or {}).get("enqueued_at")) if head else None
        if since is not None:
            oldest.append(since)
    st.processing = sum(x or 0 for x in v[2 * len(queues):])
    if oldest:
        st.oldest_ready_since_ms = min(oldest)
        st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
    if st.ready and not procs:
        st.warnings.append(f"{st.ready:,} job(s) ready but no live Sidekiq process (the processes set is empty)")
    return st
