"""A/B benchmark: ``jobctl export`` (parquet) of one DLQ by several checkouts.

Starts a private server (``jobctl.server.EmbeddedServer``), fills one
reliable-list DLQ with N dead envelopes (``bulk_runs.load``, the DLQ of
``bulk_compare.py``; ``--envelopes export``: ``export_bench.fill``'s), then runs
``jobctl export`` as a child process of each checkout in turn, ``--runs``
rounds, and prints per checkout the best and median rows/s, the child's CPU
(user + sys) per row, minimum and median, and its peak RSS, median and
highest of the runs.  CPU per row is
the steadier figure on a shared machine: wall time follows the other
engineers' load, CPU time much less.

    python3 bench/export_ab.py --jobs 300000 --runs 6 base=/tmp/base new=.

Each ``NAME=PATH`` is a checkout whose ``jobctl`` package the child imports
(``PYTHONPATH=PATH``); the default is this checkout alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bulk_runs import load  # noqa: E402
from export_bench import export_child, fill  # noqa: E402

from jobctl.server import EmbeddedServer  # noqa: E402


def run_once(url: str, checkout: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one export child of ``checkout``."""
    work = Path(tempfile.mkdtemp(prefix="jobctl-export-ab-"))
    try:
        run = export_child(url, work / "out", checkout=checkout)
        return run.wall_s, run.user_s + run.sys_s, run.max_rss_kib / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=300_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--server", default="auto", choices=["auto", "redis", "valkey"])
    ap.add_argument("--envelopes", default="bulk", choices=["bulk", "export"],
                    help="bulk: bulk_compare.py's DLQ (~550-byte envelopes, 10 tenants; the issue-11 "
                         "figures); export: export_bench.py's")
    ap.add_argument("checkouts", nargs="*", metavar="NAME=PATH")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent.parent
    checkouts = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.checkouts] \
        or [("this", here)]
    server = EmbeddedServer(kind=args.server).start()
    try:
        client = redis.Redis.from_url(server.url)
        if args.envelopes == "bulk":
            load(client, "reliable-list", "bench", args.jobs)
        else:
            fill(client, "bench", args.jobs)
        results: dict[str, list] = {name: [] for name, _ in checkouts}
        for _ in range(args.runs):
            for name, path in checkouts:
                results[name].append(run_once(server.url, path))
        n = args.jobs
        print(f"{n:,} dead jobs ({args.envelopes} envelopes), {server.kind} {server.version}, {args.runs} runs each, "
              f"load average {os.getloadavg()[0]:.2f}")
        print("| checkout | rows/s best | rows/s median | CPU µs/row min | CPU µs/row median "
              "| peak RSS MiB median | peak RSS MiB max |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, runs in results.items():
            wall = [r[0] for r in runs]
            cpu = [r[1] for r in runs]
            print(f"| {name} | {n / min(wall):,.0f} | {n / statistics.median(wall):,.0f} | "
                  f"{min(cpu) / n * 1e6:.2f} | {statistics.median(cpu) / n * 1e6:.2f} | "
                  f"{statistics.median(r[2] for r in runs):.0f} | {max(r[2] for r in runs):.0f} |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
