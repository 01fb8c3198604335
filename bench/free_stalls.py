"""Are the > 2 ms calls of a hash-job purge jobctl's, or the server's freeing?

No jobctl here: a hash-job DLQ of N failed jobs is loaded
(``bulkload.load_hash_job_failed``), then redis-py sends one plain command
per job hash, pipelined 200 at a time, and SLOWLOG (threshold 2,000 µs)
is read afterwards:

* ``del``: ``DEL`` of every job hash, the work a purge must do;
* ``hget``: ``HGET`` of one field of every job hash, the same keys touched
  without freeing anything.

The keys go in id order, the order they were written in (and a purge of
the failed list meets them in): whole pages of the server's heap fall
empty one after the other.  (In ``SCAN`` order few pages empty and the
stalls mostly go.)

Each mode runs on a fresh server, with the server's threads on CPU 0 and
this client on CPU 1 (Linux; ``--apart``: only the server's main thread on
CPU 0, its other threads, jemalloc's background purger among them, with
this client).  Run the server with jemalloc's decay off to see whether
returning freed pages to the kernel is what stalls::

    python3 bench/free_stalls.py --jobs 1000000
    python3 bench/free_stalls.py --jobs 1000000 --modes del --apart
    python3 bench/free_stalls.py --jobs 1000000 --modes del --apart --boost
    MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 python3 bench/free_stalls.py --jobs 1000000

On 2026-11-25 (Redis 7.0.15, a 2-vCPU Firecracker VM, five interleaved
pairs of ``del``): 7-14 commands over 2 ms (longest 9-26 ms) with
``--apart``, 2-6 (longest 4.7-7.7 ms) without; with decay off, none.  With
``CONFIG SET jemalloc-bg-thread no`` (purging inline): 32-35, longest
5.2-6.4 ms.  ``--apart --boost`` (the purger never preempted by the client;
2026-11-25 03:40, three pairs interleaved with plain ``--apart``): 2, 3
and 4 commands over 2 ms (longest 4.3-28 ms), against 12, 6 and 6
(longest 10-29 ms) without: fewer stalls, not none.

(``MALLOC_CONF`` reaches the server as an environment variable; it is read
by the jemalloc that Debian's ``redis-server`` links.)
"""
from __future__ import annotations

import argparse
import os
import time

import redis

from bulkload import load_hash_job_failed
from harness import start_server

QUEUE = "bench-hj"
PIPELINE = 200


def _pin(pid: int, apart: bool, boost: bool = False) -> None:
    """Every thread of ``pid`` on CPU 0 and this process on CPU 1; ``apart``
    (as ``bulk_compare.py --pin``): only its main thread on CPU 0, its other
    threads (jemalloc's background purger) with this client on CPU 1;
    ``boost``: those other threads ``SCHED_FIFO`` (priority 1), so the
    client never preempts them."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return
    os.sched_setaffinity(0, {1})
    for tid in (int(t) for t in os.listdir(f"/proc/{pid}/task")):
        os.sched_setaffinity(tid, {0} if tid == pid or not apart else {1})
        if boost and tid != pid:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(1))


def run(mode: str, n: int, apart: bool = False, boost: bool = False) -> dict:
    """One mode on a fresh server: ``{"mode", "s", "over_2ms", "max_ms"}``."""
    srv = start_server("redis")
    try:
        _pin(srv.pid, apart, boost)
        admin = redis.Redis.from_url(srv.url)
        load_hash_job_failed(admin, QUEUE, n, now_ms=int(time.time() * 1000))
        # id order, the order the jobs were written in and a purge meets them
        keys = sorted(admin.scan_iter(match=f"queue:{QUEUE}:job:*", count=10_000))
        admin.config_set("slowlog-max-len", 100_000)
        admin.config_set("slowlog-log-slower-than", 2_000)
        admin.slowlog_reset()
        started = time.perf_counter()
        for i in range(0, len(keys), PIPELINE):
            pipe = admin.pipeline(transaction=False)
            for key in keys[i:i + PIPELINE]:
                pipe.delete(key) if mode == "del" else pipe.hget(key, "status")
            pipe.execute()
        took = time.perf_counter() - started
        slow = [e["duration"] for e in admin.slowlog_get(100_000)]
        return {"mode": mode, "keys": len(keys), "s": round(took, 2), "over_2ms": len(slow),
                "max_ms": round(max(slow) / 1000, 2) if slow else 0.0}
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--apart", action="store_true",
                    help="the server's other threads on the client's CPU, not with its main thread")
    ap.add_argument("--boost", action="store_true",
                    help="the server's other threads SCHED_FIFO (root), as bulk_compare.py --pin")
    ap.add_argument("--modes", default="del,hget", help="comma-separated: del, hget")
    args = ap.parse_args()
    print(f"MALLOC_CONF={os.environ.get('MALLOC_CONF', '')!r}")
    for mode in args.modes.split(","):
        print(run(mode, args.jobs, args.apart, args.boost))


if __name__ == "__main__":
    main()
