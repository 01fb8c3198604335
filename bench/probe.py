"""A PING latency probe in its own process, on its own connection.

What another client of the server (a worker, a producer) sees while a bulk
operation runs: the probe sends ``PING``, records the round-trip time
(:func:`time.perf_counter`), sleeps ``interval`` and repeats until told to
stop (SIGTERM) or ``max_seconds`` pass, whichever comes first.  Running in a
separate process keeps the benchmark's own Python work (and its GIL) out of
the figures.

Library use::

    with PingProbe(url) as probe:
        ...                      # the operation under test
    probe.result                 # {"count", "p50_ms", "p99_ms", "max_ms", ...}

Command line (used by :class:`PingProbe`)::

    python3 bench/probe.py URL [--interval S] [--max-seconds S]

prints ``ready`` once connected, then one JSON line of results on exit.
It also stops when its parent process goes away.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["PingProbe", "probe_stats"]

#: Pause between two PINGs (s): about 1,000 probes per second at most, light
#: enough not to steal a core from the server on a 2-core machine.
DEFAULT_INTERVAL_S = 0.001
#: Environment variable: the CPU the probe pins itself to (unset: not pinned).
PROBE_CPU_ENV = "JOBCTL_BENCH_PROBE_CPU"
#: The probe stops by itself after this long whatever happens.
DEFAULT_MAX_SECONDS = 1800.0


def probe_stats(latencies_s: list[float], errors: int = 0, duration_s: float = 0.0) -> dict[str, Any]:
    """Summary of PING round trips: count, p50/p99/p99.9/max in ms, and how
    many took over 2 ms, 10 ms and 100 ms."""
    ms = [x * 1000.0 for x in latencies_s]
    out: dict[str, Any] = {"count": len(ms), "errors": errors, "duration_s": round(duration_s, 3)}
    if not ms:
        out.update(p50_ms=None, p99_ms=None, p999_ms=None, max_ms=None, over_2ms=0, over_10ms=0, over_100ms=0)
        return out
    q = statistics.quantiles(ms, n=1000, method="inclusive") if len(ms) >= 2 else [ms[0]] * 999
    out.update(p50_ms=statistics.median(ms), p99_ms=q[989], p999_ms=q[998], max_ms=max(ms),
               over_2ms=sum(1 for x in ms if x > 2), over_10ms=sum(1 for x in ms if x > 10),
               over_100ms=sum(1 for x in ms if x > 100))
    return out


class PingProbe:
    """Runs ``probe.py`` as a child process; see the module docstring.

    :meth:`start` returns once the probe is connected; :meth:`stop` returns
    its results dict (also kept in :attr:`result`).  Raises RuntimeError if
    the probe fails to start or report.
    """

    def __init__(self, url: str, *, interval_s: float = DEFAULT_INTERVAL_S,
                 max_seconds: float = DEFAULT_MAX_SECONDS) -> None:
        self.url = url
        self.interval_s = interval_s
        self.max_seconds = max_seconds
        self.proc: subprocess.Popen[bytes] | None = None
        self.result: dict[str, Any] | None = None

    def start(self) -> "PingProbe":
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), self.url, "--interval", str(self.interval_s),
             "--max-seconds", str(self.max_seconds)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"ping probe did not start: {line!r}")
        return self

    def stop(self) -> dict[str, Any]:
        import orjson

        proc, self.proc = self.proc, None
        if proc is None:
            return self.result or {}
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        try:
            self.result = orjson.loads(out.strip().splitlines()[-1])
        except (IndexError, orjson.JSONDecodeError) as exc:
            raise RuntimeError(f"ping probe gave no results: {out[-200:]!r}") from exc
        return self.result

    def __enter__(self) -> "PingProbe":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    ap.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS)
    args = ap.parse_args()

    import orjson
    import redis

    stop = False

    def _term(signum, frame) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    cpu = os.environ.get(PROBE_CPU_ENV)
    realtime = False
    if cpu:  # bulk_compare --pin: the probe next to the server, off the clients' CPU,
        # and (where permitted) real-time, so its figures are the server's
        # latency and not its own wait for a CPU behind a busy server
        os.sched_setaffinity(0, {int(cpu)})
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            realtime = True
        except (PermissionError, OSError):
            realtime = False
    client = redis.Redis.from_url(args.url, socket_timeout=30)
    client.ping()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    lat: list[float] = []
    errors = 0
    perf = time.perf_counter
    start = perf()
    end = start + args.max_seconds
    parent = os.getppid()
    while not stop and perf() < end and os.getppid() == parent:  # ends with its parent too
        t0 = perf()
        try:
            client.ping()
        except Exception:  # noqa: BLE001 - a failed probe is a data point, not a crash
            errors += 1
        else:
            lat.append(perf() - t0)
        if args.interval > 0:
            time.sleep(args.interval)
    stats = probe_stats(lat, errors, perf() - start)
    stats.update(pinned_cpu=int(cpu) if cpu else None, realtime=realtime)
    sys.stdout.write(orjson.dumps(stats).decode() + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
