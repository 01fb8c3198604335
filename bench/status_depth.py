"""Does ``jobctl status`` cost the same on a 1M-deep queue as on a 1k one?

One server holds two sets of 10 reliable-list queues, one at ``--small``
depth (1,000 jobs each) and one at ``--large`` depth (1,000,000 each), every
queue spread 50 % ready / 20 % scheduled (10 % of them overdue) / 5 %
processing (20 % of them stuck) / 25 % dead (:mod:`bulkload`).  Then, with
the two sets measured in alternation so that machine noise hits both:

* core: one refresh of the 10 queues (``ReliableList.status`` of each at one
  ``now``, the call behind ``jobctl status`` and the TUI), many times;
* CLI: the whole process ``jobctl --url URL status Q0..Q9 --json``;
* round trips per refresh (client side, :mod:`roundtrips`) and commands per
  refresh (server side, ``INFO commandstats`` after ``CONFIG RESETSTAT``).

Before timing, each queue's status is checked against what was written.
Prints medians, min/max and the large/small ratios (~1 means the cost does
not grow with depth); writes ``bench/results/status_depth-*.json``.

    python3 bench/status_depth.py [--quick] [--server redis|valkey]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import orjson
import redis

from bulkload import load_status_queue
from harness import add_common_args, bench_session, calls_delta, command_calls, jobctl_argv
from measure import ratio, run_process, summary
from report import environment, fmt, note, table, write_results
from roundtrips import install as install_roundtrips


def _label(depth: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if depth >= div and depth % div == 0:
            return f"{depth // div}{unit}"
    return str(depth)


def _check(statuses, truths) -> list[str]:
    """Mismatches between status results and what was written."""
    bad = []
    for st, (name, tr) in zip(statuses, truths):
        for field in ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead",
                      "oldest_ready_since_ms"):
            got, want = getattr(st, field), getattr(tr, field)
            if got != want:
                bad.append(f"{name}: {field} = {got}, expected {want}")
        if st.errors or st.warnings:
            bad.append(f"{name}: errors {st.errors} warnings {st.warnings}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--queues", type=int, default=10, help="Queues per depth (default 10).")
    ap.add_argument("--small", type=int, default=1_000, help="Depth of the small set (default 1,000).")
    ap.add_argument("--large", type=int, help="Depth of the large set (default 1,000,000; --quick 100,000).")
    ap.add_argument("--refreshes", type=int, help="Timed core refreshes per set (default 1000; --quick 50).")
    ap.add_argument("--cli-runs", type=int, help="CLI processes per set (default 30; --quick 5).")
    args = ap.parse_args()
    large = args.large or (100_000 if args.quick else 1_000_000)
    refreshes = args.refreshes or (50 if args.quick else 1000)
    cli_runs = args.cli_runs or (5 if args.quick else 30)
    depths = {"small": args.small, "large": large}

    from jobctl.session import Session

    with bench_session(args.server) as (srv, work):
        env = environment(srv)
        note(f"{srv.kind} {srv.version} at {srv.url}")
        admin = redis.Redis.from_url(srv.url)
        now = time.time_ns() // 1_000_000
        sets: dict[str, list[str]] = {}
        truths: dict[str, list] = {}
        catalogue = {}
        load_s = {}
        for which, depth in depths.items():
            names = [f"d{_label(depth)}_{i:02d}" for i in range(args.queues)]
            sets[which] = names
            truths[which] = []
            note(f"loading {args.queues} queues x {depth:,} jobs ({which})")
            t0 = time.perf_counter()
            for i, name in enumerate(names):
                catalogue[name] = name
                truths[which].append((name, load_status_queue(admin, name, depth, now_ms=now, seed=i)))
            load_s[which] = time.perf_counter() - t0
        work.write_catalogue(catalogue)
        mem = admin.info("memory")
        note(f"loaded in {sum(load_s.values()):.1f} s; server memory {mem['used_memory_human']}, "
             f"{admin.dbsize():,} keys")

        session = Session(config_file=str(work.config), url=srv.url)
        layouts = {w: [session.layout(n) for n in names] for w, names in sets.items()}

        def refresh(which: str):
            t = time.time_ns() // 1_000_000
            return [lay.status(t) for lay in layouts[which]]

        problems = []
        for which in sets:
            problems += _check(refresh(which), truths[which])
        if problems:
            for p in problems:
                print(f"status_depth: MISMATCH {p}", file=sys.stderr)
            return 1
        note("status matches the loaded truth for every queue")

        # -- core call -----------------------------------------------------------------
        for _ in range(20):  # warm-up: connections, script caches, branch predictors
            for which in sets:
                refresh(which)
        core: dict[str, list[float]] = {w: [] for w in sets}
        order = list(sets)
        perf = time.perf_counter
        for r in range(refreshes):
            for which in (order if r % 2 == 0 else order[::-1]):
                t0 = perf()
                refresh(which)
                core[which].append(perf() - t0)

        # -- round trips and commands per refresh --------------------------------------
        counter = install_roundtrips()
        rt: dict[str, float] = {}
        cmds: dict[str, dict[str, float]] = {}
        k = 20
        for which in sets:
            admin.config_resetstat()
            before = command_calls(admin)
            counter.reset()
            for _ in range(k):
                refresh(which)
            rt[which] = counter.count / k
            cmds[which] = {c: n / k for c, n in calls_delta(before, command_calls(admin)).items()}

        # -- the whole CLI process -----------------------------------------------------------
        argv = jobctl_argv() + ["--url", srv.url, "status"]
        child_env = work.env()
        cli: dict[str, list[float]] = {w: [] for w in sets}
        cli_rss: dict[str, list[int]] = {w: [] for w in sets}
        for w in sets:  # untimed runs: warm the page cache and .pyc files; peak RSS
            run_process(argv + sets[w] + ["--json"], env=child_env)
            cli_rss[w].append(run_process(argv + sets[w] + ["--json"], env=child_env, rss=True).max_rss_kib)
        for r in range(cli_runs):
            for which in (order if r % 2 == 0 else order[::-1]):
                run = run_process(argv + sets[which] + ["--json"], env=child_env)
                if run.returncode != 0:
                    print(f"status_depth: jobctl exited {run.returncode}: {run.stderr.strip()}", file=sys.stderr)
                    return 1
                doc = orjson.loads(run.stdout)
                got = [q["dead"] for q in doc["queues"]]
                want = [t.dead for _, t in truths[which]]
                if got != want:
                    print(f"status_depth: CLI dead counts {got} != {want}", file=sys.stderr)
                    return 1
                cli[which].append(run.wall_s)
        cli_rt: dict[str, int] = {}
        cli_cmds: dict[str, dict[str, int]] = {}
        rt_file = work.path / "roundtrips"
        here = os.path.dirname(os.path.abspath(__file__))
        for which in sets:
            admin.config_resetstat()
            before = command_calls(admin)
            run = run_process([sys.executable, os.path.join(here, "roundtrips.py"), "--url", srv.url, "status",
                               *sets[which], "--json"], env=work.env(BENCH_ROUNDTRIPS_FILE=str(rt_file)))
            if run.returncode != 0:
                print(f"status_depth: counted jobctl exited {run.returncode}: {run.stderr.strip()}",
                      file=sys.stderr)
                return 1
            cli_cmds[which] = calls_delta(before, command_calls(admin))
            cli_rt[which] = int(rt_file.read_text())

        # -- report -------------------------------------------------------------------------
        results: dict = {"queues_per_set": args.queues, "depths": depths, "refreshes": refreshes,
                         "cli_runs": cli_runs, "load_s": load_s, "server_memory": mem["used_memory_human"],
                         "sets": {}}
        rows = []
        for which, depth in depths.items():
            c = summary(core[which], 1000.0)
            p = summary(cli[which], 1000.0)
            results["sets"][which] = {
                "depth_per_queue": depth, "queues": sets[which],
                "core_refresh_ms": c, "cli_ms": p,
                "cli_max_rss_kib": max(cli_rss[which]),
                "roundtrips_per_refresh": rt[which], "commands_per_refresh": cmds[which],
                "cli_roundtrips": cli_rt[which], "cli_commands": cli_cmds[which],
            }
            rows.append([f"{args.queues} x {_label(depth)}", c["median"], c["min"], c["max"], c["p99"],
                         p["median"], p["min"], p["max"], max(cli_rss[which]) / 1024, rt[which],
                         sum(cmds[which].values()),
                         cli_rt[which], sum(cli_cmds[which].values())])
        s, l_ = results["sets"]["small"], results["sets"]["large"]
        results["ratio_large_small"] = {
            "core_median": ratio(l_["core_refresh_ms"]["median"], s["core_refresh_ms"]["median"]),
            "cli_median": ratio(l_["cli_ms"]["median"], s["cli_ms"]["median"]),
            "core_min": ratio(l_["core_refresh_ms"]["min"], s["core_refresh_ms"]["min"]),
        }
        table(f"jobctl status, one refresh of {args.queues} queues ({srv.kind} {srv.version}); times in ms",
              ["queues x depth", "core median", "core min", "core max", "core p99", "CLI median", "CLI min",
               "CLI max", "CLI peak RSS MiB", "round trips/refresh", "commands/refresh", "CLI round trips", "CLI commands"], rows)
        rr = results["ratio_large_small"]
        table(f"ratio {_label(large)} / {_label(args.small)} (1.0 = cost independent of depth)",
              ["measure", "ratio"],
              [["core refresh, median", rr["core_median"]], ["core refresh, min", rr["core_min"]],
               ["CLI process, median", rr["cli_median"]]])
        print("\ncommands per refresh (server side):",
              ", ".join(f"{c} {fmt(n)}" for c, n in sorted(cmds["large"].items())), flush=True)
        write_results("status_depth", vars(args) | {"large": large, "refreshes": refreshes,
                                                   "cli_runs": cli_runs}, env, results)
        return 0


if __name__ == "__main__":
    sys.exit(main())
