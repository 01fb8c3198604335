"""The server's floor for the plan of a filtered redrive: µs of server time a job.

Starts a throwaway server, loads ``--jobs`` reliable-list dead jobs
(:func:`bulkload.load_dead`, 5 tenants, so ``tenant = t1`` matches 20 %), and
runs, on the same windows of 120 tail positions (the plan's
:data:`jobctl.layouts.reliable_list.predicate_plan.SCAN_WINDOW`), interleaved for
``--rounds`` rounds:

* ``list_scan``: jobctl's server-side plan call with the program of
  ``tenant = t1`` (the quick rule-out: no cjson decode);
* ``MGET into Lua``: a script that only reads the same payload keys with
  ``MGET`` and counts them, the least any server-side predicate does;
* ``MGET``: the same keys read by the client with a plain ``MGET`` (no Lua):
  what a client-side plan costs the server.

Server time is ``INFO commandstats`` (``usec`` of ``evalsha`` / ``mget``) over
the calls, divided by the jobs.  The keyspace is as big as ``--jobs``, so the
reads miss the CPU caches as a real plan's do.  Prints the median and range a
job for each; a ``list_scan`` near ``MGET into Lua`` means the predicate is
not where the server's time goes.

    python3 bench/scan_floor.py [--jobs 1000000] [--rounds 8] [--windows 60] [--quick] [--server valkey]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import redis

from bulkload import load_dead
from harness import add_common_args, start_server
from report import environment, note, table, write_results

#: The least a server-side predicate does: the payload keys read into Lua.
MGET_ONLY = """
local raws = redis.call('MGET', unpack(KEYS))
local n = 0
for i = 1, #KEYS do if raws[i] then n = n + 1 end end
return n
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--jobs", type=int, default=1_000_000, help="Dead jobs loaded (the keyspace's size).")
    ap.add_argument("--rounds", type=int, default=8, help="Interleaved rounds of the three readers.")
    ap.add_argument("--windows", type=int, default=60, help="Windows of 120 tail positions a round reads.")
    add_common_args(ap)
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.rounds, args.windows = min(args.jobs, 100_000), min(args.rounds, 3), min(args.windows, 20)

    from jobctl.filter import compile_filter
    from jobctl.filter.lua_predicate import lua_program, scan_call_bytes
    from jobctl.keys import ReliableListKeys
    from jobctl.layouts.reliable_list.predicate_plan import SCAN_WINDOW
    from jobctl.scripts import source

    server = start_server(args.server)
    try:
        client = redis.Redis.from_url(server.url)
        keys = ReliableListKeys("bench")
        note(f"loading {args.jobs:,} dead jobs")
        load_dead(client, "bench", args.jobs, now_ms=int(time.time() * 1000), tenants=5)
        width = SCAN_WINDOW
        ids = client.lrange(keys.dead, -width * args.windows, -1)
        windows = [[keys.job(i.decode()) for i in ids[w * width:(w + 1) * width]] for w in range(args.windows)]
        prefix = keys.job("")
        program = lua_program(compile_filter("tenant = t1"))  # the program the plan sends
        budget = scan_call_bytes(program)  # and its byte budget
        scan, floor = client.script_load(source("list_scan")), client.script_load(MGET_ONLY)
        readers = {
            "list_scan (tenant = t1)": ("evalsha", lambda ks: client.evalsha(scan, len(ks), *ks, program, "1",
                                                                             prefix, budget)),
            "MGET into Lua": ("evalsha", lambda ks: client.evalsha(floor, len(ks), *ks)),
            "MGET (client)": ("mget", lambda ks: client.mget(ks)),
        }
        per_job: dict[str, list[float]] = {name: [] for name in readers}
        jobs = sum(len(ks) for ks in windows)
        for _ in range(args.rounds):
            for name, (cmd, call) in readers.items():
                client.config_resetstat()
                for ks in windows:
                    call(ks)
                usec = int(client.info("commandstats")[f"cmdstat_{cmd}"]["usec"])
                per_job[name].append(usec / jobs)
        rows = [[name, statistics.median(v), min(v), max(v)] for name, v in per_job.items()]
        table(f"server time a job, µs ({args.rounds} interleaved rounds of {jobs:,} jobs; keyspace {args.jobs:,})",
              ["reader", "median", "min", "max"], rows)
        write_results("scan_floor", vars(args), environment(server),
                      {name: {"median_us": statistics.median(v), "samples_us": v} for name, v in per_job.items()})
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
