"""The operations core: every front end (CLI, TUI, runbook steps through
the CLI) runs an operation through :class:`OperationCore`.

One flow, written once::

    OpRequest --prepare()--> Prepared (policies, fence, plan)
              --confirm(prepared)--> bool   (the front end's question)
              --apply()--> Outcome (RunResult, ExitCode; journaled by run_plan)

:meth:`OperationCore.run` chains the three; the TUI calls :meth:`prepare`
and :meth:`apply` from its workers and asks in between with its modal.

Policies (each only here):

* read-only refusal (:meth:`Session.require_writable`) unless ``dry_run``;
* request checks: requeue needs ``--stuck`` or ``--ids``; ``--delay`` needs
  ``--to scheduled``; ``--plan`` excludes ``--ids``; suppress needs a reason;
* export before purge: a purge needs ``export_to`` (export there first, or
  use the complete export there, then purge exactly the exported ids, each
  while unchanged) or an explicit ``no_export``; ``export_to`` excludes
  ``limit``; ``drain --export-to`` takes the same export-then-fence path
  (a whole state: no filter, no limit);
* fences from files (``redrive --plan``, export manifests) and the re-filter
  "never an id outside the fence", whatever the layout;
* confirmation thresholds: typed count over
  :data:`~jobctl.ops.catalog.TYPED_CONFIRM_OVER` jobs and for every purge
  (:attr:`Prepared.typed_count`);
* resume lifts the holds of its filter (every hold without one) of a
  reliable-list queue (:attr:`Prepared.holds`), once confirmed and before
  any job moves, so that no hold cycle pauses the resumed jobs again;
* exit codes: OK (jobs a worker took since the plan are counted, not a
  failure: :data:`~jobctl.ops.result.EXPECTED_SKIPS`), PARTIAL (failed jobs,
  other skips, fenced ids skipped),
  INTERRUPTED, ABORTED (confirmation declined).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..exitcodes import ExitCode
from ..model import State
from .catalog import needs_typed_count, require_requeue_scope
from .request import OpRequest
from .spec import Operation, OpSpec

if TYPE_CHECKING:
    from ..layouts.base import Layout
    from ..session import Session
    from .engine import RunResult
    from .plan import Plan

__all__ = ["OperationCore", "Prepared", "Outcome", "check_request", "check_layout", "breakdown_rows"]

Note = Callable[[str], None]


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
    if op is Operation.SUPPRESS and not (req.reason or "").strip():
        raise UsageError("--reason must not be empty")
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


def check_layout(operation: Operation, layout: "Layout") -> None:
    """The layout-level refusals, before anything is asked or read: replay
    needs the stream-group layout (an acknowledged history).  Raises
    :class:`UsageError`."""
    if operation is Operation.REPLAY and layout.name != "stream-group":
        raise UsageError(f"replay is for the stream-group layout; {layout.queue_name} is {layout.name} (no "
                         "acknowledged history to replay)")


def recover_holds(layout: "Layout", op_id: str, *, dry_run: bool, note: Note | None) -> None:
    """Before an operation plans: give back every hold a killed operation
    left on any shard of ``layout`` (:mod:`jobctl.ops.orphan_holds`), so the
    plan sees every dead job where it belongs; a dry run only says so."""
    from .orphan_holds import find, give_back, summary

    say = note or (lambda _text: None)
    if dry_run:
        if orphans := find(layout):
            say(f"{summary(orphans)}: a run gives them back to their dead lists first")
        return
    if back := give_back(layout, op_id):
        say(f"gave back {summary(back)} to their dead lists, in order")


def breakdown_rows(plan: "Plan", top: int) -> list[tuple[str, str, str]]:
    """The plan's breakdown as display rows ``(job type, error, jobs)``, the
    ``top`` largest groups first, then one ``("…", "N more groups", jobs)``
    row for the rest, and a ``("(sample)", ...)`` row when the breakdown
    comes from a sample of envelopes (what the CLI and the TUI show before
    confirming)."""
    groups = plan.breakdown.most_common()
    rows = [(jt, err, f"{n:,}") for (jt, err), n in groups[:top]]
    if len(groups) > top:
        rest = sum(n for _, n in groups[top:])
        rows.append(("…", f"{len(groups) - top} more groups", f"{rest:,}"))
    if plan.breakdown_sampled:  # an unfiltered dead-list plan read only a sample of envelopes
        rows.append(("(sample)", f"breakdown from a sample of {plan.breakdown_sampled:,}", ""))
    return rows


@dataclass
class Prepared:
    """A planned request: the ``spec`` it became, the ``layout`` and the
    ``plan``.  ``typed_count``: confirming needs the planned count typed.
    ``exported``: the export directory the purge is fenced to (``None``:
    none).  ``holds``: the hold records (``{"id", "filter", "reason", "by",
    ...}``) a resume lifts when applied.  ``needs_confirmation``: something
    would change (jobs, or holds to lift)."""

    request: OpRequest
    spec: OpSpec
    layout: "Layout"
    plan: "Plan"
    typed_count: bool = False
    exported: str | None = None
    holds: list[dict[str, Any]] = field(default_factory=list)
    #: migrate --transform: the before/after diff lines of the first planned envelopes
    samples: list[str] = field(default_factory=list)

    @property
    def needs_confirmation(self) -> bool:
        return not self.request.dry_run and (self.plan.planned > 0 or bool(self.holds))


@dataclass
class Outcome:
    """What became of a request: ``status`` is ``dry-run``, ``nothing`` (no
    job matched), ``cancelled`` (confirmation declined) or ``applied``;
    ``result`` the engine's :class:`~jobctl.ops.engine.RunResult` (``None``
    when cancelled); ``exit_code`` the :class:`ExitCode` to exit with."""

    prepared: Prepared
    status: str
    exit_code: ExitCode
    result: "RunResult | None" = None
    problems: list[str] = field(default_factory=list)
    #: the hold records a resume lifted
    lifted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def plan(self) -> "Plan":
        return self.prepared.plan

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` document: the result plus the plan."""
        base = self.result.to_json() if self.result is not None else {}
        return {**base, "plan": self.plan.to_json()}

    def summary(self) -> str:
        """One line: ``redrive email: planned 10, moved 9, skipped 1 (changed: 1), failed 0  [id]``."""
        res = self.result
        if res is None:
            return f"{self.plan.spec.operation.value} cancelled: nothing was changed"
        return res.summary()


