"""jobctl's Textual dashboard (installed as ``jobctl_tui``): ``jobctl tui``
and what ``jobctl demo`` opens.

Screens: the dashboard (every queue, SLO colours, history chart), the queue
screen (attempt histogram, processing by time left, scheduled due times,
DLQ triage, job list, journal), the job inspector, and the plan /
progress modals of operations.  It is built on the headless core
(:class:`jobctl.dashboard.Dashboard`); it never imports redis, and the core
never imports this package or textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobctl.session import Session

    from .app import JobctlApp

__all__ = ["run_tui", "make_app"]


def make_app(session: "Session", **kwargs) -> "JobctlApp":
    """A :class:`~jobctl_tui.app.JobctlApp` on ``session`` (see its options).

    Raises :class:`~jobctl.errors.ConfigError` for a bad ``[queues.*.slo]``.
    """
    from .app import JobctlApp

    return JobctlApp(session, **kwargs)


def run_tui(session: "Session", **kwargs) -> int:
    """Run the TUI until the operator quits; returns exit code 0."""
    app = make_app(session, **kwargs)
    app.run()
    return 0
