"""Where a script call's time goes: ``bulk_compare.py --attribute`` (``perf``, Redis 7, root).

:class:`CallTracer` follows one server's main thread with ``perf record``.
Every script call is bracketed by two uprobes on the server's
``evalGenericCommand`` (entry and return: EVAL and EVALSHA; the symbol is in
the dynamic symbol table of Debian's stripped ``redis-server``), and inside
each call the thread's ``futex`` and ``madvise`` system calls and its context
switches are timed and its page faults counted.  A call's time is split into:

* ``futex``: blocked on a lock another thread of the server held (jemalloc's
  background purger, ``jemalloc_bg_thd``, on this path);
* ``madvise``: the main thread itself handing freed pages back to the kernel;
* ``off-CPU``: switched out otherwise (preempted, or blocked in the kernel);
* the rest, "own": the script's work, and any time the hypervisor takes the
  vCPU away.  A ``cpu-clock`` sample every 50 µs of the thread's CPU
  (:data:`SAMPLE_NS`) tells the two apart: own time without samples is the
  hypervisor's.

Needs ``perf`` (linux-tools) and root; the probes are removed at :meth:`CallTracer.close`.
What the tracer found (2026-11-25): docs/performance.md, "Calls over 2 ms".
Times in ms.  Public tools only: ``perf probe``, ``perf record`` and
``perf script``'s text.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bulk_runs import SLOW_US

BOUND_MS = SLOW_US / 1000
#: ``cpu-clock`` sampling period (ns): a sample every 50 µs the main thread
#: runs (on the guest's clock: none while the hypervisor has the vCPU).
SAMPLE_NS = 50_000
#: uprobe group and the server function a script call runs in (EVAL and EVALSHA).
GROUP, FUNC = "jobctl_bench", "evalGenericCommand"
_EVENTS = [f"{GROUP}:call_in", f"{GROUP}:call_out__return",
           "syscalls:sys_enter_futex", "syscalls:sys_exit_futex",
           "syscalls:sys_enter_madvise", "syscalls:sys_exit_madvise", "sched:sched_switch",
           "exceptions:page_fault_user", f"cpu-clock/period={SAMPLE_NS}/"]
_LINE = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+(\S+?):?\s")


def calls(perf_text: str, tid: int) -> tuple[list[dict[str, float]], list[float], list[float]]:
    """From ``perf script -F tid,time,event,trace`` text: the main thread's
    script calls, each ``{"ms", "futex_ms", "madvise_ms", "off_cpu_ms",
    "faults", "samples"}`` (``faults``: page faults taken in the call;
    ``samples``: ``cpu-clock`` samples in it, one per :data:`SAMPLE_NS` of
    CPU),
    and the length of every ``futex`` wait and every ``madvise`` (ms),
    inside calls or not."""
    out: list[dict[str, float]] = []
    futexes: list[float] = []
    madvises: list[float] = []
    timed = {"futex": (futexes, "futex_ms"), "madvise": (madvises, "madvise_ms")}  # syscall -> (lengths, field)
    entered: dict[str, float] = {}  # syscall -> when the main thread entered it
    call: dict[str, float] | None = None
    off_at = None
    for line in perf_text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        ev = m.group(3)
        if int(m.group(1)) != tid and not ev.endswith("sched_switch"):
            continue  # a switch back in is logged in the context of the task it replaces
        t = float(m.group(2)) * 1000
        name = ev.rpartition("_")[2]
        if ev.endswith(":call_in"):
            call = {"at": t, "ms": 0.0, "futex_ms": 0.0, "madvise_ms": 0.0, "off_cpu_ms": 0.0, "faults": 0,
                    "samples": 0}
        elif ev.endswith(":call_out__return") and call is not None:
            call["ms"] = t - call.pop("at")
            out.append(call)
            call = None
        elif "sys_enter_" in ev and name in timed:
            entered[name] = t
        elif "sys_exit_" in ev and name in entered:
            lengths, field = timed[name]
            lengths.append(t - entered[name])
            if call is not None:
                call[field] += t - entered[name]
            del entered[name]
        elif ev.startswith("cpu-clock"):
            if call is not None:
                call["samples"] += 1
        elif ev.endswith("page_fault_user"):
            if call is not None:
                call["faults"] += 1
        elif ev.endswith("sched_switch"):
            if f"prev_pid={tid} " in line and not entered:
                off_at = t
            elif f"next_pid={tid} " in line and off_at is not None:
                if call is not None:
                    call["off_cpu_ms"] += t - off_at
                off_at = None
    return out, futexes, madvises


def _cpu(call: dict[str, float]) -> float:
    """A call's own CPU time (ms) as sampled: its ``cpu-clock`` samples times
    the period, less its ``madvise`` time (CPU too, in the kernel, but the
    allocator's)."""
    return max(0.0, call["samples"] * SAMPLE_NS / 1e6 - call["madvise_ms"])


def _rest(call: dict[str, float]) -> float:
    """A call's own time (ms): its length less the allocator's and the off-CPU time in it."""
    return call["ms"] - call["futex_ms"] - call["madvise_ms"] - call["off_cpu_ms"]


def _probes(binary: str, add: bool) -> None:
    """Add (or remove) the entry and return uprobes on :data:`FUNC`."""
    if not add:
        subprocess.run(["perf", "probe", "-q", "-d", f"{GROUP}:*"], capture_output=True)
        return
    for spec in (f"{GROUP}:call_in={FUNC}", f"{GROUP}:call_out={FUNC}%return"):
        proc = subprocess.run(["perf", "probe", "-q", "-x", binary, "-a", spec], capture_output=True, text=True)
        if proc.returncode != 0:
            _probes(binary, False)
            raise SystemExit(f"calltrace.py: perf probe {spec} failed: {proc.stderr.strip()[-300:]}")


class CallTracer:
    """``perf record`` of one server's main thread with the call uprobes:
    :meth:`start` before a timed block, :meth:`stop` after it (returns
    :func:`summarize`'s dict), :meth:`close` at the end (removes the probes
    and the data).  Raises SystemExit when ``perf`` is missing or refuses
    (not root)."""

    def __init__(self, pid: int) -> None:
        if not shutil.which("perf"):
            raise SystemExit("calltrace.py: perf not found on PATH (linux-tools)")
        self.pid = pid
        self.binary = os.path.realpath(f"/proc/{pid}/exe")
        self.dir = Path(tempfile.mkdtemp(prefix="jobctl-perf-"))
        self.data = self.dir / "perf.data"
        self.proc: subprocess.Popen | None = None
        _probes(self.binary, False)  # a stale pair from an interrupted run
        _probes(self.binary, True)

    def start(self) -> None:
        self.proc = subprocess.Popen(["perf", "record", "-q", "-t", str(self.pid), "-o", str(self.data)]
                                     + [a for e in _EVENTS for a in ("-e", e)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf attached
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode() if self.proc.stderr else ""
            self.close()
            raise SystemExit(f"calltrace.py: perf record failed: {err[-300:]}")

    def stop(self) -> dict:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()
        self.proc = None
        text = subprocess.run(["perf", "script", "-i", str(self.data), "-F", "tid,time,event,trace"],
                              capture_output=True, text=True, check=True).stdout
        self.data.unlink(missing_ok=True)
        return summarize(*calls(text, self.pid))

    def close(self, keep: bool = False) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        _probes(self.binary, False)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def summarize(got: list[dict[str, float]], futexes: list[float], madvises: list[float]) -> dict:
    """:func:`calls`' output as figures (ms): ``calls``, ``over_2ms``,
    ``over_2ms_own`` (over 2 ms of their own time), ``over_2ms_cpu`` (over
    2 ms of sampled CPU), ``own_max_ms``, ``cpu_max_ms``, the calls over
    2 ms split (``long``: ms, futex, madvise, off-CPU, own, sampled CPU,
    page faults; the 15 longest) and the main thread's ``futex`` and
    ``madvise`` totals.  Own time less sampled CPU is time the guest did not
    run at all: the hypervisor's."""
    long = sorted((c for c in got if c["ms"] > BOUND_MS), key=lambda c: -c["ms"])
    return {
        "calls": len(got), "over_2ms": len(long),
        "over_2ms_own": sum(1 for c in long if _rest(c) > BOUND_MS),
        "over_2ms_cpu": sum(1 for c in long if _cpu(c) > BOUND_MS),
        "own_max_ms": round(max((_rest(c) for c in got), default=0.0), 3),
        "cpu_max_ms": round(max((_cpu(c) for c in got), default=0.0), 3),
        "long": [(round(c["ms"], 2), round(c["futex_ms"], 2), round(c["madvise_ms"], 2), round(c["off_cpu_ms"], 2),
                  round(_rest(c), 2), round(_cpu(c), 2), int(c["faults"])) for c in long[:15]],
        "futex_waits_over_1ms": sum(1 for w in futexes if w > 1),
        "futex_total_ms": round(sum(futexes), 1), "futex_longest_ms": [round(w, 2) for w in sorted(futexes)[-5:]],
        "madvise_calls": len(madvises), "madvise_total_ms": round(sum(madvises), 1),
        "madvise_longest_ms": [round(w, 2) for w in sorted(madvises)[-5:]],
    }
