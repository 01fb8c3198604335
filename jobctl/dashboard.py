"""Headless data behind the live dashboard (the TUI draws it; this module
never imports textual, and the TUI never talks to Redis except through it).

What it holds:

* :class:`QueueHistory`: per-queue status samples since the dashboard
  opened, for the depth and oldest-ready-age sparklines and the DLQ growth
  rate (dead jobs per minute over the last :data:`GROWTH_WINDOW_MS`);
* :class:`Slo`: per-queue thresholds read from the config's queue options,
  ``[queues.<name>.slo]`` (no schema change: they ride in
  :attr:`~jobctl.config.QueueConfig.options`), evaluated into a
  :class:`Level` per metric;
* :func:`triage`: the dead-letter queue grouped by job type x error code with
  counts and first/last seen (seed 000 section 22: "classify first");
* :func:`due_distribution` and :func:`processing_by_deadline`: the scheduled
  due-time buckets and the processing jobs in order of time left to their
  visibility deadline;
* :class:`Dashboard`: the facade a front end calls from worker threads.
  Every method raises only :class:`~jobctl.errors.JobctlError` (redis-py
  errors are translated: :class:`~jobctl.errors.ConnectionFailed` for a
  dropped connection or a timeout, :class:`~jobctl.errors.AuthFailed` for an
  ACL denial); the next call reconnects.

Times are epoch milliseconds; ages and durations milliseconds.  SLO config::

    [queues.email.slo]
    oldest_ready_age = "5m"                  # breach at >= 5 minutes
    dead = { warn = 100, breach = 1000 }     # warn and breach levels
    dead_growth = 50                         # dead jobs per minute
    stuck = 1

Metrics: ``ready``, ``scheduled``, ``scheduled_overdue``, ``processing``,
``stuck``, ``dead``, ``suppressed`` (job counts), ``oldest_ready_age``,
``scheduled_overdue_max_age`` (durations: ``"5m"``, or a number of seconds)
and ``dead_growth`` (dead jobs per minute).  A bare value is the breach
level; a table gives ``warn`` and/or ``breach``.  Without configuration a
queue gets :data:`DEFAULT_SLO` (any stuck job breaches; a scheduled job
overdue by a minute or more, i.e. scheduler lag, warns); configured metrics
replace those defaults one by one.
"""

from __future__ import annotations

import shlex
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, JobctlError, UsageError
from .filter import MATCH_ALL, Filter
from .model import JobRecord, QueueStatus, State, parse_envelope

if TYPE_CHECKING:
    from .attempts import Histogram
    from .config import QueueConfig
    from .layouts.base import Layout
    from .ops.engine import RunResult
    from .ops.plan import Plan
    from .ops.spec import OpSpec
    from .session import Session

__all__ = [
    "Level", "Threshold", "Slo", "SLO_METRICS", "DEFAULT_SLO", "slo_for",
    "Sample", "QueueHistory", "GROWTH_WINDOW_MS", "HISTORY_LEN",
    "TriageGroup", "Triage", "triage", "group_filter_text", "quote_filter_value",
    "DUE_BUCKETS", "DueDistribution", "due_distribution", "processing_by_deadline",
    "JobPage", "find_jobs", "QueueRow", "Snapshot", "QueueDetail", "Dashboard",
    "equivalent_command",
]

#: Samples kept per queue (at a 1 s refresh: the last 10 minutes).
HISTORY_LEN = 600
#: The DLQ growth rate is measured over this trailing window (ms).
GROWTH_WINDOW_MS = 60_000
#: Dead jobs read exactly by :func:`triage`; beyond, a sample is scaled up.
TRIAGE_EXACT_BOUND = 50_000
#: Jobs examined at most by a filtered :func:`find_jobs`.
FIND_SCAN_BOUND = 50_000


# ---------------------------------------------------------------------------
# SLO thresholds
# ---------------------------------------------------------------------------


class Level(str, Enum):
    """How a metric stands against its SLO."""

    OK = "ok"
    WARN = "warn"
    BREACH = "breach"


