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
    ``visibility_timeout_ms``: the workers' visibility timeout for this
    request (``requeue --visibility-timeout``), over the catalogue's; a
    ``requeue --stuck`` on a queue whose timeout is only a layout default
    is refused without it (:func:`jobctl.ops.core.check_layout`).
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
    #: requeue --visibility-timeout (ms): the workers' timeout, over the catalogue's
    visibility_timeout_ms: int | None = None

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


def equivalent_command(req: OpRequest, program: str = "jobctl", global_args: tuple[str, ...] = ()) -> list[str]:
    """The CLI command line that does what ``req`` does, as argv words (not
    quoted: :func:`jobctl.ops.journal.command_line` quotes them once when
    it joins them): ``[program, *global_args, operation, queue, ...]``.
    The journal's ``command`` of an operation started outside the CLI; it
    runs as printed (``--dry-run`` added, it plans the same jobs).
    ``global_args``: the session's options (``--config FILE``...)."""
    argv = [program, *global_args, _subcommand(req), req.queue, *_target_words(req)]
    for job_id in req.ids:
        argv += ["--ids", job_id]
    if req.filter_text:
        argv += ["--filter", req.filter_text]
    if req.reason:
        argv += ["--reason", req.reason]
    if req.limit:
        argv += ["--limit", str(req.limit)]
    return argv


def _subcommand(req: OpRequest) -> str:
    """The CLI subcommand of ``req``: ``reshard`` for a migrate to the same
    queue with another shard count, ``migrate`` for a transformation, else
    the operation's name."""
    if req.operation is Operation.MIGRATE and getattr(req.destination, "shards", None):
        return "reshard"
    return "migrate" if req.operation is Operation.TRANSFORM else req.operation.value


def _target_words(req: OpRequest) -> list[str]:
    """The words after ``QUEUE`` that say where the jobs come from and go
    (``--state``, ``--to``, ``--export-to``...; see :func:`equivalent_command`)."""
    op, src = req.operation, req.source
    if op is Operation.MIGRATE and isinstance(req.destination, str):
        return [req.destination, "--state", src.value]
    if op is Operation.MIGRATE and getattr(req.destination, "shards", None):  # a reshard
        return ["--shards", str(req.destination.shards), "--state", src.value]
    if op is Operation.DRAIN:
        return ["--state", src.value, "--export-to", str(req.export_to)]
    if op is Operation.PURGE:
        return ["--state", src.value] + (["--export-to", str(req.export_to)] if req.export_to else ["--no-export"])
    if op is Operation.REQUEUE:
        return (["--stuck"] if req.stuck_only else []) + (
            ["--visibility-timeout", f"{req.visibility_timeout_ms}ms"] if req.visibility_timeout_ms else [])
    if op is Operation.REDRIVE and req.target is not None and req.target is not State.READY:
        return ["--to", req.target.value]
    if op is Operation.PAUSE and src is not State.READY:
        return ["--state", src.value]
    if op is Operation.REPLAY and req.replay_range:
        return ["--from", req.replay_range[0]] + (["--to", req.replay_range[1]] if req.replay_range[1] != "+" else [])
    if op is Operation.TRANSFORM and req.transform is not None:
        rollback = getattr(req.transform, "operation", None)
        words = ["--rollback", rollback] if rollback else ["--transform", str(getattr(req.transform, "source", ""))]
        return words + ["--state", src.value]
    return []
