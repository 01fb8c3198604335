"""The app's operation flow (:class:`ActionFlow`, mixed into
:class:`~.app.JobctlApp`): ask what is missing (a reason, where the jobs go,
a replay range where the layout's replay takes one, a transformation), plan
in a worker, confirm in :class:`~.plan_modal.PlanModal`, apply in
:class:`~.run_modal.RunModal`, then report the result.  Every check is the core's
(:func:`jobctl.ops.core.check_layout`, :func:`~jobctl.ops.core.check_request`),
run before anything is asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from jobctl import humanize
from jobctl.errors import JobctlError, ReadOnlyRefused
from jobctl.ops.core import check_layout, check_request
from jobctl.ops.spec import Operation

from .actions import OPERATIONS, ActionRequest
from .ask_modals import ReasonModal, TargetModal
from .plan_modal import PlanModal
from .recovery_modals import ask_recovery, then_start
from .recovery_modals import start_reshard as reshard_flow
from .run_modal import RunModal

__all__ = ["ActionFlow"]


class ActionFlow:
    """The operation methods of :class:`~.app.JobctlApp` (a mixin: it uses
    the app's ``session``, ``dash``, ``read``, ``notify``, ``push_screen``,
    ``report_error``, ``refresh_status``, ``export_root`` and ``clock``)."""

    def start_action(self, req: ActionRequest, after: Callable[[], None] | None = None) -> None:
        """Plan ``req`` in a worker, confirm it in :class:`PlanModal`, apply it
        in :class:`RunModal`; ``after()`` runs once it has been applied.
        Refused with a notice in read-only mode."""
        if self._refused(req) or self._asked(req, after):
            return
        info = OPERATIONS[req.operation]
        request = req.request(export_to=self._export_dir(req) if req.operation is Operation.PURGE else None)
        try:
            check_request(request, self.session)
        except ReadOnlyRefused as exc:
            self.notify(f"{exc}; nothing was changed", title="read-only", severity="error")
            return
        except JobctlError as exc:
            self.notify(str(exc), severity="error")
            return
        self.activity = f"planning {info.verb} …"

        def planned(prepared) -> None:
            self.activity = ""
            plan = prepared.plan
            if plan.planned == 0 and not prepared.holds:  # a resume with holds to lift still asks
                extra = ""
                if plan.malformed:
                    extra = f" ({len(plan.malformed):,} malformed envelope(s) excluded)"
                self.notify(f"{info.verb} {req.queue}: nothing to do, no job matches{extra}")
                return
            self.push_screen(PlanModal(req, prepared), lambda ok: self._confirmed(ok, prepared, after))

        def failed(_exc: BaseException) -> None:
            self.activity = ""

        self.read(lambda: self.dash.prepare(request), planned, key="plan", failed=failed)

    def _refused(self, req: ActionRequest) -> bool:
        """True (after a notice) when ``req`` cannot run here: read-only
        mode, a source the operation does not take, a layout refusal."""
        info = OPERATIONS[req.operation]
        try:
            self.session.require_writable(info.verb)  # before asking anything
        except ReadOnlyRefused as exc:
            self.notify(f"{exc}; nothing was changed", title="read-only", severity="error")
            return True
        if req.source not in info.sources:
            srcs = " or ".join(s.value for s in info.sources)
            self.notify(f"{info.verb} works on {srcs} jobs, not {req.source.value}", severity="warning")
            return True
        try:  # the core's layout refusals, before asking anything (prepare checks them all again)
            with self.session.errors():
                layout = self.session.layout(req.queue)
            check_layout(req.operation, layout)
        except JobctlError as exc:
            self.notify(str(exc), severity="error")
            return True
        return False

    def _asked(self, req: ActionRequest, after: Callable[[], None] | None) -> bool:
        """True when ``req`` lacks an answer and a modal now asks it (the
        modal calls :meth:`start_action` again)."""
        if req.operation in (Operation.SUPPRESS, Operation.PAUSE) and not req.reason:
            def got_reason(reason: str | None) -> None:
                if reason:
                    req.reason = reason
                    self.start_action(req, after)

            self.push_screen(ReasonModal(req), got_reason)
            return True
        if (req.operation is Operation.TRANSFORM and not req.transform) or \
                (req.operation is Operation.REPLAY and not req.replay_range and self._replay_by_range(req)):
            ask_recovery(self, req, after)  # the range or the transformation first
            return True
        if (req.operation is Operation.MIGRATE and not req.destination) or \
                (req.operation is Operation.DRAIN and not req.export_to):
            self._ask_target(req, after)
            return True
        return False

    def _replay_by_range(self, req: ActionRequest) -> bool:
        """Whether ``req``'s layout replays a stream range (asked first);
        else the replay takes the filter alone, like the CLI's."""
        with self.session.errors():
            return self.session.layout(req.queue).replay_by_range

    def _ask_target(self, req: ActionRequest, after: Callable[[], None] | None) -> None:
        """:class:`TargetModal`: the destination queue of a migrate, the
        export directory of a drain (a new one under :attr:`export_root`
        offered); then :meth:`start_action` again."""
        def fill(value: str) -> None:
            if req.operation is Operation.MIGRATE:
                req.destination = value
            else:
                req.export_to = value

        got = then_start(self, req, after, fill, cancelled=lambda value: not value)

        if req.operation is Operation.MIGRATE:
            names = [r.name for r in self.snapshot.rows if r.name != req.queue] if self.snapshot else []
            self.push_screen(TargetModal(req, "queue", suggestions=names), got)
        else:
            self.push_screen(TargetModal(req, "export", default=self._export_dir(req)), got)

    def start_reshard(self, req: ActionRequest, after: Callable[[], None] | None = None) -> None:
        """Reshard: :func:`.recovery_modals.start_reshard`."""
        reshard_flow(self, req, after)

    def _export_dir(self, req: ActionRequest) -> str:
        """A new folder under :attr:`export_root` for a purge's (or drain's) export
        (``<queue>-<state>-<UTC stamp>``, ``-2``... when that one exists)."""
        root = self.export_root
        if root is None:
            from platformdirs import user_data_dir

            root = str(Path(user_data_dir("jobctl")) / "exports")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.clock() / 1000))
        base = Path(root) / f"{req.queue}-{req.source.value}-{stamp}"
        path, n = base, 1
        while path.exists():  # never reuse another purge's export
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        return str(path)

    def _confirmed(self, ok: bool | None, prepared, after) -> None:
        if not ok:
            self.notify(f"{prepared.plan.spec.operation.value} cancelled: nothing was changed")
            return
        self.push_screen(RunModal(prepared), lambda outcome: self._applied(outcome, after, prepared))

    def _applied(self, outcome, after, prepared=None) -> None:
        res, error = outcome
        if error is not None:
            self.report_error(error)
        elif prepared is not None:
            for h in prepared.holds:  # resume: lifted by the core before the jobs moved
                self.notify(f"hold {h['id']} lifted ({h['filter'] or 'every job'})")
        if res is not None:
            took = humanize.took(res.moved, res.ended_ms - res.started_ms) if res.started_ms else ""
            text = (f"{res.summary()}{took}{' — interrupted: run it again to finish' if res.interrupted else ''}"
                    f"  [{res.operation_id}]")
            bad = res.troubled or res.interrupted or res.error
            self.notify(text, title="done" if not bad else "done, with problems",
                        severity="warning" if bad else "information", timeout=10)
            for p in res.journal_problems:
                self.notify(f"journal: {p}", severity="warning")
        self.refresh_status()
        if after is not None:
            after()
        if self._quit_after_run and not self.running_ops:
            self.exit()
