"""How long one refresh of the Prometheus exporter takes (issue 12, item 11).

    python bench/exporter_refresh.py --url redis://127.0.0.1:6379/0 --depth 100000 --load

``--load`` FLUSHES the server's database and writes one reliable-list queue
of ``--depth`` jobs with :func:`bulkload.load_status_queue`.  Then it
measures the first refresh (status, the slow metrics: attempt histograms,
dead breakdown, DLQ audit) and the median of ``--runs`` steady refreshes
(slow metrics cached), as ``jobctl metrics serve`` does them.  Compare
versions by running it with ``PYTHONPATH`` pointing at another checkout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--depth", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--load", action="store_true", help="FLUSHDB, then load a queue of --depth jobs")
    args = ap.parse_args()

    import redis

    import jobctl
    from jobctl.metrics import JobctlCollector
    from jobctl.session import Session

    print(f"jobctl from {Path(jobctl.__file__).parent}")
    if args.load:
        sys.path.insert(0, str(Path(__file__).parent))
        from bulkload import load_status_queue

        client = redis.Redis.from_url(args.url)
        client.flushdb()
        load_status_queue(client, "big", args.depth, now_ms=int(time.time() * 1000))
        client.close()
    session = Session(url=args.url)
    try:
        collector = JobctlCollector(session, interval_s=0.0, slow_interval_s=3600.0)
        t0 = time.perf_counter()
        collector.snapshot()
        first = time.perf_counter() - t0
        runs = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            collector.snapshot()
            runs.append(time.perf_counter() - t0)
    finally:
        session.close()
    print(f"depth {args.depth:,}: first refresh (with slow metrics) {first:.3f} s; steady refresh median "
          f"{statistics.median(runs) * 1000:.1f} ms (min {min(runs) * 1000:.1f}, max {max(runs) * 1000:.1f})")


if __name__ == "__main__":
    main()
