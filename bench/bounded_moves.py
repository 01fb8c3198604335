"""Per-call cost of the moves out of a stream-group dead list and out of a
processing list (every call bounded).

* ``jobctl redrive`` of an N-job stream-group dead list (bounded windows
  of the window engine, once merged): jobs/s and the duration of every
  script call the server ran (SLOWLOG with a threshold of 0), against one
  call of the per-job LPOS/LREM search (``sg_dead_move.lua``, list kind)
  over the 256 newest jobs of the same list;
* ``jobctl requeue --stuck`` of a reliable-list processing list of M stuck
  jobs (``rl_requeue.lua``: bounded LPOS from the tail).

Usage: ``python bench/bounded_moves.py [--quick] [--server redis|valkey]
[--dead N] [--stuck M]``.  Prints one JSON document.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import add_common_args, start_server  # noqa: E402


def _slowlog_calls(client) -> list[float]:
    """Durations (ms) of the script calls in the SLOWLOG."""
    out = []
    for e in client.slowlog_get(1_000_000):
        cmd = e["command"] if isinstance(e["command"], bytes) else str(e["command"]).encode()
        if cmd.split(b" ", 1)[0].upper() in (b"EVALSHA", b"EVAL"):
            out.append(e["duration"] / 1000.0)
    return out


def _stats(ms: list[float]) -> dict:
    ms = sorted(ms)
    if not ms:
        return {"calls": 0}
    return {"calls": len(ms), "max_ms": round(ms[-1], 3), "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 3),
            "median_ms": round(ms[len(ms) // 2], 3)}


def _record_all(client) -> None:
    client.config_set("slowlog-max-len", 1_000_000)
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()


def stream_group_dead(client, url: str, workdir: Path, dead: int) -> dict:
    from jobctl.cli.main import main
    from jobctl.keys import StreamGroupKeys
    from jobctl.scripts import script

    keys = StreamGroupKeys("bench")
    client.xgroup_create(keys.stream, "workers", id="$", mkstream=True)
    now = int(time.time() * 1000)
    for start in range(0, dead, 5000):
        pipe = client.pipeline(transaction=False)
        ids = [f"j{n:08d}" for n in range(start, min(dead, start + 5000))]
        for job_id in ids:
            pipe.set(keys.job(job_id), json.dumps({"jobId": job_id, "jobType": "webhook.deliver",
                                                   "createdAtEpochMs": now, "attempt": 5, "payload": {"n": job_id}}))
        pipe.lpush(keys.dead, *ids)
        pipe.execute()

    # one call of the per-job search (LPOS from the tail, LREM -1) over the
    # 256 newest jobs, the far end of the search, as before the windows
    args: list = ["purge", "list", now, 256]
    length = client.llen(keys.dead)
    newest = [x.decode() for x in client.lrange(keys.dead, 0, 255)]
    for n, job_id in enumerate(newest):
        raw = client.get(keys.job(job_id))
        args += [job_id, length - n, hashlib.sha1(raw).hexdigest(), "", ""]  # locator: MAXLEN from the tail
    snapshot_len = client.llen(keys.dead)
    t = time.perf_counter()
    script(client, "sg_dead_move")(keys=[keys.dead, keys.dead, keys.suppressed_info] + [keys.job(j) for j in newest],
                                   args=args)
    old_call_ms = (time.perf_counter() - t) * 1000
    dead_now = snapshot_len - client.llen(keys.dead)

    cfg = workdir / "sg.toml"
    cfg.write_text('[queues.sg]\nlayout = "stream-group"\ntag = "bench"\n')
    _record_all(client)
    t = time.perf_counter()
    code = main(["--url", url, "--config", str(cfg), "redrive", "sg", "--yes", "--json"])
    elapsed = time.perf_counter() - t
    calls = _stats(_slowlog_calls(client))
    moved = dead - dead_now
    return {"dead": dead, "exit": code, "seconds": round(elapsed, 2), "jobs_per_s": round(moved / elapsed),
            "window_calls": calls, "old_per_job_search_one_call_ms": round(old_call_ms, 1),
            "left_dead": client.llen(keys.dead)}


def processing_requeue(client, url: str, workdir: Path, stuck: int) -> dict:
    from jobctl.cli.main import main
    from jobctl.keys import ReliableListKeys

    keys = ReliableListKeys("rq")
    past = int(time.time() * 1000) - 3_600_000
    for start in range(0, stuck, 5000):
        pipe = client.pipeline(transaction=False)
        ids = [f"p{n:08d}" for n in range(start, min(stuck, start + 5000))]
        for job_id in ids:
            pipe.set(keys.job(job_id), json.dumps({"jobId": job_id, "jobType": "webhook.deliver",
                                                   "createdAtEpochMs": past}))
        pipe.lpush(keys.processing, *ids)
        pipe.zadd(keys.deadline, {i: past for i in ids})
        pipe.execute()
    cfg = workdir / "rq.toml"
    cfg.write_text('[queues.rq]\nlayout = "reliable-list"\ntag = "rq"\n')
    _record_all(client)
    t = time.perf_counter()
    code = main(["--url", url, "--config", str(cfg), "requeue", "rq", "--stuck", "--yes", "--json"])
    elapsed = time.perf_counter() - t
    return {"stuck": stuck, "exit": code, "seconds": round(elapsed, 2), "jobs_per_s": round(stuck / elapsed),
            "requeue_calls": _stats(_slowlog_calls(client)), "left_processing": client.llen(keys.processing)}


def main() -> None:
    import contextlib
    import os
    import tempfile

    import redis

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--dead", type=int, default=None)
    ap.add_argument("--stuck", type=int, default=None)
    a = ap.parse_args()
    dead = a.dead or (20_000 if a.quick else 200_000)
    stuck = a.stuck or (2_000 if a.quick else 20_000)
    server = start_server(a.server)
    try:
        client = redis.Redis.from_url(server.url)
        work = Path(tempfile.mkdtemp(prefix="jobctl-bench-"))
        out = {"server": a.server}
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            out["stream_group_dead_redrive"] = stream_group_dead(client, server.url, work, dead)
            client.flushall()
            out["reliable_list_requeue"] = processing_requeue(client, server.url, work, stuck)
        print(json.dumps(out, indent=2))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
