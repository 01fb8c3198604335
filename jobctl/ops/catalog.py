"""Facts about operations, written once: which states each operation moves
between, its TUI key, its verb, whether it destroys data, the confirmation
thresholds, and the (job type, error) grouping key shared by plan breakdowns
and the DLQ triage.

Read by the layouts' planners (transitions), the operations core
(:mod:`jobctl.ops.core`: thresholds), the CLI and the TUI (keys, verbs,
sources).  Source: seed 000 sections 8 and 22.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model import State
from .spec import Operation

if TYPE_CHECKING:
    from ..model import Envelope

__all__ = ["OpInfo", "OPERATIONS", "TRANSITIONS_WITH_SCHEDULED", "TRANSITIONS_WITHOUT_SCHEDULED",
           "PRODUCTION_NAMES", "is_production", "needs_typed_count",
           "require_requeue_scope", "group_key", "GROUP_MESSAGE_CHARS", "operation_for_key",
           "JOB_OPERATIONS", "job_operations"]

#: ``(operation, source) -> allowed targets`` (``None``: purge) of a layout
#: with ready, scheduled, processing, dead and suppressed states
#: (reliable-list, stream-group).
TRANSITIONS_WITH_SCHEDULED: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    (Operation.REQUEUE, State.PROCESSING): (State.READY,),
    (Operation.REDRIVE, State.DEAD): (State.READY, State.SCHEDULED),
    (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
    (Operation.SUPPRESS, State.DEAD): (State.SUPPRESSED,),
    (Operation.UNSUPPRESS, State.SUPPRESSED): (State.DEAD,),
    (Operation.PURGE, State.DEAD): (None,),
    (Operation.PURGE, State.SUPPRESSED): (None,),
}

#: The same for a layout without a scheduled state (hash-job, json-list):
#: no promote, redrive only to ready.
TRANSITIONS_WITHOUT_SCHEDULED: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    k: tuple(t for t in v if t is not State.SCHEDULED)
    for k, v in TRANSITIONS_WITH_SCHEDULED.items() if k[0] is not Operation.PROMOTE
}


@dataclass(frozen=True)
class OpInfo:
    """One operation: its TUI ``key``, the ``sources`` it takes jobs from
    (first: the default), its default ``target`` (``None``: purge), its
    ``verb`` and whether it deletes data (``destructive``)."""

    operation: Operation
    key: str
    sources: tuple[State, ...]
    target: State | None
    verb: str
    destructive: bool = False


#: Operation -> :class:`OpInfo`, in the TUI footer's order.  Unsuppress has no TUI key (``""``).
OPERATIONS: dict[Operation, OpInfo] = {
    Operation.REQUEUE: OpInfo(Operation.REQUEUE, "U", (State.PROCESSING,), State.READY, "requeue"),
    Operation.PROMOTE: OpInfo(Operation.PROMOTE, "P", (State.SCHEDULED,), State.READY, "promote"),
    Operation.REDRIVE: OpInfo(Operation.REDRIVE, "R", (State.DEAD,), State.READY, "redrive"),
    Operation.SUPPRESS: OpInfo(Operation.SUPPRESS, "S", (State.DEAD,), State.SUPPRESSED, "suppress"),
    Operation.UNSUPPRESS: OpInfo(Operation.UNSUPPRESS, "", (State.SUPPRESSED,), State.DEAD, "unsuppress"),
    Operation.PURGE: OpInfo(Operation.PURGE, "X", (State.DEAD, State.SUPPRESSED), None, "purge",
                            destructive=True),
    Operation.PAUSE: OpInfo(Operation.PAUSE, "", (State.READY, State.SCHEDULED), State.PAUSED, "pause"),
    Operation.RESUME: OpInfo(Operation.RESUME, "", (State.PAUSED,), State.READY, "resume"),
    Operation.TRANSFORM: OpInfo(Operation.TRANSFORM, "", (State.DEAD, State.READY, State.SCHEDULED, State.PAUSED),
                                State.DEAD, "transform"),
    Operation.REPLAY: OpInfo(Operation.REPLAY, "", (State.HISTORY,), State.READY, "replay"),
    Operation.MIGRATE: OpInfo(Operation.MIGRATE, "", (State.READY, State.SCHEDULED), State.READY, "migrate"),
    # drain --export-to: the jobs leave Redis (index entry and payload) for an export written first
    Operation.DRAIN: OpInfo(Operation.DRAIN, "", (State.READY, State.SCHEDULED), None, "drain", destructive=True),
}


#: The operations that move one job by its id (the inspector's), in :data:`OPERATIONS` order.
JOB_OPERATIONS: tuple[Operation, ...] = (Operation.REQUEUE, Operation.PROMOTE, Operation.REDRIVE,
                                         Operation.SUPPRESS, Operation.UNSUPPRESS, Operation.PURGE)


def job_operations(state: State | None, *, stuck: bool = False) -> tuple[Operation, ...]:
    """The :data:`JOB_OPERATIONS` that apply to one job in ``state``: those
    taking jobs from that state, a requeue only when the processing job is
    ``stuck`` (past its visibility deadline).  Dead: redrive, suppress,
    purge; suppressed: unsuppress, purge; scheduled: promote; ready or
    ``None`` (an orphan payload): none."""
    return tuple(op for op in JOB_OPERATIONS
                 if state in OPERATIONS[op].sources and (op is not Operation.REQUEUE or stuck))


def operation_for_key(key: str) -> Operation | None:
    """The operation bound to TUI key ``key`` (``"R"`` -> redrive), if any."""
    return next((i.operation for i in OPERATIONS.values() if i.key and i.key == key), None)


def require_requeue_scope(request) -> None:
    """Requeue touches claimed jobs: it needs ``--stuck`` or ``--ids``.

    ``request``: an :class:`~jobctl.ops.spec.OpSpec` or
    :class:`~jobctl.ops.request.OpRequest`.  Raises :class:`UsageError`."""
    if request.operation is Operation.REQUEUE and not request.stuck_only and not request.ids:
        from ..errors import UsageError

        raise UsageError("requeue needs --stuck or --ids")


#: Environment names (a profile's ``environment``, any case) that mean production.
PRODUCTION_NAMES = frozenset({"production", "prod", "prd", "live"})


def is_production(environment: str | None) -> bool:
    """Whether a profile's ``environment`` names production (:data:`PRODUCTION_NAMES`)."""
    return bool(environment) and environment.strip().lower() in PRODUCTION_NAMES


def needs_typed_count(plan, environment: str | None = None) -> bool:
    """Whether confirming ``plan`` (a :class:`~jobctl.ops.plan.Plan`) needs
    its job count typed rather than a plain yes: an operation that deletes
    or rewrites data (purge, drain, transform), or any operation on a
    server whose ``environment`` is production."""
    op = plan.spec.operation
    return OPERATIONS[op].destructive or op is Operation.TRANSFORM or is_production(environment)


#: Characters of the last error message that stand for the error of a job without an error code.
GROUP_MESSAGE_CHARS = 40


def group_key(env: "Envelope") -> tuple[str | None, str | None]:
    """The (job type, error) group of a job: the envelope's ``type`` and
    ``lastError.code``, else the first :data:`GROUP_MESSAGE_CHARS`
    characters of its last error message (``None`` when missing).  Plan
    breakdowns and the DLQ triage both group by it, so their counts agree."""
    msg = env.last_error_message
    return env.job_type, env.last_error_code or (msg[:GROUP_MESSAGE_CHARS] if msg else None)
