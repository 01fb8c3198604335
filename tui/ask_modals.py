"""Modals that ask one thing before an operation is planned: why
(:class:`ReasonModal`), where the jobs go (:class:`TargetModal`), which
scope of a triage group (:class:`ScopeModal`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, OptionList, Static

from jobctl.ops.catalog import OPERATIONS

if TYPE_CHECKING:
    from .actions import ActionRequest

__all__ = ["ReasonModal", "TargetModal", "ScopeModal"]


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
