"""Benchmark: ``jobctl analyze`` (PySpark, local[*]) on large exports.

Writes synthetic Parquet exports of 1M and 4M dead jobs (the export schema
and manifest of :mod:`jobctl.export`, realistic spread of job types, error
codes, tenants, messages with ids and numbers to fingerprint), then runs
``jobctl analyze`` on each as a child process and reports the wall time
(JVM start included), the analysis time Spark spent (report.json
``seconds``), the Spark jobs and stages it ran (from Spark's event log),
the 4M/1M ratio, and DuckDB's time for the same rollups over the same
files in the same run (``bench/analyze_duckdb.py``; skipped without duckdb).

    python3 bench/analyze_bench.py            # 1,000,000 and 4,000,000 rows
    python3 bench/analyze_bench.py --quick    # 250,000 and 1,000,000 rows
    python3 bench/analyze_bench.py --sizes 500000,2000000 --master local[2]

Prints a Markdown table on stdout; conclusions in docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from analyze_duckdb import duckdb_seconds, event_log_conf, spark_job_stage_counts
from jobctl.export.manifest import Manifest
from jobctl.export.parquet_writer import ParquetPartWriter

TYPES = (("invoice.email.send", 3, 8), ("webhook.deliver", 2, 5), ("report.generate", 1, 3))
ERRORS = (("HTTP_503", "upstream 10.0.{a}.{b} unavailable after {n} ms"),
          ("HTTP_429", "rate limited, retry after {n}s"),
          ("HTTP_400", "validation failed: invoice_{n} has no recipient"),
          ("SERIALIZATION_ERROR", "incompatible payload version {v}"),
          ("DEADLINE_EXCEEDED", "Job deadline passed"))
PART_ROWS = 500_000


def synthetic_rows(start: int, n: int, now: int, rng: random.Random):
    for i in range(start, start + n):
        jt, version, max_attempts = TYPES[i % 3]
        code, template = ERRORS[rng.randrange(5)]
        tenant = f"tenant_{rng.randrange(1, 200)}"
        created = now - rng.randrange(3_600_000, 7 * 86_400_000)
        died = created + rng.randrange(1_000, 6 * 3_600_000)
        job_id = f"job_{i:010d}"
        message = template.format(a=i % 256, b=i % 7, n=rng.randrange(10_000), v=version - 1)
        raw = f'{{"jobId":"{job_id}","jobType":"{jt}"}}'
        attempt = max_attempts if code in ("HTTP_503", "HTTP_429") else rng.randrange(0, 2)
        yield ("bench", "reliable-list", f"bench:{i % 8:02d}", "dead", job_id, i // 8, None, None, job_id, jt,
               version, tenant, None if i % 17 == 0 else f"{jt}:{tenant}:{i}", created, None, created + 86_400_000,
               attempt, max_attempts, None, None, None, '{"invoiceId":"x"}', died, None, code, message, None, None,
               None, False, None, raw, None, len(raw), hashlib.sha1(raw.encode()).hexdigest())


def write_export(directory: Path, rows: int) -> float:
    t0 = time.monotonic()
    directory.mkdir(parents=True)
    now = time.time_ns() // 1_000_000
    m = Manifest(selector={"queue": "bench", "layout": "reliable-list", "states": ["dead"], "filter": "",
                           "format": "parquet"},
                 source={"server": "synthetic", "queue": "bench", "layout": "reliable-list", "shards": []},
                 snapshot_ms=now, started_ms=now, complete=True, scanned={"dead": rows})
    rng = random.Random(rows)
    from jobctl.export.manifest import PartInfo

    for index, start in enumerate(range(0, rows, PART_ROWS)):
        n = min(PART_ROWS, rows - start)
        w = ParquetPartWriter(directory, f"part-{index:05d}.parquet", row_group_rows=100_000)
        batch = []
        for row in synthetic_rows(start, n, now, rng):
            batch.append(row)
            if len(batch) == 100_000:
                w.write(batch)
                batch = []
        w.write(batch)
        size, digest = w.commit()
        m.parts.append(PartInfo(file=w.final, rows=n, bytes=size, sha256=digest, counts={"dead": n}))
    m.finished_ms = time.time_ns() // 1_000_000
    m.save(directory)
    return time.monotonic() - t0


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record in ``seen`` (pid -> CPU seconds, user + system) ``root`` and
    its descendants (the analyze process, its JVM and Python workers), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            procs[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree = {root}
    for _ in range(8):  # descendants, a level a round
        tree |= {pid for pid, (ppid, _) in procs.items() if ppid in tree}
    for pid in tree & procs.keys():
        seen[pid] = max(seen.get(pid, 0.0), procs[pid][1])


def run_analyze(export_dir: Path, out: Path, master: str, events: Path) -> tuple[float, float, dict, float]:
    """``(wall s, report seconds, summary, CPU s of the process tree)`` of one ``jobctl analyze``;
    the CPU time is sampled from /proc every 0.2 s (a process's last 0.2 s may be missed)."""
    cmd = [sys.executable, "-c", "from jobctl.cli.main import main; main()", "analyze", str(export_dir),
           "--out", str(out), "--master", master, "--json"]
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": event_log_conf(events)}
    t0 = time.monotonic()
    seen: dict[int, float] = {}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    while proc.poll() is None:
        _tree_cpu(proc.pid, seen)
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"analyze failed ({proc.returncode}): {stderr.decode().strip()[-2000:]}")
    summary = orjson.loads(stdout)
    return wall, summary["seconds"], summary, sum(seen.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,4000000")
    ap.add_argument("--quick", action="store_true", help="250,000 and 1,000,000 rows")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--keep", metavar="DIR", help="write the exports under DIR and keep them")
    args = ap.parse_args()
    sizes = [250_000, 1_000_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="jobctl-analyze-bench-"))
    results = []
    try:
        for n in sizes:
            export_dir = work / f"export-{n}"
            if not any(export_dir.glob("*manifest.json")):
                secs = write_export(export_dir, n)
                print(f"wrote a {n:,}-row export in {secs:.0f}s "
                      f"({sum(p.stat().st_size for p in export_dir.iterdir()) / 2**20:.0f} MiB)", file=sys.stderr)
            events = work / f"events-{n}"
            shutil.rmtree(events, ignore_errors=True)
            wall, spark_s, summary, cpu = run_analyze(export_dir, work / f"report-{n}", args.master, events)
            duck = duckdb_seconds(export_dir)
            results.append((n, wall, spark_s, spark_job_stage_counts(events), duck, cpu))
            print(f"analyzed {n:,} rows: {wall:.1f}s wall, {spark_s:.1f}s in Spark; "
                  f"{summary['groups_total']:,} groups, {summary['fingerprints_total']:,} fingerprints, "
                  f"{summary['redrive_planned']:,} planned", file=sys.stderr)
        print(f"| rows | wall s (JVM start included) | analysis s | CPU s (analyze, JVM, workers) "
              f"| Spark jobs / stages run (skipped) | ratio to {sizes[0]:,} rows | DuckDB s (CPU s), same rollups "
              "| analysis / DuckDB | CPU / DuckDB CPU |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, wall, spark_s, (jobs, stages, skipped), duck, cpu in results:
            duck_s = (f"{duck[0]:.2f} ({duck[2]:.2f}) | {spark_s / duck[0]:.1f}x | {cpu / duck[2]:.1f}x" if duck
                      else "(duckdb not installed) | - | -")
            print(f"| {n:,} | {wall:.1f} | {spark_s:.1f} | {cpu:.1f} | {jobs} / {stages} ({skipped}) "
                  f"| {spark_s / results[0][2]:.2f} | {duck_s} |")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
