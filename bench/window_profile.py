"""Where one window-engine operation spends its time: client vs server.

Starts a throwaway server, loads ``--jobs`` reliable-list dead jobs
(:func:`bulkload.load_dead`, tenants ``t0``..``t9``), resets ``INFO
commandstats`` and runs one ``jobctl`` operation in this process under
cProfile; prints the wall time, this process's CPU time, the server's time
by command (scripts include the commands they run) and the top functions.

    python3 bench/window_profile.py --jobs 100000 redrive
    python3 bench/window_profile.py --jobs 100000 redrive --filter 'tenant = t0 or tenant = t1'
    python3 bench/window_profile.py --jobs 100000 purge

Not a throughput benchmark (cProfile slows the client); use it to see
whether the client or the server is the bottleneck.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

import redis

from bulkload import load_dead
from harness import Workdir, start_server


def _print_by_script(client) -> None:
    """Server time per Lua script (µs: total, calls, longest), from SLOWLOG."""
    import hashlib

    from jobctl.scripts import source

    names = {hashlib.sha1(source(p.stem).encode()).hexdigest(): p.stem
             for p in (Path(__file__).resolve().parents[1] / "jobctl" / "lua").glob("*.lua")}
    per: dict[str, list[int]] = {}
    for e in client.slowlog_get(1_000_000):
        cmd = e["command"].split()
        if cmd and cmd[0].upper() == b"EVALSHA":
            per.setdefault(names.get(cmd[1].decode(), cmd[1].decode()[:12]), []).append(int(e["duration"]))
    print("server time by script (µs: total, calls, longest):")
    for name, d in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:22s} {sum(d):>10,} {len(d):>9,} {max(d):>9,}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("operation", choices=["redrive", "purge", "suppress"])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--by-script", action="store_true",
                    help="log every command in SLOWLOG and print the server time per Lua script")
    args = ap.parse_args()
    server = start_server(args.server)
    try:
        client = redis.Redis.from_url(server.url)
        with Workdir() as wd:
            wd.write_catalogue({"bench": "bench"})
            load_dead(client, "bench", args.jobs, now_ms=int(time.time() * 1000))
            os.environ.update(wd.env())
            argv = ["--url", server.url, args.operation, "bench", "--yes", "--json"]
            if args.operation == "purge":
                argv += ["--state", "dead", "--no-export"]
            if args.operation == "suppress":
                argv += ["--reason", "profile"]
            if args.filter:
                argv += ["--filter", args.filter]
            from jobctl.cli.main import main as jobctl_main

            client.config_resetstat()
            if args.by_script:
                client.config_set("slowlog-max-len", 1_000_000)
                client.config_set("slowlog-log-slower-than", 0)
                client.slowlog_reset()
            wall, cpu = time.perf_counter(), time.process_time()
            prof = cProfile.Profile()
            prof.enable()
            out = sys.stdout
            sys.stdout = io.TextIOWrapper(io.BytesIO())  # jobctl's --json output, dropped
            try:
                jobctl_main(argv)
            except SystemExit:
                pass
            finally:
                sys.stdout = out
                prof.disable()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            stats = client.info("commandstats")
            print(f"wall {wall:.3f} s; client CPU {cpu:.3f} s; server time by command (µs, calls):")
            for name, v in sorted(stats.items(), key=lambda kv: -int(kv[1]["usec"]))[:12]:
                print(f"  {name.removeprefix('cmdstat_'):22s} {int(v['usec']):>10,} {int(v['calls']):>9,}")
            if args.by_script:
                _print_by_script(client)
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
            print(s.getvalue())
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
