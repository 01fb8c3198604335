"""The dashboard: every queue on one screen.

Columns, most important first (a narrow terminal drops them from the end,
never cutting a number): dead, DLQ growth rate, oldest-ready age, stuck,
ready (with ``+N paused, M held`` when ``jobctl pause`` holds jobs back),
processing, scheduled, overdue, suppressed; below, a chart of dead, ready
depth, DLQ growth or oldest-ready age per queue since the TUI opened (and
the hours before, from a configured Prometheus) (:mod:`.history_chart`,
``c`` cycles it), beside it the top error groups, running operations and
holds, and recent journal entries (:mod:`.overview_panels`; one summary
line on a terminal narrower than :data:`~.overview_panels.WIDE`); below
the table, each active hold (its filter, age and reason).  Cells are coloured by the queue's
SLO (:class:`jobctl.dashboard.Slo`): yellow at ``warn``, red at ``breach``.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Static

from jobctl.dashboard import QueueRow, Snapshot
from jobctl.dashboard.overview import Overview
from jobctl.dashboard.prom_history import DEFAULT_WINDOW_MS
from jobctl.ops.spec import Operation
from jobctl.thresholds import cell_levels

from . import format as fmt
from .actions import OPERATIONS, operation_bindings, queue_wide_requests
from .footer import KeyFooter
from .history_chart import HistoryChart
from .overview_panels import WIDE, OverviewPanels, summary_line
from .widgets import TopBar, TroubleBanner, VimTable

__all__ = ["DashboardScreen", "COLUMNS"]

#: (column key, header), most important first: a narrow terminal drops columns from the end.
COLUMNS = (
    ("queue", "queue"), ("dead", "dead"), ("growth", "DLQ growth"), ("age", "oldest ready"),
    ("stuck", "stuck"), ("ready", "ready"), ("processing", "processing"), ("scheduled", "scheduled"),
    ("overdue", "overdue"), ("suppressed", "suppr."),
)
#: Columns of text (left-aligned); the others are numbers.
TEXT_COLUMNS = ("queue",)


def row_cells(row: QueueRow) -> tuple:
    """The table cells of one queue (rich Text, styled by SLO level)."""
    lv = row.levels
    name = Text(row.name, style="bold")
    st = row.status
    if st is None:
        return (name, Text(row.error or "unreadable", style="red"), *[""] * (len(COLUMNS) - 2))
    if st.shards > 1:
        name.append(f" ×{st.shards}", style="dim")
    if row.error:
        name.append(" !", style="bold red")
    ready = fmt.count(st.ready)
    if st.ready_by_priority:
        ready += " (" + " ".join(f"{k}:{v:,}" for k, v in sorted(st.ready_by_priority.items())) + ")"
    paused, holds = getattr(st, "paused", 0), getattr(st, "held_filters", None) or []
    if paused or holds:  # jobctl pause: only when something is paused or held
        ready += f" +{paused:,} paused" + (f", {len(holds)} held" if holds else "")
    overdue = fmt.count(st.scheduled_overdue)
    if st.scheduled_overdue and st.scheduled_overdue_max_age_ms is not None:
        overdue += f" ({fmt.age(st.scheduled_overdue_max_age_ms)})"
    overdue_level = cell_levels(lv)["overdue"]  # the worst of count and age (jobctl.thresholds, as the CLI)
    return (
        name,
        fmt.styled(fmt.count(st.dead), lv.get("dead")),
        fmt.styled(fmt.rate(row.dead_growth_per_min), lv.get("dead_growth")),
        fmt.styled(fmt.age(st.oldest_ready_age_ms), lv.get("oldest_ready_age")),
        fmt.styled(fmt.count(st.stuck), lv.get("stuck")),
        fmt.styled(ready, lv.get("ready")),
        fmt.styled(fmt.count(st.processing), lv.get("processing")),
        fmt.styled(fmt.count(st.scheduled), lv.get("scheduled")),
        fmt.styled(overdue, overdue_level),
        fmt.styled(fmt.count(st.suppressed), lv.get("suppressed")),
    )


def fitting_columns(rows: list[tuple], width: int) -> int:
    """How many of :data:`COLUMNS` (a prefix, at least 2: queue and dead)
    fit ``width`` terminal cells whole, given the cells of ``rows`` (each
    column as wide as its widest cell or header, plus 2 cells of padding)."""
    used = 0
    for i, (_, label) in enumerate(COLUMNS):
        cells = [r[i].cell_len if isinstance(r[i], Text) else len(str(r[i])) for r in rows]
        used += max([len(label), *cells]) + 2
        if used > width and i >= 2:
            return i
    return len(COLUMNS)


class DashboardScreen(Screen):
    """Every queue of the catalogue; ``enter``/``l`` opens one."""

    DEFAULT_CSS = """
    DashboardScreen #queues { height: auto; max-height: 50%; }
    DashboardScreen #dash-body { height: 1fr; min-height: 8; }
    DashboardScreen #history { width: 1fr; }
    DashboardScreen #overview-line { height: 1; padding: 0 1; }
    """

    BINDINGS = [
        Binding("enter", "open", "open queue", show=False),
        Binding("t", "triage", "triage"),
        Binding("slash", "filter", "filter", show=False),
        Binding("c", "chart", "next chart", show=False),
        Binding("Z", "op('pause')", "pause", show=False),
        Binding("W", "op('resume')", "resume (wake)", show=False),
        *operation_bindings(requeue="requeue stuck"),
    ]

    def compose(self) -> ComposeResult:
        yield TopBar("dashboard", id="topbar")
        yield TroubleBanner(id="banner")
        yield VimTable(id="queues")
        yield Static("", id="dash-notes", classes="note")
        with Horizontal(id="dash-body"):
            yield HistoryChart(id="history")
            yield OverviewPanels(id="panels")
        yield Static("", id="overview-line")
        yield KeyFooter()

    def _show_rows(self, rows: list[tuple[str, tuple]]) -> None:
        """Show ``rows`` (key, cells) with the columns that fit the screen's
        width; dropped columns go from the least important (the end of
        :data:`COLUMNS`), numbers are never cut."""
        self._rows = rows
        table = self.table
        n = fitting_columns([cells for _, cells in rows], self.size.width or self.app.size.width)
        if n != len(table.columns):
            table.clear(columns=True)
            for key, label in COLUMNS[:n]:
                table.add_column(label if key in TEXT_COLUMNS else Text(label, justify="right"), key=key)
        table.replace_rows([(k, cells[:n]) for k, cells in rows])

    def on_resize(self) -> None:
        if getattr(self, "_rows", None) is not None:
            self._show_rows(self._rows)
        self._place_panels()

    def _place_panels(self) -> None:
        """Panels beside the chart from :data:`WIDE` cells on, else one summary line."""
        wide = (self.size.width or self.app.size.width) >= WIDE
        self.query_one("#panels", OverviewPanels).display = wide
        line = self.query_one("#overview-line", Static)
        line.display = not wide and self.panels.overview is not None

    @property
    def panels(self) -> OverviewPanels:
        return self.query_one("#panels", OverviewPanels)

    def _read_overview(self, snap: Snapshot) -> None:
        """The side panels' data for ``snap``'s queues, read by the core in a worker."""
        def done(ov: Overview) -> None:
            self.panels.show(ov)
            self.query_one("#overview-line", Static).update(summary_line(ov))
            self._place_panels()

        self.app.read(lambda: self.app.dash.overview(snap), done, key="overview", banner=False)

    #: One line about the history's source: None before the Prometheus read
    #: started, "" while nothing to say, else what it loaded or why it failed.
    history_note: str | None = None

    def on_mount(self) -> None:
        self._show_rows([])
        self._place_panels()
        snap = self.app.snapshot
        if snap is not None:
            self.status_refreshed(snap)
        else:
            self.query_one("#dash-notes", Static).update("reading every queue's status …")

    @property
    def chart(self) -> HistoryChart:
        return self.query_one("#history", HistoryChart)

    def action_chart(self) -> None:
        self.chart.cycle_metric()

    @property
    def table(self) -> VimTable:
        return self.query_one("#queues", VimTable)

    def status_refreshed(self, snap: Snapshot) -> None:
        """Redraw from a new snapshot (called by the app on every refresh)."""
        self._show_rows([(r.name, row_cells(r)) for r in snap.rows])
        self._snap = snap
        if snap.rows:
            self._read_overview(snap)
        if self.history_note is None and snap.rows:
            self._load_prometheus([r.name for r in snap.rows])
        self._redraw_chart()
        notes = Text()
        if self.history_note:
            notes.append(self.history_note + "\n", style="yellow" if "Prometheus history:" in self.history_note else "")
        if not snap.rows:
            notes.append("no queues: none configured ([queues] in jobctl.toml) and none discovered\n",
                         style="yellow")
        elif snap.catalogue == "discovered":
            notes.append("queues discovered by a bounded SCAN (no [queues] catalogue in the config)\n")
        for r in snap.rows:
            if r.status is not None:
                for w in r.status.warnings:  # DLQ loss (status_truth): dead jobs about to disappear
                    notes.append(f"{r.name}: {w}\n", style="bold red" if w.startswith("DLQ") else "yellow")
                for h in r.status.held_filters:  # jobctl pause --hold: each active hold with its age
                    notes.append(f"{r.name}: held ", style="yellow")
                    notes.append(h.get("filter") or "every job", style="cyan")
                    notes.append(f" for {fmt.age(h.get('age_ms'))}" + (f" ({h['reason']})" if h.get("reason") else "")
                                 + f", {r.status.paused:,} paused · W resumes\n", style="yellow")
        ops = [i for i in OPERATIONS.values() if i.key]
        keys = "/".join(i.key for i in ops)
        verbs = "/".join("requeue stuck" if i.operation is Operation.REQUEUE else i.verb for i in ops)
        notes.append(f"enter: open queue · t: triage · {keys}: {verbs} "
                     "(whole queue, plan first) · c: next chart · p: freeze refresh · +/-: interval · ?: help · ctrl+p: commands",
                     style="dim")
        self.query_one("#dash-notes", Static).update(notes)

    def _redraw_chart(self) -> None:
        snap, dash = self._snap, self.app.dash  # the samples the workers recorded (memory, no Redis)
        self.chart.show_history({r.name: dash.history(r.name).samples for r in snap.rows}, snap.at_ms)

    def _load_prometheus(self, queues: list[str]) -> None:
        """Fill the history's last hours from the configured Prometheus, once,
        in a worker (the core's HTTP read); a failure is one notice and one note line."""
        dash = self.app.dash
        self.history_note = ""

        def run() -> dict[str, int] | None:
            return dash.load_prometheus_history(queues) if dash.prometheus_url else None

        def done(added: dict[str, int] | None) -> None:
            if added is not None:
                self.chart.source = "Prometheus + this TUI"
                got = {q: n for q, n in added.items() if n}
                self.history_note = (f"history: the last {fmt.age(DEFAULT_WINDOW_MS)} from Prometheus, "
                                     f"{sum(got.values()):,} samples of {len(got)} queue(s)")
                self.status_refreshed(self._snap)

        def failed(exc: BaseException) -> None:
            self.history_note = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            self.status_refreshed(self._snap)

        self.app.read(run, done, key="prometheus-history", banner=False, failed=failed)

    def _current(self) -> str | None:
        key = self.table.current_key
        if key is None:
            self.app.notify("no queue selected", severity="warning")
        return key

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key is not None and event.row_key.value:
            self.app.open_queue(event.row_key.value)

    def action_open(self) -> None:
        name = self._current()
        if name:
            self.app.open_queue(name)

    def action_triage(self) -> None:
        name = self._current()
        if name:
            self.app.open_queue(name, tab="triage")

    def action_filter(self) -> None:
        name = self._current()
        if name:
            self.app.open_queue(name, tab="jobs")
            self.app.call_after_refresh(lambda: getattr(self.app.screen, "action_filter", lambda: None)())

    def action_op(self, operation: str) -> None:
        name = self._current()
        if not name:
            return
        req = next(r for r in queue_wide_requests(name) if r.operation is Operation(operation))
        self.app.start_action(req)
