"""What a front end asks the operations core for: :class:`OpRequest`.

A request holds the operator's words (filter text, file paths, durations in
milliseconds) before any policy ran; :class:`jobctl.ops.core.OperationCore`
validates it, turns it into an :class:`~jobctl.ops.spec.OpSpec`, plans,
confirms and applies it.  The CLI builds one from its options, the TUI from
a keystroke (:func:`equivalent_command` gives back the command line a TUI
request stands for: the journal's ``command``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..filter import checked_filter_text
from ..model import State
from .catalog import OPERATIONS
from .spec import Operation

__all__ = ["OpRequest", "equivalent_command"]


@dataclass
class OpRequest:
    """One operation asked by an operator.

    ``source`` defaults to the operation's first source state and
    ``target`` to its default target (:data:`jobctl.ops.catalog.OPERATIONS`;
    redrive may target ``scheduled`` with ``delay_ms``).  ``filter_text``:
    the filter language (``None``: every job; blank text raises
    :class:`~jobctl.filter.FilterError`).  ``plan_file``: a
    ``redrive-plan.jsonl`` (redrive only those ids, each while unchanged).
    ``older_than_ms``: purge only jobs dead for at least that long.  A purge
    needs ``export_to`` (export there first, then purge exactly those) or
    ``no_export`` unless ``dry_run``; a drain (``drain --export-to``) needs
    ``export_to``.  ``limit`` caps the planned jobs.
    """

    operation: Operation
    queue: str
    source: State | None = None
    target: State | None = None
    filter_text: str | None = None
    ids: tuple[str, ...] = ()
    stuck_only: bool = False
    priority: int | None = None
    limit: int | None = None
    delay_ms: int = 0
    reset_attempts: bool = False
    reason: str | None = None
    plan_file: str | None = None
    older_than_ms: int | None = None
    export_to: str | None = None
    export_format: str = "parquet"
    no_export: bool = False
    dry_run: bool = False
    #: migrate/drain --to: the destination queue's name (reshard: its QueueConfig with the new shard count)
    destination: object | None = None
    #: migrate --transform: the parsed transformation (:class:`jobctl.ops.transform.Transform`)
    transform: object | None = None
    #: replay: ``(from, to)`` stream entry ids
    replay_range: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        self.filter_text = checked_filter_text(self.filter_text)
        info = OPERATIONS[self.operation]
        if self.source is None:
            self.source = info.sources[0]
        if self.target is None and self.operation is not Operation.PURGE:
            self.target = info.target

    @property
    def effective_filter_text(self) -> str | None:
        """``filter_text`` with ``older_than_ms`` as a ``dead_for >= Nms`` clause."""
        text = self.filter_text
        if self.older_than_ms:
            clause = f"dead_for >= {self.older_than_ms}ms"
            text = clause if not text else f"({text}) and {clause}"
        return text


def equivalent_command(req: OpRequest, program: str = "jobctl-tui") -> list[str]:
    """The CLI command line that does what ``req`` does, shell-quoted (the
    journal's ``command`` of an operation started outside the CLI)."""
    import shlex

    argv = [program, req.operation.value, req.queue]
    if req.operation is Operation.MIGRATE and isinstance(req.destination, str):
        argv += [req.destination, "--state", req.source.value]
    elif req.operation is Operation.MIGRATE and getattr(req.destination, "shards", None):  # a reshard
        argv[1] = "reshard"
        argv += ["--shards", str(req.destination.shards), "--state", req.source.value]
    if req.operation is Operation.DRAIN:
        argv += ["--state", req.source.value, "--export-to", str(req.export_to)]
    if req.operation is Operation.PURGE:
        argv += ["--state", req.source.value]
        argv += ["--export-to", req.export_to] if req.export_to else ["--no-export"]
    if req.operation is Operation.REQUEUE and req.stuck_only:
        argv.append("--stuck")
    if req.operation is Operation.REDRIVE and req.target is not None and req.target is not State.READY:
        argv += ["--to", req.target.value]
    if req.operation is Operation.REPLAY and req.replay_range:
        argv += ["--from", req.replay_range[0]] + (["--to", req.replay_range[1]] if req.replay_range[1] != "+" else [])
    if req.operation is Operation.TRANSFORM and req.transform is not None:
        rollback = getattr(req.transform, "operation", None)
        argv[1] = "migrate"
        argv += ["--rollback", rollback] if rollback else ["--transform", getattr(req.transform, "source", "")]
        argv += ["--state", req.source.value]
    for job_id in req.ids[:20]:
        argv += ["--ids", job_id]
    if req.filter_text:
        argv += ["--filter", req.filter_text]
    if req.reason:
        argv += ["--reason", req.reason]
    if req.limit:
        argv += ["--limit", str(req.limit)]
    return [shlex.quote(a) for a in argv]
