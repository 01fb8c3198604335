"""jobctl's ``rq`` layout against ``rq requeue --all``, same server, same run.

    python3 bench/rq_layout.py [--jobs 100000] [--quick] [--server redis]

Makes ``--jobs`` failed RQ jobs: one failed for real by RQ's own
``SimpleWorker`` (:func:`rq_failed.worker_failed_fields`), cloned with its
hash, results stream and registry entry under new ids (what a worker
leaves, in seconds), then times, each on a fresh set:
``jobctl redrive Q --yes`` (unfiltered: the plan reads only the registry;
three runs, two before RQ's and one after, the median reported: a run of
seconds meets the load of its moment, RQ's of minutes an average),
``jobctl redrive Q --filter "error = 'ValueError'"`` (every job read at plan
time) and ``rq requeue --all``.  Prints one JSON object: wall seconds,
jobs/s, the 1-minute load average before and after, the ratios, plus the
script calls' mean server time (``INFO commandstats``: EVALSHA usec per
call) and how many took over 5 ms with the slowest (``SLOWLOG``; on a
loaded core these include time the server waited for the CPU).  Needs ``pip install rq``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rq_failed  # noqa: E402
from harness import add_common_args, bench_session, jobctl_argv  # noqa: E402

QUEUE = "bench"
#: Script calls slower than this (µs, the server's SLOWLOG) are counted: the bound a call.
SLOW_US = 5000


def _timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    run = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {run.returncode}: {run.stderr.strip()[-500:]}")
    return wall


def make_failed(admin, n: int) -> None:
    """``n`` failed jobs in ``QUEUE``'s failed registry, clones of one a real worker failed."""
    import uuid

    admin.flushall()
    rq_failed.worker_failed_fields(admin, QUEUE)
    (seed, score), = admin.zrange(f"rq:failed:{QUEUE}", 0, 0, withscores=True)
    fields = admin.hgetall(b"rq:job:" + seed)
    (_, entry), = admin.xrange(b"rq:results:" + seed)
    pipe = admin.pipeline(transaction=False)
    for i in range(n - 1):
        job_id = str(uuid.uuid4())
        pipe.hset(f"rq:job:{job_id}", mapping=fields)
        pipe.expire(f"rq:job:{job_id}", 31_536_000)
        pipe.xadd(f"rq:results:{job_id}", entry, maxlen=10)
        pipe.zadd(f"rq:failed:{QUEUE}", {job_id: score})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def _one(admin, n: int, argv: list[str], env: dict[str, str]) -> dict:
    make_failed(admin, n)
    admin.config_resetstat()
    admin.config_set("slowlog-log-slower-than", SLOW_US)
    admin.config_set("slowlog-max-len", 10_000)
    admin.slowlog_reset()
    load = os.getloadavg()[0]
    wall = _timed(argv, env)
    queued, failed = admin.llen(f"rq:queue:{QUEUE}"), admin.zcard(f"rq:failed:{QUEUE}")
    if (queued, failed) != (n, 0):
        raise RuntimeError(f"{argv[:3]} left {queued} queued and {failed} failed; expected {n} and 0")
    evalsha = admin.info("commandstats").get("cmdstat_evalsha", {})
    slow = admin.slowlog_get(10_000)
    return {"wall_s": round(wall, 3), "jobs_per_s": round(n / wall),
            "load_1m": [round(load, 1), round(os.getloadavg()[0], 1)], "script_calls": evalsha.get("calls", 0),
            "script_usec_per_call": evalsha.get("usec_per_call"),
            "script_calls_over_5ms": sum(1 for e in slow if _command(e).upper().startswith("EVALSHA")),
            "script_usec_max": max((e["duration"] for e in slow if _command(e).upper().startswith("EVALSHA")),
                                   default=None)}


def _command(entry: dict) -> str:
    cmd = entry.get("command", b"")
    return cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--jobs", type=int, help="Failed jobs per run (default 100,000; --quick 5,000).")
    args = ap.parse_args()
    n = args.jobs or (5_000 if args.quick else 100_000)
    rq = str(Path(sys.executable).parent / "rq")
    import redis

    with bench_session(args.server) as (srv, work):
        work.config.write_text(f'[queues.{QUEUE}]\nlayout = "rq"\n')
        env = work.env()
        admin = redis.Redis.from_url(srv.url)
        jobctl = jobctl_argv() + ["--url", srv.url]
        redrive = jobctl + ["redrive", QUEUE, "--yes"]
        runs = [_one(admin, n, redrive, env) for _ in range(2)]
        out = {"jobs": n,
               "jobctl_redrive_filtered": _one(admin, n, jobctl + ["redrive", QUEUE, "--filter",
                                                                  "error = 'ValueError'", "--yes"], env),
               "rq_requeue_all": _one(admin, n, [rq, "requeue", "--all", "-u", srv.url, "--queue", QUEUE], env)}
        runs.append(_one(admin, n, redrive, env))  # after RQ's long run: the load it met too
    runs.sort(key=lambda r: r["wall_s"])
    out["jobctl_redrive"], out["jobctl_redrive_runs"] = runs[1], runs  # the median of three
    base = out["rq_requeue_all"]["jobs_per_s"]
    out["ratio_unfiltered"] = round(out["jobctl_redrive"]["jobs_per_s"] / base, 1)
    out["ratio_filtered"] = round(out["jobctl_redrive_filtered"]["jobs_per_s"] / base, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
