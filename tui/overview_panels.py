"""The dashboard's side panels (:class:`OverviewPanels`): the top error
groups across every queue, the operations running and the holds, and the
newest journal entries, drawn from a core
:class:`jobctl.dashboard.overview.Overview` (this module reads nothing).

Beside the chart when the terminal is at least :data:`WIDE` cells wide;
narrower, the panels collapse to one line (:func:`summary_line`).  Numbers
are never cut: count columns keep their width, text columns give way.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from jobctl.dashboard.overview import ErrorGroup, Overview
from jobctl.thresholds import OUTCOME_STYLES

from . import format as fmt

__all__ = ["OverviewPanels", "WIDE", "errors_table", "ops_text", "journal_table", "summary_line", "group_words"]

#: Terminal width (cells) from which the panels sit beside the chart.
WIDE = 120


def group_words(g: ErrorGroup) -> str:
    """``webhook.deliver × HTTP_503`` (``(none)`` for a missing field)."""
    return f"{g.job_type or '(none)'} × {g.error or '(none)'}"


def _table(*columns: tuple[str, str]) -> Table:
    """A borderless table; ``columns``: (header, "num" or "text")."""
    t = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False, header_style="bold", expand=False)
    for header, kind in columns:
        if kind == "num":
            t.add_column(header, justify="right", no_wrap=True)
        else:
            t.add_column(header, no_wrap=True, overflow="ellipsis")
    return t


def errors_table(ov: Overview) -> Table | Text:
    """The top error groups: count (``≈`` when sampled), queue, job type × error."""
    if not ov.errors:
        return Text("no dead job" if ov.triaged else "reading the DLQs …", style="dim")
    t = _table(("dead", "num"), ("queue", "text"), ("job type × error", "text"))
    for g in ov.errors:
        t.add_row(("≈" if g.sampled else "") + fmt.count(g.count), g.queue, group_words(g))
    return t


def ops_text(ov: Overview) -> Text:
    """One line per running operation (progress, rate, ETA) and per hold (filter, age, reason)."""
    out = Text()
    for op in ov.active:
        out.append(f"{op.operation} {op.queue}" + (f" by {op.by}" if op.by else "") + ": ", style="bold")
        elapsed = None if op.started_ms is None else max(0, ov.at_ms - op.started_ms)
        if not op.by:  # this TUI's own: jobs moved, rate and ETA
            out.append(fmt.progress_words(op.done, op.total, elapsed or 0) + "\n")
            continue
        walked = f"{op.done:,} of {op.total:,} walked" if op.total else "running"  # dead-list positions
        out.append(walked + (f" · for {fmt.age(elapsed)}" if elapsed is not None else "") + "\n")
    for h in ov.holds:
        out.append(f"{h.queue}: held ", style="yellow")
        out.append(h.filter or "every job", style="cyan")
        out.append(f" for {fmt.age(h.age_ms)}" + (f" ({h.reason})" if h.reason else "") + f", {h.paused:,} paused\n",
                   style="yellow")
    if not out.plain:
        out.append("no operation running, no hold", style="dim")
    out.rstrip()
    return out


def journal_table(ov: Overview) -> Table | Text:
    """The newest journal entries: time, operation, queue, result, counts."""
    if not ov.journal:
        return Text("no operation journaled yet", style="dim")
    t = _table(("ended", "text"), ("op", "text"), ("queue", "text"), ("result", "text"), ("moved", "num"),
               ("of", "num"), ("skip", "num"), ("fail", "num"))
    style = OUTCOME_STYLES  # as the CLI's journal
    for e in ov.journal:
        t.add_row(fmt.clock(e.ended_ms), e.operation, e.queue, Text(e.result, style=style.get(e.result, "")),
                  fmt.count(e.moved), fmt.count(e.planned), fmt.count(e.skipped), fmt.count(e.failed))
    return t


def summary_line(ov: Overview) -> Text:
    """The panels in one line, for a narrow terminal: the numbers first
    (running, held, the top error group's count), so a cut takes words only."""
    out = Text(f"{len(ov.active)} running · {len(ov.holds)} held", style="dim")
    if ov.errors:
        g = ov.errors[0]
        out.append(" · top error ", style="dim")
        out.append(f"{'≈' if g.sampled else ''}{g.count:,} in {g.queue}: {group_words(g)}")
    if ov.journal:
        e = ov.journal[0]
        out.append(f" · last {e.operation} {e.queue} {e.result}", style="dim")
    return out


def _title(text: str, note: str = "") -> Text:
    out = Text(text, style="bold")
    if note:
        out.append(f"  {note}", style="dim")
    return out


class OverviewPanels(Vertical):
    """Three stacked panels (errors, operations and holds, journal);
    :attr:`overview` is what they show (``None`` before the first read)."""

    DEFAULT_CSS = """
    OverviewPanels { width: 74; height: 1fr; padding: 0 1; }
    OverviewPanels Static { height: auto; }
    OverviewPanels .panel-title { margin-top: 1; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.overview: Overview | None = None

    def compose(self) -> ComposeResult:
        yield Static(_title("top errors"), id="errors-title", classes="panel-title")
        yield Static(Text("waiting for the first refresh", style="dim"), id="errors-panel")
        yield Static(_title("operations and holds"), id="ops-title", classes="panel-title")
        yield Static("", id="ops-panel")
        yield Static(_title("recent journal"), id="journal-title", classes="panel-title")
        yield Static("", id="journal-panel")

    def show(self, ov: Overview) -> None:
        """Redraw from ``ov``."""
        self.overview = ov
        note = ("sampled DLQs: ≈ counts" if ov.sampled else "") + \
            (f"  {ov.triaged} of {ov.queues} queues read" if ov.triaged < ov.queues else "")
        self.query_one("#errors-title", Static).update(_title("top errors (dead, every queue)", note.strip()))
        self.query_one("#errors-panel", Static).update(errors_table(ov))
        self.query_one("#ops-panel", Static).update(ops_text(ov))
        refused = Text("\n".join(ov.notes), style="yellow")  # what the ACL did not let this user read
        self.query_one("#journal-panel", Static).update(Group(journal_table(ov), refused) if ov.notes
                                                        else journal_table(ov))
