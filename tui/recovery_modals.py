"""The questions of the recovery operations that need more than a reason
or a destination (issue 14): the range of a replay (:class:`ReplayModal`,
``jobctl replay --from/--to``) and the transformation of an envelope
migration (:class:`TransformModal`, ``jobctl migrate --transform FILE`` or
``--rollback OPERATION``).  Each validates with the CLI's own parser
(:func:`jobctl.ops.stream_bounds.replay_range`,
:func:`jobctl.ops.transform.load_transform`), and the shard count of a
reshard (:class:`ShardsModal`, ``jobctl reshard --shards N``, checked by
:func:`jobctl.layouts.sharding.reshard_destination`): a bad value is a one-line
notice and the question stays open; nothing is read or changed until the
plan modal (:class:`~.actions.PlanModal`) is confirmed."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, ScreenResultType
from textual.widgets import Input, Label, Static

from jobctl.errors import JobctlError
from jobctl.ops.spec import Operation

if TYPE_CHECKING:
    from .actions import ActionRequest

__all__ = ["ReplayModal", "TransformModal", "ShardsModal", "ask_recovery", "start_reshard", "diff_text"]

_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 96; max-width: 100%; height: auto; border: thick $warning; background: $surface;
                    padding: 0 1; }}
{name} .note {{ padding: 0; }}
"""


