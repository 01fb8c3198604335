"""Plan and apply of a 100k-job reliable-list dead-list redrive, timed apart,
in this process (window engine quick check): wall seconds, server CPU
seconds (INFO cpu), EVALSHA calls and µs per call (INFO commandstats),
SLOWLOG entries over 2 ms, unfiltered (no filter: the tail-range plan; ``id ~ '*'``: every envelope read) and filtered at 20 %.

    python3 bench/window_split.py [--jobs N] [--server redis|valkey]
"""

from __future__ import annotations

import argparse
import time

import redis

from bulkload import load_dead
from harness import start_server
from jobctl.config import QueueConfig
from jobctl.filter import MATCH_ALL, compile_filter
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec


def server_cpu(c) -> float:
    info = c.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis")
    ap.add_argument("--batch", type=int, default=None, help="positions per window call (default: the engine's)")
    ap.add_argument("--only", choices=["unfiltered", "all"], default="all", help="unfiltered: only the no-filter run")
    args = ap.parse_args()
    srv = start_server(args.server)
    try:
        c = redis.Redis.from_url(srv.url)
        for flt in (None,) if args.only == "unfiltered" else (None, "id ~ '*'", "tenant = t0 or tenant = t1"):
            c.flushall()
            load_dead(c, "bench", args.jobs, now_ms=int(time.time() * 1000))
            c.config_set("slowlog-log-slower-than", 2000)
            c.slowlog_reset()
            c.config_resetstat()
            lay = ReliableList(c, QueueConfig("bench", tag="bench"))
            spec = OpSpec(Operation.REDRIVE, "bench", State.DEAD, State.READY, filter=MATCH_ALL if flt is None else compile_filter(flt))
            cpu0 = server_cpu(c)
            t0 = time.perf_counter()
            plan = lay.plan(spec)
            t1 = time.perf_counter()
            cpu1 = server_cpu(c)
            res = run_plan(lay, plan, journal=False, batch=args.batch)
            t2 = time.perf_counter()
            cpu2 = server_cpu(c)
            st = c.info("commandstats").get("cmdstat_evalsha", {})
            print(f"{flt!r}: plan {t1 - t0:.2f} s ({args.jobs / (t1 - t0):,.0f} scanned/s), apply {t2 - t1:.2f} s "
                  f"({res.moved / (t2 - t1):,.0f} moved/s, {args.jobs / (t2 - t1):,.0f} positions/s), "
                  f"moved {res.moved:,}; server CPU plan {cpu1 - cpu0:.2f} s, apply {cpu2 - cpu1:.2f} s; "
                  f"EVALSHA {st.get('calls')} calls, {st.get('usec_per_call')} µs/call; "
                  f"SLOWLOG > 2 ms: {len(c.slowlog_get(1000))}")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
