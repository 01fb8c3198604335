"""``?``: every key of every screen."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from jobctl.ops.catalog import OPERATIONS

__all__ = ["HelpScreen", "KEYS"]

#: The operation keys (jobctl.ops.catalog), e.g. "U P R S X".
_OPS = [i for i in OPERATIONS.values() if i.key]
_OP_KEYS = " ".join(i.key for i in _OPS)

#: (section, [(keys, what)])
KEYS: list[tuple[str, list[tuple[str, str]]]] = [
    ("everywhere", [
        ("?", "this help"),
        ("ctrl+p", "command palette: open a queue, triage, operations, freeze the refresh"),
        ("p", "freeze / unfreeze the periodic refresh (top bar: FROZEN for 1 m)"),
        ("r", "refresh now (and reload the screen's lists)"),
        ("+ / -", "slower / faster refresh (floor 0.5s)"),
        ("j k g G ctrl+d ctrl+u", "move in lists (vim keys; arrows work too)"),
        ("q", "quit (an operation in progress is stopped after its batch first)"),
    ]),
    ("dashboard", [
        ("enter / l", "open the highlighted queue"),
        ("t", "triage view of its dead-letter queue"),
        (_OP_KEYS, " / ".join("requeue stuck" if i.verb == "requeue" else i.verb for i in _OPS) + ", whole queue"),
        ("Z / W", "pause / resume every ready (paused) job of the queue (asks why)"),
        ("c", "next history chart: dead, ready depth, DLQ growth, oldest-ready age"),
    ]),
    ("queue screen", [
        ("1 2 3 4 5", "overview, processing, triage, jobs, journal"),
        ("escape / h", "back"),
        ("/", "filter (the CLI's filter language: docs/filter.md); empty clears"),
        ("enter", "triage: the group's jobs; jobs and processing: inspect the job"),
        ("space", "select / unselect a job (jobs and processing tabs)"),
        ("s", "jobs tab: next state (dead, ready, scheduled, processing, suppressed)"),
        ("c", "clear the filter and the selection"),
        (_OP_KEYS, "on the highlighted triage group, else the selection, else the filter"),
        ("Z / W", "pause / resume (W lifts the holds of the filter); triage: the ready jobs of the group's job type or one of its tenants"),
        ("M", "migrate the ready jobs passing the filter to another queue (no filter: drain --to); asks which"),
        ("D", "drain the ready jobs into an export (drain --export-to); asks the directory"),
        ("Y", "replay once: stream entries (asks --from / --to) or Celery failed tasks"),
        ("T", "migrate envelopes: asks a transformation file (or a transform-… id to roll back); sample diff"),
        ("H", "reshard a sharded reliable-list queue (asks --shards N)"),
    ]),
    ("job inspector", [
        ("escape / h", "back"),
        (f"{_OP_KEYS} N", "this job: only the keys of its state (dead R S X, suppressed N unsuppress and X, "
                           "scheduled P, processing U once past its deadline, ready none)"),
    ]),
    ("operations", [
        ("", "every operation shows its plan first (count, breakdown, sample ids); focus is on Cancel"),
        ("", "purge, drain, transform, or any operation in production: type the count"),
        ("", "purge and drain D export the jobs first (like --export-to), then remove exactly those"),
        ("", "it runs with a progress bar; Stop ends it after the current batch"),
        ("", "same operations core, engine and journal as the CLI; read-only mode refuses with a notice"),
    ]),
]


class HelpScreen(ModalScreen):
    """The key reference; escape, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 90%;
                                  border: thick $accent; background: $surface; padding: 0 1; }
    """

    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    def compose(self) -> ComposeResult:
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold cyan", justify="right", no_wrap=True)
        t.add_column()
        for section, keys in KEYS:
            t.add_row(Text(section.upper(), style="bold"), "")
            for k, what in keys:
                t.add_row(k, what)
            t.add_row("", "")
        with VerticalScroll():
            yield Static(Text("jobctl tui — keys", style="bold"))
            yield Static(t, id="help-keys")

    def action_close(self) -> None:
        self.dismiss()
