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
* request checks (:func:`check_request`): requeue needs ``--stuck`` or
  ``--ids``; ``--delay`` needs ``--to scheduled``; ``--plan`` excludes
  ``--ids``; suppress needs a reason and a filter or ids; pause needs a
  reason;
* layout checks (:func:`check_layout`, before anything is exported or
  planned; :mod:`.policies`): replay needs a layout that declares it;
  pause, resume, migrate, drain and transformations need a layout whose
  jobs jobctl can hold out of the workers' reach (:func:`require_holdable`); ``requeue --stuck``
  needs a known visibility timeout (configured, or the request's
  ``visibility_timeout_ms``), never a layout's default;
* export before purge: a purge needs ``export_to`` (export there first, or
  use the complete export there, then purge exactly the exported ids, each
  while unchanged) or an explicit ``no_export``; ``export_to`` excludes
  ``limit``; ``drain --export-to`` takes the same export-then-fence path
  (a whole state: no filter, no limit);
* fences from files (``redrive --plan``, export manifests) and the re-filter
  "never an id outside the fence", whatever the layout;
* confirmation: the count typed for a purge, drain or transform, and for
  any operation in a production environment, a plain yes otherwise
  (:attr:`Prepared.typed_count`, :func:`~jobctl.ops.catalog.needs_typed_count`);
* resume lifts the holds of its filter (every hold without one) of a
  layout that keeps hold records (:attr:`Prepared.holds`), once confirmed and before
  any job moves, so that no hold cycle pauses the resumed jobs again;
* exit codes: OK (jobs a worker took since the plan are counted, not a
  failure: :data:`~jobctl.ops.result.EXPECTED_SKIPS`), PARTIAL (failed jobs,
  other skips, fenced ids skipped),
  INTERRUPTED, ABORTED (confirmation declined).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exitcodes import ExitCode
from .catalog import needs_typed_count
from .policies import check_layout, check_request, require_holdable, require_known_visibility
from .prepared import Outcome, Prepared, breakdown_rows
from .request import OpRequest
from .spec import Operation, OpSpec

if TYPE_CHECKING:
    from ..layouts.base import Layout
    from ..session import Session
    from .engine import RunResult
    from .plan import Plan

__all__ = ["OperationCore", "Prepared", "Outcome", "check_request", "check_layout", "require_holdable",
           "require_known_visibility", "breakdown_rows"]

Note = Callable[[str], None]


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


def _drain_words(req: OpRequest, note: Note | None) -> Note | None:
    """``note`` for a drain: the export fence's sentences say "purging"."""
    if note is None or req.operation is not Operation.DRAIN:
        return note
    return lambda sentence: note(sentence.replace("purging", "draining"))


def _verb_done(req: OpRequest) -> str:
    return "drained" if req.operation is Operation.DRAIN else "purged"


def _holds_to_lift(req: OpRequest, layout: "Layout") -> list[dict[str, Any]]:
    """The holds a resume of ``req.filter_text`` lifts (the layout's
    :meth:`~jobctl.layouts.facts.LayoutFacts.holds_to_lift`: those of the
    same filter, every hold without one; ``[]`` where it keeps none)."""
    if req.operation is not Operation.RESUME:
        return []
    return layout.holds_to_lift(req.filter_text)


