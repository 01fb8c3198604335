"""Metric names, HELP texts and label sets: turns a :class:`Snapshot` into
Prometheus metric families.

Queue gauges (labels ``queue``, ``layout``) follow seed 000 section 21
(``redis_job_*``; times in milliseconds as the seed names them); jobctl's
own metrics are ``jobctl_*``.  The seed's worker-side counters (claims,
successes, retries, handler durations, duplicates) are only observable in
the workers: jobctl exports the state they leave in Redis.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..model import QueueStatus
from .breakdown import BREAKDOWN_BOUND, MAX_SERIES, OTHER
from .snapshot import HISTOGRAM_BOUND, Snapshot

__all__ = ["families", "ATTEMPT_BUCKETS", "STATUS_GAUGES"]

#: Upper bounds (``le``) of the attempts histogram buckets.
ATTEMPT_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)

_Q = ["queue", "layout"]

#: (metric name, QueueStatus attribute, HELP): one gauge per status field.
STATUS_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("redis_job_ready_depth", "ready", "Jobs ready to claim (all ready lists)."),
    ("redis_job_scheduled_depth", "scheduled", "Delayed jobs and retries waiting in the scheduled zset."),
    ("redis_job_scheduled_overdue_depth", "scheduled_overdue",
     "Scheduled jobs whose due time has passed but are still scheduled: scheduler lag."),
    ("redis_job_scheduled_overdue_max_age_ms", "scheduled_overdue_max_age_ms",
     "Milliseconds since the oldest overdue scheduled job was due (0 when none is overdue)."),
    ("redis_job_processing_depth", "processing", "In-flight jobs: claimed, not yet acknowledged."),
    ("redis_job_stuck_depth", "stuck",
     "Processing jobs past their visibility deadline (a crashed or hung worker holds them)."),
    ("redis_job_dead_depth", "dead", "Dead-lettered jobs (DLQ depth)."),
    ("redis_job_suppressed_depth", "suppressed",
     "Dead jobs an operator suppressed (kept for audit, out of the DLQ)."),
    ("redis_job_paused_depth", "paused",
     "Jobs an operator paused (jobctl pause): out of the workers' reach until resumed."),
    ("redis_job_migrating_depth", "migrating",
     "Jobs between two queues: taken out by a jobctl migrate that did not finish (rerun it)."),
    ("redis_job_oldest_ready_age_ms", "oldest_ready_age_ms",
     "Milliseconds the job at the claim end has been ready: latency pressure (0 when nothing is ready)."),
)


def _labels(st: QueueStatus) -> list[str]:
    return [st.queue, st.layout]


def families(snap: Snapshot) -> Iterator:
    """The metric families of ``snap`` (all of them, even when empty)."""
    up = GaugeMetricFamily("jobctl_exporter_up", "1 when the last refresh read the server, else 0.")
    up.add_metric([], 1.0 if snap.up else 0.0)
    yield up
    dur = GaugeMetricFamily("jobctl_exporter_refresh_duration_seconds", "Seconds the last refresh took.")
    dur.add_metric([], snap.duration_s)
    yield dur
    at = GaugeMetricFamily("jobctl_exporter_refresh_timestamp_seconds",
                           "When the values were read (epoch seconds); scrapes in between get cached values.")
    at.add_metric([], snap.taken_at)
    yield at
    if not snap.up:
        return
    yield from _server(snap)
    statuses = [qs.status for qs in snap.queues if qs.status is not None]
    for name, attr, help_text in STATUS_GAUGES:
        g = GaugeMetricFamily(name, help_text, labels=_Q)
        for st in statuses:
            v = getattr(st, attr)
            g.add_metric(_labels(st), float(v or 0))
        yield g
    prio = GaugeMetricFamily("redis_job_ready_priority_depth", "Jobs ready to claim per priority list (pN).",
                             labels=_Q + ["priority"])
    for st in statuses:
        for p, n in sorted(st.ready_by_priority.items()):
            prio.add_metric(_labels(st) + [p], float(n))
    yield prio
    held = GaugeMetricFamily("redis_job_held_filters",
                             "Active holds (jobctl pause --hold): filters whose newly ready jobs are paused.",
                             labels=_Q)
    for st in statuses:
        held.add_metric(_labels(st), float(len(getattr(st, "held_filters", None) or [])))
    yield held
    errs = GaugeMetricFamily("redis_job_status_errors",
                             "Problems reading the queue: keys of the wrong type, unreadable status.",
                             labels=_Q)
    for qs in snap.queues:
        n = (len(qs.status.errors) if qs.status is not None else 0) + (1 if qs.error else 0)
        errs.add_metric([qs.queue.name, qs.layout], float(n))
    yield errs
    yield from _dlq_loss(statuses)
    yield from _attempts(snap)
    yield from _breakdown(snap)
    yield from _counters(snap)


def _dlq_loss(statuses: list[QueueStatus]) -> Iterator:
    """Dead jobs about to be lost without anyone deleting them (issue 12, item 9)."""
    exp = GaugeMetricFamily(
        "jobctl_dlq_expiring_jobs",
        "Dead jobs whose payload (or the dead list itself) expires within an hour (PTTL), among the newest "
        "audited entries: export the DLQ now. Read with the slow metrics.", labels=_Q)
    cap = GaugeMetricFamily(
        "jobctl_dlq_at_cap",
        "1 when the DLQ holds at least the configured dead_cap entries, or its length stayed put between "
        "refreshes while new failures arrived: the workers' LTRIM drops the oldest dead jobs.", labels=_Q)
    for st in statuses:
        exp.add_metric(_labels(st), float(st.dead_expiring or 0))
        at_cap = st.dead_pinned or (st.dead_cap is not None and st.dead >= st.dead_cap)
        cap.add_metric(_labels(st), 1.0 if at_cap else 0.0)
    yield exp
    yield cap


def _server(snap: Snapshot) -> Iterator:
    s = snap.server
    info = GaugeMetricFamily("jobctl_redis_info", "The server jobctl reads; run_id changes on restart and failover.",
                             labels=["server", "version", "role", "run_id"])
    info.add_metric([s.get("kind", ""), s.get("version", ""), s.get("role", ""), s.get("run_id", "")], 1.0)
    yield info
    for name, key, help_text in (
        ("jobctl_redis_uptime_seconds", "uptime_s", "Seconds since the server started (INFO uptime_in_seconds)."),
        ("jobctl_redis_used_memory_bytes", "used_memory", "INFO used_memory."),
        ("jobctl_redis_maxmemory_bytes", "maxmemory", "INFO maxmemory (0: no limit)."),
    ):
        g = GaugeMetricFamily(name, help_text)
        g.add_metric([], float(s.get(key, 0)))
        yield g


def _attempts(snap: Snapshot) -> Iterator:
    h = HistogramMetricFamily(
        "redis_job_attempts",
        "Attempts made by the jobs in a state (envelope attempt): dead letters, and retries waiting in "
        f"scheduled. Exact up to {HISTOGRAM_BOUND:,} jobs in the state, else estimated from a random sample "
        "(see redis_job_attempts_sampled). Jobs without a readable attempt are left out "
        "(redis_job_attempts_unknown).",
        labels=_Q + ["state"])
    sampled = GaugeMetricFamily("redis_job_attempts_sampled",
                                "1 when redis_job_attempts is estimated from a sample.", labels=_Q + ["state"])
    unknown = GaugeMetricFamily("redis_job_attempts_unknown",
                                "Jobs whose envelope has no readable attempt field.", labels=_Q + ["state"])
    age = GaugeMetricFamily("redis_job_attempts_age_seconds",
                            "Seconds since the attempts histogram and dead breakdown were read (cached longer "
                            "than the depth gauges).", labels=_Q)
    for qs in snap.queues:
        labels = [qs.queue.name, qs.layout]
        for state, hist in sorted(qs.histograms.items()):
            buckets = []
            for le in ATTEMPT_BUCKETS:
                buckets.append((str(le), float(sum(v for k, v in hist.counts.items() if k <= le))))
            total = sum(hist.counts.values())
            buckets.append(("+Inf", float(total)))
            h.add_metric(labels + [state], buckets, sum_value=float(sum(k * v for k, v in hist.counts.items())))
            sampled.add_metric(labels + [state], 1.0 if hist.sampled else 0.0)
            unknown.add_metric(labels + [state], float(hist.unknown))
        if qs.slow_at is not None:
            age.add_metric(labels, max(0.0, time.monotonic() - qs.slow_at))
    yield h
    yield sampled
    yield unknown
    yield age


def _breakdown(snap: Snapshot) -> Iterator:
    g = GaugeMetricFamily(
        "redis_job_dead_by_type_tenant",
        "Dead jobs by jobType and tenantId, read from the envelopes: exact when the DLQ holds at most "
        f"{BREAKDOWN_BOUND:,} jobs, else estimated from a random sample of {BREAKDOWN_BOUND:,} "
        f"(redis_job_dead_breakdown_sampled). The top {MAX_SERIES} pairs per queue; the rest summed "
        f"under {OTHER}.",
        labels=_Q + ["job_type", "tenant"])
    sampled = GaugeMetricFamily("redis_job_dead_breakdown_sampled",
                                "1 when redis_job_dead_by_type_tenant is estimated from a sample.", labels=_Q)
    for qs in snap.queues:
        if qs.breakdown is None:
            continue
        labels = [qs.queue.name, qs.layout]
        for (job_type, tenant), n in sorted(qs.breakdown.counts.items()):
            g.add_metric(labels + [job_type, tenant], float(n))
        sampled.add_metric(labels, 1.0 if qs.breakdown.sampled else 0.0)
    yield g
    yield sampled


def _counters(snap: Snapshot) -> Iterator:
    specs = (
        ("jobctl_operations", "entries", "Operations jobctl applied (journal entries), by type."),
        ("jobctl_operation_jobs_moved", "moved", "Jobs moved by jobctl's operations, by operation type."),
        ("jobctl_operation_jobs_skipped", "skipped",
         "Jobs an operation skipped (changed or gone since the plan), by operation type."),
        ("jobctl_operation_jobs_failed", "failed", "Jobs an operation failed to move, by operation type."),
    )
    for name, attr, help_text in specs:
        c = CounterMetricFamily(name, help_text + " Read from the queues' journal streams.",
                                labels=["queue", "operation"])
        for (queue, op), counts in sorted(snap.counters.items()):
            c.add_metric([queue, op], float(getattr(counts, attr)))
        yield c