def _holds_to_lift(req: OpRequest, layout: "Layout") -> list[dict[str, Any]]:
    """The holds a resume of ``req.filter_text`` lifts: those of the same
    filter, every hold without one (reliable-list; other layouts have none)."""
    if req.operation is not Operation.RESUME or layout.name != "reliable-list":
        return []
    from ..layouts.reliable_list_holds import lift_holds

    return lift_holds(layout, req.filter_text, dry_run=True)


def _transform_samples(layout: "Layout", plan: "Plan", transform, n: int = 3) -> list[str]:
    """The before/after diff of the first ``n`` planned envelopes of a
    ``migrate --transform`` (a rollback: none); reads ``n`` payloads."""
    if plan.spec.operation is not Operation.TRANSFORM or not hasattr(transform, "apply_raw"):
        return []
    from .transform import diff_lines

    lines: list[str] = []
    for job in plan.jobs[:n]:
        raw = layout.client.get(layout.shards[job.shard].job(job.job_id))
        new = transform.apply_raw(raw) if raw is not None else None
        if new is not None:
            lines += diff_lines(job.job_id, raw, new)
    return lines


class OperationCore:
    """Plans, confirms and applies :class:`OpRequest` on ``session``.

    ``clock()`` gives "now" in epoch ms for planning (default: the layout's
    clock).  Every method raises :class:`~jobctl.errors.JobctlError` only
    (redis-py errors translated by ``session.errors()``).
    """

    def __init__(self, session: "Session", *, clock: Callable[[], int] | None = None) -> None:
        self.session = session
        self.clock = clock

    # -- the three steps -------------------------------------------------------------
    def prepare(self, req: OpRequest, *, note: Note | None = None,
                progress: Callable[[int, int], None] | None = None) -> Prepared:
        """Check ``req`` (:func:`check_request`), build its fence (``--plan``
        file, or export-then-fence for a purge with ``export_to``: the export
        is written here unless ``dry_run``), plan it (reads only) and keep
        only fenced ids.  ``note(text)`` receives progress sentences;
        ``progress(done, total)`` the export's progress."""
        check_request(req, self.session)
        from ..filter import MATCH_ALL, compile_filter

        text = req.effective_filter_text
        flt = MATCH_ALL if text is None else compile_filter(text)
        fence = None
        exported = None
        if req.plan_file:
            from ..export.fence import read_redrive_plan

            fence = read_redrive_plan(req.plan_file, req.queue)
        elif req.operation in (Operation.PURGE, Operation.DRAIN) and req.export_to:
            from ..export.fence import export_fence

            say = note
            if note is not None and req.operation is Operation.DRAIN:  # the fence's sentences say "purging"
                def say(sentence: str) -> None:
                    note(sentence.replace("purging", "draining"))
            fence = export_fence(self.session, req.queue, req.source, text, req.export_to,
                                 fmt=req.export_format, dry_run=req.dry_run, note=say, progress=progress)
            exported = req.export_to if fence is not None else None
        spec = OpSpec(req.operation, req.queue, req.source, req.target, filter=flt, ids=tuple(req.ids),
                      stuck_only=req.stuck_only, limit=req.limit, delay_ms=req.delay_ms,
                      reset_attempts=req.reset_attempts, reason=req.reason, priority=req.priority, fence=fence)
        with self.session.errors():
            layout = self.session.layout(req.queue)
            check_layout(req.operation, layout)
            recover_holds(layout, spec.op_id, dry_run=req.dry_run, note=note)
            if req.destination:  # migrate/drain --to: the destination queue, resolved like the source
                spec.destination = self.session.layout(req.destination)
            elif req.operation is Operation.DRAIN:  # drain --export-to: where the drained jobs are
                spec.destination = str(req.export_to)
            spec.transform, spec.replay_range = req.transform, req.replay_range
            plan = layout.plan(spec, now=self.clock() if self.clock else None)
            holds = _holds_to_lift(req, layout)
            samples = _transform_samples(layout, plan, req.transform)
        if spec.fence is not None:  # whatever the layout: never an id outside the fence
            plan.jobs = [j for j in plan.jobs if j.job_id in spec.fence]
        if holds and req.dry_run and note is not None:
            note(f"would lift {len(holds)} hold(s): " + ", ".join(h["id"] for h in holds))
        return Prepared(req, spec, layout, plan, typed_count=needs_typed_count(plan), exported=exported,
                        holds=holds, samples=samples)

    def apply(self, prepared: Prepared, *, stop: Callable[[], bool] | None = None,
              progress: Callable[[int, int], None] | None = None, rate: float | None = None,
              batch: int | None = None, argv: list[str] | None = None) -> Outcome:
        """Apply a confirmed ``prepared`` with :func:`jobctl.ops.engine.run_plan`
        (bounded, fenced script calls; journaled with ``argv`` as the command).
        A dry run or an empty plan changes nothing and writes no journal entry."""
        from .engine import run_plan

        plan, layout = prepared.plan, prepared.layout
        if prepared.request.dry_run:
            res = run_plan(layout, plan, dry_run=True, journal=False)
            return Outcome(prepared, "dry-run", ExitCode.OK, res)
        lifted = self._lift(prepared)
        if plan.planned == 0:
            res = run_plan(layout, plan, dry_run=False, journal=False)
            return Outcome(prepared, "nothing", ExitCode.PARTIAL if res.troubled else ExitCode.OK, res,
                           lifted=lifted)
        self.session.require_writable(plan.spec.operation.value)
        with self.session.errors():
            res = run_plan(layout, plan, rate=rate, batch=batch, stop=stop, progress=progress,
                           target=self.session.target, argv=argv)
        if res.interrupted:
            code = ExitCode.INTERRUPTED
        else:
            code = ExitCode.PARTIAL if res.troubled else ExitCode.OK  # the expected race is no failure
        return Outcome(prepared, "applied", code, res, problems=list(res.journal_problems), lifted=lifted)

    def _lift(self, prepared: Prepared) -> list[dict[str, Any]]:
        """Lift the holds a confirmed resume lifts (:attr:`Prepared.holds`),
        before its jobs move; returns those that were still recorded."""
        if not prepared.holds:
            return []
        from ..layouts.reliable_list_holds import lift_holds

        self.session.require_writable("resume")
        with self.session.errors():
            current = {h["id"] for h in lift_holds(prepared.layout, prepared.request.filter_text, dry_run=True)}
            lifted = [h for h in prepared.holds if h["id"] in current]
            if lifted:
                lift_holds(prepared.layout, prepared.request.filter_text)
        return lifted

    def run(self, req: OpRequest, *, confirm: Callable[[Prepared], bool],
            show: Callable[[Prepared], None] | None = None, note: Note | None = None,
            stop: Callable[[], bool] | None = None, progress: Callable[[int, int], None] | None = None,
            rate: float | None = None, batch: int | None = None, argv: list[str] | None = None) -> Outcome:
        """:meth:`prepare`, ``show(prepared)``, ``confirm(prepared)`` when
        something would change (declined: status ``cancelled``, exit code
        ABORTED, nothing changed), then :meth:`apply`."""
        prepared = self.prepare(req, note=note)
        if show is not None:
            show(prepared)
        if prepared.needs_confirmation and not confirm(prepared):
            return Outcome(prepared, "cancelled", ExitCode.ABORTED)
        return self.apply(prepared, stop=stop, progress=progress, rate=rate, batch=batch, argv=argv)