#: SLO metric name -> kind (``count``, ``duration`` in ms, ``rate`` per minute).
SLO_METRICS: dict[str, str] = {
    "ready": "count",
    "scheduled": "count",
    "scheduled_overdue": "count",
    "processing": "count",
    "stuck": "count",
    "dead": "count",
    "suppressed": "count",
    "oldest_ready_age": "duration",
    "scheduled_overdue_max_age": "duration",
    "dead_growth": "rate",
}


@dataclass(frozen=True)
class Threshold:
    """``warn``/``breach`` levels (same unit as the metric); ``None``: unset."""

    warn: float | None = None
    breach: float | None = None

    def level(self, value: float | None) -> Level:
        """:class:`Level` of ``value`` (``None``, i.e. unknown, is OK)."""
        if value is None:
            return Level.OK
        if self.breach is not None and value >= self.breach:
            return Level.BREACH
        if self.warn is not None and value >= self.warn:
            return Level.WARN
        return Level.OK


#: Thresholds every queue has unless its config says otherwise.
DEFAULT_SLO: dict[str, Threshold] = {
    "stuck": Threshold(breach=1),
    "scheduled_overdue_max_age": Threshold(warn=60_000),
}


def _slo_value(where: str, metric: str, value: Any) -> float:
    kind = SLO_METRICS[metric]
    if kind == "duration" and isinstance(value, str):
        from .durations import parse_duration

        try:
            return float(parse_duration(value))
        except UsageError as exc:
            raise ConfigError(f"{where}: {metric}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        want = "a duration like \"5m\" or seconds" if kind == "duration" else "a number >= 0"
        raise ConfigError(f"{where}: {metric} must be {want}, got {value!r}")
    return float(value) * (1000 if kind == "duration" else 1)


@dataclass(frozen=True)
class Slo:
    """The thresholds of one queue: metric name -> :class:`Threshold`."""

    thresholds: dict[str, Threshold] = field(default_factory=lambda: dict(DEFAULT_SLO))

    @classmethod
    def from_options(cls, options: dict[str, Any], *, where: str = "slo") -> "Slo":
        """Parse ``options["slo"]`` (see the module docstring) over the defaults.

        Raises :class:`~jobctl.errors.ConfigError` naming ``where`` for an
        unknown metric or a bad value.
        """
        raw = options.get("slo")
        merged = dict(DEFAULT_SLO)
        if raw is None:
            return cls(merged)
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table")
        for metric, value in raw.items():
            if metric not in SLO_METRICS:
                known = ", ".join(SLO_METRICS)
                raise ConfigError(f"{where}: unknown metric {metric!r} (known: {known})")
            if isinstance(value, dict):
                unknown = set(value) - {"warn", "breach"}
                if unknown:
                    raise ConfigError(f"{where}: {metric}: unknown key {sorted(unknown)[0]!r} "
                                      "(use warn and breach)")
                th = Threshold(
                    warn=None if value.get("warn") is None else _slo_value(where, metric, value["warn"]),
                    breach=None if value.get("breach") is None else _slo_value(where, metric, value["breach"]))
            else:
                th = Threshold(breach=_slo_value(where, metric, value))
            merged[metric] = th
        return cls(merged)

    def evaluate(self, values: dict[str, float | None]) -> dict[str, Level]:
        """``{metric: Level}`` for every metric in ``values`` with a threshold."""
        return {m: th.level(values.get(m)) for m, th in self.thresholds.items() if m in values}


def slo_for(queue: "QueueConfig", path: Any = None) -> Slo:
    """The :class:`Slo` of a catalogue entry (``[queues.<name>.slo]``)."""
    where = f"config {path}: [queues.{queue.name}.slo]" if path else f"[queues.{queue.name}.slo]"
    return Slo.from_options(queue.options, where=where)


def slo_values(status: QueueStatus, dead_growth: float | None) -> dict[str, float | None]:
    """The SLO metric values of one status sample."""
    return {
        "ready": status.ready, "scheduled": status.scheduled,
        "scheduled_overdue": status.scheduled_overdue, "processing": status.processing,
        "stuck": status.stuck, "dead": status.dead, "suppressed": status.suppressed,
        "oldest_ready_age": status.oldest_ready_age_ms,
        "scheduled_overdue_max_age": status.scheduled_overdue_max_age_ms,
        "dead_growth": dead_growth,
    }


# ---------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One status reading of one queue at ``at_ms``."""

    at_ms: int
    ready: int
    scheduled: int
    processing: int
    stuck: int
    dead: int
    oldest_ready_age_ms: int | None

    @classmethod
    def of(cls, status: QueueStatus) -> "Sample":
        return cls(status.now_ms, status.ready, status.scheduled, status.processing, status.stuck,
                   status.dead, status.oldest_ready_age_ms)


class QueueHistory:
    """The last ``maxlen`` samples of one queue (thread-safe)."""

    def __init__(self, maxlen: int = HISTORY_LEN) -> None:
        self._samples: deque[Sample] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def add(self, status: QueueStatus) -> None:
        with self._lock:
            self._samples.append(Sample.of(status))

    @property
    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def series(self, name: str) -> list[int | None]:
        """Values of one :class:`Sample` field, oldest first."""
        return [getattr(s, name) for s in self.samples]

    def dead_growth_per_min(self, window_ms: int = GROWTH_WINDOW_MS) -> float | None:
        """Change of the DLQ depth per minute over the trailing ``window_ms``.

        Negative after a redrive or purge.  ``None`` until two samples at
        least one second apart exist.
        """
        samples = self.samples
        if len(samples) < 2:
            return None
        last = samples[-1]
        first = next((s for s in samples if s.at_ms >= last.at_ms - window_ms), samples[0])
        if first is last:
            first = samples[-2]
        dt = last.at_ms - first.at_ms
        if dt < 1000:
            return None
        return (last.dead - first.dead) * 60_000 / dt


# ---------------------------------------------------------------------------
# Triage of the dead-letter queue
# ---------------------------------------------------------------------------


def quote_filter_value(value: str) -> str:
    """``value`` as a quoted string literal of the filter language."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'


def group_filter_text(job_type: str | None, error: str | None) -> str:
    """The filter that selects one triage group, e.g.
    ``type = "webhook.deliver" and error = "HTTP_503"``.  A missing field is
    matched by ``not <field> ~ "*"`` (a missing value never matches ``~``)."""
    parts = []
    for name, value in (("type", job_type), ("error", error)):
        parts.append(f'not {name} ~ "*"' if value is None else f"{name} = {quote_filter_value(value)}")
    return " and ".join(parts)


@dataclass
class TriageGroup:
    """Dead jobs sharing a job type and last error code.

    ``count`` is exact unless the triage was sampled (then scaled);
    ``first_seen_ms``/``last_seen_ms`` are the earliest/latest time a job of
    the group became dead (its ``lastAttemptAtEpochMs``; ``None`` if no job
    said).  ``tenants`` counts the jobs read per tenant; ``sample_ids`` holds
    up to 20 ids.
    """

    job_type: str | None
    error: str | None
    count: int = 0
    first_seen_ms: int | None = None
    last_seen_ms: int | None = None
    tenants: Counter = field(default_factory=Counter)
    sample_ids: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        """A stable key for this group (``type|error``)."""
        return f"{self.job_type or ''}|{self.error or ''}"

    @property
    def filter_text(self) -> str:
        return group_filter_text(self.job_type, self.error)

    def top_tenants(self, n: int = 2) -> list[tuple[str, int]]:
        return self.tenants.most_common(n)


@dataclass
class Triage:
    """The DLQ (``state``: dead or suppressed) grouped for triage at ``now_ms``.

    ``depth`` is the state's size, ``read`` the envelopes read, ``matched``
    the jobs that passed ``filter_text``; ``sampled`` says the counts are
    scaled from a random sample (the state held more than the exact bound).
    ``malformed`` counts jobs whose envelope did not parse (never redriven;
    they are not in any group).
    """

    queue: str
    state: str
    now_ms: int
    depth: int = 0
    read: int = 0
    matched: int = 0
    sampled: bool = False
    malformed: int = 0
    filter_text: str = ""
    groups: list[TriageGroup] = field(default_factory=list)

    def group(self, key: str) -> TriageGroup | None:
        return next((g for g in self.groups if g.key == key), None)


def triage(layout: "Layout", *, flt: Filter = MATCH_ALL, now: int, state: State = State.DEAD,
           exact_bound: int = TRIAGE_EXACT_BOUND) -> Triage:
    """Group ``state`` of ``layout`` by (job type, last error code).

    Reads the whole state in batches (``layout.iter_batches``) when it holds
    at most ``exact_bound`` jobs, else random windows whose counts are scaled
    to the depth.  Groups are sorted by count, largest first.
    """
    from .attempts import SAMPLE_WINDOW, SAMPLE_WINDOWS

    depth = layout.depth(state)
    out = Triage(queue=layout.queue_name, state=state.value, now_ms=now, depth=depth,
                 filter_text=flt.text)
    sample = None
    if depth > exact_bound:
        out.sampled = True
        sample = (SAMPLE_WINDOWS, SAMPLE_WINDOW)
    groups: dict[tuple[str | None, str | None], TriageGroup] = {}
    for batch in layout.iter_batches(state, batch=1000, sample=sample):
        for rec in batch:
            out.read += 1
            env = rec.envelope
            if env.problems:
                out.malformed += 1
                continue
            if not flt.matches(rec, now):
                continue
            out.matched += 1
            k = (env.job_type, env.last_error_code)
            g = groups.get(k)
            if g is None:
                g = groups[k] = TriageGroup(job_type=k[0], error=k[1])
            g.count += 1
            if env.tenant_id:
                g.tenants[env.tenant_id] += 1
            seen = rec.meta.get("dead_since_ms", env.last_attempt_ms)
            if seen is not None:
                g.first_seen_ms = seen if g.first_seen_ms is None else min(g.first_seen_ms, seen)
                g.last_seen_ms = seen if g.last_seen_ms is None else max(g.last_seen_ms, seen)
            if len(g.sample_ids) < 20:
                g.sample_ids.append(rec.job_id)
    if out.sampled and out.read:
        scale = depth / out.read
        for g in groups.values():
            g.count = round(g.count * scale)
        out.malformed = round(out.malformed * scale)
        out.matched = round(out.matched * scale)
    out.groups = sorted(groups.values(), key=lambda g: (-g.count, g.job_type or "", g.error or ""))
    return out


# ---------------------------------------------------------------------------
# Scheduled due times and processing deadlines
# ---------------------------------------------------------------------------

#: (label, lower bound, upper bound) of due time minus now, in ms; ``None``
#: is unbounded.  A job falls in the bucket with ``lo <= due - now < hi``.
DUE_BUCKETS: tuple[tuple[str, int | None, int | None], ...] = (
    ("overdue", None, 0),
    ("< 1m", 0, 60_000),
    ("1m-5m", 60_000, 300_000),
    ("5m-15m", 300_000, 900_000),
    ("15m-1h", 900_000, 3_600_000),
    ("1h-6h", 3_600_000, 21_600_000),
    ("6h-24h", 21_600_000, 86_400_000),
    ("> 24h", 86_400_000, None),
)


@dataclass
class DueDistribution:
    """Scheduled jobs per :data:`DUE_BUCKETS` bucket at ``now_ms``."""

    now_ms: int
    counts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


def due_distribution(layout: "Layout", now: int) -> DueDistribution:
    """Count scheduled jobs per due-time bucket.

    Reliable-list: one pipelined ``ZCOUNT`` per bucket and shard (exact,
    independent of depth).  Other layouts: their scheduled jobs' scores
    from ``iter_batches`` (bounded windows).
    """
    out = DueDistribution(now_ms=now)
    shards = getattr(layout, "shards", None)
    if layout.name == "reliable-list" and shards:
        pipe = layout.client.pipeline(transaction=False)
        for keys in shards:
            for _, lo, hi in DUE_BUCKETS:
                pipe.zcount(keys.scheduled, "-inf" if lo is None else now + lo,
                            "+inf" if hi is None else f"({now + hi}")
        res = pipe.execute()
        n = len(DUE_BUCKETS)
        for i, (label, _, _) in enumerate(DUE_BUCKETS):
            out.counts.append((label, sum(res[s * n + i] for s in range(len(shards)))))
        return out
    counts = Counter()
    for batch in layout.iter_batches(State.SCHEDULED, batch=1000):
        for rec in batch:
            if rec.score is None:
                continue
            delta = rec.score - now
            for label, lo, hi in DUE_BUCKETS:
                if (lo is None or delta >= lo) and (hi is None or delta < hi):
                    counts[label] += 1
                    break
    out.counts = [(label, counts[label]) for label, _, _ in DUE_BUCKETS]
    return out


def processing_by_deadline(layout: "Layout", limit: int = 200) -> list[JobRecord]:
    """Up to ``limit`` processing jobs, least time left to the visibility
    deadline first (stuck jobs, whose deadline passed, come first).

    Reliable-list: ``ZRANGE processing:deadline 0 limit-1 WITHSCORES`` per
    shard plus one ``MGET`` of the envelopes.  Other layouts: the oldest
    claims from ``list_jobs`` sorted by deadline.
    """
    shards = getattr(layout, "shards", None)
    if layout.name != "reliable-list" or not shards:
        recs = layout.list_jobs(State.PROCESSING, limit)
        return sorted(recs, key=lambda r: (r.deadline_ms is None, r.deadline_ms or 0))
    records: list[JobRecord] = []
    for keys in shards:
        pairs = layout.client.zrange(keys.deadline, 0, limit - 1, withscores=True)
        if not pairs:
            continue
        ids = [m.decode("utf-8", "surrogateescape") if isinstance(m, bytes) else m for m, _ in pairs]
        raws = layout.client.mget([keys.job(i) for i in ids])
        for (_, score), job_id, raw in zip(pairs, ids, raws):
            records.append(JobRecord(queue=layout.queue_name, layout=layout.name, shard=keys.tag,
                                     job_id=job_id, state=State.PROCESSING, envelope=parse_envelope(raw),
                                     raw=raw, deadline_ms=int(score)))
    records.sort(key=lambda r: (r.deadline_ms, r.job_id))
    return records[:limit]


# ---------------------------------------------------------------------------
# Job lists with a filter
# ---------------------------------------------------------------------------


@dataclass
class JobPage:
    """Jobs of one state that pass ``filter_text`` (at most ``limit``).

    ``scanned`` jobs were examined; ``complete`` is False when the walk
    stopped at the limit or the scan bound before the end of the state.
    """

    queue: str
    state: str
    filter_text: str
    now_ms: int
    records: list[JobRecord] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True


_PAGE_ORDER: dict[State, Callable[[JobRecord], Any]] = {
    State.READY: lambda r: r.position if r.position is not None else 0,
    State.SCHEDULED: lambda r: r.score or 0,
    State.PROCESSING: lambda r: (r.deadline_ms is None, r.deadline_ms or 0),
    State.DEAD: lambda r: -(r.meta.get("dead_since_ms") or r.envelope.last_attempt_ms or 0),
    State.SUPPRESSED: lambda r: -(r.score or 0),
}


def find_jobs(layout: "Layout", state: State, *, flt: Filter = MATCH_ALL, now: int, limit: int = 200,
              scan_bound: int = FIND_SCAN_BOUND) -> JobPage:
    """Jobs of ``state`` in serving order; with a filter, the first ``limit``
    matches of a walk over at most ``scan_bound`` jobs (shown in the
    state's order: dead newest first, scheduled earliest due first...)."""
    page = JobPage(queue=layout.queue_name, state=state.value, filter_text=flt.text, now_ms=now)
    if flt.is_match_all:
        page.records = layout.list_jobs(state, limit, now=now)
        page.scanned = len(page.records)
        page.complete = len(page.records) < limit
        return page
    for batch in layout.iter_batches(state, batch=1000):
        for rec in batch:
            page.scanned += 1
            if flt.matches(rec, now):
                page.records.append(rec)
                if len(page.records) >= limit:
                    page.complete = False
                    break
        if not page.complete:
            break
        if page.scanned >= scan_bound:
            page.complete = False
            break
    page.records.sort(key=_PAGE_ORDER.get(state, lambda r: 0))
    return page


# ---------------------------------------------------------------------------
# The facade
# ---------------------------------------------------------------------------


@dataclass
class QueueRow:
    """One dashboard row: the latest status (``None`` if it could not be
    read: ``error`` says why), SLO levels, DLQ growth and sparkline series."""

    name: str
    status: QueueStatus | None
    error: str | None = None
    dead_growth_per_min: float | None = None
    levels: dict[str, Level] = field(default_factory=dict)
    depth_series: list[int] = field(default_factory=list)
    age_series: list[int | None] = field(default_factory=list)


@dataclass
class Snapshot:
    """Every queue at ``at_ms`` (one dashboard refresh)."""

    at_ms: int
    rows: list[QueueRow] = field(default_factory=list)
    catalogue: str = "config"

    def row(self, name: str) -> QueueRow | None:
        return next((r for r in self.rows if r.name == name), None)


@dataclass
class QueueDetail:
    """The queue screen's live part: status, processing jobs by time left
    (at most ``limit``), the scheduled due-time distribution, and the
    states the queue's layout has."""

    queue: str
    now_ms: int
    status: QueueStatus
    processing: list[JobRecord]
    due: DueDistribution
    states: tuple[State, ...] = ()


def equivalent_command(spec: "OpSpec") -> list[str]:
    """The CLI command line that does what ``spec`` does, shell-quoted (the
    journal's ``command`` of an operation started from the TUI)."""
    from .ops.spec import Operation

    argv = ["jobctl-tui", spec.operation.value, spec.queue]
    if spec.operation is Operation.PURGE:
        argv += ["--state", spec.source.value, "--no-export"]
    if spec.operation is Operation.REQUEUE and spec.stuck_only:
        argv.append("--stuck")
    if spec.operation is Operation.REDRIVE and spec.target is not None and spec.target.value != "ready":
        argv += ["--to", spec.target.value]
    for job_id in spec.ids[:20]:
        argv += ["--ids", job_id]
    if not spec.filter.is_match_all:
        argv += ["--filter", spec.filter.text]
    if spec.reason:
        argv += ["--reason", spec.reason]
    if spec.limit:
        argv += ["--limit", str(spec.limit)]
    return [shlex.quote(a) for a in argv]


class Dashboard:
    """What the TUI asks for, headless and thread-safe enough to be called
    from worker threads.

    ``clock()`` gives "now" in epoch ms (injectable for tests).  Every method
    raises :class:`~jobctl.errors.JobctlError` only; a connection failure
    leaves the object usable and the next call reconnects.  Raises
    :class:`~jobctl.errors.ConfigError` at construction for a bad SLO.
    """

    def __init__(self, session: "Session", *, clock: Callable[[], int] | None = None,
                 history_len: int = HISTORY_LEN, histogram_bound: int = 20_000) -> None:
        from .layouts.base import now_ms

        self.session = session
        self.clock = clock or now_ms
        self.history_len = history_len
        self.histogram_bound = histogram_bound
        self._histories: dict[str, QueueHistory] = {}
        self._slos: dict[str, Slo] = {}
        self._lock = threading.Lock()
        # validate configured SLOs now: a bad config fails at start-up
        for q in session.config.queues.values():
            self._slos[q.name] = slo_for(q, session.config.path)

    # -- connection --------------------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        with self.session.errors():
            with self._lock:
                self.session.client  # noqa: B018 - connect (once) outside the worker race
            return fn()

    def queue_names(self) -> list[str]:
        """Catalogue queue names (may run a bounded discovery once)."""
        return self._call(lambda: [q.name for q in self.session.catalogue()])

    def layout(self, name: str) -> "Layout":
        return self._call(lambda: self.session.layout(name))

    def slo(self, name: str) -> Slo:
        s = self._slos.get(name)
        if s is None:
            q = self._call(lambda: self.session.queue(name))
            s = self._slos[name] = slo_for(q)
        return s

    def history(self, name: str) -> QueueHistory:
        with self._lock:
            h = self._histories.get(name)
            if h is None:
                h = self._histories[name] = QueueHistory(self.history_len)
            return h

    # -- reads ---------------------------------------------------------------
    def refresh(self) -> Snapshot:
        """Read every queue's status, record it in the history and return the
        rows.  A queue whose keys hold the wrong type gets ``error`` set; a
        connection or ACL failure raises."""
        from .errors import DataError

        def run() -> Snapshot:
            queues = self.session.catalogue()
            now = self.clock()
            snap = Snapshot(at_ms=now, catalogue="config" if self.session.config.queues else "discovered")
            for q in queues:
                try:
                    st = self.session.layout(q).status_report(now=now)
                except DataError as exc:
                    snap.rows.append(QueueRow(name=q.name, status=None, error=str(exc)))
                    continue
                snap.rows.append(self._row(q.name, st))
            return snap

        return self._call(run)

    def _row(self, name: str, st: QueueStatus) -> QueueRow:
        hist = self.history(name)
        hist.add(st)
        growth = hist.dead_growth_per_min()
        return QueueRow(name=name, status=st, error="; ".join(st.errors) or None, dead_growth_per_min=growth,
                        levels=self.slo(name).evaluate(slo_values(st, growth)),
                        depth_series=[s.ready for s in hist.samples],
                        age_series=[s.oldest_ready_age_ms for s in hist.samples])

    def queue_detail(self, name: str, *, limit: int = 200) -> QueueDetail:
        """Status, processing jobs by time left and the due distribution."""
        def run() -> QueueDetail:
            layout = self.session.layout(name)
            now = self.clock()
            has = set(layout.states)
            return QueueDetail(queue=name, now_ms=now, status=layout.status_report(now=now),
                               processing=processing_by_deadline(layout, limit) if State.PROCESSING in has else [],
                               due=due_distribution(layout, now) if State.SCHEDULED in has
                               else DueDistribution(now_ms=now), states=tuple(layout.states))

        return self._call(run)

    def histograms(self, name: str,
                   states: Iterable[State] = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD),
                   ) -> dict[str, "Histogram"]:
        """Attempt histogram per state the layout has
        (:func:`jobctl.attempts.attempt_histogram`, exact up to
        ``histogram_bound`` jobs per state, sampled beyond)."""
        from .attempts import attempt_histogram

        def run() -> dict[str, Histogram]:
            layout = self.session.layout(name)
            return {s.value: attempt_histogram(layout, s, exact_bound=self.histogram_bound)
                    for s in states if s in layout.states}

        return self._call(run)

    def triage(self, name: str, flt: Filter = MATCH_ALL, state: State = State.DEAD) -> Triage:
        """:func:`triage` of the queue's DLQ (empty for a layout without one)."""
        def run() -> Triage:
            layout = self.session.layout(name)
            if state not in layout.states:
                return Triage(queue=name, state=state.value, now_ms=self.clock(), filter_text=flt.text)
            return triage(layout, flt=flt, now=self.clock(), state=state)

        return self._call(run)

    def jobs(self, name: str, state: State, flt: Filter = MATCH_ALL, limit: int = 200) -> JobPage:
        """:func:`find_jobs` on the queue."""
        return self._call(lambda: find_jobs(self.session.layout(name), state, flt=flt, now=self.clock(),
                                            limit=limit))

    def inspect(self, name: str, job_id: str) -> JobRecord:
        """``Layout.inspect``; raises :class:`~jobctl.errors.NotFound`."""
        return self._call(lambda: self.session.layout(name).inspect(job_id))

    def journal(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """Newest entries of the queue's journal stream, newest first."""
        from .ops.journal import read_entries

        return self._call(lambda: read_entries(self.session.client, [self.session.layout(name).journal_key],
                                               limit))

    # -- operations ------------------------------------------------------------
    def plan(self, spec: "OpSpec") -> "Plan":
        """Plan ``spec`` (reads only; allowed in read-only mode)."""
        return self._call(lambda: self.session.layout(spec.queue).plan(spec, now=self.clock()))

    def run(self, plan: "Plan", *, stop: Callable[[], bool] | None = None,
            progress: Callable[[int, int], None] | None = None, rate: float | None = None,
            batch: int | None = None) -> "RunResult":
        """Apply ``plan`` with :func:`jobctl.ops.engine.run_plan` (same
        engine and journal as the CLI).  Raises
        :class:`~jobctl.errors.ReadOnlyRefused` in read-only mode."""
        from .ops.engine import run_plan

        self.session.require_writable(plan.spec.operation.value)
        return self._call(lambda: run_plan(self.session.layout(plan.spec.queue), plan, stop=stop,
                                           progress=progress, rate=rate, batch=batch,
                                           target=self.session.target,
                                           argv=equivalent_command(plan.spec)))
