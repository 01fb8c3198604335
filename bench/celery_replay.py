"""jobctl's Celery replay (``replay_results = 1``) and the status read of
result records, on one server.

    python3 bench/celery_replay.py [--records 20000] [--other 100000] [--quick] [--server redis]

Lays ``--records`` FAILURE result records of the queue ``celery`` (the JSON
Celery 5.7's Redis backend writes with ``result_extended = True``: a 64-bit
integer argument and a ~1 KB kwargs payload) among ``--other`` unrelated
keys, then runs ``jobctl status celery --json`` and ``jobctl replay celery
--yes --json`` (whole commands).  Prints one JSON object: per command the
wall seconds and the CPU seconds of redis-server and of the client; for the
replay the records/s, script calls, mean usec per call (``INFO
commandstats``), the slowest call and the calls over 5 ms (``SLOWLOG``,
calls over 1 ms logged); the load average.  Celery itself has no replay to
compare with: the numbers are the cost of jobctl's own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import add_common_args, bench_session, jobctl_argv  # noqa: E402

SLOW_US, LOGGED_US = 5000, 1000


def _record(i: int) -> bytes:
    return json.dumps({
        "status": "FAILURE", "result": {"exc_type": "ConnectionError", "exc_message": [f"refused {i}"],
                                        "exc_module": "builtins"},
        "traceback": "Traceback (most recent call last):\n  ...\nConnectionError: refused\n", "children": [],
        "date_done": "2026-11-28T06:00:00.000000+00:00", "name": "app.tasks.send", "args": [f"r{i}", 2 ** 63 - 1],
        "kwargs": {"tag": "a" if i % 2 else "b", "body": "x" * 900}, "worker": "celery@bench", "retries": 3,
        "queue": "celery", "task_id": f"task-{i}"}).encode()


def _lay(admin, records: int, other: int) -> None:
    admin.flushall()
    pipe = admin.pipeline(transaction=False)
    for i in range(records):
        pipe.set(f"celery-task-meta-task-{i}", _record(i))
        if i % 5000 == 4999:
            pipe.execute()
    for i in range(other):
        pipe.set(f"other:{i}", "v")
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def _server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(srv, env: dict, *args: str) -> tuple[dict, dict]:
    cpu0, t0 = (_server_cpu_s(srv.pid), _child_cpu_s()), time.perf_counter()
    out = subprocess.run([*jobctl_argv(), "--url", srv.url, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if out.returncode not in (0, 8):
        raise RuntimeError(f"jobctl {args[0]} exited {out.returncode}: {out.stderr.strip()[-500:]}")
    cost = {"wall_s": round(wall, 3), "server_cpu_s": round(_server_cpu_s(srv.pid) - cpu0[0], 3),
            "client_cpu_s": round(_child_cpu_s() - cpu0[1], 3)}
    return json.loads(out.stdout), cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--other", type=int, default=100_000)
    add_common_args(ap)
    a = ap.parse_args()
    if a.quick:
        a.records, a.other = 2_000, 10_000
    with bench_session(a.server) as (srv, work):
        import redis

        admin = redis.Redis.from_url(srv.url)
        work.config.write_text('[queues.celery]\nlayout = "celery"\nreplay_results = 1\n')
        env = work.env()
        _lay(admin, a.records, a.other)
        status, status_cost = _run(srv, env, "status", "celery", "--json")
        admin.config_resetstat()
        admin.config_set("slowlog-log-slower-than", LOGGED_US)
        admin.config_set("slowlog-max-len", 10000)
        admin.slowlog_reset()
        res, cost = _run(srv, env, "replay", "celery", "--yes", "--json")
        evalsha = admin.info("commandstats").get("cmdstat_evalsha", {})
        slow = [e for e in admin.slowlog_get(10000) if e["command"].split(b" ", 1)[0].upper() == b"EVALSHA"]
        print(json.dumps({
            "records": a.records, "other_keys": a.other, "server": a.server,
            "status": {"dead": status["queues"][0]["dead"], **status_cost},
            "replay": {"moved": res["moved"], "records_per_s": round(res["moved"] / cost["wall_s"]), **cost,
                       "queued": admin.llen("celery"), "script_calls": evalsha.get("calls", 0),
                       "script_usec_per_call": evalsha.get("usec_per_call"),
                       "slowest_call_us": max((e["duration"] for e in slow), default=None),
                       "script_calls_over_5ms": sum(e["duration"] > SLOW_US for e in slow)},
            "loadavg": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