def _transform_samples(layout: "Layout", plan: "Plan", transform, n: int = 3) -> list[str]:
    """The before/after diff of the first ``n`` planned envelopes of a
    ``migrate --transform`` (a rollback: none); reads ``n`` payloads."""
    from .transform import Transform, diff_lines

    if plan.spec.operation is not Operation.TRANSFORM or not isinstance(transform, Transform):
        return []

    lines: list[str] = []
    for job in plan.jobs[:n]:
        raw = layout.planned_payload(job)
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
                progress: Callable[[int, int], None] | None = None, defer_export: bool = False) -> Prepared:
        """Check ``req`` (:func:`check_request`, then :func:`check_layout`
        on its queue: nothing is written by a refused request), build its
        fence (``--plan`` file, or export-then-fence for a purge or drain
        with ``export_to``: the export is written here unless ``dry_run``
        or ``defer_export``), plan it (reads only) and keep only fenced ids.
        ``defer_export`` (the TUI): nothing is written; the plan shows what
        would be exported (:attr:`Prepared.export_pending`) and
        :meth:`apply` exports it once confirmed.  ``note(text)`` receives
        progress sentences; ``progress(done, total)`` the export's progress."""
        check_request(req, self.session)
        from ..filter import MATCH_ALL, compile_filter

        text = req.effective_filter_text
        flt = MATCH_ALL if text is None else compile_filter(text)
        with self.session.errors():
            layout, destination = self._resolve(req, note)
        fence, exported, pending = self._fence(req, note, progress, defer_export)
        spec = OpSpec(req.operation, req.queue, req.source, req.target, filter=flt, ids=tuple(req.ids),
                      stuck_only=req.stuck_only, limit=req.limit, delay_ms=req.delay_ms,
                      reset_attempts=req.reset_attempts, reason=req.reason, priority=req.priority, fence=fence)
        with self.session.errors():
            recover_holds(layout, spec.op_id, dry_run=req.dry_run, note=note)
            spec.destination = destination
            spec.transform, spec.replay_range = req.transform, req.replay_range
            plan = self._plan(layout, spec)
            holds = _holds_to_lift(req, layout)
            samples = _transform_samples(layout, plan, req.transform)
        if holds and req.dry_run and note is not None:
            note(f"would lift {len(holds)} hold(s): " + ", ".join(h["id"] for h in holds))
        typed = needs_typed_count(plan, self.session.target.environment)
        return Prepared(req, spec, layout, plan, typed_count=typed, exported=exported,
                        holds=holds, samples=samples, export_pending=pending)

    def _resolve(self, req: OpRequest, note: Note | None) -> "tuple[Layout, Any]":
        """The request's layout (its catalogue entry with the request's
        visibility timeout) and the plan's destination (the layout a migrate
        moves to, the directory a drain exports to), after
        :func:`check_layout`."""
        from dataclasses import replace

        from ..config import defaulted_visibility

        q = self.session.queue(req.queue)
        if req.visibility_timeout_ms is not None:
            q = replace(q, visibility_timeout_ms=req.visibility_timeout_ms)
        layout = self.session.layout(q)
        destination: Any = None
        if req.destination:  # migrate/drain --to: the destination queue, resolved like the source
            destination = self.session.layout(req.destination)
        elif req.operation is Operation.DRAIN:  # drain --export-to: where the drained jobs are
            destination = str(req.export_to)
        check_layout(req, layout, destination if req.destination else None)
        default = defaulted_visibility(q) if req.operation is Operation.REQUEUE else None
        if default is not None and note is not None:
            note(f"warning: queue {q.name}: visibility_timeout_ms is not configured; deadlines shown use the "
                 f"{q.layout} default of {default:,} ms")
        return layout, destination

    def _fence(self, req: OpRequest, note: Note | None, progress: Callable[[int, int], None] | None,
               defer_export: bool) -> tuple[dict[str, str] | None, str | None, str | None]:
        """``(fence, exported, export_pending)`` of ``req``: a ``--plan``
        file's ids, or a purge's (drain's) export, written now unless a dry
        run or ``defer_export`` (then ``export_pending`` names where
        :meth:`apply` writes it)."""
        if req.plan_file:
            from ..export.fence import read_redrive_plan

            return read_redrive_plan(req.plan_file, req.queue), None, None
        if req.operation not in (Operation.PURGE, Operation.DRAIN) or not req.export_to:
            return None, None, None
        deferred = defer_export and not req.dry_run
        fence = self._export(req, _drain_words(req, note), progress, dry_run=req.dry_run or deferred)
        if fence is None:
            return None, None, (str(req.export_to) if deferred else None)
        return fence, str(req.export_to), None

    def _export(self, req: OpRequest, note: Note | None, progress: Callable[[int, int], None] | None, *,
                dry_run: bool) -> dict[str, str] | None:
        """:func:`jobctl.export.fence.export_fence` of ``req`` (``None``: a
        dry run found no complete export there)."""
        from ..export.fence import export_fence

        return export_fence(self.session, req.queue, req.source, req.effective_filter_text, req.export_to,
                            fmt=req.export_format, dry_run=dry_run, note=note, progress=progress)

    def _plan(self, layout: "Layout", spec: OpSpec) -> "Plan":
        """``layout.plan(spec)`` at the core's clock, keeping only fenced ids."""
        plan = layout.plan(spec, now=self.clock() if self.clock else None)
        if spec.fence is not None:  # whatever the layout: never an id outside the fence
            plan.jobs = [j for j in plan.jobs if j.job_id in spec.fence]
        return plan

    def export_now(self, prepared: Prepared, *, note: Note | None = None) -> Prepared:
        """A confirmed :attr:`Prepared.export_pending`: write the export
        now, then plan again fenced to it (exactly the exported jobs, each
        while unchanged).  Returns the fenced :class:`Prepared` (``note``
        says how many were exported, and the count confirmed when it
        differs).  Raises what :func:`jobctl.export.fence.export_fence` raises."""
        from dataclasses import replace

        req = prepared.request
        self.session.require_writable(req.operation.value)
        fence = self._export(req, _drain_words(req, note), None, dry_run=False)
        spec = prepared.spec
        spec.fence = fence
        with self.session.errors():
            plan = self._plan(prepared.layout, spec)
        if note is not None and plan.planned != prepared.plan.planned:
            note(f"{req.operation.value} {req.queue}: the export holds {plan.planned:,} of the planned jobs "
                 f"({prepared.plan.planned:,} confirmed): only those are {_verb_done(req)}")
        return replace(prepared, spec=spec, plan=plan, exported=str(req.export_to), export_pending=None)

    def apply(self, prepared: Prepared, *, stop: Callable[[], bool] | None = None,
              progress: Callable[[int, int], None] | None = None, rate: float | None = None,
              batch: int | None = None, argv: list[str] | None = None, note: Note | None = None) -> Outcome:
        """Apply a confirmed ``prepared`` with :func:`jobctl.ops.engine.run_plan`
        (bounded, fenced script calls; journaled with ``argv`` as the command),
        after writing its pending export (:meth:`export_now`).
        A dry run or an empty plan changes nothing and writes no journal entry."""
        from .engine import run_plan

        plan, layout = prepared.plan, prepared.layout
        if prepared.request.dry_run:
            res = run_plan(layout, plan, dry_run=True, journal=False)
            return Outcome(prepared, "dry-run", ExitCode.OK, res)
        if prepared.export_pending:  # the TUI: exported only now, once confirmed
            prepared = self.export_now(prepared, note=note)
            plan = prepared.plan
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
        before its jobs move, under the queue's lease (no hold cycle runs
        meanwhile; :class:`~jobctl.errors.Busy` when another operation keeps
        it); then the plan takes in the jobs their cycles paused since it
        was made (``replan_after_lift``).  Returns the holds that were still
        recorded."""
        if not prepared.holds:
            return []
        from ..clock import now_ms
        from .queue_lease import QueueLease

        self.session.require_writable("resume")
        layout = prepared.layout
        with self.session.errors(), QueueLease(layout, prepared.spec.op_id):
            return layout.lift_holds(prepared.holds, prepared.request.filter_text, prepared.plan,
                                     self.clock() if self.clock else now_ms())

    def hold_cycle(self, layout: "Layout", hold: dict[str, Any], marks: Any, *, budget: int,
                   stop: Callable[[], bool] | None = None, rate: float | None = None, batch: int | None = None,
                   argv: list[str] | None = None) -> "RunResult | None":
        """One cycle of the hold record ``hold`` (``jobctl pause --hold``,
        ``jobctl hold run``): plan the newly ready jobs of its filter, at
        most ``budget`` (the layout's
        :meth:`~jobctl.layouts.facts.LayoutFacts.plan_hold_cycle`, ``marks``
        kept between cycles), and pause them under the queue's lease, each
        call only while the hold is recorded; journaled when any moved.
        ``None`` when nothing matched.  Raises
        :class:`~jobctl.errors.ReadOnlyRefused`, :class:`~jobctl.errors.Busy`
        (another operation keeps the lease) and other
        :class:`~jobctl.errors.JobctlError`."""
        from .engine import run_plan

        self.session.require_writable("hold")
        with self.session.errors():
            plan = layout.plan_hold_cycle(hold, marks, budget)
            if not plan.planned:
                return None
            return run_plan(layout, plan, rate=rate, batch=batch, stop=stop, target=self.session.target,
                            argv=argv)

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
        return self.apply(prepared, stop=stop, progress=progress, rate=rate, batch=batch, argv=argv, note=note)
