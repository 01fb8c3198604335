"""Redrive a million dead jobs: throughput, memory and what other clients feel.

On one throwaway server, each measured on a freshly loaded dead list of
``--jobs`` jobs (1,000,000; ``--quick`` 100,000; :func:`bulkload.load_dead`,
tenants ``t0``..``t9`` so ``tenant = t1`` matches exactly 10 %):

1. One script call of jobctl's dead-list apply (the window engine's
   ``rl_tail.lua`` / ``rl_window.lua``, which every dead-list redrive, suppress and purge
   runs, one call per round trip here, and ``list_restore.lua``): about ``--window-calls`` calls per batch size
   in ``--windows`` (256, jobctl's default, and 128) on the full list, in
   three mixes (no job planned: pure rotation; 10 % planned; all planned),
   through ``ReliableList.plan``/``.apply`` in this process, timed from the
   client (EVALSHA round trip) and by the server (``SLOWLOG``).
2. ``jobctl redrive bench --yes --json`` as a child process, unfiltered and
   with ``--filter 'tenant = t1'``: plan and apply seconds (from its JSON),
   wall time, jobs/s, the process's peak RSS (``wait4``), server-side time
   per ``EVALSHA`` (``INFO commandstats``), commands over 1 ms
   (``SLOWLOG``), and the PING latency seen meanwhile by a probe in another
   process on its own connection (:mod:`probe`).
3. The ceiling: ``ceiling_move.lua`` moving the same jobs 1,000 per call
   with no plan, fence, envelope update or journal.
4. RQ: ``rq requeue --all -u URL --queue bench`` on ``--rq-jobs`` failed RQ
   jobs (100,000; ``--quick`` 10,000) made by :mod:`rq_failed`, with the
   same probe.  Skipped with a note if ``rq`` is not installed.

Each of 2-4 runs ``--runs`` times, interleaved; tables show medians.
Writes ``bench/results/redrive-*.json``.

    python3 bench/redrive.py [--quick] [--runs N] [--server redis|valkey]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import orjson
import redis

from bulkload import load_dead
from harness import Workdir, add_common_args, bench_session, jobctl_argv
from measure import ratio, run_process, summary
from probe import PingProbe
from report import RESULTS_DIR, environment, fmt, note, table, write_results

QUEUE = "bench"
RQ_QUEUE = "bench"
CEILING_BATCH = 1000
HERE = Path(__file__).resolve().parent


# -- server-side measurements ---------------------------------------------------------

@contextmanager
def slowlog(admin, threshold_us: int, max_len: int):
    """Record commands slower than ``threshold_us``; yields a list filled on
    exit with ``(command, duration µs)``, where command is the lower-case
    name, ``"evalsha <sha>"`` for a script call.  Restores the config."""
    old = admin.config_get("slowlog-*")
    admin.config_set("slowlog-log-slower-than", threshold_us)
    admin.config_set("slowlog-max-len", max_len)
    admin.slowlog_reset()
    entries: list[tuple[str, int]] = []
    try:
        yield entries
        for e in admin.slowlog_get(max_len):
            cmd = e["command"]
            words = (cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)).split(" ", 2)
            name = words[0].lower()
            if name == "evalsha" and len(words) > 1:
                name = f"evalsha {words[1].lower()}"
            entries.append((name, int(e["duration"])))
    finally:
        for k, v in old.items():
            admin.config_set(k, v)
        admin.slowlog_reset()


def server_cpu_s(admin) -> float:
    """CPU seconds the server process has used (``INFO cpu``, user + sys):
    unlike wall time, barely inflated by other work on the machine."""
    cpu = admin.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def server_time(admin) -> dict:
    """From ``INFO commandstats`` since the last reset: EVALSHA calls and
    µs per call, and the total µs the server spent executing commands."""
    stats = admin.info("commandstats")
    ev = stats.get("cmdstat_evalsha", {})
    busy = sum(int(v["usec"]) for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_config"))
    return {"evalsha_calls": int(ev.get("calls", 0)), "evalsha_usec_per_call": float(ev.get("usec_per_call", 0)),
            "server_busy_s": busy / 1e6}


def fresh_dead(admin, n: int) -> float:
    """FLUSHALL, then ``n`` dead jobs on queue ``bench``; returns load seconds."""
    admin.flushall()
    t0 = time.perf_counter()
    got = load_dead(admin, QUEUE, n, now_ms=time.time_ns() // 1_000_000, seed=0)
    if got != n:
        raise RuntimeError(f"loaded {got} dead jobs, expected {n}")
    return time.perf_counter() - t0


# -- 1. one window-script call ---------------------------------------------------------

#: SLOWLOG threshold while timing script calls: every script call takes
#: longer, while the commands a script runs (also logged) rarely do.
SCRIPT_SLOWLOG_US = 50


def _script_shas() -> dict[str, str]:
    """SHA1 (as EVALSHA names it) -> name of each reliable-list script."""
    import hashlib

    from jobctl.scripts import SCRIPT_NAMES, source

    return {hashlib.sha1(source(n).encode()).hexdigest(): n for n in SCRIPT_NAMES
            if n.startswith("rl_") or n in ("rl_window", "rl_tail", "list_restore")}


def _info_cpu_cost(admin, samples: int = 200) -> float:
    """Median server CPU seconds between two back-to-back ``INFO cpu``
    readings: what one reading itself costs, subtracted from per-call CPU."""
    deltas = []
    for _ in range(samples):
        a = server_cpu_s(admin)
        deltas.append(server_cpu_s(admin) - a)
    return statistics.median(deltas)


def window_latency(admin, url: str, config: Path, calls: int, window: int) -> dict:
    """Time the script calls of jobctl's own dead-list apply path
    (``ReliableList.plan`` / ``.apply`` in this process, ``batch=window``)
    over about ``calls`` windows, for three mixes of planned jobs per window:

    * ``none planned``: ``--ids`` of the one job ``calls * window`` positions
      from the tail: every window before it only rotates;
    * ``10% planned``: ``tenant = t1``, limited to ``calls * window / 10``;
    * ``all planned``: no filter, limited to ``calls * window``.

    Client side: the ``EVALSHA`` round trip (``client.evalsha`` wrapped).
    Server side: ``SLOWLOG`` execution time (threshold
    :data:`SCRIPT_SLOWLOG_US`; wall time, so it includes any time the server
    was preempted), and the server's CPU time across the call (``INFO cpu``
    before and after, minus what an ``INFO cpu`` costs), which other load on
    the machine does not inflate.  Reported
    per script (``rl_tail``/``rl_window`` and ``list_restore``, which puts the held
    jobs back in order afterwards).
    """
    from jobctl.filter import MATCH_ALL, compile_filter
    from jobctl.keys import ReliableListKeys
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec
    from jobctl.session import Session

    keys = ReliableListKeys(QUEUE)
    shas = _script_shas()
    session = Session(config_file=str(config), url=url)
    layout = session.layout(QUEUE)
    client = layout.client
    timings: list[tuple[str, float, float]] = []  # (sha, round trip s, server CPU s)
    plain_evalsha = client.evalsha
    info_cost = _info_cpu_cost(admin)

    def timed_evalsha(sha, numkeys, *keys_and_args):
        cpu0 = server_cpu_s(admin)
        t0 = time.perf_counter()
        try:
            return plain_evalsha(sha, numkeys, *keys_and_args)
        finally:
            dt = time.perf_counter() - t0
            timings.append((sha, dt, server_cpu_s(admin) - cpu0 - info_cost))

    client.evalsha = timed_evalsha
    out = {}
    try:
        for mode in ("none planned", "10% planned", "all planned"):
            span = calls * window
            if mode == "none planned":
                far = admin.lindex(keys.dead, -span).decode()
                spec = OpSpec(Operation.REDRIVE, QUEUE, State.DEAD, State.READY, ids=(far,))
            elif mode == "10% planned":
                spec = OpSpec(Operation.REDRIVE, QUEUE, State.DEAD, State.READY,
                              filter=compile_filter("tenant = t1"), limit=span // 10)
            else:
                spec = OpSpec(Operation.REDRIVE, QUEUE, State.DEAD, State.READY, filter=MATCH_ALL, limit=span)
            length_before = admin.llen(keys.dead)
            plan = layout.plan(spec)
            timings.clear()
            moved = 0
            with slowlog(admin, SCRIPT_SLOWLOG_US, 200_000) as entries:
                for br in layout.apply(plan, batch=window):
                    moved += len(br.moved)
            if moved != plan.planned:
                raise RuntimeError(f"{mode}: moved {moved} of {plan.planned} planned jobs")
            per_script: dict[str, dict] = {}
            for sha, name in shas.items():
                client_s = [dt for s_, dt, _ in timings if s_ == sha]
                if not client_s:
                    continue
                prefix = f"evalsha {sha}"
                server_us = [d for cmd, d in entries if cmd == prefix]
                per_script[name] = {"calls": len(client_s), "client_ms": summary(client_s, 1000.0),
                                    "server_ms": summary(server_us, 0.001),
                                    "server_cpu_ms": summary([c for s_, _, c in timings if s_ == sha], 1000.0)}
            out[mode] = {"planned": plan.planned, "dead_length_before": length_before,
                         "dead_length_after": admin.llen(keys.dead), "scripts": per_script}
            w = per_script.get("rl_tail", per_script.get("rl_window", {})).get("server_ms", {})
            note(f"window {window}, {mode}: {plan.planned:,} moved; rl_tail server median "
                 f"{fmt(w.get('median'))} ms, max {fmt(w.get('max'))} ms")
    finally:
        client.evalsha = plain_evalsha
        session.close()
    return out


# -- 2. jobctl redrive through the CLI ------------------------------------------------------

def jobctl_redrive(srv, admin, work: Workdir, n: int, filter_text: str | None, batch: int | None = None) -> dict:
    from jobctl.keys import ReliableListKeys

    keys = ReliableListKeys(QUEUE)
    load_s = fresh_dead(admin, n)
    argv = jobctl_argv() + ["--url", srv.url, "redrive", QUEUE, "--yes", "--json"]
    if filter_text:
        argv += ["--filter", filter_text]
    if batch:
        argv += ["--batch", str(batch)]
    admin.config_resetstat()
    cpu0 = server_cpu_s(admin)
    with slowlog(admin, 1000, 100_000) as slow:
        with PingProbe(srv.url) as probe:
            run = run_process(argv, env=work.env(), rss=True)
    server_cpu = server_cpu_s(admin) - cpu0
    if run.returncode != 0:
        raise RuntimeError(f"jobctl redrive exited {run.returncode}: {run.stderr.strip()[-500:]}")
    doc = orjson.loads(run.stdout)
    plan = doc["plan"]
    expect = n if not filter_text else n // 10
    ready, dead = admin.llen(keys.ready), admin.llen(keys.dead)
    if doc["moved"] != expect or ready != expect or dead != n - expect:
        raise RuntimeError(f"jobctl redrive moved {doc['moved']} (ready {ready}, dead {dead}); expected {expect}")
    plan_s = (doc["started_ms"] - plan["now_ms"]) / 1000
    apply_s = (doc["ended_ms"] - doc["started_ms"]) / 1000
    return {"load_s": load_s, "scanned": plan["scanned"], "moved": doc["moved"], "skipped": doc["skipped"],
            "plan_s": plan_s, "apply_s": apply_s, "wall_s": run.wall_s,
            "other_s": run.wall_s - plan_s - apply_s,
            "plan_jobs_per_s": plan["scanned"] / plan_s if plan_s else None,
            "apply_jobs_per_s": doc["moved"] / apply_s if apply_s else None,
            "total_jobs_per_s": doc["moved"] / run.wall_s,
            "max_rss_kib": run.max_rss_kib, "cpu_s": run.user_s + run.sys_s, "server_cpu_s": server_cpu,
            "ping": probe.result, **server_time(admin), "slow_over_1ms": _slow_summary(slow)}


def _slow_summary(entries: list[tuple[str, int]]) -> dict:
    shas = _script_shas()
    by: dict[str, list[int]] = {}
    for name, d in entries:
        if name.startswith("evalsha "):
            name = shas.get(name[8:], "evalsha")
        by.setdefault(name, []).append(d)
    return {name: {"count": len(ds), "max_ms": max(ds) / 1000} for name, ds in by.items()}


# -- 3. the Lua ceiling ---------------------------------------------------------------------

#: This thread's CPU time where Linux offers it (the ceiling runs in-process).
_RUSAGE = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def ceiling(srv, admin, n: int, tenant: str) -> dict:
    from jobctl.keys import ReliableListKeys

    keys = ReliableListKeys(QUEUE)
    load_s = fresh_dead(admin, n)
    move = admin.register_script((HERE / "ceiling_move.lua").read_text())
    admin.script_load(move.script)
    length = admin.llen(keys.dead)
    admin.config_resetstat()
    moved = popped = 0
    cpu0 = server_cpu_s(admin)
    with slowlog(admin, 1000, 100_000) as slow:
        with PingProbe(srv.url) as probe:
            ru0 = resource.getrusage(_RUSAGE)
            t0 = time.perf_counter()
            if not tenant:
                while True:
                    p, m = move(keys=[keys.dead, keys.ready], args=[CEILING_BATCH, ""])
                    if not p:
                        break
                    popped += p
                    moved += m
            else:
                for start in range(0, length, CEILING_BATCH):
                    p, m = move(keys=[keys.dead, keys.ready],
                                args=[min(CEILING_BATCH, length - start), tenant, keys.job_prefix])
                    popped += p
                    moved += m
            wall = time.perf_counter() - t0
            ru1 = resource.getrusage(_RUSAGE)
    server_cpu = server_cpu_s(admin) - cpu0
    client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    expect = n if not tenant else n // 10
    if moved != expect or admin.llen(keys.ready) != expect:
        raise RuntimeError(f"ceiling moved {moved}, expected {expect}")
    return {"load_s": load_s, "scanned": popped, "moved": moved, "wall_s": wall,
            "total_jobs_per_s": moved / wall, "cpu_s": client_cpu, "server_cpu_s": server_cpu, "ping": probe.result,
            **server_time(admin),
            "slow_over_1ms": _slow_summary(slow)}


# -- 4. RQ --------------------------------------------------------------------------------------

def rq_executable() -> str | None:
    beside = Path(sys.executable).parent / "rq"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("rq")


def rq_requeue(srv, admin, m: int, env: dict[str, str]) -> dict:
    import rq_failed

    admin.flushall()
    real = rq_failed.worker_failed_fields(admin, "rq-shape")
    admin.flushall()
    t0 = time.perf_counter()
    ids = rq_failed.make_failed_jobs(admin, RQ_QUEUE, m)
    create_s = time.perf_counter() - t0
    synthetic = rq_failed.job_fields(admin, ids[0])
    if synthetic != real:
        note(f"warning: synthetic RQ jobs differ from worker-failed ones: "
             f"missing {sorted(real - synthetic)}, extra {sorted(synthetic - real)}")
    argv = [rq_executable(), "requeue", "--all", "-u", srv.url, "--queue", RQ_QUEUE]
    admin.config_resetstat()
    cpu0 = server_cpu_s(admin)
    with slowlog(admin, 1000, 100_000) as slow:
        with PingProbe(srv.url) as probe:
            run = run_process(argv, capture=False, rss=True, env=env)
    server_cpu = server_cpu_s(admin) - cpu0
    if run.returncode != 0:
        raise RuntimeError(f"rq requeue exited {run.returncode}: {run.stderr.strip()[-500:]}")
    queued = admin.llen(f"rq:queue:{RQ_QUEUE}")
    failed = admin.zcard(f"rq:failed:{RQ_QUEUE}")
    if queued != m or failed != 0:
        raise RuntimeError(f"rq requeue left {queued} queued and {failed} failed; expected {m} and 0")
    return {"load_s": create_s, "scanned": m, "moved": m, "wall_s": run.wall_s, "total_jobs_per_s": m / run.wall_s,
            "max_rss_kib": run.max_rss_kib, "cpu_s": run.user_s + run.sys_s, "server_cpu_s": server_cpu,
            "ping": probe.result,
            "fields_match_worker": synthetic == real, **server_time(admin), "slow_over_1ms": _slow_summary(slow)}


# -- report ---------------------------------------------------------------------------------------

def _med(runs: list[dict], key: str):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def _med_ping(runs: list[dict], key: str):
    vals = [r["ping"][key] for r in runs if r.get("ping") and r["ping"].get(key) is not None]
    return statistics.median(vals) if vals else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--jobs", type=int, help="Dead jobs (default 1,000,000; --quick 100,000).")
    ap.add_argument("--rq-jobs", type=int, help="Failed RQ jobs (default 100,000; --quick 10,000).")
    ap.add_argument("--runs", type=int, help="Runs of each operation (default 2; --quick 1).")
    ap.add_argument("--window-calls", type=int, help="list_window calls per mix (default 300; --quick 50).")
    ap.add_argument("--windows", default="256,128",
                    help="Window sizes to time list_window at (default 256,128; jobctl's default is 192).")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["window", "jobctl", "filtered", "batch128", "ceiling", "rq"], help="Leave a part out.")
    args = ap.parse_args()
    n = args.jobs or (100_000 if args.quick else 1_000_000)
    m = args.rq_jobs or (10_000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 2)
    calls = args.window_calls or (50 if args.quick else 300)
    if n % 10:
        ap.error("--jobs must be a multiple of 10 (the filter matches exactly a tenth)")
    skip = set(args.skip)
    if "rq" not in skip and rq_executable() is None:
        note("rq is not installed (pip install rq): skipping the RQ comparison")
        skip.add("rq")

    with bench_session(args.server) as (srv, work):
        env = environment(srv)
        note(f"{srv.kind} {srv.version} at {srv.url}; {n:,} dead jobs, {runs} run(s)")
        admin = redis.Redis.from_url(srv.url)
        work.write_catalogue({QUEUE: QUEUE})
        results: dict = {"jobs": n, "rq_jobs": m, "runs": runs, "ceiling_batch": CEILING_BATCH}

        # untimed: fill the private bytecode cache (harness.Workdir.env) for both tools
        admin.flushall()
        run_process(jobctl_argv() + ["--url", srv.url, "redrive", QUEUE, "--dry-run", "--json"], env=work.env())
        if "rq" not in skip:
            run_process([rq_executable(), "requeue", "--all", "-u", srv.url, "--queue", RQ_QUEUE], env=work.env())

        with PingProbe(srv.url) as idle:
            time.sleep(3)
        results["ping_idle"] = idle.result

        if "window" not in skip:
            load_s = fresh_dead(admin, n)
            note(f"loaded {n:,} dead jobs in {load_s:.1f} s ({admin.info('memory')['used_memory_human']})")
            results["window_latency"] = {}
            for size in [int(x) for x in args.windows.split(",")]:
                if size != int(args.windows.split(",")[0]):
                    load_s = fresh_dead(admin, n)
                results["window_latency"][size] = window_latency(admin, srv.url, work.config, calls, size)

        ops = {
            "jobctl redrive": lambda: jobctl_redrive(srv, admin, work, n, None),
            "jobctl redrive --filter 'tenant = t1'": lambda: jobctl_redrive(srv, admin, work, n, "tenant = t1"),
            "jobctl redrive --batch 128": lambda: jobctl_redrive(srv, admin, work, n, None, 128),
            "Lua ceiling, all": lambda: ceiling(srv, admin, n, ""),
            "Lua ceiling, tenant t1": lambda: ceiling(srv, admin, n, "t1"),
            f"rq requeue --all ({m:,} jobs)": lambda: rq_requeue(srv, admin, m, work.env()),
        }
        parts = ["jobctl", "filtered", "batch128", "ceiling", "ceiling", "rq"]
        ops = {k: f for (k, f), part in zip(ops.items(), parts) if part not in skip}
        per_op: dict[str, list[dict]] = {k: [] for k in ops}
        for r in range(runs):
            for name, fn in ops.items():
                note(f"run {r + 1}/{runs}: {name}")
                res = fn()
                per_op[name].append(res)
                partial = RESULTS_DIR / "redrive-partial.json"  # survives an interrupted run
                RESULTS_DIR.mkdir(parents=True, exist_ok=True)
                partial.write_bytes(orjson.dumps({"args": vars(args), "env": env, "results": results,
                                                  "operations": per_op}, option=orjson.OPT_NON_STR_KEYS))
                note(f"  {res['moved']:,} moved in {res['wall_s']:.1f} s ({res['total_jobs_per_s']:,.0f} jobs/s); "
                     f"PING p99 {res['ping']['p99_ms']:.2f} ms, max {res['ping']['max_ms']:.1f} ms")
        results["operations"] = per_op

        # -- tables -------------------------------------------------------------------------------------
        idle_p = results["ping_idle"]
        print(f"\nidle PING probe: p50 {fmt(idle_p['p50_ms'])} ms, p99 {fmt(idle_p['p99_ms'])} ms, "
              f"max {fmt(idle_p['max_ms'])} ms over {idle_p['count']:,} pings")
        if "window_latency" in results:
            rows = []
            for size, modes in results["window_latency"].items():
                for mode, w in modes.items():
                    for script_name, sc in w["scripts"].items():
                        cpu = sc.get("server_cpu_ms", {})
                        rows.append([size, mode, script_name, sc["calls"], w["dead_length_before"],
                                     cpu.get("median"), cpu.get("p99"), cpu.get("max"),
                                     sc["server_ms"]["median"], sc["server_ms"]["p99"], sc["server_ms"]["max"],
                                     sc["client_ms"]["median"], sc["client_ms"]["p99"], sc["client_ms"]["max"]])
            table(f"one script call of jobctl's dead-list apply on a ~{n:,}-element dead list; ms "
                  f"(CPU = server CPU time of the call; server = SLOWLOG execution time, wall; "
                  f"client = EVALSHA round trip)",
                  ["batch", "planned in window", "script", "calls", "list length", "CPU median", "CPU p99",
                   "CPU max", "server median", "server p99", "server max", "client median", "client p99",
                   "client max"], rows)
        rows, rows2 = [], []
        summ = {}
        for name, rr in per_op.items():
            walls = [x["wall_s"] for x in rr]
            s = {"runs": len(rr), "moved": rr[0]["moved"], "scanned": rr[0]["scanned"],
                 "wall_s": summary(walls), "plan_s": _med(rr, "plan_s"), "apply_s": _med(rr, "apply_s"),
                 "plan_jobs_per_s": _med(rr, "plan_jobs_per_s"), "apply_jobs_per_s": _med(rr, "apply_jobs_per_s"),
                 "total_jobs_per_s": _med(rr, "total_jobs_per_s"),
                 "max_rss_mib": _med(rr, "max_rss_kib") / 1024 if _med(rr, "max_rss_kib") else None,
                 "ping_p50_ms": _med_ping(rr, "p50_ms"), "ping_p99_ms": _med_ping(rr, "p99_ms"),
                 "ping_max_ms": _med_ping(rr, "max_ms"),
                 "ping_max_ms_worst": max(x["ping"]["max_ms"] for x in rr),
                 "ping_over_10ms": _med_ping(rr, "over_10ms"),
                 "evalsha_usec_per_call": _med(rr, "evalsha_usec_per_call"),
                 "server_busy_s": _med(rr, "server_busy_s"),
                 "client_cpu_s": _med(rr, "cpu_s"), "server_cpu_s": _med(rr, "server_cpu_s")}
            cpu = (s["client_cpu_s"] or 0) + (s["server_cpu_s"] or 0)
            s["jobs_per_cpu_s"] = s["moved"] / cpu if cpu else None
            summ[name] = s
            rows.append([name, s["moved"], s["scanned"], s["runs"], s["plan_s"], s["apply_s"], s["wall_s"]["median"],
                         s["wall_s"]["min"], s["wall_s"]["max"], s["plan_jobs_per_s"], s["apply_jobs_per_s"],
                         s["total_jobs_per_s"], s["client_cpu_s"], s["server_cpu_s"], s["jobs_per_cpu_s"]])
            slow = rr[len(rr) // 2]["slow_over_1ms"]  # from the median-index run
            slow_txt = ", ".join(f"{c} {v['count']:,} (max {v['max_ms']:.1f})"
                                 for c, v in sorted(slow.items(), key=lambda kv: -kv[1]["count"])[:3]) or "none"
            rows2.append([name, s["max_rss_mib"], s["ping_p50_ms"], s["ping_p99_ms"], s["ping_max_ms"],
                          s["ping_max_ms_worst"], s["ping_over_10ms"], s["evalsha_usec_per_call"],
                          s["server_busy_s"], slow_txt])
        results["summary"] = summ
        if rows:
            table("throughput (medians over runs; plan/apply from jobctl's JSON; wall = whole process; "
                  "CPU = user+sys of the client process (GNU time) and of the server (INFO cpu), which other "
                  "load on the machine barely inflates)",
                  ["operation", "moved", "scanned", "runs", "plan s", "apply s", "wall s", "wall min", "wall max",
                   "plan jobs/s (scanned)", "apply jobs/s", "total jobs/s", "client CPU s", "server CPU s",
                   "jobs per CPU s"], rows)
            table("impact (medians over runs): peak RSS of the process; PING probe on its own connection, ms; "
                  "server time per EVALSHA; server busy = all commands' execution time",
                  ["operation", "peak RSS MiB", "PING p50", "PING p99", "PING max", "PING max (worst run)",
                   "PINGs > 10 ms", "EVALSHA µs/call", "server busy s", "commands > 1 ms: count (max ms)"], rows2)
            ratios = {}

            def _r(a, b, label):
                if a in summ and b in summ:
                    ratios[label] = ratio(summ[a]["total_jobs_per_s"], summ[b]["total_jobs_per_s"])

            _r("jobctl redrive", "Lua ceiling, all", "jobctl / ceiling (unfiltered), jobs/s")
            _r("jobctl redrive --filter 'tenant = t1'", "Lua ceiling, tenant t1", "jobctl / ceiling (10 % filter), jobs/s")
            rq_name = next((k for k in summ if k.startswith("rq ")), None)
            if rq_name:
                _r("jobctl redrive", rq_name, "jobctl / rq requeue, jobs/s")
                _r("jobctl redrive --filter 'tenant = t1'", rq_name, "jobctl filtered / rq requeue, jobs/s")
            results["ratios"] = ratios
            if ratios:
                table("ratios of total jobs/s", ["comparison", "ratio"], [[k, v] for k, v in ratios.items()])
        write_results("redrive", vars(args) | {"jobs": n, "rq_jobs": m, "runs": runs, "window_calls": calls},
                      env, results)
        (RESULTS_DIR / "redrive-partial.json").unlink(missing_ok=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
