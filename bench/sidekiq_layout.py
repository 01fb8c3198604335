"""jobctl's ``sidekiq`` layout against Sidekiq's own ``DeadSet#retry_all``,
same server, same run.

    python3 bench/sidekiq_layout.py [--jobs 100000] [--quick] [--server redis]

Fills the ``dead`` set with ``--jobs`` jobs shaped as Sidekiq 6.4.1's
``send_to_morgue`` writes them (a 64-bit integer argument; half
``ArgumentError``, half ``IOError``), then times, each on a fresh set:
``jobctl redrive Q --yes``, ``jobctl redrive Q --filter "error =
'ArgumentError'" --yes`` (half the jobs) and ``ruby -e
'Sidekiq::DeadSet.new.retry_all'`` (Debian's ruby-sidekiq).  Prints one
JSON object: wall seconds, jobs/s, the ratios, and the script calls
(``INFO commandstats``: calls, mean usec; ``SLOWLOG``: calls over 5 ms).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import add_common_args, bench_session, jobctl_argv  # noqa: E402

QUEUE = "sk"
#: One dead job as Sidekiq 6.4.1 stores it (float-second times), jid and name filled in.
TEMPLATE = ('{{"retry":0,"queue":"bench","args":["{name}",9223372036854775807],"class":"FailWhileFlag",'
            '"jid":"{jid}","created_at":{t:.7f},"enqueued_at":{t:.7f},"error_message":"flag set for {name}",'
            '"error_class":"{err}","failed_at":{t:.6f},"retry_count":0}}')
SLOW_US = 5000


def make_dead(admin, n: int) -> None:
    """``n`` jobs in the ``dead`` set (score = failed_at), nothing else."""
    admin.flushall()
    t0 = time.time() - n / 1000
    pipe = admin.pipeline(transaction=False)
    for i in range(n):
        t = t0 + i / 1000
        err = "ArgumentError" if i % 2 == 0 else "IOError"
        pipe.zadd("dead", {TEMPLATE.format(name=f"job-{i}", jid=f"{i:024x}", t=t, err=err): t})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def _one(admin, n: int, argv: list[str], env: dict[str, str], moved: int) -> dict:
    make_dead(admin, n)
    admin.config_resetstat()
    admin.config_set("slowlog-log-slower-than", SLOW_US)
    admin.slowlog_reset()
    t0 = time.perf_counter()
    run = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if run.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {run.returncode}: {run.stderr.strip()[-500:]}")
    queued, dead = admin.llen("queue:bench"), admin.zcard("dead")
    if (queued, dead) != (moved, n - moved):
        raise RuntimeError(f"{argv[:3]} left {queued} queued and {dead} dead; expected {moved} and {n - moved}")
    evalsha = admin.info("commandstats").get("cmdstat_evalsha", {})
    slow = [e for e in admin.slowlog_get(1000) if e["command"].split(b" ", 1)[0].upper() == b"EVALSHA"]
    return {"wall_s": round(wall, 3), "jobs_per_s": round(moved / wall), "script_calls": evalsha.get("calls", 0),
            "script_usec_per_call": evalsha.get("usec_per_call"), "script_calls_over_5ms": len(slow)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--jobs", type=int, help="Dead jobs per run (default 100,000; --quick 5,000).")
    args = ap.parse_args()
    n = args.jobs or (5_000 if args.quick else 100_000)
    import redis

    with bench_session(args.server) as (srv, work):
        work.config.write_text(f'[queues.{QUEUE}]\nlayout = "sidekiq"\n')
        env = work.env()
        admin = redis.Redis.from_url(srv.url)
        jobctl = jobctl_argv() + ["--url", srv.url]
        ruby = ["ruby", "-e", 'require "sidekiq/api"; Sidekiq::DeadSet.new.retry_all']
        out = {"jobs": n,
               "jobctl_redrive": _one(admin, n, jobctl + ["redrive", QUEUE, "--yes"], env, n),
               "jobctl_redrive_filtered": _one(admin, n, jobctl + ["redrive", QUEUE, "--filter",
                                                                  "error = 'ArgumentError'", "--yes"], env, n // 2),
               "sidekiq_retry_all": _one(admin, n, ruby, {**env, "REDIS_URL": srv.url}, n)}
    base = out["sidekiq_retry_all"]["jobs_per_s"]
    out["ratio_unfiltered"] = round(out["jobctl_redrive"]["jobs_per_s"] / base, 1)
    out["ratio_filtered"] = round(out["jobctl_redrive_filtered"]["jobs_per_s"] / base, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