class _QuestionModal(ModalScreen[ScreenResultType]):
    """A modal asking one question of a flow: escape dismisses it with ``None``."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def action_cancel(self) -> None:
        self.dismiss(None)


def diff_text(lines: list[str]) -> Text:
    """Unified diff lines (the core's :attr:`Prepared.samples`) coloured."""
    out = Text()
    for line in lines:
        style = ("bold" if line.startswith(("---", "+++")) else "green" if line.startswith("+")
                 else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
        out.append(line + "\n", style=style)
    return out


class ReplayModal(_QuestionModal["tuple[str, str] | None"]):
    """Asks the range of a replay: ``--from`` (required) and ``--to``
    (empty: the newest entry), each an entry id, epoch ms, an ISO-8601 time
    or a duration ago.  Dismisses with the XRANGE bounds, or ``None``
    (escape).  ``now_ms``: "now" of a duration ago."""

    DEFAULT_CSS = _CSS.format(name="ReplayModal")

    def __init__(self, queue: str, now_ms: int | None = None) -> None:
        super().__init__()
        self.queue = queue
        self.now_ms = now_ms

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Replay — acknowledged history of queue {self.queue}", id="replay-title")
            yield Static("re-adds each entry once as a new entry with replayOf (a replay run twice replays "
                         "once); from/to: an entry id, epoch ms, ISO-8601 time or a duration ago (2h)",
                         classes="note")
            yield Input(placeholder="--from (required)", id="from")
            yield Input(placeholder="--to (empty: the newest entry; enter to plan, esc to cancel)", id="to")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "from" and not self.query_one("#to", Input).value:
            self.query_one("#to", Input).focus()
            return
        from jobctl.ops.stream_bounds import replay_range

        try:
            bounds = replay_range(self.query_one("#from", Input).value, self.query_one("#to", Input).value,
                                  now_ms=self.now_ms)
        except JobctlError as exc:
            self.app.notify(str(exc), severity="warning")
            return
        self.dismiss(bounds)


#: An operation id of the journal (``transform-20261124T183000Z-1a2b3c4d``): a rollback.
_OPERATION_ID = re.compile(r"transform-\d{8}T\d{6}Z-[0-9a-f]{8}")


class TransformModal(_QuestionModal[object]):
    """Asks the transformation of an envelope migration: a TOML file path
    (``--transform FILE``, loaded and checked here) or the id of the
    transform operation to roll back (``--rollback OPERATION``).  Dismisses
    with a :class:`~jobctl.ops.transform.Transform` or
    :class:`~jobctl.ops.transform.Rollback`, or ``None`` (escape)."""

    DEFAULT_CSS = _CSS.format(name="TransformModal")

    def __init__(self, queue: str, scope: str) -> None:
        super().__init__()
        self.queue = queue
        self.scope = scope

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Migrate envelopes — {self.scope} of queue {self.queue}", id="transform-title")
            yield Static("a transformation file (TOML: set, rename, delete, bump_version) rewrites the envelopes "
                         "in place, the old ones kept for a rollback; or the id of a transform operation "
                         "(transform-…) puts back the envelopes it replaced", classes="note")
            yield Input(placeholder="file path or operation id (enter to plan, esc to cancel)", id="transform")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        from jobctl.ops.transform import Rollback, load_transform

        value = event.value.strip()
        if not value:
            self.app.notify("a transformation file or an operation id is required", severity="warning")
            return
        if _OPERATION_ID.fullmatch(value):
            self.dismiss(Rollback(value))
            return
        try:
            transform = load_transform(value)
        except JobctlError as exc:
            self.app.notify(str(exc), severity="warning")
            return
        self.dismiss(transform)


class ShardsModal(_QuestionModal[object]):
    """Asks the new number of shards of a reshard (``--shards N``) of the
    reliable-list ``layout``.  Dismisses with the destination
    :class:`~jobctl.config.QueueConfig` (:func:`reshard_destination`), or
    ``None`` (escape)."""

    DEFAULT_CSS = _CSS.format(name="ShardsModal")

    def __init__(self, layout, scope: str) -> None:
        super().__init__()
        self.queue_layout = layout
        self.scope = scope

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Reshard — {self.scope} of queue {self.queue_layout.queue_name} "
                        f"({len(self.queue_layout.shards)} shard(s) now)", id="shards-title")
            yield Static("each job moves to the shard its id hashes to by the producers' shard_rule, "
                         "copy-then-delete, crash-safe; switch producers and workers first, run it for ready "
                         "and scheduled, then set shards in the catalogue", classes="note")
            yield Input(placeholder="--shards N (enter to plan, esc to cancel)", id="shards")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        from jobctl.errors import UsageError
        from jobctl.layouts.sharding import reshard_destination

        value = event.value.strip()
        try:
            if not value.isdigit():
                raise UsageError(f"--shards: {value!r} is not a number of shards")
            destination = reshard_destination(self.queue_layout, int(value))
        except JobctlError as exc:
            self.app.notify(str(exc), severity="warning")
            return
        self.dismiss(destination)


# -- the flows: each question, then the app's start_action (plan modal, apply) ---------------

def then_start(app, req: "ActionRequest", after: Callable[[], None] | None, fill: Callable[[Any], None], *,
               what: str | None = None, cancelled: Callable[[Any], bool] = lambda value: value is None):
    """The dismiss callback of a question modal: a cancelled answer (``None``
    unless ``cancelled`` says otherwise) -> the notice "<what, else the
    operation> cancelled: nothing was changed"; else ``fill(answer)`` into
    ``req``, then :meth:`JobctlApp.start_action` again."""
    def got(value) -> None:
        if cancelled(value):
            app.notify(f"{what or req.operation.value} cancelled: nothing was changed")
            return
        fill(value)
        app.start_action(req, after)
    return got


def ask_recovery(app, req: "ActionRequest", after: Callable[[], None] | None) -> None:
    """Replay of a layout whose replay takes a stream range: :class:`ReplayModal`
    (from/to), after the layout check (the core's refusal, before asking); migrate --transform:
    :class:`TransformModal` (file or operation id to roll back).  Then
    :meth:`JobctlApp.start_action` again."""
    from jobctl.ops.core import check_layout

    try:
        check_layout(req.operation, app.session.layout(req.queue))
    except JobctlError as exc:
        app.notify(str(exc), severity="error")
        return

    def fill(value) -> None:
        if req.operation is Operation.REPLAY:
            req.replay_range = value
        else:
            req.transform = value

    got = then_start(app, req, after, fill)

    if req.operation is Operation.REPLAY:
        app.push_screen(ReplayModal(req.queue, now_ms=app.clock()), got)
    else:
        app.push_screen(TransformModal(req.queue, req.scope), got)


def start_reshard(app, req: "ActionRequest", after: Callable[[], None] | None = None) -> None:
    """Reshard (a migrate to the same queue with N shards): refused
    with the core's notice on other layouts or without a shard_rule,
    else :class:`ShardsModal`, then :meth:`JobctlApp.start_action`."""
    from jobctl.layouts.sharding import reshard_destination

    try:
        layout = app.session.layout(req.queue)
        reshard_destination(layout, len(layout.shards) + 1)  # the layout and shard_rule refusals now
    except JobctlError as exc:
        app.notify(str(exc), severity="error")
        return

    def fill(value) -> None:
        req.destination = value
        req.scope = f"{req.scope} to {value.shards} shard(s)"

    got = then_start(app, req, after, fill, what="reshard")

    app.push_screen(ShardsModal(layout, req.scope), got)

