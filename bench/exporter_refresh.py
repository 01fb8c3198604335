"""How long one refresh of the Prometheus exporter takes (issue 12, item 11).

    python3 bench/exporter_refresh.py --depth 100000              # its own throwaway server
    python3 bench/exporter_refresh.py --url redis://127.0.0.1:6379/0 --depth 100000 --load

Without ``--url`` it starts a throwaway server (``--server``) and loads one
reliable-list queue of ``--depth`` jobs with :func:`bulkload.load_status_queue`;
with ``--url`` it uses that server as it is, and ``--load`` FLUSHES its
database and loads the queue.  Then it measures the first refresh (status,
the slow metrics: attempt histograms, dead breakdown, DLQ audit) and the
median of ``--runs`` steady refreshes (slow metrics cached), as ``jobctl
metrics serve`` does them.  Compare versions by running it with
``PYTHONPATH`` pointing at another checkout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def load(url: str, depth: int) -> None:
    """FLUSHDB, then one reliable-list queue ``big`` of ``depth`` jobs."""
    import redis

    from bulkload import load_status_queue

    client = redis.Redis.from_url(url)
    client.flushdb()
    load_status_queue(client, "big", depth, now_ms=int(time.time() * 1000))
    client.close()


def refreshes(url: str, runs: int) -> tuple[float, list[float]]:
    """Seconds of the first refresh, and of each of ``runs`` steady ones."""
    from jobctl.metrics import JobctlCollector
    from jobctl.session import Session

    session = Session(url=url)
    try:
        collector = JobctlCollector(session, interval_s=0.0, slow_interval_s=3600.0)
        t0 = time.perf_counter()
        collector.snapshot()
        first = time.perf_counter() - t0
        steady = []
        for _ in range(runs):
            t0 = time.perf_counter()
            collector.snapshot()
            steady.append(time.perf_counter() - t0)
    finally:
        session.close()
    return first, steady


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a server you own (default: start a throwaway one and load it)")
    ap.add_argument("--server", choices=("redis", "valkey"), default="redis")
    ap.add_argument("--depth", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--load", action="store_true", help="with --url: FLUSHDB, then load a queue of --depth jobs")
    args = ap.parse_args()

    import jobctl
    from harness import start_server

    print(f"jobctl from {Path(jobctl.__file__).parent}")
    srv = None if args.url else start_server(args.server)
    url = args.url or srv.url
    try:
        if srv is not None or args.load:
            load(url, args.depth)
        first, runs = refreshes(url, args.runs)
    finally:
        if srv is not None:
            srv.stop()
    print(f"depth {args.depth:,}: first refresh (with slow metrics) {first:.3f} s; steady refresh median "
          f"{statistics.median(runs) * 1000:.1f} ms (min {min(runs) * 1000:.1f}, max {max(runs) * 1000:.1f})")


if __name__ == "__main__":
    main()
