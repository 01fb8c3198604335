"""What an operation is asked to do: :class:`OpSpec`.

Operations (seed 000 sections 8 and 22): requeue (processing -> ready),
redrive (dead -> ready or scheduled), promote (scheduled -> ready), suppress
(dead -> suppressed), unsuppress (suppressed -> dead) and purge (dead or
suppressed -> gone, index entry and payload together).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..filter import MATCH_ALL, Filter
from ..model import State

__all__ = ["Operation", "OpSpec", "new_operation_id", "operator_name"]


class Operation(str, Enum):
    REQUEUE = "requeue"
    REDRIVE = "redrive"
    PROMOTE = "promote"
    SUPPRESS = "suppress"
    UNSUPPRESS = "unsuppress"
    PURGE = "purge"
    PAUSE = "pause"
    RESUME = "resume"
    MIGRATE = "migrate"
    DRAIN = "drain"
    TRANSFORM = "transform"
    REPLAY = "replay"

    def __str__(self) -> str:
        return self.value


def new_operation_id(op: Operation) -> str:
    """``redrive-20261121T101500Z-1a2b3c4d``: names the operation in the
    journal and in every envelope it touches."""
    import time

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{op.value}-{stamp}-{uuid.uuid4().hex[:8]}"


def operator_name() -> str:
    """``user@host`` of whoever runs jobctl (``$JOBCTL_OPERATOR`` overrides)."""
    if os.environ.get("JOBCTL_OPERATOR"):
        return os.environ["JOBCTL_OPERATOR"]
    import getpass

    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass
class OpSpec:
    """One requested operation on one queue.

    ``source``/``target`` are states (``target=None``: purge).  ``ids``
    restricts the operation to those job ids; ``stuck_only`` (requeue)
    restricts it to processing jobs past their visibility deadline.
    ``delay_ms`` (redrive ``--to scheduled``) is added to the apply time to
    give the due time.  ``limit`` caps the planned jobs.  ``priority`` picks
    the ``ready:pN`` list of a priority queue (default: its lowest priority).
    """

    operation: Operation
    queue: str
    source: State
    target: State | None
    filter: Filter = MATCH_ALL
    ids: tuple[str, ...] = ()
    stuck_only: bool = False
    limit: int | None = None
    delay_ms: int = 0
    reset_attempts: bool = False
    reason: str | None = None
    priority: int | None = None
    #: ``{job id: payload SHA1}``: plan only these jobs, and each only while its
    #: payload is unchanged (``jobctl purge --export-to``, ``redrive --plan``).
    fence: dict[str, str] | None = None
    operator: str = field(default_factory=operator_name)
    op_id: str = ""
    #: pause ``--hold`` cycles: the hold record's id; a call moves nothing once it is gone
    hold_id: str | None = None
    #: migrate/drain --to: the destination queue's layout (set by the operations core);
    #: drain --export-to: the export directory (``str``) the drained jobs are in
    destination: Any = None
    #: migrate --transform: the :class:`~jobctl.ops.transform.Transform` applied to each envelope
    transform: Any = None
    #: replay: ``(from, to)`` stream entry ids (XRANGE bounds) of the history to replay
    replay_range: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if not self.op_id:
            self.op_id = new_operation_id(self.operation)

    @property
    def skips_malformed(self) -> bool:
        """Malformed envelopes are never redriven, promoted or requeued...
        except requeue, which does not read the envelope: it only undoes a
        claim.  Suppress and purge take them when the filter does not need
        envelope fields."""
        return self.operation in (Operation.REDRIVE, Operation.PROMOTE)
