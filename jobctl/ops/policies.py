"""The policies of the operations core (:mod:`jobctl.ops.core`) that need
no plan: the request checks (:func:`check_request`) and the layout checks
(:func:`check_layout`), which read what each layout declares
(:class:`~jobctl.layouts.facts.LayoutFacts`), never its name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..model import State
from .catalog import require_requeue_scope
from .request import OpRequest
from .spec import Operation

if TYPE_CHECKING:
    from ..config import QueueConfig
    from ..layouts.base import Layout
    from ..session import Session

__all__ = ["check_request", "check_layout", "require_holdable", "require_known_visibility", "layouts_that"]


def check_request(req: OpRequest, session: "Session | None" = None) -> None:
    """The request-level policies, before anything is read.

    Raises :class:`UsageError` naming the CLI option at fault, then
    :class:`~jobctl.errors.ReadOnlyRefused` when ``session`` is read-only
    and the request is no dry run (:meth:`Session.require_writable`).
    """
    op = req.operation
    require_requeue_scope(req)
    if op is Operation.REDRIVE:
        if req.delay_ms and req.target is not State.SCHEDULED:
            raise UsageError("--delay needs --to scheduled")
        if req.plan_file and req.ids:
            raise UsageError("--plan and --ids exclude each other")
    if op in (Operation.SUPPRESS, Operation.PAUSE) and not (req.reason or "").strip():
        raise UsageError("--reason must not be empty")
    if op is Operation.SUPPRESS and not (req.filter_text or req.ids):
        raise UsageError("suppress needs --filter or --ids (it never takes every dead job at once)")
    if req.visibility_timeout_ms is not None and req.visibility_timeout_ms < 1:
        raise UsageError("--visibility-timeout must be at least 1ms")
    if op is Operation.PURGE:
        if req.no_export and req.export_to:
            raise UsageError("--no-export and --export-to exclude each other")
        if req.export_to and req.limit is not None:
            raise UsageError("--limit cannot be combined with --export-to: the export holds every matching job, "
                             "and the purge removes exactly what it holds")
        if not req.no_export and not req.export_to and not req.dry_run:
            raise UsageError("purge deletes jobs for good: pass --export-to DIR to export them first, "
                             "or --no-export to confirm you do not need an export")
    if op is Operation.DRAIN:  # drain --export-to (drain --to is a migrate)
        if not req.export_to:
            raise UsageError("drain needs --to QUEUE or --export-to DIR")
        if req.limit is not None or req.filter_text:
            raise UsageError("drain --export-to empties the state: no --limit or --filter (the export holds "
                             "every job, and the drain removes exactly what it holds)")
    if session is not None and not req.dry_run:
        session.require_writable(op.value)


def layouts_that(test: Callable[[Any], bool]) -> list[str]:
    """The registered layout names whose class passes ``test`` (e.g.
    ``lambda cls: cls.holds_jobs()``), in registry order."""
    from ..layouts import layout_classes

    return [cls.name for cls in layout_classes() if test(cls)]


#: The operations that need a layout that holds jobs (:meth:`~jobctl.layouts.facts.LayoutFacts.holds_jobs`),
#: and the words their refusal names.
_HOLDING_VERBS = {Operation.PAUSE: "pause", Operation.RESUME: "resume", Operation.MIGRATE: "migrate (or drain --to)",
                  Operation.DRAIN: "drain --export-to", Operation.TRANSFORM: "migrate --transform"}


def require_holdable(layout: "Layout", verb: str) -> None:
    """Refuse ``verb`` (``"pause"``, ``"hold"``...) on a layout whose workers
    take jobs from keys jobctl cannot hold jobs back from.  Raises
    :class:`UsageError`."""
    if not layout.holds_jobs():
        raise UsageError(f"{verb} is not supported for layout {layout.name}: its workers take jobs from keys "
                         "jobctl cannot hold jobs back from without their cooperation (supported: "
                         f"{', '.join(layouts_that(lambda cls: cls.holds_jobs()))})")


def require_known_visibility(queue: "QueueConfig") -> None:
    """Refuse ``requeue --stuck`` on ``queue`` when its visibility timeout
    is only its layout's default: a guess, which against workers with a
    longer timeout would requeue jobs they still hold.  Raises
    :class:`UsageError`."""
    from ..config import defaulted_visibility

    default = defaulted_visibility(queue)
    if default is not None:
        raise UsageError(f"requeue --stuck on queue {queue.name}: its visibility timeout is not configured (the "
                         f"{queue.layout} default {default:,} ms is a guess; a longer worker timeout would "
                         "requeue live jobs): set visibility_timeout_ms or pass --visibility-timeout")


def check_layout(operation: "Operation | OpRequest", layout: "Layout", destination: "Layout | None" = None) -> None:
    """The layout-level refusals, before anything is exported, asked or
    planned: replay needs a layout that declares it (an acknowledged
    history: stream-group); pause, resume, migrate (also of ``destination``,
    the queue a migrate moves to), drain and transformations need a layout
    that holds jobs; given a request, ``requeue --stuck`` needs a
    known visibility timeout (``layout.queue``: the catalogue entry with
    the request's ``visibility_timeout_ms`` applied).  Raises
    :class:`UsageError`."""
    req = operation if isinstance(operation, OpRequest) else None
    op = req.operation if req is not None else operation
    if op is Operation.REPLAY and not layout.supports(Operation.REPLAY):
        names = " or ".join(layouts_that(lambda cls: cls.supports(Operation.REPLAY)))
        raise UsageError(f"replay is for the {names} layout; {layout.queue_name} is {layout.name} (no "
                         "acknowledged history to replay)")
    if op in _HOLDING_VERBS:
        require_holdable(layout, _HOLDING_VERBS[op])
    if op is Operation.MIGRATE and destination is not None:
        require_holdable(destination, "migrate (or drain --to)")
    if req is not None and op is Operation.REQUEUE and req.stuck_only:
        require_known_visibility(layout.queue)
