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

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from jobctl.dashboard import JobPage, QueueDetail, Snapshot, Triage
from jobctl.filter import MATCH_ALL, Filter, compile_filter
from jobctl.model import State
from jobctl.ops.spec import Operation

from . import queue_views as views
from .actions import ActionRequest, operation_bindings
from .queue_requests import request_for
from .queue_views import right
from .footer import KeyFooter
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
        Binding("Y", "op('replay')", "replay history", show=False),
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
                    yield VimTable(id=table, drop_order=views.DROP_ORDER.get(table, ()))
        yield KeyFooter()

    def on_mount(self) -> None:
        hist = self.query_one("#hist", VimTable)
        hist.add_columns(*[right(c) for c in ("attempt", "ready", "scheduled", "processing", "dead")], "all")
        due = self.query_one("#due", VimTable)
        due.add_columns("due", right("jobs"), "")
        self.query_one("#proc", VimTable).add_columns(" ", "job id", "type", "tenant", right("attempt"),
                                                      "time left to deadline", "shard", "last error")
        self.query_one("#groups", VimTable).add_columns("job type", "error code", right("jobs"), right("share"),
                                                        "first seen", "last seen", "tenants")
        self.query_one("#jobs-table", VimTable).add_columns(" ", "job id", "type", "tenant", right("attempt"),
                                                            "created", "when", "last error")
        self.query_one("#journal-table", VimTable).add_columns(
            "ended", "result", "operation", "operator", *[right(c) for c in ("planned", "done", "skipped", "failed")],
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
        if self._triage_stale():  # say so at once; recompute when the tab is in view
            self.query_one("#triage-note", Static).update(views.triage_view(self.triage, snap.at_ms)[1])
            if load and self.app.screen is self and self.active_tab == "triage":
                self.load_triage(auto=True)

    def _summary(self, row) -> None:
        self.query_one("#summary", Static).update(views.summary_text(row, self.filter, self.selection))

    def _redraw_summary(self) -> None:
        snap = self.app.snapshot
        row = snap.row(self.queue) if snap else None
        if row is not None:
            self._summary(row)
        else:
            self.query_one("#summary", Static).update(views.filter_text(self.filter))

    def load_detail(self) -> None:
        dash, q = self.app.dash, self.queue
        self.app.read(lambda: dash.queue_detail(q), self._detail_done, key=f"detail:{q}")

    def load_histograms(self) -> None:
        dash, q = self.app.dash, self.queue
        self.app.read(lambda: dash.histograms(q), self._hist_done, key=f"hist:{q}")

    def load_triage(self, *, auto: bool = False) -> None:
        """Recompute the triage tab; ``auto`` (a header refresh moved on):
        not while a recomputation is still in flight."""
        # every load is a new generation: a result that arrives after a newer
        # request (another filter) is dropped rather than shown
        gen, dash, q, flt = self._triage_gen + 1, self.app.dash, self.queue, self.filter
        if self.app.read(lambda: dash.triage(q, flt),
                         lambda tri: self._triage_done(tri) if gen == self._triage_gen else None,
                         key=f"triage:{q}" if auto else None):
            self._triage_gen = gen

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
        self.query_one("#due", VimTable).replace_rows(views.due_rows(detail))

    def _render_processing(self) -> None:
        if self.detail is None:
            return
        rows, note = views.processing_view(self.detail, self.filter, self.selection)
        self.query_one("#proc", VimTable).replace_rows(rows)
        self.query_one("#proc-note", Static).update(note)

    def _hist_done(self, hists: dict) -> None:
        self.histograms = hists
        rows, title = views.hist_view(hists)
        self.query_one("#hist", VimTable).replace_rows(rows)
        self.query_one("#hist-title", Static).update(title)

    def _triage_done(self, tri: Triage) -> None:
        self.triage = tri
        rows, note = views.triage_view(tri, self.app.last_update_ms)
        self.query_one("#groups", VimTable).replace_rows(rows)
        self.query_one("#triage-note", Static).update(note)

    def _triage_stale(self) -> bool:
        """Whether the header's last refresh is later than the triage figures."""
        header = self.app.last_update_ms
        return self.triage is not None and header is not None and header > self.triage.now_ms

    def _jobs_done(self, page: JobPage) -> None:
        self.page = page
        self._render_jobs()

    def _render_jobs(self) -> None:
        if self.page is None:
            return
        rows, note = views.jobs_view(self.page, self.selection)
        self.query_one("#jobs-table", VimTable).replace_rows(rows)
        self.query_one("#jobs-note", Static).update(note)

    def _journal_done(self, entries: list[dict]) -> None:
        self.journal = entries
        rows, note = views.journal_view(entries, self.app.clock())
        self.query_one("#journal-table", VimTable).replace_rows(rows)
        self.query_one("#journal-note", Static).update(note)

    # -- events ----------------------------------------------------------------------------------
    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id if event.pane is not None else None
        if tab == "journal":
            self.load_journal()
        elif tab == "triage" and self._triage_stale():
            self.load_triage(auto=True)

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
        """What ``operation`` applies to on the active tab (None: not here):
        :func:`.queue_requests.request_for`."""
        return request_for(self, operation)

    def action_op(self, operation: str) -> None:
        req = self.request_for(Operation(operation))
        if req is not None:
            self.app.start_action(req, after=self.after_action)

    def action_reshard(self) -> None:
        """Reshard the listed state (jobs tab: ready or scheduled; else ready)."""
        source = self.jobs_state if self.active_tab == "jobs" else State.READY
        if source not in (State.READY, State.SCHEDULED):
            self.app.notify(f"reshard moves ready or scheduled jobs; this list shows {source.value} jobs "
                            "(s: next state)", severity="warning")
            return
        self.app.start_reshard(ActionRequest(Operation.MIGRATE, self.queue, source, f"every {source.value} job"),
                               after=self.after_action)

    def after_action(self) -> None:
        """After an operation applied from here: clear the selection, reload."""
        self.selection.clear()
        self._redraw_summary()
        self.reload()

    def palette_commands(self):
        yield SystemCommand("Filter jobs (/)", "Filter language of the CLI's --filter", self.action_filter)
        yield SystemCommand("Clear filter and selection", "", self.action_clear)
        for op, title, help_text in views.PALETTE_OPS:
            yield SystemCommand(title.format(queue=self.queue), help_text, partial(self.action_op, op))
        yield SystemCommand(f"Reshard {self.queue} (H)",
                            "Sharded reliable-list: asks --shards N; each job to the shard its id hashes to",
                            self.action_reshard)
        for tab in TABS:
            yield SystemCommand(f"Show {tab}", f"Tab {tab} of queue {self.queue}",
                                lambda t=tab: self.action_tab(t))
