"""The Textual application: refresh loop, workers, Redis trouble, navigation.

Every Redis read or write goes through :class:`jobctl.dashboard.Dashboard`
in a thread worker (``@work(thread=True)``); a worker never touches a
widget: it posts :class:`ReadDone` (or the run modal's messages) and the UI
thread applies the result.  A connection failure, timeout or ACL denial
sets :attr:`JobctlApp.trouble` (the banner on every screen); the refresh
timer keeps retrying and the banner goes away at the first good refresh.
Operations (plan, confirm, apply) are :class:`~.action_flow.ActionFlow`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen

from jobctl.dashboard import Dashboard, Snapshot
from jobctl.errors import AuthFailed, ConnectionFailed, JobctlError
from jobctl.ops.spec import Operation
from jobctl.session import Session

from .action_flow import ActionFlow
from .actions import queue_wide_requests
from .run_modal import RunModal

__all__ = ["JobctlApp", "MIN_REFRESH_S", "REFRESH_STEPS", "ReadDone"]

#: The refresh interval floor, seconds: one status refresh costs two
#: pipelined round trips per queue, so faster would only load the server.
MIN_REFRESH_S = 0.5
#: Intervals ``+``/``-`` step through, seconds.
REFRESH_STEPS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class ReadDone(Message):
    """A read worker finished: ``done(result)`` or, on error, ``failed(exc)``."""

    def __init__(self, key: str | None, done: Callable[[Any], None], result: Any = None,
                 error: BaseException | None = None, failed: Callable[[BaseException], None] | None = None,
                 banner: bool = False) -> None:
        super().__init__()
        self.key = key
        self.done = done
        self.result = result
        self.error = error
        self.failed = failed
        self.banner = banner


class JobctlApp(ActionFlow, App):
    """``jobctl tui``: the live dashboard.

    ``session`` is a :class:`jobctl.session.Session` (not yet connected is
    fine: the app connects in a worker and shows a banner while it cannot).
    ``refresh_s`` is clamped to :data:`MIN_REFRESH_S`.  ``clock`` (epoch ms)
    and ``server_label`` exist for tests and snapshots.  ``op_rate`` caps
    jobs per second of operations (like the CLI's ``--rate``); ``op_batch``
    is the jobs per script call.  ``note`` is shown in the top bar (the
    demo says what it runs); ``exit_after`` quits after that many seconds.
    ``export_root``: the folder a purge exports its jobs to first, one
    subfolder per purge (default: ``<user data dir>/jobctl/exports``).
    ``prometheus_url`` (else the profile's): the history chart's last hours.
    Raises :class:`~jobctl.errors.ConfigError` for a bad SLO in the config.
    """

    TITLE = "jobctl"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"),
        Binding("p", "toggle_freeze", "freeze"),
        Binding("r", "refresh_now", "refresh"),
        Binding("plus,equals_sign", "slower", "slower refresh", show=False),
        Binding("minus", "faster", "faster refresh", show=False),
    ]

    DEFAULT_CSS = """
    Screen { background: $background; }
    .note { color: $text-muted; padding: 0 1; height: auto; }
    .summary { padding: 0 1; height: auto; }
    """

    trouble: reactive[str | None] = reactive(None)
    #: Epoch ms the refresh was frozen at (``p``); None while it runs.
    frozen_since_ms: reactive[int | None] = reactive(None)
    #: Bumped by each timer tick while frozen, so the top bar redraws the freeze's age.
    frozen_ticks: reactive[int] = reactive(0)
    refresh_s: reactive[float] = reactive(2.0)
    last_update_ms: reactive[int | None] = reactive(None)
    activity: reactive[str] = reactive("")

    def __init__(self, session: Session, *, refresh_s: float = 2.0, clock: Callable[[], int] | None = None,
                 server_label: str | None = None, op_rate: float | None = None, op_batch: int | None = None,
                 note: str = "", exit_after: float | None = None, history_len: int = 600,
                 export_root: str | None = None, prometheus_url: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.dash = Dashboard(session, clock=clock, history_len=history_len, prometheus_url=prometheus_url)
        self.clock = self.dash.clock
        self.server_label = server_label or session.target.display
        self.environment = session.target.environment
        self.read_only = session.read_only
        self.note = note
        self.op_rate = op_rate
        self.op_batch = op_batch
        self.exit_after = exit_after
        self.export_root = export_root
        self.set_reactive(JobctlApp.refresh_s, max(MIN_REFRESH_S, float(refresh_s)))
        self.snapshot: Snapshot | None = None
        self.trouble_since_ms: int | None = None
        self.notices: list[tuple[str, str]] = []
        self.running_ops = 0
        self._inflight: set[str] = set()
        self._pending = 0
        self._timer = None
        self._quit_after_run = False

    # -- lifecycle -------------------------------------------------------------------
    def on_mount(self) -> None:
        from .dashboard_screen import DashboardScreen

        self.push_screen(DashboardScreen())
        self._timer = self.set_interval(self.refresh_s, self._tick, name="status-refresh")
        if self.exit_after:
            self.set_timer(self.exit_after, self.exit)
        self.refresh_status()

    @property
    def busy(self) -> bool:
        """True while a read or an operation is under way (tests wait on it)."""
        return bool(self._pending or self.running_ops)

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's toast, also kept in :attr:`notices` (``(severity, message)``)."""
        self.notices.append((severity, message))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # -- workers --------------------------------------------------------------------------
    def read(self, fn: Callable[[], Any], done: Callable[[Any], None], *, key: str | None = None,
             failed: Callable[[BaseException], None] | None = None, banner: bool = True) -> bool:
        """Run ``fn()`` (Redis work through :attr:`dash`) in a thread worker
        and ``done(result)`` on the UI thread.  With ``key``, a read still in
        flight under the same key makes this one a no-op (returns False):
        a slow server never piles up requests.  Errors: a connection, timeout
        or ACL error sets the banner (a notice when not ``banner``);
        anything else is a notice; ``failed(exc)`` is called too."""
        if key is not None:
            if key in self._inflight:
                return False
            self._inflight.add(key)
        self._pending += 1
        self._read_worker(fn, done, key, failed, banner)
        return True

    @work(thread=True, exit_on_error=False, group="read")
    def _read_worker(self, fn, done, key, failed, banner) -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - reported on the UI thread
            self.post_message(ReadDone(key, done, error=exc, failed=failed, banner=banner))
            return
        self.post_message(ReadDone(key, done, result=result, banner=banner))

    def on_read_done(self, msg: ReadDone) -> None:
        self._pending -= 1
        if msg.key is not None:
            self._inflight.discard(msg.key)
        if msg.error is not None:
            self.report_error(msg.error, banner=msg.banner)
            if msg.failed is not None:
                msg.failed(msg.error)
            return
        try:
            msg.done(msg.result)
        except Exception as exc:  # noqa: BLE001 - a screen closed under us, or a bug: say so
            from textual.css.query import NoMatches

            if not isinstance(exc, NoMatches):
                self.notify(f"internal error: {exc.__class__.__name__}: {exc}", severity="error")

    def report_error(self, exc: BaseException, *, banner: bool = False) -> None:
        """Banner for Redis trouble (``banner``), a notice for the rest."""
        if isinstance(exc, (ConnectionFailed, AuthFailed)):
            if banner or self.trouble:
                if not self.trouble:
                    self.trouble_since_ms = self.clock()
                self.trouble = str(exc)
            else:
                self.notify(str(exc), severity="error", title="Redis")
            return
        if isinstance(exc, JobctlError):
            self.notify(str(exc), severity="error")
        else:
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.notify(f"internal error: {exc.__class__.__name__}: {first}", severity="error")

    # -- refresh ------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.frozen:
            self.frozen_ticks += 1
        else:
            self.refresh_status()

    def refresh_status(self) -> None:
        """Read every queue's status now (skipped while a refresh is in flight)."""
        self.read(self.dash.refresh, self._status_done, key="status", banner=True)

    def _status_done(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self.last_update_ms = snap.at_ms
        if self.trouble:
            self.trouble = None
            self.trouble_since_ms = None
            self.notify("Redis answers again; refreshing", title="reconnected")
        for screen in self.screen_stack:
            hook = getattr(screen, "status_refreshed", None)
            if hook is not None:
                hook(snap)

    def action_refresh_now(self) -> None:
        self.refresh_status()
        hook = getattr(self.screen, "reload", None)
        if hook is not None:
            hook()

    @property
    def frozen(self) -> bool:
        """True while the periodic refresh is frozen (``p``)."""
        return self.frozen_since_ms is not None

    def action_toggle_freeze(self) -> None:
        self.frozen_since_ms = None if self.frozen else self.clock()

    def _set_interval(self, seconds: float) -> None:
        self.refresh_s = max(MIN_REFRESH_S, seconds)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(self.refresh_s, self._tick, name="status-refresh")

    def action_slower(self) -> None:
        bigger = [s for s in REFRESH_STEPS if s > self.refresh_s]
        self._set_interval(bigger[0] if bigger else REFRESH_STEPS[-1])

    def action_faster(self) -> None:
        smaller = [s for s in REFRESH_STEPS if s < self.refresh_s]
        if not smaller:
            self.notify(f"the refresh interval cannot go below {MIN_REFRESH_S:g}s", severity="warning")
        self._set_interval(smaller[-1] if smaller else MIN_REFRESH_S)

    # -- navigation -------------------------------------------------------------------------
    def action_help(self) -> None:
        from .help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def open_queue(self, name: str, tab: str | None = None) -> None:
        from .queue_screen import QueueScreen

        self.push_screen(QueueScreen(name, tab=tab))

    def open_job(self, queue: str, job_id: str) -> None:
        from .inspector import InspectorScreen

        self.push_screen(InspectorScreen(queue, job_id))

    async def action_quit(self) -> None:
        if self.running_ops:
            self._quit_after_run = True
            for screen in self.screen_stack:
                if isinstance(screen, RunModal):
                    screen.action_stop()
            self.notify("stopping the operation after the current batch; quitting when it has stopped",
                        severity="warning")
            return
        self.exit()

    # -- command palette -----------------------------------------------------------------------
    def get_system_commands(self, screen: Screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help: keys", "Every key of every screen", self.action_help)
        yield SystemCommand("Refresh now", "Read every queue's status now", self.action_refresh_now)
        yield SystemCommand("Unfreeze refresh" if self.frozen else "Freeze refresh",
                            "Freeze/unfreeze the periodic status refresh (p)", self.action_toggle_freeze)
        names = [r.name for r in self.snapshot.rows] if self.snapshot else []
        for name in names:
            yield SystemCommand(f"Open queue {name}", "Queue screen: histogram, processing, triage, jobs",
                                lambda n=name: self.open_queue(n))
            yield SystemCommand(f"Triage DLQ of {name}", "Dead jobs grouped by job type x error code",
                                lambda n=name: self.open_queue(n, tab="triage"))
        for name in names:
            for req in queue_wide_requests(name):
                yield SystemCommand(f"{req.operation.value.capitalize()} {req.scope} of {name}",
                                    _PALETTE_HELP.get(req.operation, "Plan first, confirm, then apply (journaled)"),
                                    lambda r=req: self.start_action(r), discover=False)
        extra = getattr(screen, "palette_commands", None)
        if extra is not None:
            yield from extra()


#: Palette help of the operations that ask where the jobs go first.
_PALETTE_HELP = {
    Operation.MIGRATE: "To another queue (asks which; jobctl migrate / drain --to): plan, confirm, apply",
    Operation.DRAIN: "Export to a directory first, then remove exactly those (jobctl drain --export-to)",
}

