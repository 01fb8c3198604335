"""``jobctl tui``: the live dashboard (package ``jobctl_tui``, imported only
when the command runs, so the core and ``jobctl --help`` never load
textual)."""

from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ..session import Session
from . import options

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)

#: The refresh floor, seconds (``jobctl_tui.app.MIN_REFRESH_S``; kept here
#: so that ``--help`` does not import textual).
MIN_REFRESH_S = 0.5


@click.command()
@click.option("--refresh", type=options.Finite(MIN_REFRESH_S, 3600), default=2.0, show_default=True,
              metavar="SECONDS", help=f"Status refresh interval (floor {MIN_REFRESH_S:g}s; +/- change it live).")
@click.option("--rate", type=options.RATE, metavar="N",
              help="Operations move at most N jobs per second (as the CLI's --rate).")
@click.option("--prometheus-url", metavar="URL",
              help="A Prometheus scraping `jobctl metrics`: the history chart opens with its last 3 hours "
                   "(default: the profile's prometheus_url).")
@pass_session
def tui(session: Session, refresh: float, rate: float | None, prometheus_url: str | None) -> int:
    """Live dashboard: every queue, triage, inspector, operations behind a plan.

    Thresholds per queue colour the cells: [queues.NAME.slo] in the config
    (README, "TUI").  Press ? in the TUI for the keys.
    """
    if prometheus_url:
        from ..dashboard.prom_history import check_url

        check_url(prometheus_url)  # a bad URL: exit 2 before anything starts
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("jobctl tui needs a terminal (use jobctl status --watch when piped)")
    session.target  # noqa: B018 - a bad --url or --profile fails here, as one line
    from jobctl_tui import run_tui

    return run_tui(session, refresh_s=refresh, op_rate=rate, prometheus_url=prometheus_url)


COMMANDS = [tui]
