"""The plan's confirmation modal (:class:`PlanModal`): count, breakdown,
sample ids and what a purge or drain exports, with focus on Cancel.

The core says when the count must be typed (:attr:`Prepared.typed_count`:
a purge, drain or transform, and anything in production).  The title names
the queue, the server (no password) and its environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from jobctl.ops.catalog import OPERATIONS
from jobctl.ops.core import breakdown_rows
from jobctl.ops.spec import Operation

if TYPE_CHECKING:
    from .actions import ActionRequest

__all__ = ["PlanModal", "plan_table", "export_words"]


def plan_table(plan) -> Table:
    """The plan's breakdown (job type x error -> jobs), its 8 biggest rows."""
    t = Table(header_style="bold", box=None, pad_edge=False, expand=False)
    t.add_column("job type")
    t.add_column("error")
    t.add_column("jobs", justify="right")
    for row in breakdown_rows(plan, 8):
        t.add_row(*row)
    return t


def export_words(prepared) -> str:
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
    PlanModal #confirm { dock: bottom; height: auto; }
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
            yield Label(self._title(info.verb), id="plan-title")
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
                    yield Static(plan_table(plan), id="plan-breakdown")
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
                    extra.append(export_words(self.prepared), style="bold red")
                yield Static(extra, id="plan-extra")
                if getattr(self.prepared, "samples", None):  # migrate --transform: the core's sample diff
                    from .recovery_modals import diff_text

                    yield Static(diff_text(self.prepared.samples), id="plan-samples")
            with Vertical(id="confirm"):  # docked: never scrolled or cut off on a short terminal
                if self.typed_required:
                    yield Input(placeholder=f"type {plan.planned:,} to confirm", id="typed")
                with Horizontal(id="buttons"):
                    yield Button("Cancel", id="cancel", variant="primary")
                    yield Button(f"{info.verb.capitalize()} {plan.planned:,}", id="apply",
                                 variant="error" if info.destructive else "warning",
                                 disabled=self.typed_required)

    def _title(self, verb: str) -> Text:
        """``Redrive — queue email on redis://h:6379/0 (PRODUCTION)`` with the
        environment's badge, so the modal never hides where it acts."""
        from jobctl.humanize import target_words

        from .widgets import env_badge

        app = self.app
        env = getattr(app, "environment", None)
        title = Text(f"{verb.capitalize()} — {target_words(self.request.queue, app.server_label, None)}")
        badge = env_badge(env)
        if badge:
            title.append("  ")
            title.append(badge)
        return title

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
