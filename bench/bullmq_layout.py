"""jobctl's ``bullmq`` layout against BullMQ's own ``retryJobs``, same server, same run.

    python3 bench/bullmq_layout.py [--jobs 100000] [--rounds 3] [--quick] [--server redis]

Makes the failed set once: BullMQ 6.7's own ``Queue.addBulk`` and
``Worker`` fail up to ``--seed`` jobs (``bench/bullmq/layout_ops.js``:
two job names, every 10th with priority 5, every 20th lifo), and the rest
are clones of those hashes under new ids with the same failed score (what
BullMQ's ``moveToFinished`` writes; checked with BullMQ's own
``getJobCounts``).  Then, interleaved for ``--rounds`` rounds, each on a
fresh copy of the same failed set: ``retryJobs({state: 'failed', count:
1000})`` (BullMQ's own timing, without node's start-up: favours BullMQ),
``jobctl redrive Q --yes`` and ``jobctl redrive Q --filter "type =
'invoice.email.send'" --yes`` (half the jobs; wall time of the whole
command).  Prints one JSON object: per variant the median jobs/s, script
calls and mean usec per call (``INFO commandstats``), the slowest script
call (``SLOWLOG``, calls over 1 ms) and the calls over 5 ms; the ratios of
medians (and, as ``ratio_unfiltered_whole_commands``, jobctl's command
against node's whole ``retryJobs`` process); per run the CPU seconds of
redis-server and of the client process (``wait4``) and the client's peak
RSS (``ratio_unfiltered_cpu_model``: node's whole ``retryJobs`` over
jobctl's, client + server: the ratio without the noise of a shared core);
the load average.  1M jobs
(``--jobs 1000000``) take ~15 min.
Needs node and ``npm ci`` in bench/bullmq (run on demand).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bulk_runs import npm_ready  # noqa: E402
from harness import add_common_args, bench_session, jobctl_argv  # noqa: E402

QUEUE = "bench"
JS = str(Path(__file__).resolve().parent / "bullmq" / "layout_ops.js")
SLOW_US, LOGGED_US = 5000, 1000
FILTER = "type = 'invoice.email.send'"


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str, float, float]:
    """Run ``argv`` to its end: its exit code, stdout, stderr, CPU seconds
    (user + system) and peak RSS in MiB, of that process alone (``wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(), err.read().decode(), ru.ru_utime + ru.ru_stime,
                ru.ru_maxrss / 1024)


def _node(*args: str, usage: dict | None = None) -> dict:
    """``layout_ops.js`` with ``args``: its JSON line; its CPU seconds and peak RSS go in ``usage``."""
    code, stdout, stderr, cpu, rss = _run(["node", JS, *args])
    if code != 0:
        raise RuntimeError(f"layout_ops.js {args[0]} exited {code}: {stderr.strip()[-500:]}")
    if usage is not None:
        usage.update(client_cpu_s=round(cpu, 3), client_peak_rss_mib=round(rss))
    return json.loads(stdout.strip().splitlines()[-1])


class FailedSet:
    """The failed set, made once and laid again (byte for byte) before each run."""

    def __init__(self, admin, url: str, n: int, seed: int) -> None:
        self.admin, self.n = admin, n
        admin.flushall()
        self.seed_s = _node("seed", url, QUEUE, str(min(n, seed)))["seconds"]
        base = f"bull:{QUEUE}:"
        pairs = admin.zrange(base + "failed", 0, -1, withscores=True)
        self.templates = [(admin.hgetall(base + m.decode()), score) for m, score in pairs]
        self.meta = admin.hgetall(base + "meta")
        # the jobs FILTER matches (half of them when n is a multiple of the templates)
        names = [fields.get(b"name") for fields, _ in self.templates]
        self.matching = sum(names[i % len(names)] == b"invoice.email.send" for i in range(1, n + 1))

    def lay(self) -> None:
        """FLUSHALL, then ``meta`` and ``n`` failed jobs (ids 1..n), cloned from the templates."""
        a, base = self.admin, f"bull:{QUEUE}:"
        a.flushall()
        a.hset(base + "meta", mapping=self.meta)
        a.set(base + "id", self.n)
        pipe = a.pipeline(transaction=False)
        for i in range(1, self.n + 1):
            fields, score = self.templates[i % len(self.templates)]
            pipe.hset(f"{base}{i}", mapping=fields)
            pipe.zadd(base + "failed", {str(i): score})
            if i % 5000 == 0:
                pipe.execute()
        pipe.execute()


