"""Redis Cluster vs one server, measured in one run.

Starts, from the same server binary, one server and a 3-primary cluster
(``tests/cluster_servers.py``), then on each:

1. ``status --json`` over 10 queues (a fresh CLI run, connection included),
   and the same refresh on a connected session (what the TUI and the
   exporter repeat), -- 2 sharded queues of 8 tags and 8
   single-tag queues (:func:`bulkload.load_status_queue`, ``--depth`` jobs per
   tag): round trips (:mod:`roundtrips`: one per ``send_packed_command``, a
   pipeline to one node counts once) and wall time, median of ``--runs``
   in-process runs after one warm-up.
2. ``redrive bench --yes --json`` of ``--jobs`` dead jobs spread over ``--shards`` (8) shard
   tags (:func:`bulkload.load_dead`), unfiltered and filtered (about half of
   each shard): jobs/s (moved / wall seconds), median of ``--runs`` runs, each
   on a freshly loaded dead list; and the jobs/s modelled for a machine with a
   core per process from the CPU seconds the client and each primary used
   (``INFO cpu``): on a shared machine the wall time measures contention, the
   CPU seconds what each process needs.

    python3 bench/cluster_bench.py [--jobs 50000] [--depth 2000] [--runs 3] [--shards 8] [--server redis|valkey] [--threads]

``--jobs 1000000`` is the issue's full size (not run by default: the machine
is shared).  Prints a Markdown table and writes
``bench/results/cluster-*.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import orjson  # noqa: E402

import cluster_servers  # noqa: E402
from cpu_model import Recorder, modelled_seconds  # noqa: E402
from bulkload import load_dead, load_status_queue  # noqa: E402
from roundtrips import install  # noqa: E402

from jobctl.cli.main import main  # noqa: E402
from jobctl.connection import Target, make_client  # noqa: E402
from jobctl.keys import shard_tags  # noqa: E402
from jobctl.server import EmbeddedServer, resolve_binary  # noqa: E402

SHARDED = ("email", "webhooks")
SINGLE = tuple(f"q{i}" for i in range(8))


def _config(path: Path, shards: int) -> str:
    lines = []
    for name in SHARDED:
        lines += [f"[queues.{name}]", 'layout = "reliable-list"', f'tag = "{name}"', "shards = 8"]
    for name in SINGLE:
        lines += [f"[queues.{name}]", 'layout = "reliable-list"', f'tag = "{name}"']
    lines += ["[queues.bench]", 'layout = "reliable-list"', 'tag = "bench"', f"shards = {shards}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _quiet(argv: list[str]) -> tuple[int, str]:
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    out.flush()
    if code != 0:
        raise RuntimeError(f"jobctl {' '.join(argv[-4:])} exited {code}: {err.getvalue().strip()}")
    return code, out.buffer.getvalue().decode()


def measure(url: str, cfg: str, args, counter) -> dict:
    client = make_client(Target(url, "bench"))
    now = int(time.time() * 1000)
    for i, name in enumerate(SHARDED):
        for tag in shard_tags(name, 8):
            load_status_queue(client, tag, args.depth, now_ms=now, seed=i)
    for i, name in enumerate(SINGLE):
        load_status_queue(client, name, args.depth, now_ms=now, seed=10 + i)
    base = ["--url", url, "--config", cfg]
    _quiet([*base, "status", "--json"])  # warm-up: scripts, connections
    times, trips = [], []
    for _ in range(args.runs):
        counter.reset()
        t0 = time.perf_counter()
        _quiet([*base, "status", "--json"])
        times.append(time.perf_counter() - t0)
        trips.append(counter.count)
    # a refresh on a connected session (what the TUI and the exporter repeat)
    from jobctl.session import Session

    session = Session(config_file=cfg, url=url)
    names = [*SHARDED, *SINGLE]
    layouts = [session.layout(n) for n in names]
    [lay.status() for lay in layouts]
    refresh_t, refresh_rt = [], []
    for _ in range(args.runs * 3):
        counter.reset()
        t0 = time.perf_counter()
        [lay.status() for lay in layouts]
        refresh_t.append(time.perf_counter() - t0)
        refresh_rt.append(counter.count)
    session.close()
    runs = {kind: _redrives(client, base, args, now, flt) for kind, flt in REDRIVES.items()}
    client.close()
    return {"status_s": statistics.median(times), "status_round_trips": statistics.median(trips),
            "refresh_s": statistics.median(refresh_t), "refresh_round_trips": statistics.median(refresh_rt),
            "status_samples": times, "redrive": runs}


#: the redrives measured: every job, and about half of each shard's (an id filter: a per-job walk)
REDRIVES = {"unfiltered": None, "filtered": "id ~ '*[02468ACEGJMPRTVXZ]'"}


def _redrives(client, base: list[str], args, now: int, flt: str | None) -> dict:
    """``--runs`` redrives of ``--jobs`` freshly loaded dead jobs: jobs/s
    (moved / wall seconds), and the CPU seconds of the client and of each
    primary, from which the jobs/s with a core per process is modelled."""
    measured, modelled, cpu = [], [], []
    for run in range(args.runs):
        for n, tag in enumerate(shard_tags("bench", args.shards)):
            load_dead(client, tag, args.jobs // args.shards + (1 if n < args.jobs % args.shards else 0), now_ms=now,
                      seed=run * args.shards + n)
        argv = [*base, "redrive", "bench", "--yes", "--json", *(["--filter", flt] if flt else [])]
        rec = Recorder(lambda: _server_cpu(client))
        with rec.recording():
            t0 = time.perf_counter()
            _, out = _quiet(argv)
            wall = time.perf_counter() - t0
        doc = orjson.loads(out)
        moved = (doc.get("result") or doc).get("moved", 0)
        if moved != args.jobs and not flt or not moved:
            raise RuntimeError(f"redrive moved {moved} of {args.jobs}")
        measured.append(moved / wall)
        model = modelled_seconds(rec)  # a core per process: cpu_model's docstring
        modelled.append(moved / model["seconds"])
        cpu.append({"moved": moved, **model})
        for tag in shard_tags("bench", args.shards):  # clear for the next run
            client.delete(f"queue:{{{tag}}}:ready", f"queue:{{{tag}}}:dead")
    return {"jobs_per_s": statistics.median(measured), "modelled_jobs_per_s": statistics.median(modelled),
            "samples": measured, "cpu": cpu}


def _server_cpu(client) -> dict[str, float]:
    """CPU seconds (user + system, ``INFO cpu``) each primary has used so far, by address."""
    nodes = ([(n.name, client.get_redis_connection(n)) for n in client.get_primaries()]
             if hasattr(client, "get_primaries") else [("server", client)])
    out = {}
    for name, conn in nodes:
        info = conn.info("cpu")
        out[name] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return out


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--depth", type=int, default=2_000, help="jobs per tag of the status queues")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shards", type=int, default=8, help="shard tags of the redriven queue")
    ap.add_argument("--server", choices=["redis", "valkey"], default="redis")
    ap.add_argument("--threads", action="store_true",
                    help="walk and plan each primary's shards in threads of the command, not in processes")
    args = ap.parse_args()
    if args.threads:
        from jobctl.ops.walk import parallel, processes

        processes.FORKS = parallel.FORKS = False
    binary = resolve_binary(kind=args.server)
    counter = install()
    os.environ.setdefault("JOBCTL_JOURNAL", str(Path(tempfile.mkdtemp()) / "journal.jsonl"))
    cfg = _config(Path(tempfile.mkdtemp()) / "jobctl.toml", args.shards)
    results = {}
    single = EmbeddedServer(binary=binary).start()
    try:
        results["one server"] = measure(single.url, cfg, args, counter)
    finally:
        single.stop()
    topo = cluster_servers.start_cluster(binary, masters=3)
    try:
        results["3-primary cluster"] = measure(topo.url, cfg, args, counter)
    finally:
        topo.stop()
    load = os.getloadavg()[0]
    print(f"\n{args.server}, status: 10 queues (2 x 8 shards + 8 single), {args.depth:,} jobs per tag; "
          f"redrive: {args.jobs:,} dead jobs over {args.shards} shards; median of {args.runs}; load {load:.1f}\n")
    print("| topology | `status --json` round trips | ms | refresh (connected) round trips | ms |\n"
          "|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['status_round_trips']:.0f} | {r['status_s'] * 1000:.1f} | "
              f"{r['refresh_round_trips']:.0f} | {r['refresh_s'] * 1000:.1f} |")
    print("\n| redrive | one server jobs/s | cluster jobs/s | cluster / one server | modelled, a core per process: "
          "one server | cluster | cluster / one server |\n|---|---:|---:|---:|---:|---:|---:|")
    one, three = results["one server"]["redrive"], results["3-primary cluster"]["redrive"]
    for kind in REDRIVES:
        a, b = one[kind], three[kind]
        print(f"| {kind} | {a['jobs_per_s']:,.0f} | {b['jobs_per_s']:,.0f} | {b['jobs_per_s'] / a['jobs_per_s']:.2f}x | "
              f"{a['modelled_jobs_per_s']:,.0f} | {b['modelled_jobs_per_s']:,.0f} | "
              f"{b['modelled_jobs_per_s'] / a['modelled_jobs_per_s']:.2f}x |")
    print("\nmodelled: jobs moved / the seconds the run would take with a core per process (each phase "
          "as long as its busiest process: the command, a walker process, or a primary)")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    path = out / f"cluster-{args.server}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_bytes(orjson.dumps({"args": vars(args), "load": load, "results": results}, option=orjson.OPT_INDENT_2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
