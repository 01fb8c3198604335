"""Real ``celery worker`` processes for the Celery tests (Celery's own CLI,
the solo pool, one task at a time), and a bounded wait on what they do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def worker_starter(app_module: str, env: dict[str, str]) -> Iterator[Callable[[], subprocess.Popen]]:
    """A fixture body: yields ``start()`` -> a running ``celery -A app_module
    worker`` (``env`` added to the environment, this folder on its path);
    every worker started is killed (SIGKILL) when the fixture ends."""
    procs: list[subprocess.Popen] = []
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}

    def start() -> subprocess.Popen:
        cmd = [sys.executable, "-m", "celery", "-A", app_module, "worker", "-P", "solo", "-c", "1",
               "--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "warning"]
        procs.append(subprocess.Popen(cmd, env=full, cwd=str(TESTS), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)


def until(check, what: str, limit_s: float = 60.0):
    """Poll ``check()`` until it returns a true value, and return it (a hang
    guard, not a timing assertion): AssertionError naming ``what`` after ``limit_s``."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
