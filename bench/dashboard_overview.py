"""Cost of the dashboard's side panels (``Dashboard.overview``) on a queue
whose DLQ holds ``--dead`` jobs (default 1,000,000): the first call groups
the DLQ from a bounded random sample, the next ones within the triage TTL
reuse it and read only the journal streams.

    python -m bench.dashboard_overview [--dead N] [--server redis|valkey]

It starts its own throwaway server (bench.harness), so it never touches
another one.

Prints one line per call: wall time (ms), envelopes read, sampled.
"""

from __future__ import annotations

import argparse
import os
import time

import redis

from jobctl.config import Config, QueueConfig
from jobctl.dashboard import Dashboard
from jobctl.session import Session

from .bulkload import load_dead
from .harness import add_common_args, bench_session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dead", type=int, default=1_000_000)
    add_common_args(ap)
    args = ap.parse_args()
    with bench_session(args.server) as (srv, work):
        os.environ["JOBCTL_JOURNAL"] = str(work.journal)
        run(srv.url, args.dead)


def run(url: str, dead: int) -> None:
    client = redis.Redis.from_url(url)
    now = int(time.time() * 1000)
    t = time.perf_counter()
    load_dead(client, "big", dead, now_ms=now)
    print(f"loaded {dead:,} dead jobs in {time.perf_counter() - t:.1f} s")
    s = Session(url=url, timeout_s=30.0)
    s._config = Config(queues={"big": QueueConfig("big")})
    dash = Dashboard(s)
    snap = dash.refresh()
    for call in range(3):
        t = time.perf_counter()
        ov = dash.overview(snap)
        ms = (time.perf_counter() - t) * 1000
        (tri,) = dash._triages.get(["big"])
        print(f"overview call {call + 1}: {ms:,.0f} ms, envelopes read {tri.read:,} of {tri.depth:,}, "
              f"sampled {ov.sampled}, top group {ov.errors[0].count:,}")
    s.close()


if __name__ == "__main__":
    main()
