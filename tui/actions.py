"""Operations from the TUI: what is asked (:class:`ActionRequest`), the
plan's confirmation modal and the progress modal.

The flow is the CLI's, through the same operations core
(:class:`jobctl.ops.core.OperationCore`): the keystroke becomes an
:class:`~jobctl.ops.request.OpRequest` (:meth:`ActionRequest.request`), the
core checks and plans it (a purge exports first, like ``jobctl purge
--export-to``), the plan is shown (count, breakdown, sample ids) with focus
on Cancel, and only then the core applies it (through
:meth:`jobctl.dashboard.Dashboard.apply`), writing the same journal.  The
core says when the count must be typed (:attr:`Prepared.typed_count`: over
:data:`TYPED_CONFIRM_OVER` jobs, and every purge).  Operation facts (keys,
sources, verbs) come from :mod:`jobctl.ops.catalog`.  Planning and applying
run in thread workers; the modals only receive messages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, OptionList, ProgressBar, Static

from jobctl.model import State
from jobctl.ops.catalog import OPERATIONS, TYPED_CONFIRM_OVER, OpInfo, needs_typed_count
from jobctl.ops.core import breakdown_rows
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation

__all__ = ["ActionRequest", "OPERATIONS", "OpInfo", "operation_bindings", "TYPED_CONFIRM_OVER", "needs_typed_count", "PlanModal",
           "RunModal", "ReasonModal", "TargetModal", "ScopeModal"]

@dataclass
class ActionRequest:
    """One operation asked from the keyboard.

    ``scope`` says in words what it applies to ("triage group ...", "3
    selected jobs", "every stuck job"); ``filter_text`` ("" for none),
    ``ids`` and ``stuck_only`` become the core's :class:`OpRequest`
    (:meth:`request`).  ``destination``: the queue a migrate (``drain
    --to``) moves the jobs to; ``export_to``: the directory a drain
    (``drain --export-to``) exports them to first (both asked by
    :class:`TargetModal` when missing).
    """

    operation: Operation
    queue: str
    source: State
    scope: str
    filter_text: str = ""
    ids: tuple[str, ...] = ()
    stuck_only: bool = False
    reason: str | None = None
    destination: str | None = None
    export_to: str | None = None
    #: replay: ``(from, to)`` XRANGE bounds (asked by :class:`~.recovery_modals.ReplayModal`)
    replay_range: tuple[str, str] | None = None
    #: migrate --transform / --rollback (asked by :class:`~.recovery_modals.TransformModal`)
    transform: object | None = None

    def request(self, export_to: str | None = None) -> OpRequest:
        """The core's :class:`OpRequest`; ``export_to``: where a purge
        exports the jobs first (the CLI's ``--export-to``; a drain's own
        :attr:`export_to` otherwise).  A migrate (and a migrate --transform)
        keeps the jobs' state."""
        target = self.source if self.operation in (Operation.MIGRATE, Operation.TRANSFORM) else None
        return OpRequest(self.operation, self.queue, source=self.source, target=target,
                         filter_text=self.filter_text or None, ids=self.ids, stuck_only=self.stuck_only,
                         reason=self.reason, export_to=export_to or self.export_to, destination=self.destination,
                         replay_range=self.replay_range, transform=self.transform)


def operation_bindings(**labels: str) -> list[Binding]:
    """A screen's bindings of the operation keys (:data:`OPERATIONS`: ``U``
    requeue, ``P`` promote, ``R`` redrive, ``S`` suppress, ``X`` purge), each
    calling ``action_op(<operation>)``; ``labels`` overrides a footer label
    by operation name (``requeue="requeue stuck"``)."""
    return [Binding(i.key, f"op('{i.operation.value}')", labels.get(i.operation.value, i.verb))
            for i in OPERATIONS.values() if i.key]


def _plan_table(plan) -> Table:
    t = Table(header_style="bold", box=None, pad_edge=False, expand=False)
    t.add_column("job type")
    t.add_column("error")
    t.add_column("jobs", justify="right")
    for row in breakdown_rows(plan, 8):
        t.add_row(*row)
    return t


def _export_words(prepared) -> str:
    """What a purge (drain) plan says of its export: written on Apply
    (nothing is written before), or the complete export it is fenced to."""
    pending = getattr(prepared, "export_pending", None)
    done = prepared.exported
    where = Path(pending or done).name if (pending or done) else None
    drain = prepared.plan.spec.operation is Operation.DRAIN
    head = ("\ndrain removes the jobs from Redis (index entry and payload); " if drain
            else "\npurge deletes jobs for good (index entry and payload); ")
    if where is None:
        return head + "there is no export"
    what = "removed" if drain else "purged"
    if pending:
        return head + (f"on Apply, first exported to …/{where} (nothing is written before): only the "
                       f"exported jobs, each if unchanged, are {what}")
    return head + f"exported first to …/{where}: only those jobs, each if unchanged, are {what}"


class PlanModal(ModalScreen[bool]):
    """The plan of an operation; dismisses with True to apply it.

    Focus starts on Cancel.  Typed confirmation: the Apply button stays
    disabled until the input holds the planned count.
    """

    DEFAULT_CSS = """
    PlanModal { align: center middle; }
    PlanModal > Vertical { width: 96; max-width: 100%; height: auto; max-height: 90%;
                           border: thick $warning; background: $surface; padding: 0 1; }
    PlanModal.-destructive > Vertical { border: thick $error; }
    PlanModal #plan-title { text-style: bold; width: 1fr; }
    PlanModal VerticalScroll { height: auto; max-height: 20; }
    PlanModal #typed { margin: 1 0 0 0; }
    PlanModal #buttons { height: auto; align-horizontal: right; margin: 1 0 0 0; }
    PlanModal Button { margin: 0 0 0 2; }
    """

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    AUTO_FOCUS = "#cancel"

    def __init__(self, request: ActionRequest, prepared) -> None:
        super().__init__()
        self.request = request
        self.prepared = prepared
        self.plan = prepared.plan
        self.typed_required = prepared.typed_count

    def compose(self) -> ComposeResult:
        plan, req = self.plan, self.request
        info = OPERATIONS[plan.spec.operation]
        if info.destructive:
            self.add_class("-destructive")
        with Vertical():
            yield Label(f"{info.verb.capitalize()} — queue {req.queue}", id="plan-title")
            body = Text()
            body.append("scope: ", style="bold")
            body.append(req.scope + "\n")
            body.append(plan.describe() + "\n", style="bold")
            body.append(f"scanned {plan.scanned:,} job(s); matched {plan.planned:,}")
            if plan.truncated:
                body.append(" (stopped at the limit)")
            if plan.spec.filter.text:
                body.append(f"\nfilter: {plan.spec.filter.text}")
            if plan.spec.reason:
                body.append(f"\nreason: {plan.spec.reason}")
            if plan.spec.replay_range:
                body.append(f"\nentries {plan.spec.replay_range[0]} .. {plan.spec.replay_range[1]}")
            if plan.spec.transform is not None:
                body.append(f"\ntransformation: {plan.spec.transform.describe()}")
            for h in getattr(self.prepared, "holds", ()):
                body.append(f"\nlifts hold {h['id']} ({h['filter'] or 'every job'}: {h['reason']})", style="yellow")
            with VerticalScroll(can_focus=False):
                yield Static(body, id="plan-body")
                if plan.breakdown:
                    yield Static(_plan_table(plan), id="plan-breakdown")
                extra = Text()
                if plan.planned:
                    extra.append("sample ids: " + ", ".join(plan.sample_ids(5)))
                    if plan.planned > 5:
                        extra.append(", …")
                if plan.malformed:
                    extra.append(f"\n{len(plan.malformed):,} job(s) with malformed envelopes excluded",
                                 style="yellow")
                if plan.dangling:
                    extra.append(f"\n{len(plan.dangling):,} dangling id(s) without payload excluded "
                                 "(see jobctl check)", style="yellow")
                if info.destructive:
                    extra.append(_export_words(self.prepared), style="bold red")
                yield Static(extra, id="plan-extra")
                if getattr(self.prepared, "samples", None):  # migrate --transform: the core's sample diff
                    from .recovery_modals import diff_text

                    yield Static(diff_text(self.prepared.samples), id="plan-samples")
            if self.typed_required:
                yield Input(placeholder=f"type {plan.planned:,} to confirm", id="typed")
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(f"{info.verb.capitalize()} {plan.planned:,}", id="apply",
                             variant="error" if info.destructive else "warning",
                             disabled=self.typed_required)

    def _typed_ok(self, value: str) -> bool:
        digits = value.replace(",", "").replace("_", "").replace(" ", "")
        return digits == str(self.plan.planned)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#apply", Button).disabled = not self._typed_ok(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._typed_ok(event.value):
            self.dismiss(True)
        else:
            self.app.notify(f"type {self.plan.planned:,} to confirm", severity="warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "apply")

    def action_cancel(self) -> None:
        self.dismiss(False)


class ReasonModal(ModalScreen[str | None]):
    """Asks why (suppress and pause keep the reason with who and when)."""

    DEFAULT_CSS = """
    ReasonModal { align: center middle; }
    ReasonModal > Vertical { width: 80; height: auto; border: thick $warning; background: $surface;
                             padding: 0 1; }
    """

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, request: ActionRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{OPERATIONS[self.request.operation].verb.capitalize()} — {self.request.scope}")
            yield Input(placeholder="reason (required; enter to continue, esc to cancel)", id="reason")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.dismiss(event.value.strip())
        else:
            self.app.notify(f"a reason is required to {OPERATIONS[self.request.operation].verb}", severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class TargetModal(ModalScreen[str | None]):
    """Asks where the jobs go: the destination queue of a migrate (``kind``
    ``"queue"``, completed from ``suggestions``) or the export directory of
    a drain (``"export"``, prefilled with ``default``).  Dismisses with the
    text, or ``None`` (escape)."""

    DEFAULT_CSS = """
    TargetModal { align: center middle; }
    TargetModal > Vertical { width: 96; max-width: 100%; height: auto; border: thick $warning;
                             background: $surface; padding: 0 1; }
    TargetModal .note { padding: 0; }
    """

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, request: ActionRequest, kind: str, *, default: str = "",
                 suggestions: list[str] | None = None) -> None:
        super().__init__()
        self.request = request
        self.kind = kind
        self.default = default
        self.suggestions = list(suggestions or [])

    def compose(self) -> ComposeResult:
        verb = OPERATIONS[self.request.operation].verb.capitalize()
        with Vertical():
            yield Label(f"{verb} — {self.request.scope} of queue {self.request.queue}", id="target-title")
            if self.kind == "queue":
                note = ("to which queue? (reliable-list; copy-then-delete, crash-safe; without a filter this "
                        "is `jobctl drain --to`)" + (f"  queues: {', '.join(self.suggestions)}"
                                                     if self.suggestions else ""))
                placeholder = "destination queue (enter to plan, esc to cancel)"
            else:
                note = ("export to which directory? the jobs are exported there first (as `jobctl export` "
                        "does), then exactly the exported jobs leave Redis")
                placeholder = "export directory (enter to export and plan, esc to cancel)"
            yield Static(note, classes="note")
            suggester = SuggestFromList(self.suggestions, case_sensitive=True) if self.suggestions else None
            yield Input(self.default, placeholder=placeholder, id="target", suggester=suggester)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if value:
            self.dismiss(value)
        else:
            self.app.notify("a destination queue is required" if self.kind == "queue"
                            else "an export directory is required", severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class ScopeModal(ModalScreen[int | None]):
    """Picks what a pause/resume from a triage group applies to: one of
    ``scopes`` (``(label, filter text)``, from the core's grouping:
    :meth:`jobctl.dashboard.TriageGroup.scopes`).  Dismisses with its index,
    or ``None`` (escape)."""

    DEFAULT_CSS = """
    ScopeModal { align: center middle; }
    ScopeModal > Vertical { width: 96; max-width: 100%; height: auto; border: thick $warning;
                            background: $surface; padding: 0 1; }
    ScopeModal OptionList { height: auto; max-height: 10; }
    """

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str, scopes: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.scopes = scopes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, id="scope-title")
            yield OptionList(*[Text.assemble(label, "   ", (text, "cyan")) for label, text in self.scopes],
                             id="scopes")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option_index)

    def action_cancel(self) -> None:
        self.dismiss(None)


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
            yield ProgressBar(total=max(1, self.plan.planned), show_eta=self.autostart, id="run-progress")
            yield Static("starting …", id="run-status")
            with Horizontal(id="run-buttons"):
                yield Button("Stop after this batch", id="stop", variant="error")

    def on_mount(self) -> None:
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
        self.query_one("#run-status", Static).update(f"{msg.done:,} of {msg.total:,} done")

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
