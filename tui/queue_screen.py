"""One queue: overview (attempt histogram, scheduled due-time distribution),
processing jobs by time left to their visibility deadline, the DLQ triage
view (job type x error code), a job list with ``/`` filter and selection,
and the queue's journal.

Actions (``U`` requeue, ``P`` promote, ``R`` redrive, ``S`` suppress, ``X``
purge) apply to what the tab shows: the highlighted triage group, the
selected jobs (``space``), else every job of the listed state that passes
the ``/`` filter.  On the overview tab they apply to the whole queue.
``M`` migrates the ready (jobs tab: the listed ready or scheduled) jobs that
pass the ``/`` filter to another queue (no filter: ``drain --to``), ``D``
drains them into an export (``drain --export-to``); both ask where first.
``Z``/``W`` on a triage group pause/resume the ready jobs of its job type or
one of its tenants (the scopes come from the core's grouping).
"""

from __future__ import annotations

from functools import partial

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from jobctl.dashboard import DUE_BUCKETS, JobPage, Level, QueueDetail, Snapshot, Triage
from jobctl.filter import MATCH_ALL, Filter
from jobctl.model import JobRecord, State
from jobctl.ops.spec import Operation

from . import format as fmt
from .actions import OPERATIONS, ActionRequest, operation_bindings, queue_wide_requests
from .widgets import FilterBar, TopBar, TroubleBanner, VimTable

__all__ = ["QueueScreen", "TABS", "JOB_STATES"]

#: Tab ids in order (keys 1..5).
TABS = ("overview", "processing", "triage", "jobs", "journal")
#: States the job list cycles through with ``s``.
JOB_STATES = (State.DEAD, State.READY, State.SCHEDULED, State.PROCESSING, State.SUPPRESSED, State.PAUSED)
#: Jobs listed at most.
LIST_LIMIT = 200
#: The list tabs after the overview: (tab id, note id, table id), keys 2..5.
_LIST_TABS = (("processing", "proc-note", "proc"), ("triage", "triage-note", "groups"),
              ("jobs", "jobs-note", "jobs-table"), ("journal", "journal-note", "journal-table"))

#: The palette's queue operations: (action_op's operation, title with ``{queue}``, help).
_PALETTE_OPS = (
    ("migrate", "Migrate / drain {queue} to another queue (M)",
     "The ready jobs that pass the / filter (jobs tab: the listed state); asks which queue"),
    ("drain", "Drain {queue} into an export (D)",
     "Every ready job (jobs tab: the listed state); asks the directory, exports first"),
    ("replay", "Replay {queue}'s history (Y)",
     "Stream-group: re-add acknowledged entries once (asks --from/--to; jobctl replay)"),
    ("transform", "Migrate {queue}'s envelopes (T)",
     "Asks a transformation file (or an operation id to roll back); shows a sample diff"),
)

_TAB_SOURCE = {"processing": State.PROCESSING, "triage": State.DEAD}


def job_cells(r: JobRecord, now: int, selected: bool) -> tuple:
    """Cells of the job list."""
    e = r.envelope
    st = r.state.value if r.state else None
    if st == "scheduled":
        when = "due " + fmt.rel(now, r.score)
    elif st == "processing":
        when = "deadline " + fmt.rel(now, r.deadline_ms) if r.deadline_ms is not None else "no deadline"
    elif st == "suppressed":
        when = "suppressed " + fmt.rel(now, r.score)
    elif st == "dead":
        when = "dead " + fmt.rel(now, r.meta.get("dead_since_ms", e.last_attempt_ms))
    else:
        when = "ready " + fmt.rel(now, e.ready_since_ms)
    attempt = "-" if e.attempt is None else f"{e.attempt}/{e.max_attempts if e.max_attempts is not None else '?'}"
    err = Text(e.last_error_code or "")
    if e.problems:
        err = Text(f"malformed: {e.problems[0]}", style="red")
    mark = Text("●", style="bold yellow") if selected else Text(" ")
    return (mark, r.job_id, e.job_type or "-", e.tenant_id or "-", Text(attempt, justify="right"),
            fmt.rel(now, e.created_ms), when, err)


