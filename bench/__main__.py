"""The benchmark suite's runner: ``python3 -m bench`` from the checkout's root.

    python3 -m bench --list                   # the table: what each measures, its anchor, how long
    python3 -m bench bulk_compare --sizes 1000000 --pin --isolate   # one benchmark, its own options
    python3 -m bench --all                    # every benchmark at its full size, one after the other
    python3 -m bench --all --tiny             # every benchmark at a tiny size: does each still run?
    python3 -m bench --help-all               # every benchmark's --help: does each still start?

Each benchmark is a script in ``bench/`` run as a child process with this
interpreter; it starts its own throwaway server unless told ``--url``, and
writes ``bench/results/<name>-<UTC stamp>.json`` where it keeps results.
Decisions the figures led to, and the command behind each: docs/performance.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    """One kept benchmark: ``bench/<name>.py``."""

    name: str
    measures: str
    anchor: str   # what the figure is compared against
    takes: str    # a full run's wall time on the project's 2-core machine
    tiny: tuple[str, ...]   # options for a run of a few seconds (--tiny)


SUITE = (
    Bench("bulk_compare", "redrive/purge/export jobs/s, peak RSS, calls > 2 ms, PING tail; every layout",
          "jobctl vs BullMQ 6.7 retryJobs / clean vs a minimal Lua move (ceiling_move.lua)",
          "~15 min at 100k+1M (+5M with --memory)", ("--sizes", "2000", "--skip", "bullmq")),
    Bench("plan_memory", "peak RSS of plans that keep per-job state (hash-job, filtered reliable-list)",
          "flat from 1M to 5M (<= 150 MiB); --compare another checkout, interleaved",
          "~10 min at 1M,5M", ("--sizes", "2000", "--ops", "hj-redrive,rl-filtered")),
    Bench("redrive", "one window call's server time; redrive wall/CPU/RSS; PING tail",
          "jobctl vs `rq requeue --all` (rq_failed.py) and the Lua move",
          "10-25 min at 1M (--quick ~1 min)",
          ("--quick", "--jobs", "2000", "--rq-jobs", "200", "--window-calls", "5", "--skip", "batch128")),
    Bench("export_bench", "`jobctl export` rows/s and peak RSS per format",
          ">= 100k rows/s, <= 150 MiB flat", "~2 min at 1M (--quick 100k)", ("--jobs", "2000", "--formats", "parquet")),
    Bench("analyze_bench", "`jobctl analyze` (PySpark local[*]) wall and analysis seconds",
          "4M rows in < 4x the 1M time", "~2 min (needs pyspark, java)", ("--sizes", "2000,4000")),
    Bench("status_depth", "`status` of 10 queues: core ms, CLI ms, round trips, commands",
          "1M-deep queues cost the same as 1k-deep (ratio ~1)", "~1 min (--quick ~10 s)",
          ("--quick", "--queues", "2", "--small", "100", "--large", "2000", "--refreshes", "20", "--cli-runs", "2")),
    Bench("cli_startup", "`jobctl --help` and an empty redrive/purge: the fixed cost in every bulk figure",
          "`python3 -c pass` and `import click`", "~30 s", ("--runs", "2")),
    Bench("exporter_refresh", "one Prometheus exporter refresh (first, and steady)",
          "the refresh interval", "~20 s at 100k", ("--depth", "2000", "--runs", "2")),
    Bench("cluster_bench", "status round trips and redrive jobs/s", "a 3-primary Redis Cluster vs one server",
          "~2 min at 50k", ("--jobs", "2000", "--depth", "50", "--runs", "1")),
    Bench("scan_bounds", "server time of one filtered-plan scan call at its limits; the COST_* constants",
          "SCAN_CALL_BUDGET_US (4 ms a call)", "~15 s", ("--quick", "--repeat", "1")),
    Bench("bounded_moves", "each call's server time: stream-group dead redrive, `requeue --stuck`",
          "the 2 ms bound a call", "~1 min (--quick ~10 s)", ("--quick", "--dead", "2000", "--stuck", "200")),
    Bench("rq_layout", "rq layout redrive jobs/s (unfiltered and filtered) of RQ's own failed jobs",
          "`rq requeue --all` (goal 100x)", "~8 min at 100k", ("--quick", "--jobs", "300")),
    Bench("sidekiq_layout", "sidekiq layout redrive jobs/s (unfiltered and filtered) of the dead set",
          "Sidekiq's own `DeadSet#retry_all` (goal 10x)", "~5 min at 100k", ("--quick", "--jobs", "300")),
    Bench("bullmq_layout", "bullmq layout redrive jobs/s (unfiltered and filtered), interleaved rounds",
          "BullMQ 6.7's own `retryJobs` (>= 1.0x, goal 1.5x)", "~4 min at 100k x 3 rounds",
          ("--quick", "--jobs", "300", "--seed", "100")),
)
BY_NAME = {b.name: b for b in SUITE}


def table() -> str:
    """The suite as a Markdown table."""
    rows = ["| name | measures | anchor | full run |", "|---|---|---|---|"]
    rows += [f"| {b.name} | {b.measures} | {b.anchor} | {b.takes} |" for b in SUITE]
    return "\n".join(rows)


def run(bench: Bench, args: list[str]) -> int:
    """Run ``bench/<name>.py args`` with this interpreter; its exit status."""
    print(f"== {bench.name} {' '.join(args)}".rstrip(), flush=True)
    t0 = time.monotonic()
    rc = subprocess.run([sys.executable, str(BENCH / f"{bench.name}.py"), *args], cwd=BENCH.parent).returncode
    print(f"== {bench.name}: exit {rc} after {time.monotonic() - t0:.1f} s", flush=True)
    return rc


def run_all(make_args) -> int:
    """Every benchmark in turn with ``make_args(bench)``; 1 if any failed."""
    failed = [b.name for b in SUITE if run(b, make_args(b)) != 0]
    print(f"== {len(SUITE) - len(failed)} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the table of benchmarks")
    ap.add_argument("--all", action="store_true", help="run every benchmark")
    ap.add_argument("--tiny", action="store_true", help="with --all or a name: at a tiny size")
    ap.add_argument("--help-all", action="store_true", help="every benchmark's --help (each must start)")
    ap.add_argument("name", nargs="?", choices=sorted(BY_NAME), help="run this benchmark")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its options (see python3 -m bench NAME --help)")
    opts = ap.parse_args(argv)
    if opts.help_all:
        return run_all(lambda b: ["--help"])
    if opts.all:
        return run_all(lambda b: list(b.tiny) if opts.tiny else [])
    if opts.name:
        bench = BY_NAME[opts.name]
        tiny = opts.tiny or "--tiny" in opts.args  # also after the name
        args = [a for a in opts.args if a != "--tiny"]
        return run(bench, [*(bench.tiny if tiny else ()), *args])
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
