"""Operations from the TUI: what is asked (:class:`ActionRequest`), the
operation keys (:func:`operation_bindings`) and the whole-queue requests
(:func:`queue_wide_requests`).

The flow is the CLI's, through the same operations core
(:class:`jobctl.ops.core.OperationCore`): the keystroke becomes an
:class:`~jobctl.ops.request.OpRequest` (:meth:`ActionRequest.request`), the
core checks and plans it (a purge exports first, like ``jobctl purge
--export-to``), the plan is shown (:class:`~.plan_modal.PlanModal`: count,
breakdown, sample ids) with focus on Cancel, and only then the core applies
it (:class:`~.run_modal.RunModal`, through
:meth:`jobctl.dashboard.Dashboard.apply`), writing the same journal.  The
core says when the count must be typed (:attr:`Prepared.typed_count`: a purge,
drain or transform, and anything in production).  Operation facts (keys,
sources, verbs) come from :mod:`jobctl.ops.catalog`.  Planning and applying
run in thread workers; the modals only receive messages
(:class:`~.action_flow.ActionFlow` drives them).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

from jobctl.model import State
from jobctl.ops.catalog import OPERATIONS, OpInfo, needs_typed_count
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation

__all__ = ["ActionRequest", "OPERATIONS", "OpInfo", "operation_bindings", "queue_wide_requests",
           "needs_typed_count"]


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


def queue_wide_requests(name: str, filter_text: str = "") -> list[ActionRequest]:
    """The whole-queue operations (dashboard keys and the palette)."""
    suffix = f" matching {filter_text}" if filter_text else ""
    return [
        ActionRequest(Operation.REQUEUE, name, State.PROCESSING, f"every stuck job{suffix}", filter_text,
                      stuck_only=True),
        ActionRequest(Operation.PROMOTE, name, State.SCHEDULED, f"every scheduled job{suffix}", filter_text),
        ActionRequest(Operation.REDRIVE, name, State.DEAD, f"every dead job{suffix}", filter_text),
        ActionRequest(Operation.SUPPRESS, name, State.DEAD, f"every dead job{suffix}", filter_text),
        ActionRequest(Operation.PURGE, name, State.DEAD, f"every dead job{suffix}", filter_text),
        ActionRequest(Operation.PAUSE, name, State.READY, f"every ready job{suffix}", filter_text),
        ActionRequest(Operation.RESUME, name, State.PAUSED, f"every paused job{suffix}", filter_text),
        ActionRequest(Operation.MIGRATE, name, State.READY, f"every ready job{suffix}", filter_text),
        ActionRequest(Operation.DRAIN, name, State.READY, f"every ready job{suffix}", filter_text),
    ]
