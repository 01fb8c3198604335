"""The progress modal (:class:`RunModal`): applies a confirmed plan through
:meth:`jobctl.dashboard.Dashboard.apply` in a thread worker; the worker only
posts :class:`RunProgress` and :class:`RunFinished`."""

from __future__ import annotations

import threading

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Label, ProgressBar, Static

from jobctl.ops.catalog import OPERATIONS

from . import format as fmt

__all__ = ["RunModal", "RunProgress", "RunFinished"]


class RunProgress(Message):
    """Posted by the run worker after each script call."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done = done
        self.total = total


class RunFinished(Message):
    """Posted by the run worker at the end (``result`` or ``error``)."""

    def __init__(self, result=None, error: BaseException | None = None) -> None:
        super().__init__()
        self.result = result
        self.error = error


class RunModal(ModalScreen):
    """Applies a confirmed plan in a thread worker with a progress bar.

    Stop (or escape) asks the engine to stop after the current script call:
    every job is then either moved or untouched, and the journal says the
    run was interrupted.  Dismisses with ``(result, error)``.
    """

    DEFAULT_CSS = """
    RunModal { align: center middle; }
    RunModal > Vertical { width: 80; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    RunModal ProgressBar { margin: 1 0; }
    RunModal #run-buttons { height: auto; align-horizontal: right; }
    """

    BINDINGS = [Binding("escape", "stop", "stop")]
    AUTO_FOCUS = "#stop"

    def __init__(self, prepared, *, autostart: bool = True) -> None:
        super().__init__()
        #: a :class:`~jobctl.ops.core.Prepared` (a bare Plan only for a static modal)
        self.prepared = prepared
        self.plan = getattr(prepared, "plan", prepared)
        self.autostart = autostart  # False: a static modal (snapshot tests)
        self.stop_event = threading.Event()
        self.done = 0

    def compose(self) -> ComposeResult:
        info = OPERATIONS[self.plan.spec.operation]
        with Vertical():
            yield Label(f"{info.verb.capitalize()} {self.plan.planned:,} job(s) — queue {self.plan.spec.queue}",
                        id="run-title")
            # the status line below says elapsed and ETA in words: no unlabelled clock in the bar
            yield ProgressBar(total=max(1, self.plan.planned), show_eta=False, id="run-progress")
            yield Static("starting …", id="run-status")
            with Horizontal(id="run-buttons"):
                yield Button("Stop after this batch", id="stop", variant="error")

    def on_mount(self) -> None:
        self.started_ms = self.app.clock()
        if self.autostart:
            self.app.running_ops += 1
            self._apply()

    @work(thread=True, exit_on_error=False, group="apply")
    def _apply(self) -> None:
        app = self.app
        try:
            res = app.dash.apply(self.prepared, stop=self.stop_event.is_set,
                                 progress=lambda d, t: self.post_message(RunProgress(d, t)),
                                 rate=app.op_rate, batch=app.op_batch,
                                 note=lambda text: app.call_from_thread(app.notify, text)).result
        except BaseException as exc:  # noqa: BLE001 - reported by the UI thread
            self.post_message(RunFinished(error=exc))
            return
        self.post_message(RunFinished(result=res))

    def on_run_progress(self, msg: RunProgress) -> None:
        self.done = msg.done
        self.query_one(ProgressBar).update(total=max(1, msg.total), progress=msg.done)
        elapsed = self.app.clock() - self.started_ms
        self.query_one("#run-status", Static).update(fmt.progress_words(msg.done, msg.total, elapsed))

    def on_run_finished(self, msg: RunFinished) -> None:
        self.app.running_ops -= 1
        self.dismiss((msg.result, msg.error))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_stop()

    def action_stop(self) -> None:
        if not self.stop_event.is_set():
            self.stop_event.set()
            self.query_one("#run-status", Static).update("stopping after the current batch …")
            self.query_one("#stop", Button).disabled = True