def _server_cpu_s(pid: int) -> float:
    """redis-server's user + system CPU seconds so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _script_stats(admin) -> dict:
    evalsha = admin.info("commandstats").get("cmdstat_evalsha", {})
    slow = [e for e in admin.slowlog_get(10000) if e["command"].split(b" ", 1)[0].upper() in (b"EVALSHA", b"EVAL")]
    return {"script_calls": evalsha.get("calls", 0), "script_usec_per_call": evalsha.get("usec_per_call"),
            "slowest_call_us": max((e["duration"] for e in slow), default=None),
            "script_calls_over_5ms": sum(e["duration"] > SLOW_US for e in slow)}


def _one(fs: FailedSet, srv, variant: str, jobctl: list[str], env: dict[str, str]) -> dict:
    fs.lay()
    admin = fs.admin
    admin.config_resetstat()
    admin.config_set("slowlog-log-slower-than", LOGGED_US)
    admin.config_set("slowlog-max-len", 10000)
    admin.slowlog_reset()
    moved = fs.matching if variant == "jobctl_redrive_filtered" else fs.n
    url, extra = srv.url, {}
    cpu0 = _server_cpu_s(srv.pid)
    if variant == "bullmq_retryJobs":
        t0 = time.perf_counter()
        out = _node("retry", url, QUEUE, "1000", usage=extra)
        # node's start-up, connect and getJobCounts included: the whole command, as for jobctl
        extra["process_wall_s"] = round(time.perf_counter() - t0, 3)
        wall, counts = out["seconds"], out["counts"]
    else:
        argv = jobctl + ["redrive", QUEUE, "--yes"]
        if variant == "jobctl_redrive_filtered":
            argv[-1:-1] = ["--filter", FILTER]
        t0 = time.perf_counter()
        code, _, stderr, cpu, rss = _run(argv, env)
        wall = time.perf_counter() - t0
        if code != 0:
            raise RuntimeError(f"{variant} exited {code}: {stderr.strip()[-500:]}")
        counts = None
        extra.update(client_cpu_s=round(cpu, 3), client_peak_rss_mib=round(rss))
    # CPU seconds of the run (the client's whole process): the model of the ratio on a shared core
    extra["server_cpu_s"] = round(_server_cpu_s(srv.pid) - cpu0, 3)
    stats = _script_stats(admin)
    counts = counts or _node("counts", url, QUEUE)
    ready = counts.get("waiting", counts.get("wait", 0)) + counts.get("prioritized", 0)
    if (ready, counts.get("failed")) != (moved, fs.n - moved):
        raise RuntimeError(f"{variant} left {counts}; expected {moved} ready and {fs.n - moved} failed")
    return {"wall_s": round(wall, 3), "jobs_per_s": round(moved / wall), **extra, **stats}


def _summary(runs: list[dict]) -> dict:
    return {"jobs_per_s": round(statistics.median(r["jobs_per_s"] for r in runs)),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in runs),
            "client_cpu_s": statistics.median(r["client_cpu_s"] for r in runs),
            "client_peak_rss_mib": max(r["client_peak_rss_mib"] for r in runs),
            "slowest_call_us": max((r["slowest_call_us"] or 0) for r in runs) or None,
            "script_calls_over_5ms": sum(r["script_calls_over_5ms"] for r in runs), "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--jobs", type=int, help="Failed jobs per run (default 100,000; --quick 5,000).")
    ap.add_argument("--rounds", type=int, help="Interleaved rounds (default 3; --quick 1).")
    ap.add_argument("--seed", type=int, default=2000, help="Jobs failed by BullMQ itself; the rest are clones.")
    args = ap.parse_args()
    n = args.jobs or (5_000 if args.quick else 100_000)
    rounds = args.rounds or (1 if args.quick else 3)
    err = npm_ready()
    if err:
        print(f"bullmq_layout: {err}", file=sys.stderr)
        return 1
    import redis

    variants = ("bullmq_retryJobs", "jobctl_redrive", "jobctl_redrive_filtered")
    with bench_session(args.server) as (srv, work):
        work.config.write_text(f'[queues.{QUEUE}]\nlayout = "bullmq"\n')
        env = work.env()
        admin = redis.Redis.from_url(srv.url, socket_timeout=600)  # FLUSHALL of 1M jobs outlasts the 5 s default
        fs = FailedSet(admin, srv.url, n, args.seed)
        jobctl = jobctl_argv() + ["--url", srv.url]
        # fills the private bytecode cache, as after a pip install: no run pays the compile
        subprocess.run(jobctl + ["redrive", QUEUE, "--dry-run"], env=env, capture_output=True)
        runs: dict[str, list] = {v: [] for v in variants}
        for _ in range(rounds):
            for v in variants:
                runs[v].append(_one(fs, srv, v, jobctl, env))
    out = {"jobs": n, "rounds": rounds, "seed_s": round(fs.seed_s, 1), "loadavg": os.getloadavg(),
           **{v: _summary(r) for v, r in runs.items()}}
    base = out["bullmq_retryJobs"]["jobs_per_s"]
    out["ratio_unfiltered"] = round(out["jobctl_redrive"]["jobs_per_s"] / base, 2)
    out["ratio_filtered"] = round(out["jobctl_redrive_filtered"]["jobs_per_s"] / base, 2)
    whole = statistics.median(r["process_wall_s"] for r in runs["bullmq_retryJobs"])
    jobctl_wall = statistics.median(r["wall_s"] for r in runs["jobctl_redrive"])
    out["ratio_unfiltered_whole_commands"] = round(whole / jobctl_wall, 2)
    # on one shared core: the CPU seconds (client process + redis-server) of node's whole retryJobs over jobctl's
    cpu = {v: out[v]["server_cpu_s"] + out[v]["client_cpu_s"] for v in variants}
    out["ratio_unfiltered_cpu_model"] = round(cpu["bullmq_retryJobs"] / cpu["jobctl_redrive"], 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
