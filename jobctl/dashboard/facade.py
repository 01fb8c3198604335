"""The facade a front end calls from worker threads: :class:`Dashboard`.

Every method raises only :class:`~jobctl.errors.JobctlError` (redis-py
errors are translated: :class:`~jobctl.errors.ConnectionFailed` for a
dropped connection or a timeout, :class:`~jobctl.errors.AuthFailed` for an
ACL denial); the next call reconnects.  Operations go through
:class:`jobctl.ops.core.OperationCore` (:meth:`Dashboard.prepare`,
:meth:`Dashboard.apply`).  Times are epoch milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..filter import MATCH_ALL, Filter
from ..model import JobRecord, QueueStatus, State
from .history import HISTORY_LEN, QueueHistory
from .overview import ActiveOp, Overview, TriageCache
from .pages import JobPage, find_jobs
from .schedule import DueDistribution, due_distribution, processing_by_deadline
from .slo import Level, Slo, slo_for, slo_values
from .triage import Triage, triage

if TYPE_CHECKING:
    from ..attempts import Histogram
    from ..layouts.base import Layout
    from ..ops.core import OperationCore, Outcome, Prepared
    from ..ops.plan import Plan
    from ..ops.request import OpRequest
    from ..ops.spec import OpSpec
    from ..session import Session

__all__ = ["QueueRow", "Snapshot", "QueueDetail", "Dashboard", "equivalent_command"]


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


def equivalent_command(spec: "OpSpec | OpRequest", session: "Session | None" = None) -> list[str]:
    """The ``jobctl`` command line that does what ``spec`` does, as argv
    words (the journal's ``command`` of an operation started from the TUI,
    quoted once by :func:`jobctl.ops.journal.command_line`); see
    :func:`jobctl.ops.request.equivalent_command`.  ``session``: its
    ``--url`` (redacted in the journal), ``--profile`` and ``--config``
    come first, so the line runs as printed.  An :class:`OpSpec` is read as
    a request without an export (``--no-export`` for a purge)."""
    from ..ops.request import OpRequest, equivalent_command as of_request

    if not isinstance(spec, OpRequest):
        spec = OpRequest(spec.operation, spec.queue, source=spec.source, target=spec.target,
                         filter_text=spec.filter.text or None, ids=tuple(spec.ids), stuck_only=spec.stuck_only,
                         reason=spec.reason, limit=spec.limit, no_export=True)
    return of_request(spec, global_args=_session_args(session))


def _session_args(session: "Session | None") -> tuple[str, ...]:
    """The global options that point a ``jobctl`` command at ``session``'s server and catalogue."""
    if session is None:
        return ()
    out: list[str] = []
    if session.url:
        out += ["--url", session.url]
    elif session.profile:
        out += ["--profile", session.profile]
    if session.config_file:
        out += ["--config", str(session.config_file)]
    return tuple(out)