def processing_cells(r: JobRecord, now: int, selected: bool) -> tuple:
    """Cells of the processing list; a stuck job (deadline passed) in red."""
    e = r.envelope
    left = None if r.deadline_ms is None else r.deadline_ms - now
    if left is None:
        when = Text("no deadline", style="bold red")
    elif left < 0:
        when = Text(f"STUCK {fmt.age(-left)} past", style="bold white on red")
    else:
        when = Text(f"{fmt.age(left)} left", style="yellow" if left < 60_000 else "")
    attempt = "-" if e.attempt is None else f"{e.attempt}/{e.max_attempts if e.max_attempts is not None else '?'}"
    mark = Text("●", style="bold yellow") if selected else Text(" ")
    return (mark, r.job_id, e.job_type or "-", e.tenant_id or "-", Text(attempt, justify="right"), when,
            r.shard, e.last_error_code or "")


def _right(label: str) -> Text:
    return Text(label, justify="right")


class QueueScreen(Screen):
    """The queue screen; ``escape``/``h`` goes back to the dashboard."""

    BINDINGS = [
        Binding("escape,h", "back", "back"),
        *(Binding(str(n), f"tab('{tab}')", tab, show=False) for n, tab in enumerate(TABS, 1)),  # keys 1..5
        Binding("slash", "filter", "filter"),
        Binding("space", "toggle_select", "select", show=False),
        Binding("s", "cycle_state", "state", show=False),
        Binding("c", "clear", "clear", show=False),
        Binding("Z", "op('pause')", "pause", show=False),
        Binding("W", "op('resume')", "resume (wake)", show=False),
        Binding("M", "op('migrate')", "migrate / drain to a queue", show=False),
        Binding("D", "op('drain')", "drain to an export", show=False),
        Binding("Y", "op('replay')", "replay history (stream-group)", show=False),
        Binding("T", "op('transform')", "migrate envelopes (--transform / --rollback)", show=False),
        Binding("H", "reshard", "reshard (--shards N)", show=False),
        *operation_bindings(),
    ]

    DEFAULT_CSS = """
    QueueScreen #overview-row { height: 1fr; }
    QueueScreen #hist-box { width: 3fr; }
    QueueScreen #due-box { width: 2fr; }
    QueueScreen .box-title { text-style: bold; padding: 0 1; height: 1; }
    QueueScreen TabbedContent { height: 1fr; }
    QueueScreen TabPane { padding: 0; }
    """

    def __init__(self, queue: str, tab: str | None = None) -> None:
        super().__init__()
        self.queue = queue
        self.initial_tab = tab or "overview"
        self.filter: Filter = MATCH_ALL
        self.jobs_state: State = State.DEAD
        self.selection: set[str] = set()
        self.detail: QueueDetail | None = None
        self.histograms: dict | None = None
        self.triage: Triage | None = None
        self.page: JobPage | None = None
        self.journal: list[dict] | None = None
        self._triage_gen = 0
        self._jobs_gen = 0

    # -- layout ----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TopBar(f"queue {self.queue}", id="topbar")
        yield TroubleBanner(id="banner")
        yield Static("", id="summary", classes="summary")
        yield FilterBar(id="filterbar")
        with TabbedContent(initial=self.initial_tab, id="tabs"):
            with TabPane("1 overview", id="overview"):
                with Horizontal(id="overview-row"):
                    with Vertical(id="hist-box"):
                        yield Static("attempt histogram", classes="box-title", id="hist-title")
                        yield VimTable(id="hist")
                    with Vertical(id="due-box"):
                        yield Static("scheduled: due in", classes="box-title")
                        yield VimTable(id="due")
            for n, (tab, note, table) in enumerate(_LIST_TABS, start=2):
                with TabPane(f"{n} {tab}", id=tab):
                    yield Static("", id=note, classes="note")
                    yield VimTable(id=table)
        yield Footer()

    def on_mount(self) -> None:
        hist = self.query_one("#hist", VimTable)
        hist.add_columns(*[_right(c) for c in ("attempt", "ready", "scheduled", "processing", "dead")], "all")
        due = self.query_one("#due", VimTable)
        due.add_columns("due", _right("jobs"), "")
        self.query_one("#proc", VimTable).add_columns(" ", "job id", "type", "tenant", _right("attempt"),
                                                      "time left to deadline", "shard", "last error")
        self.query_one("#groups", VimTable).add_columns("job type", "error code", _right("jobs"), _right("share"),
                                                        "first seen", "last seen", "tenants")
        self.query_one("#jobs-table", VimTable).add_columns(" ", "job id", "type", "tenant", _right("attempt"),
                                                            "created", "when", "last error")
        self.query_one("#journal-table", VimTable).add_columns(
            "ended", "operation", "operator", *[_right(c) for c in ("planned", "moved", "skipped", "failed")],
            "filter / ids")
        if self.app.snapshot is not None:
            self.status_refreshed(self.app.snapshot, load=False)
        self.reload()
        self._focus_tab(self.initial_tab)

    @property
    def tabs(self) -> TabbedContent:
        return self.query_one("#tabs", TabbedContent)

    @property
    def active_tab(self) -> str:
        return self.tabs.active

    def _focus_tab(self, tab: str) -> None:
        table_id = {"overview": "hist", **{t: table for t, _, table in _LIST_TABS}}[tab]
        self.query_one(f"#{table_id}", VimTable).focus()

    # -- loading -------------------------------------------------------------------------
    def reload(self) -> None:
        """Reload everything this screen shows (``r``)."""
        self.load_detail()
        self.load_histograms()
        self.load_triage()
        self.load_jobs()
        self.load_journal()

    def status_refreshed(self, snap: Snapshot, load: bool = True) -> None:
        row = snap.row(self.queue)
        if row is not None:
            self._summary(row)
        if load and self.app.screen is self:
            self.load_detail()

    def _summary(self, row) -> None:
        st = row.status
        out = Text()
        if st is None:
            out.append(row.error or "status unreadable", style="red")
        else:
            lv = row.levels

            def part(label: str, value: str, level: Level | None = None) -> None:
                if out:
                    out.append(" · ")
                out.append(f"{label} ")
                out.append(value, style=fmt.level_style(level) or "bold")

            part("ready", fmt.count(st.ready), lv.get("ready"))
            part("oldest ready", fmt.age(st.oldest_ready_age_ms), lv.get("oldest_ready_age"))
            part("scheduled", f"{st.scheduled:,} ({st.scheduled_overdue:,} overdue)", lv.get("scheduled_overdue"))
            part("processing", f"{st.processing:,} ({st.stuck:,} stuck)", lv.get("stuck"))
            part("dead", fmt.count(st.dead), lv.get("dead"))
            part("DLQ growth", fmt.rate(row.dead_growth_per_min), lv.get("dead_growth"))
            part("suppressed", fmt.count(st.suppressed))
            if st.paused or st.held_filters:
                part("paused", fmt.count(st.paused))
            for h in st.held_filters:  # jobctl pause --hold: the active holds with their age
                out.append("\nheld: ", style="bold yellow")
                out.append(h.get("filter") or "every job", style="cyan")
                out.append(f" for {fmt.age(h.get('age_ms'))}"
                           + (f" ({h['reason']})" if h.get("reason") else ""))
        if not self.filter.is_match_all:
            out.append("\nfilter: ", style="bold")
            out.append(self.filter.text, style="cyan")
        if self.selection:
            out.append(f"\nselected: {len(self.selection):,} job(s) (space toggles, c clears)", style="yellow")
        self.query_one("#summary", Static).update(out)

    def _redraw_summary(self) -> None:
        snap = self.app.snapshot
        row = snap.row(self.queue) if snap else None
        if row is not None:
            self._summary(row)
        else:
            text = Text()
            if not self.filter.is_match_all:
                text.append(f"filter: {self.filter.text}")
            self.query_one("#summary", Static).update(text)

    def load_detail(self) -> None:
        dash, q = self.app.dash, self.queue
        self.app.read(lambda: dash.queue_detail(q), self._detail_done, key=f"detail:{q}")

    def load_histograms(self) -> None:
        dash, q = self.app.dash, self.queue
        self.app.read(lambda: dash.histograms(q), self._hist_done, key=f"hist:{q}")

    def load_triage(self) -> None:
        # every load is a new generation: a result that arrives after a newer
        # request (another filter) is dropped rather than shown
        self._triage_gen += 1
        gen, dash, q, flt = self._triage_gen, self.app.dash, self.queue, self.filter
        self.app.read(lambda: dash.triage(q, flt),
                      lambda tri: self._triage_done(tri) if gen == self._triage_gen else None)

    def load_jobs(self) -> None:
        if self.detail is None:
            return  # the first detail says which states the layout has, then loads the jobs
        self._jobs_gen += 1
        gen, dash, q, flt, state = self._jobs_gen, self.app.dash, self.queue, self.filter, self.jobs_state
        self.query_one("#jobs-note", Static).update(f"loading {state.value} jobs …")
        self.app.read(lambda: dash.jobs(q, state, flt, LIST_LIMIT),
                      lambda page: self._jobs_done(page) if gen == self._jobs_gen else None)

    def load_journal(self) -> None:
        dash, q = self.app.dash, self.queue
        self.app.read(lambda: dash.journal(q), self._journal_done, key=f"journal:{q}")

    # -- rendering -------------------------------------------------------------------------
    def _detail_done(self, detail: QueueDetail) -> None:
        first = self.detail is None
        self.detail = detail
        if first:
            if detail.states and self.jobs_state not in detail.states:
                self.jobs_state = next((s for s in JOB_STATES if s in detail.states), self.jobs_state)
            self.load_jobs()
        self._render_processing()
        due = self.query_one("#due", VimTable)
        total = detail.due.total
        rows = []
        for label, n in detail.due.counts:
            style = "bold red" if label == "overdue" and n else ""
            rows.append((label, (Text(label, style=style), Text(f"{n:,}", justify="right", style=style),
                                 Text(fmt.bar(n, total, 24), style="red" if label == "overdue" else "cyan"))))
        due.replace_rows(rows)

    def _render_processing(self) -> None:
        d = self.detail
        if d is None:
            return
        recs = [r for r in d.processing if self.filter.matches(r, d.now_ms)]
        table = self.query_one("#proc", VimTable)
        table.replace_rows([(r.job_id, processing_cells(r, d.now_ms, r.job_id in self.selection)) for r in recs])
        stuck = sum(1 for r in recs if r.deadline_ms is not None and r.deadline_ms < d.now_ms)
        note = Text(f"{d.status.processing:,} processing, {d.status.stuck:,} stuck; showing the "
                    f"{len(recs):,} with the least time left to their visibility deadline")
        if not self.filter.is_match_all:
            note.append(" (filtered)")
        if stuck:
            note.append(f"  ·  {stuck:,} stuck shown in red: U requeues them", style="bold red")
        note.append(f"  ·  as of {fmt.clock(d.now_ms)}", style="dim")
        self.query_one("#proc-note", Static).update(note)

    def _hist_done(self, hists: dict) -> None:
        self.histograms = hists
        states = ("ready", "scheduled", "processing", "dead")
        attempts = sorted({a for h in hists.values() for a in h.counts})
        totals = {a: sum(hists[s].counts.get(a, 0) for s in states if s in hists) for a in attempts}
        biggest = max(totals.values(), default=0)
        rows = []
        for a in attempts:
            cells = [Text(str(a), justify="right")]
            cells += [Text(f"{hists[s].counts.get(a, 0):,}", justify="right") if s in hists else "-"
                      for s in states]
            cells.append(Text(f"{fmt.bar(totals[a], biggest, 16)} {totals[a]:,}", style="cyan"))
            rows.append((str(a), tuple(cells)))
        unknown = {s: hists[s].unknown for s in states if s in hists}
        if any(unknown.values()):
            rows.append(("unknown", (Text("?", justify="right"),
                                     *[Text(f"{unknown.get(s, 0):,}", justify="right") for s in states],
                                     Text(""))))
        self.query_one("#hist", VimTable).replace_rows(rows)
        sampled = [s for s in states if s in hists and hists[s].sampled]
        title = "attempt histogram (envelope attempt, by state)"
        if sampled:
            title += f" — sampled: {', '.join(sampled)}"
        self.query_one("#hist-title", Static).update(title)

    def _triage_done(self, tri: Triage) -> None:
        self.triage = tri
        rows = []
        for g in tri.groups:
            share = f"{g.count * 100 / tri.matched:.0f}%" if tri.matched else "-"
            tenants = ", ".join(f"{t} {n * 100 / max(1, sum(g.tenants.values())):.0f}%"
                                for t, n in g.top_tenants(2))
            rows.append((g.key, (Text(g.job_type or "(none)", style="bold"), g.error or "(none)",
                                 Text(f"{g.count:,}", justify="right"), Text(share, justify="right"),
                                 fmt.rel(tri.now_ms, g.first_seen_ms), fmt.rel(tri.now_ms, g.last_seen_ms),
                                 tenants)))
        self.query_one("#groups", VimTable).replace_rows(rows)
        note = Text(f"{tri.depth:,} dead · {len(tri.groups)} group(s) by job type × error code")
        if tri.sampled:
            note.append(f" · sampled {tri.read:,} and scaled", style="yellow")
        if tri.malformed:
            note.append(f" · {tri.malformed:,} malformed (not redrivable)", style="yellow")
        if tri.filter_text:
            note.append(f" · {tri.matched:,} match the filter", style="cyan")
        note.append(f" · as of {fmt.clock(tri.now_ms)}", style="dim")
        note.append("\nenter: the group's jobs · R redrive / S suppress / X purge the highlighted group · "
                    "Z/W pause/resume the ready jobs of its job type or a tenant", style="dim")
        self.query_one("#triage-note", Static).update(note)

    def _jobs_done(self, page: JobPage) -> None:
        self.page = page
        self._render_jobs()

    def _render_jobs(self) -> None:
        page = self.page
        if page is None:
            return
        table = self.query_one("#jobs-table", VimTable)
        table.replace_rows([(r.job_id, job_cells(r, page.now_ms, r.job_id in self.selection))
                            for r in page.records])
        note = Text()
        note.append(f"{page.state}", style="bold")
        note.append(f" jobs: {len(page.records):,} shown")
        if page.filter_text:
            note.append(f" matching the filter ({page.scanned:,} examined"
                        f"{', more may match' if not page.complete else ''})")
        elif not page.complete:
            note.append(" (the first ones in serving order)")
        note.append(f" · as of {fmt.clock(page.now_ms)}", style="dim")
        note.append("\ns: next state · space: select · enter: inspect · / filter · "
                    "actions apply to the selection, else to the filter", style="dim")
        self.query_one("#jobs-note", Static).update(note)

    def _journal_done(self, entries: list[dict]) -> None:
        self.journal = entries
        now = self.app.clock()
        rows = []
        for n, e in enumerate(entries):
            what = e.get("filter") or (", ".join(e.get("ids") or [])[:60]) or ""
            rows.append((e.get("stream_id") or str(n), (
                fmt.rel(now, e.get("ended_ms")), Text(str(e.get("operation")), style="bold"),
                str(e.get("operator") or ""), Text(f"{e.get('planned', 0):,}", justify="right"),
                Text(f"{e.get('moved', 0):,}", justify="right"), Text(f"{e.get('skipped', 0):,}", justify="right"),
                Text(f"{e.get('failed', 0):,}", justify="right"), what)))
        self.query_one("#journal-table", VimTable).replace_rows(rows)
        self.query_one("#journal-note", Static).update(
            Text(f"the queue's audit journal stream: {len(entries)} newest entr{'y' if len(entries) == 1 else 'ies'}"
                 " (operations from the CLI and the TUI)"))

    # -- events ----------------------------------------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id if event.pane is not None else None
        if tab == "journal":
            self.load_journal()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value if event.row_key is not None else None
        if key is None:
            return
        table_id = event.data_table.id
        if table_id == "groups":
            self.drill_down(key)
        elif table_id in ("jobs-table", "proc"):
            self.app.open_job(self.queue, key)

    def drill_down(self, group_key: str) -> None:
        """Show the jobs of one triage group (its filter, and the ``/`` filter)."""
        g = self.triage.group(group_key) if self.triage else None
        if g is None:
            return
        from jobctl.filter import compile_filter

        text = g.filter_text if self.filter.is_match_all else f"({self.filter.text}) and {g.filter_text}"
        self.filter = compile_filter(text)
        self.jobs_state = State.DEAD
        self.selection.clear()
        self._redraw_summary()
        self.load_jobs()
        self.load_triage()
        self.tabs.active = "jobs"
        self._focus_tab("jobs")

    def on_filter_bar_applied(self, event: FilterBar.Applied) -> None:
        self.filter = event.filter
        self.selection.clear()
        self._redraw_summary()
        self._render_processing()
        self.load_triage()
        self.load_jobs()
        self._focus_tab(self.active_tab)

    def on_filter_bar_closed(self, event: FilterBar.Closed) -> None:
        self._focus_tab(self.active_tab)

    # -- actions (keys) ------------------------------------------------------------------------
    def action_back(self) -> None:
        bar = self.query_one(FilterBar)
        if bar.is_open:
            bar.action_close()
            return
        self.app.pop_screen()

    def action_tab(self, tab: str) -> None:
        self.tabs.active = tab
        self._focus_tab(tab)

    def action_filter(self) -> None:
        self.query_one(FilterBar).open(self.filter.text)

    def action_cycle_state(self) -> None:
        if self.active_tab != "jobs":
            self.action_tab("jobs")
            return
        cycle = [s for s in JOB_STATES if not self.detail or not self.detail.states or s in self.detail.states]
        i = cycle.index(self.jobs_state) if self.jobs_state in cycle else -1
        self.jobs_state = cycle[(i + 1) % len(cycle)]
        self.selection.clear()
        self._redraw_summary()
        self.load_jobs()

    def action_clear(self) -> None:
        self.selection.clear()
        self.filter = MATCH_ALL
        self._redraw_summary()
        self._render_processing()
        self.load_triage()
        self.load_jobs()

    def action_toggle_select(self) -> None:
        tab = self.active_tab
        if tab not in ("jobs", "processing"):
            self.app.notify("select jobs on the jobs or processing tab (space)", severity="warning")
            return
        table = self.query_one("#jobs-table" if tab == "jobs" else "#proc", VimTable)
        key = table.current_key
        if key is None:
            return
        if key in self.selection:
            self.selection.discard(key)
        else:
            self.selection.add(key)
        if tab == "jobs":
            self._render_jobs()
        else:
            self._render_processing()
        self._redraw_summary()
        table.action_cursor_down()

    def request_for(self, operation: Operation) -> ActionRequest | None:
        """What ``operation`` applies to on the active tab (None: not here)."""
        info = OPERATIONS[operation]
        tab = self.active_tab
        flt_text = "" if self.filter.is_match_all else self.filter.text
        if operation is Operation.REPLAY:  # the acknowledged history, whatever the tab
            return ActionRequest(operation, self.queue, State.HISTORY,
                                 "acknowledged entries" + (f" matching {flt_text}" if flt_text else ""), flt_text)
        if tab == "overview" and operation is Operation.TRANSFORM:
            return ActionRequest(operation, self.queue, State.READY,
                                 "every ready job" + (f" matching {flt_text}" if flt_text else ""), flt_text)
        if tab == "overview":
            return next(r for r in queue_wide_requests(self.queue, flt_text) if r.operation is operation)
        if tab == "triage" and operation in (Operation.PAUSE, Operation.RESUME):
            self._triage_scope(operation)
            return None
        if tab == "triage":
            if State.DEAD not in info.sources:
                self.app.notify(f"{info.verb} does not apply to dead jobs (overview tab: whole queue)",
                                severity="warning")
                return None
            key = self.query_one("#groups", VimTable).current_key
            g = self.triage.group(key) if self.triage and key else None
            if g is None:
                self.app.notify("no triage group highlighted", severity="warning")
                return None
            text = g.filter_text if not flt_text else f"({flt_text}) and {g.filter_text}"
            return ActionRequest(operation, self.queue, State.DEAD,
                                 f"triage group {g.job_type or '(none)'} × {g.error or '(none)'} "
                                 f"({g.count:,} job(s) at triage time)", text)
        source = self.jobs_state if tab == "jobs" else State.PROCESSING
        if tab == "journal":
            self.app.notify("no action on the journal tab", severity="warning")
            return None
        if source not in info.sources:
            self.app.notify(f"{info.verb} works on {' or '.join(s.value for s in info.sources)} jobs; this list "
                            f"shows {source.value} jobs" + (" (s: next state)" if tab == "jobs" else ""),
                            severity="warning")
            return None
        if self.selection and operation in (Operation.MIGRATE, Operation.DRAIN, Operation.TRANSFORM):
            self.app.notify(f"{info.verb} takes every listed job (and the / filter), not selected jobs: "
                            "c clears the selection", severity="warning")
            return None
        if self.selection:
            ids = tuple(sorted(self.selection))
            return ActionRequest(operation, self.queue, source, f"{len(ids):,} selected {source.value} job(s)",
                                 ids=ids)
        if operation is Operation.REQUEUE:
            return ActionRequest(operation, self.queue, source,
                                 "every stuck job" + (f" matching {flt_text}" if flt_text else ""), flt_text,
                                 stuck_only=True)
        scope = f"every {source.value} job" + (f" matching {flt_text}" if flt_text else "")
        return ActionRequest(operation, self.queue, source, scope, flt_text)

    def _triage_scope(self, operation: Operation) -> None:
        """Pause (resume) from a triage group: pick its job type or one of its
        tenants (:meth:`TriageGroup.scopes`, the core's grouping), then the
        ready (paused) jobs of that filter go through the usual flow."""
        from .ask_modals import ScopeModal

        key = self.query_one("#groups", VimTable).current_key
        g = self.triage.group(key) if self.triage and key else None
        if g is None:
            self.app.notify("no triage group highlighted", severity="warning")
            return
        scopes = g.scopes()
        source = State.READY if operation is Operation.PAUSE else State.PAUSED
        verb = OPERATIONS[operation].verb

        def chosen(index: int | None) -> None:
            if index is None:
                return
            label, text = scopes[index]
            req = ActionRequest(operation, self.queue, source,
                                f"every {source.value} job of {label} (triage group {g.job_type or '(none)'} × "
                                f"{g.error or '(none)'})", text)
            self.app.start_action(req, after=self._after_action)

        self.app.push_screen(ScopeModal(f"{verb.capitalize()} the {source.value} jobs of … (queue {self.queue})",
                                        scopes), chosen)

    def action_op(self, operation: str) -> None:
        req = self.request_for(Operation(operation))
        if req is not None:
            self.app.start_action(req, after=self._after_action)

    def action_reshard(self) -> None:
        """Reshard the listed state (jobs tab: ready or scheduled; else ready)."""
        source = self.jobs_state if self.active_tab == "jobs" else State.READY
        if source not in (State.READY, State.SCHEDULED):
            self.app.notify(f"reshard moves ready or scheduled jobs; this list shows {source.value} jobs "
                            "(s: next state)", severity="warning")
            return
        self.app.start_reshard(ActionRequest(Operation.MIGRATE, self.queue, source, f"every {source.value} job"),
                               after=self._after_action)

    def _after_action(self) -> None:
        self.selection.clear()
        self._redraw_summary()
        self.reload()

    def palette_commands(self):
        from textual.app import SystemCommand

        yield SystemCommand("Filter jobs (/)", "Filter language of the CLI's --filter", self.action_filter)
        yield SystemCommand("Clear filter and selection", "", self.action_clear)
        for op, title, help_text in _PALETTE_OPS:
            yield SystemCommand(title.format(queue=self.queue), help_text, partial(self.action_op, op))
        yield SystemCommand(f"Reshard {self.queue} (H)",
                            "Sharded reliable-list: asks --shards N; each job to the shard its id hashes to",
                            self.action_reshard)
        for tab in TABS:
            yield SystemCommand(f"Show {tab}", f"Tab {tab} of queue {self.queue}",
                                lambda t=tab: self.action_tab(t))
