"""What one refresh of the exporter read: :class:`Snapshot`.

Taking a snapshot (:func:`take_snapshot`) is the only place the exporter
talks to Redis.  Per queue it costs one ``status`` (two pipelined round
trips plus one per shard, whatever the depth); the slow parts (attempt
histograms of the dead and scheduled states, the dead breakdown by type and
tenant) are bounded reads of at most :data:`HISTOGRAM_BOUND` and
:data:`~jobctl.metrics.breakdown.BREAKDOWN_BOUND` envelopes, cached for
longer and recomputed for at most :data:`SLOW_QUEUES_PER_REFRESH` queues per
refresh; the journal counters read at most
:data:`~jobctl.metrics.journal_counters.MAX_ENTRIES_PER_REFRESH` new entries
per queue.  Plus one pipelined ``INFO server/replication/memory``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..attempts import Histogram, attempt_histogram
from ..config import QueueConfig
from ..model import QueueStatus, State
from .breakdown import Breakdown, dead_breakdown

__all__ = ["QueueSnapshot", "Snapshot", "SlowCache", "take_snapshot", "HISTOGRAM_BOUND", "HISTOGRAM_STATES",
           "SLOW_QUEUES_PER_REFRESH"]

#: The attempt histograms are exact up to this many jobs in the state, else sampled.
HISTOGRAM_BOUND = 20_000
#: States with an attempt histogram: the DLQ, and the retries in scheduled (retry storms).
HISTOGRAM_STATES = (State.DEAD, State.SCHEDULED)
#: Queues whose slow metrics may be recomputed in one refresh.
SLOW_QUEUES_PER_REFRESH = 4


@dataclass
class QueueSnapshot:
    """One queue: its status (``None`` when it could not be read: ``error``),
    and the cached slow metrics (which may be older: ``slow_at``)."""

    queue: QueueConfig
    layout: str
    status: QueueStatus | None = None
    error: str | None = None
    histograms: dict[str, Histogram] = field(default_factory=dict)
    breakdown: Breakdown | None = None
    slow_at: float | None = None


@dataclass
class Snapshot:
    """Everything one refresh read.  ``up`` is false when the server could
    not be read at all (``error`` says why); ``server`` holds INFO fields."""

    taken_at: float
    up: bool = True
    error: str | None = None
    duration_s: float = 0.0
    server: dict[str, Any] = field(default_factory=dict)
    queues: list[QueueSnapshot] = field(default_factory=list)
    counters: dict = field(default_factory=dict)


@dataclass
class SlowCache:
    """Slow metrics per queue name, with the monotonic time they were read."""

    entries: dict[str, tuple[float, dict[str, Histogram], Breakdown | None]] = field(default_factory=dict)
    #: The DLQ audit per queue name (:func:`jobctl.layouts.status_truth.audit_dlq`):
    #: ``({field: value}, [warnings])``, read with the slow metrics.
    dlq: dict[str, tuple[dict[str, Any], list[str]]] = field(default_factory=dict)


def _audit(layout, status: QueueStatus) -> tuple[dict[str, Any], list[str]]:
    """The DLQ audit of one queue (bounded: at most DEAD_AUDIT_MAX entries per shard)."""
    from ..layouts.status_truth import AUDIT_FIELDS, audit_dlq

    scratch = QueueStatus(queue=status.queue, layout=status.layout, now_ms=status.now_ms, dead=status.dead)
    audit_dlq(layout, scratch)
    return {f: getattr(scratch, f) for f in AUDIT_FIELDS}, list(scratch.warnings)


#: The ACL grant the exporter needs besides reading the queue keys.
INFO_ACL_HINT = ("the exporter needs INFO (server, replication, memory): grant the ACL user +info "
                 "(ACL SETUSER <user> +info), or use a user with +@read +info")


def _server_info(client) -> dict[str, Any]:
    """INFO server/replication/memory; raises :class:`~jobctl.errors.AuthFailed`
    naming the missing ``+info`` grant when an ACL denies INFO."""
    import redis

    from ..cluster import primaries
    from ..errors import AuthFailed

    client = primaries(client)[0]  # a Redis Cluster: the first primary's INFO (no pipelined INFO there)
    pipe = client.pipeline(transaction=False)
    pipe.info("server")
    pipe.info("replication")
    pipe.info("memory")
    try:
        server, repl, mem = pipe.execute()
    except redis.exceptions.ResponseError as exc:  # NoPermissionError is one
        if "NOPERM" in str(exc).upper() or isinstance(exc, redis.exceptions.NoPermissionError):
            raise AuthFailed(f"ACL denied INFO: {INFO_ACL_HINT}") from None
        raise
    kind = "valkey" if server.get("server_name") == "valkey" or "valkey_version" in server else "redis"
    return {
        "kind": kind,
        "version": str(server.get("valkey_version") or server.get("redis_version") or ""),
        "run_id": str(server.get("run_id") or ""),
        "uptime_s": int(server.get("uptime_in_seconds") or 0),
        "role": str(repl.get("role") or ""),
        "used_memory": int(mem.get("used_memory") or 0),
        "maxmemory": int(mem.get("maxmemory") or 0),
    }


def _slow(layout) -> tuple[dict[str, Histogram], Breakdown | None]:
    hists = {s.value: attempt_histogram(layout, s, exact_bound=HISTOGRAM_BOUND)
             for s in HISTOGRAM_STATES if s in layout.states}
    breakdown = dead_breakdown(layout) if State.DEAD in layout.states else None
    return hists, breakdown


def _translated(exc: Exception, session):
    """``exc`` as a JobctlError; a lost connection is raised (the whole refresh fails)."""
    from ..connection import translate
    from ..errors import ConnectionFailed

    err = translate(exc, session.target)
    if isinstance(err, ConnectionFailed):
        raise err from None
    return err


def take_snapshot(session, names: tuple[str, ...], cache: SlowCache, counters, *,
                  slow_interval_s: float, clock=time.monotonic) -> Snapshot:
    """Read the server once (see the module docstring).

    ``session``: a :class:`~jobctl.session.Session`; ``names``: queues to
    export (empty: the whole catalogue); ``cache``: slow metrics carried
    between refreshes; ``counters``: a
    :class:`~jobctl.metrics.journal_counters.JournalCounters`.  Raises
    :class:`~jobctl.errors.JobctlError` when the server cannot be read.
    """
    from ..layouts.base import now_ms

    started = clock()
    snap = Snapshot(taken_at=time.time())
    with session.errors():
        client = session.reader
        snap.server = _server_info(client)
        queues = session.queues(names)
        now = now_ms()
        layouts = []
        for q in queues:
            qs = QueueSnapshot(queue=q, layout=q.layout)
            try:
                layout = session.read_layout(q)
                qs.status = layout.status_report(now, audit_dead=False)  # the audit is a slow metric
                layouts.append((qs, layout))
            except Exception as exc:  # noqa: BLE001 - one bad queue does not hide the others
                qs.error = str(_translated(exc, session))
            snap.queues.append(qs)
        due = sorted(((cache.entries.get(qs.queue.name, (None,))[0] or -1.0), qs.queue.name)
                     for qs, _ in layouts
                     if qs.queue.name not in cache.entries
                     or clock() - cache.entries[qs.queue.name][0] >= slow_interval_s)
        refresh = {name for _, name in due[:SLOW_QUEUES_PER_REFRESH]}
        for qs, layout in layouts:
            name = qs.queue.name
            if name in refresh:
                try:
                    hists, breakdown = _slow(layout)
                    cache.entries[name] = (clock(), hists, breakdown)
                    if qs.status is not None and not qs.status.errors:
                        cache.dlq[name] = _audit(layout, qs.status)
                except Exception as exc:  # noqa: BLE001 - the depth gauges still count
                    err = _translated(exc, session)
                    qs.error = f"attempts/breakdown: {err}"
            if name in cache.entries:
                at, qs.histograms, qs.breakdown = cache.entries[name]
                qs.slow_at = at
            if name in cache.dlq and qs.status is not None:
                fields, warnings = cache.dlq[name]
                for f, v in fields.items():
                    setattr(qs.status, f, v)
                qs.status.warnings.extend(warnings)
        counters.update(client, {qs.queue.name: layout.journal_key for qs, layout in layouts})
        snap.counters = dict(counters.counts)
    snap.duration_s = clock() - started
    return snap
