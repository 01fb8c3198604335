"""Quick check of the window engine (jobctl.ops.window) on one throwaway server.

Loads ``--jobs`` dead jobs (default 100,000; :func:`bulkload.load_dead`,
tenants ``t0``..``t9``, so ``tenant in (t0, t1)`` matches 20 %) and runs, each
on a freshly loaded dead list, ``jobctl redrive bench --yes --json``
unfiltered, then filtered at 20 %, then ``jobctl purge`` of the whole DLQ,
as child processes; reports wall time, jobs (scanned) per second, the
child's peak RSS (GNU time) and the slowest script call in SLOWLOG.

    python3 bench/window_quick.py [--jobs N] [--server redis|valkey] [--batch B]

Not a substitute for bench/redrive.py (the coordinator's full comparison).
"""

from __future__ import annotations

import argparse
import sys
import time

import orjson
import redis

from bulkload import load_dead
from harness import Workdir, jobctl_argv, start_server
from measure import run_process

QUEUE = "bench"


def slowest_call_us(client) -> int:
    """The slowest command in SLOWLOG (µs; 0 when none logged)."""
    entries = client.slowlog_get(128)
    return max((int(e["duration"]) for e in entries), default=0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis")
    ap.add_argument("--batch", type=int, default=None)
    args = ap.parse_args()
    server = start_server(args.server)
    try:
        client = redis.Redis.from_url(server.url)
        runs = [("unfiltered redrive", ["redrive", QUEUE]),
                ("filtered redrive (20%)", ["redrive", QUEUE, "--filter", "tenant = t0 or tenant = t1"]),
                ("purge of the DLQ", ["purge", QUEUE, "--state", "dead", "--no-export"])]
        with Workdir() as wd:
            wd.write_catalogue({QUEUE: QUEUE})
            # warm-up: fills the bytecode cache (as a pip install does), not measured
            run_process([*jobctl_argv(), "--url", server.url, "status", QUEUE], env=wd.env(), rss=False)
            for name, argv in runs:
                client.flushall()
                load_dead(client, QUEUE, args.jobs, now_ms=int(time.time() * 1000))
                client.config_set("slowlog-log-slower-than", 1000)
                client.slowlog_reset()
                extra = ["--batch", str(args.batch)] if args.batch else []
                run = run_process([*jobctl_argv(), "--url", server.url, *argv, "--yes", "--json", *extra],
                                  env=wd.env(), rss=True)
                if run.returncode not in (0, 8):
                    print(f"{name}: exit {run.returncode}: {run.stderr}", file=sys.stderr)
                    continue
                res = orjson.loads(run.stdout)
                slow = client.slowlog_get(128)
                print(f"{name:26s} planned {res['planned']:>8,} moved {res['moved']:>8,} "
                      f"wall {run.wall_s:6.2f} s  {args.jobs / run.wall_s:>9,.0f} scanned/s  "
                      f"{res['moved'] / run.wall_s:>9,.0f} moved/s  "
                      f"rss {run.max_rss_kib / 1024:6.1f} MB  calls > 1 ms: {len(slow)}, "
                      f"slowest {slowest_call_us(client) / 1000:.2f} ms")
                worst = max(slow, key=lambda e: int(e["duration"]), default=None)
                if worst is not None:
                    print(f"{'':26s} slowest command: {worst['command'][:60]!r}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