class Dashboard:
    """What the TUI asks for, headless and thread-safe enough to be called
    from worker threads.

    ``clock()`` gives "now" in epoch ms (injectable for tests).  Every method
    raises :class:`~jobctl.errors.JobctlError` only; a connection failure
    leaves the object usable and the next call reconnects.  Raises
    :class:`~jobctl.errors.ConfigError` at construction for a bad SLO.
    """

    def __init__(self, session: "Session", *, clock: Callable[[], int] | None = None,
                 history_len: int = HISTORY_LEN, histogram_bound: int = 20_000,
                 prometheus_url: str | None = None) -> None:
        from ..layouts.base import now_ms

        self.session = session
        self._prometheus_url = prometheus_url
        self.clock = clock or now_ms
        self.history_len = history_len
        self.histogram_bound = histogram_bound
        self._histories: dict[str, QueueHistory] = {}
        self._triages = TriageCache()
        self._active: dict[str, ActiveOp] = {}
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

    @property
    def prometheus_url(self) -> str | None:
        """Where the history's last hours come from: the ``prometheus_url``
        given at construction, else the profile's (``None``: nowhere)."""
        if self._prometheus_url:
            return self._prometheus_url
        profile = self.session.target.profile
        return profile.prometheus_url if profile is not None else None

    def load_prometheus_history(self, queues: list[str], *, window_ms: int | None = None) -> dict[str, int]:
        """Fill the history of ``queues`` with the last ``window_ms`` (default
        3 h) of the exporter's gauges read from :attr:`prometheus_url`
        (:func:`~jobctl.dashboard.prom_history.load_history`, one HTTP GET, no
        Redis); returns the samples added per queue.  Raises
        :class:`~jobctl.dashboard.prom_history.PrometheusError` (one line)."""
        from .prom_history import DEFAULT_WINDOW_MS, PrometheusError, load_history

        url = self.prometheus_url
        if not url:
            raise PrometheusError("no prometheus_url configured")
        got = load_history(url, queues, now_ms=self.clock(), window_ms=window_ms or DEFAULT_WINDOW_MS)
        return {q: self.history(q).prepend(samples) for q, samples in got.items()}

    # -- reads ---------------------------------------------------------------
    def refresh(self) -> Snapshot:
        """Read every queue's status, record it in the history and return the
        rows.  A queue whose keys hold the wrong type gets ``error`` set; a
        connection or ACL failure raises."""
        from ..errors import DataError

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
        from ..attempts import attempt_histogram

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

    def overview(self, snap: Snapshot) -> Overview:
        """The dashboard's side panels for the queues of ``snap``
        (:mod:`jobctl.dashboard.overview`): the top error groups across
        their DLQs (bounded, cached triage), the operations this dashboard is
        applying, the holds ``snap`` read, and the newest journal entries."""
        from ..errors import AccessDenied
        from ..ops.journal import read_entries
        from .overview import JOURNAL_ROWS, holds_of, journal_rows, running_walks, top_errors

        def run() -> Overview:
            now = self.clock()
            notes: list[str] = []

            def allowed(fn: Callable[[], Any], default: Any) -> Any:
                """``fn()``; an ACL refusal is a note (once per read) and ``default``."""
                try:
                    with self.session.errors():
                        return fn()
                except AccessDenied as exc:
                    notes.append(str(exc).splitlines()[0])
                    return default

            layouts = {r.name: self.session.layout(r.name) for r in snap.rows if r.status is not None}
            with_dead = {q: lay for q, lay in layouts.items() if State.DEAD in lay.states}
            allowed(lambda: self._triages.refresh(with_dead, now), None)
            triages = self._triages.get(list(with_dead))
            entries = allowed(lambda: read_entries(self.session.client, [lay.journal_key for lay in layouts.values()],
                                                   JOURNAL_ROWS), [])
            with self._lock:
                active = [ActiveOp(**vars(op)) for op in self._active.values()]
            active += allowed(lambda: running_walks(layouts, {op.op_id for op in active}), [])
            return Overview(at_ms=now, errors=top_errors(triages), sampled=any(t.sampled for t in triages),
                            triaged=len(triages), queues=len(with_dead), active=active, holds=holds_of(snap),
                            journal=journal_rows(entries), notes=notes)

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
        from ..ops.journal import read_entries

        return self._call(lambda: read_entries(self.session.client, [self.session.layout(name).journal_key],
                                               limit))

    # -- operations (through the operations core) ---------------------------
    def core(self) -> "OperationCore":
        """The :class:`~jobctl.ops.core.OperationCore` of this session, planning at :attr:`clock`."""
        from ..ops.core import OperationCore

        return OperationCore(self.session, clock=self.clock)

    def plan(self, spec: "OpSpec") -> "Plan":
        """Plan ``spec`` (reads only; allowed in read-only mode)."""
        return self._call(lambda: self.session.layout(spec.queue).plan(spec, now=self.clock()))

    def prepare(self, request: "OpRequest", *, note: Callable[[str], None] | None = None) -> "Prepared":
        """:meth:`OperationCore.prepare <jobctl.ops.core.OperationCore.prepare>`:
        the request's policies (every refusal of the CLI, from the same
        core) and plan; nothing is written: a purge's (drain's) export is
        only planned (:attr:`Prepared.export_pending`), :meth:`apply` writes
        it once confirmed."""
        return self._call(lambda: self.core().prepare(request, note=note, defer_export=True))

    def apply(self, prepared: "Prepared", *, stop: Callable[[], bool] | None = None,
              progress: Callable[[int, int], None] | None = None, rate: float | None = None,
              batch: int | None = None, note: Callable[[str], None] | None = None) -> "Outcome":
        """:meth:`OperationCore.apply <jobctl.ops.core.OperationCore.apply>` of
        a confirmed plan (its pending export written first), journaled with
        :func:`equivalent_command` as the command.  Raises
        :class:`~jobctl.errors.ReadOnlyRefused` in read-only mode."""
        argv = equivalent_command(prepared.request, self.session)
        op = ActiveOp(op_id=prepared.spec.op_id, operation=prepared.request.operation.value,
                      queue=prepared.request.queue, total=prepared.plan.planned, started_ms=self.clock())

        def track(done: int, total: int) -> None:  # the overview's progress, then the caller's
            op.done, op.total = done, total
            if progress is not None:
                progress(done, total)

        with self._lock:
            self._active[op.op_id] = op
        try:
            return self._call(lambda: self.core().apply(prepared, stop=stop, progress=track, rate=rate,
                                                        batch=batch, argv=argv, note=note))
        finally:
            with self._lock:
                self._active.pop(op.op_id, None)
