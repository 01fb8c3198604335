"""Timing helpers shared by the benchmarks: summaries of samples and child
processes measured with their own resource usage.

Times are seconds (float) unless a name ends in ``_ms``; memory is KiB.
Public tools only: :func:`time.perf_counter`, :mod:`statistics` and GNU
``/usr/bin/time`` for a child's peak RSS.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["summary", "ProcessRun", "run_process", "ratio"]


def summary(samples: list[float], scale: float = 1.0) -> dict[str, Any]:
    """``{"n", "median", "min", "max", "p99"}`` of ``samples`` times ``scale``.

    ``p99`` is the 99th percentile (statistics.quantiles, inclusive method)
    and is ``None`` below 20 samples, where it means nothing.  An empty list
    gives ``n=0`` and ``None`` everywhere.
    """
    if not samples:
        return {"n": 0, "median": None, "min": None, "max": None, "p99": None}
    xs = [s * scale for s in samples]
    p99 = statistics.quantiles(xs, n=100, method="inclusive")[98] if len(xs) >= 20 else None
    return {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs), "p99": p99}


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or ``None`` when either is missing or ``b`` is zero."""
    if a is None or b is None or b == 0:
        return None
    return a / b


@dataclass
class ProcessRun:
    """One finished child process: ``wall_s`` from spawn to reap,
    ``max_rss_kib`` its peak resident set (-1 when not measured), CPU
    seconds, exit code and captured output (stderr: its last 4 KiB)."""

    argv: list[str]
    returncode: int
    wall_s: float
    max_rss_kib: int
    user_s: float
    sys_s: float
    stdout: bytes
    stderr: str


#: GNU time: measures the peak RSS of its child alone.  A child reaped by
#: ``os.wait4`` directly would report at least the RSS of the (large)
#: benchmark process it was forked from: Linux folds the pre-exec memory into
#: ``ru_maxrss``.
GNU_TIME = "/usr/bin/time"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``process_group=0``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(argv: list[str], *, env: dict[str, str] | None = None, capture: bool = True,
                rss: bool = False, timeout_s: float = 3600.0, cwd: str | os.PathLike | None = None) -> ProcessRun:
    """Run ``argv`` to completion; measure wall time (spawn to reap).

    With ``rss``, the child runs under ``/usr/bin/time -f "%M %U %S"`` (about
    1 ms more wall time) and ``max_rss_kib``, ``user_s`` and ``sys_s`` are
    the child's own; without it (or without GNU time) they are ``-1``/0.
    stdout is captured when ``capture`` (else discarded); stderr goes to a
    temporary file; ``cwd`` is the child's working directory.  Raises
    ``TimeoutError`` (after killing the child) past ``timeout_s``.
    """
    use_time = rss and os.access(GNU_TIME, os.X_OK)
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp:
        err_path = os.path.join(tmp, "stderr")
        time_path = os.path.join(tmp, "time")
        full = [GNU_TIME, "-f", "%M %U %S", "-o", time_path, *argv] if use_time else list(argv)
        with open(err_path, "wb") as err:
            t0 = time.perf_counter()
            # its own process group, so a timeout kills the measured command
            # too, not only GNU time (whose child would keep stdout open)
            proc = subprocess.Popen(full, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                                    stderr=err, env=env, cwd=cwd, process_group=0)
            killer = threading.Timer(timeout_s, _kill_group, (proc,))
            killer.daemon = True
            killer.start()
            try:
                out = b""
                if capture:
                    assert proc.stdout is not None
                    out = proc.stdout.read()  # until EOF: the child exited or closed stdout
                    proc.stdout.close()
                proc.wait()
                wall = time.perf_counter() - t0
            finally:
                killer.cancel()
                if proc.poll() is None:  # interrupted (Ctrl-C): leave no child behind
                    _kill_group(proc)
                    proc.wait()
        if wall >= timeout_s:
            raise TimeoutError(f"{argv[0]} ran longer than {timeout_s:g} s (killed)")
        with open(err_path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
        max_rss, user_s, sys_s = -1, 0.0, 0.0
        if use_time:
            try:
                fields = open(time_path).read().split()[-3:]
                max_rss, user_s, sys_s = int(fields[0]), float(fields[1]), float(fields[2])
            except (OSError, ValueError, IndexError):
                pass
    return ProcessRun(argv=list(argv), returncode=proc.returncode, wall_s=wall,
                      max_rss_kib=max_rss, user_s=user_s, sys_s=sys_s, stdout=out, stderr=text[-4096:])
