"""``jobctl metrics serve | once``: the Prometheus exporter (:mod:`jobctl.metrics`)."""

from __future__ import annotations

import sys
import time

import click

from ..exitcodes import ExitCode
from ..session import Session
from . import options, render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)


def _interval_options(fn):
    for opt in reversed([
        click.option("--interval", type=options.Finite(0.0, 3600), default=5.0, show_default=True,
                     metavar="SECONDS", help="Read the server at most once per SECONDS; scrapes in between "
                                             "get the cached values."),
        click.option("--slow-interval", type=options.Finite(0.0, 86400), default=60.0, show_default=True,
                     metavar="SECONDS", help="Recompute the attempt histograms and the dead breakdown "
                                             "(bounded envelope reads) at most once per SECONDS."),
    ]):
        fn = opt(fn)
    return fn


@click.group()
def metrics() -> None:
    """Prometheus exporter: queue depths, ages, stuck, attempts, jobctl's operations."""


@metrics.command()
@click.argument("queues", nargs=-1, shell_complete=options.complete_queue)
@click.option("--port", type=options.Count(0, 65535), default=None, help="TCP port (default 9839; 0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@_interval_options
@pass_session
def serve(session: Session, queues: tuple[str, ...], port: int | None, host: str, interval: float,
          slow_interval: float) -> int:
    """Serve /metrics for QUEUES (default: all) until Ctrl-C.

    The ACL user needs +info besides read access to the queue keys (INFO
    server, replication, memory): without it, serve exits 4 saying so.

    Each scrape costs a bounded number of round trips per queue whatever the
    depth; see 'jobctl metrics once' for the exposition text.
    """
    from ..metrics import DEFAULT_PORT, JobctlCollector, start_exporter

    collector = JobctlCollector(session, queues, interval_s=interval, slow_interval_s=slow_interval)
    first = collector.snapshot()
    if not first.up and first.error and "ACL denied INFO" in first.error:
        from ..errors import AuthFailed  # a missing grant does not heal: say so instead of serving up=0

        raise AuthFailed(first.error)
    server, _thread = start_exporter(collector, host=host, port=DEFAULT_PORT if port is None else port)
    render.note(f"serving http://{host}:{server.server_port}/metrics for {session.target.display} "
                f"(read at most every {interval:g}s; Ctrl-C to stop)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return int(ExitCode.OK)


@metrics.command()
@click.argument("queues", nargs=-1, shell_complete=options.complete_queue)
@pass_session
def once(session: Session, queues: tuple[str, ...]) -> int:
    """Print one scrape's exposition text for QUEUES (default: all).

    Exits 3 when the server cannot be read (the text then holds only
    jobctl_exporter_up 0).
    """
    from ..metrics import JobctlCollector, exposition

    collector = JobctlCollector(session, queues, interval_s=0.0, slow_interval_s=0.0)
    text = exposition(collector)
    sys.stdout.buffer.write(text)
    sys.stdout.flush()
    snap = collector.snapshot()
    return int(ExitCode.OK if snap.up else ExitCode.UNREACHABLE)


COMMANDS = [metrics]
