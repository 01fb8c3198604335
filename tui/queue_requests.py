"""What an operation key applies to on the queue screen's active tab
(:func:`request_for`): the whole queue (overview), the highlighted triage
group, the selected jobs, else every listed job that passes the ``/`` filter.
Each returns an :class:`~.actions.ActionRequest`, or None after a notice
when the key does not apply there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobctl.errors import JobctlError
from jobctl.model import State
from jobctl.ops.catalog import OpInfo
from jobctl.ops.spec import Operation

from .actions import OPERATIONS, ActionRequest, queue_wide_requests
from .ask_modals import ScopeModal
from .widgets import VimTable

if TYPE_CHECKING:
    from .queue_screen import QueueScreen

__all__ = ["request_for", "triage_scope"]


def request_for(screen: QueueScreen, operation: Operation) -> ActionRequest | None:
    """What ``operation`` applies to on ``screen``'s active tab (None: not here)."""
    tab = screen.active_tab
    flt_text = "" if screen.filter.is_match_all else screen.filter.text
    if operation is Operation.REPLAY:  # what the layout replays (its history), whatever the tab
        return ActionRequest(operation, screen.queue, State.HISTORY,
                             _replay_source(screen) + (f" matching {flt_text}" if flt_text else ""), flt_text)
    if tab == "overview" and operation is Operation.TRANSFORM:
        return ActionRequest(operation, screen.queue, State.READY,
                             "every ready job" + (f" matching {flt_text}" if flt_text else ""), flt_text)
    if tab == "overview":
        return next(r for r in queue_wide_requests(screen.queue, flt_text) if r.operation is operation)
    if tab == "triage" and operation in (Operation.PAUSE, Operation.RESUME):
        triage_scope(screen, operation)
        return None
    if tab == "triage":
        return _triage_request(screen, operation, OPERATIONS[operation], flt_text)
    return _list_request(screen, operation, OPERATIONS[operation], flt_text)


def _replay_source(screen: QueueScreen) -> str:
    """What the queue's layout replays, in words (its declaration; "history"
    when the queue cannot be resolved: the flow then refuses with the core's words)."""
    session = screen.app.session
    try:
        with session.errors():
            return session.layout(screen.queue).replay_source
    except JobctlError:
        return "history"


def _highlighted_group(screen: QueueScreen):
    """The highlighted triage group (None after a notice)."""
    key = screen.query_one("#groups", VimTable).current_key
    g = screen.triage.group(key) if screen.triage and key else None
    if g is None:
        screen.app.notify("no triage group highlighted", severity="warning")
    return g


def _triage_request(screen: QueueScreen, operation: Operation, info: OpInfo,
                    flt_text: str) -> ActionRequest | None:
    """The dead jobs of the highlighted triage group (and the ``/`` filter)."""
    if State.DEAD not in info.sources:
        screen.app.notify(f"{info.verb} does not apply to dead jobs (overview tab: whole queue)",
                          severity="warning")
        return None
    g = _highlighted_group(screen)
    if g is None:
        return None
    text = g.filter_text if not flt_text else f"({flt_text}) and {g.filter_text}"
    return ActionRequest(operation, screen.queue, State.DEAD,
                         f"triage group {g.job_type or '(none)'} × {g.error or '(none)'} "
                         f"({g.count:,} job(s) at triage time)", text)


def _list_request(screen: QueueScreen, operation: Operation, info: OpInfo,
                  flt_text: str) -> ActionRequest | None:
    """The jobs or processing list: the selected jobs, else every listed job
    that passes the ``/`` filter (requeue: every stuck one)."""
    tab = screen.active_tab
    source = screen.jobs_state if tab == "jobs" else State.PROCESSING
    if tab == "journal":
        screen.app.notify("no action on the journal tab", severity="warning")
        return None
    if source not in info.sources:
        screen.app.notify(f"{info.verb} works on {' or '.join(s.value for s in info.sources)} jobs; this list "
                          f"shows {source.value} jobs" + (" (s: next state)" if tab == "jobs" else ""),
                          severity="warning")
        return None
    if screen.selection and operation in (Operation.MIGRATE, Operation.DRAIN, Operation.TRANSFORM):
        screen.app.notify(f"{info.verb} takes every listed job (and the / filter), not selected jobs: "
                          "c clears the selection", severity="warning")
        return None
    if screen.selection:
        ids = tuple(sorted(screen.selection))
        return ActionRequest(operation, screen.queue, source, f"{len(ids):,} selected {source.value} job(s)",
                             ids=ids)
    if operation is Operation.REQUEUE:
        return ActionRequest(operation, screen.queue, source,
                             "every stuck job" + (f" matching {flt_text}" if flt_text else ""), flt_text,
                             stuck_only=True)
    scope = f"every {source.value} job" + (f" matching {flt_text}" if flt_text else "")
    return ActionRequest(operation, screen.queue, source, scope, flt_text)


def triage_scope(screen: QueueScreen, operation: Operation) -> None:
    """Pause (resume) from a triage group: pick its job type or one of its
    tenants (:meth:`TriageGroup.scopes`, the core's grouping), then the
    ready (paused) jobs of that filter go through the usual flow."""
    g = _highlighted_group(screen)
    if g is None:
        return
    scopes = g.scopes()
    source = State.READY if operation is Operation.PAUSE else State.PAUSED
    verb = OPERATIONS[operation].verb

    def chosen(index: int | None) -> None:
        if index is None:
            return
        label, text = scopes[index]
        req = ActionRequest(operation, screen.queue, source,
                            f"every {source.value} job of {label} (triage group {g.job_type or '(none)'} × "
                            f"{g.error or '(none)'})", text)
        screen.app.start_action(req, after=screen.after_action)

    screen.app.push_screen(ScopeModal(f"{verb.capitalize()} the {source.value} jobs of … (queue {screen.queue})",
                                      scopes), chosen)
