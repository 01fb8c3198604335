"""The wall time a run would take with a core per process, from the CPU
seconds each process used: the jobctl command run in-process (its own CPU),
the walker processes it forks (each one's total, reported by the child as it
ends) and each Redis server (``INFO cpu``, sampled every :data:`TICK_S`).

The run is cut into segments: each phase (children whose lifetimes overlap,
e.g. the plan's readers, then the walkers) and the spans between them.  In a
segment the processes work side by side, calls in flight, so the busiest one
sets its pace: the segment takes the largest CPU seconds of the command, a
child of that phase, or a server, used within it; the run takes their sum.
With no child (one server) this is the whole run's busiest process.
"""

from __future__ import annotations

import bisect
import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

__all__ = ["modelled_seconds", "Recorder", "TICK_S"]

#: Seconds between two samples of the command's and the servers' CPU.
TICK_S = 0.1


class Recorder:
    """Samples ``(wall, command CPU, {server: CPU})`` while a run lasts, and
    the ``(start, end, CPU)`` of each child the run forks."""

    def __init__(self, server_cpu: Callable[[], dict[str, float]]) -> None:
        self.server_cpu = server_cpu
        self.samples: list[tuple[float, float, dict[str, float]]] = []
        self.children: list[tuple[float, float, float]] = []
        self._log = tempfile.NamedTemporaryFile(prefix="jobctl-children-", delete=False)
        self._stop = threading.Event()

    def _sample(self) -> None:
        self.samples.append((time.perf_counter(), time.process_time(), self.server_cpu()))

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            self._sample()

    @contextmanager
    def recording(self):
        """Within: sampling on, and every walker child reports its CPU."""
        from jobctl.ops.walk import processes

        real, path = processes._child, self._log.name

        def reporting(*args):  # runs in the child, before it exits
            t0 = time.perf_counter()
            try:
                real(*args)
            finally:
                ru = resource.getrusage(resource.RUSAGE_SELF)
                with open(path, "a") as f:
                    f.write(f"{t0} {time.perf_counter()} {ru.ru_utime + ru.ru_stime}\n")

        processes._child = reporting
        self._sample()
        sampler = threading.Thread(target=self._loop, daemon=True)
        sampler.start()
        try:
            yield self
        finally:
            self._stop.set()
            sampler.join()
            self._sample()
            processes._child = real
            with open(path) as f:
                self.children = [tuple(map(float, line.split())) for line in f if line.strip()]
            os.unlink(path)


def _at(samples, t: float, pick) -> float:
    """``pick(sample)`` interpolated at wall time ``t``."""
    walls = [s[0] for s in samples]
    i = min(max(bisect.bisect_left(walls, t), 1), len(samples) - 1)
    (t0, *a), (t1, *b) = samples[i - 1], samples[i]
    v0, v1 = pick((t0, *a)), pick((t1, *b))
    return v0 if t1 <= t0 else v0 + (v1 - v0) * min(max((t - t0) / (t1 - t0), 0.0), 1.0)


def _phases(children: list[tuple[float, float, float]]) -> list[tuple[float, float, list[float]]]:
    """Children whose lifetimes overlap, merged: ``(start, end, [CPU of each])``."""
    out: list[tuple[float, float, list[float]]] = []
    for start, end, cpu in sorted(children):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end), [*out[-1][2], cpu])
        else:
            out.append((start, end, [cpu]))
    return out


def modelled_seconds(rec: Recorder) -> dict:
    """The modelled seconds of the run :class:`Recorder` saw, with the CPU
    seconds behind them: ``{"seconds", "command_s", "children_s": [...],
    "servers_s": {...}, "segments": [...]}``."""
    samples = rec.samples
    first, last = samples[0][0], samples[-1][0]
    servers = list(samples[0][2])
    cuts, child_cpu = [first], {}
    for start, end, cpus in _phases(rec.children):
        cuts += [min(max(start, first), last), min(max(end, first), last)]
        child_cpu[len(cuts) - 2] = cpus  # the segment that starts at this phase's start
    cuts.append(last)
    segments = []
    for k in range(len(cuts) - 1):
        a, b = cuts[k], cuts[k + 1]
        command = _at(samples, b, lambda s: s[1]) - _at(samples, a, lambda s: s[1])
        per_server = {n: _at(samples, b, lambda s, n=n: s[2][n]) - _at(samples, a, lambda s, n=n: s[2][n])
                      for n in servers}
        kids = child_cpu.get(k, [])
        segments.append({"wall_s": b - a, "command_s": command, "children_s": kids, "servers_s": per_server,
                         "seconds": max(command, *kids, *per_server.values())})
    return {"seconds": sum(s["seconds"] for s in segments),
            "command_s": samples[-1][1] - samples[0][1],
            "children_s": [c for *_, c in rec.children],
            "servers_s": {n: samples[-1][2][n] - samples[0][2][n] for n in servers},
            "segments": segments}
