"""One measured run each for :mod:`bulk_compare`: a ``jobctl`` bulk
operation as a whole child process, BullMQ's ``retryJobs``/``clean`` through
``bench/bullmq/failed_ops.js``, and the minimal Lua move
(``ceiling_move.lua``).

Every run is watched the same way (:func:`watched`): ``SLOWLOG`` with
``slowlog-log-slower-than`` at :data:`SLOW_US` (2 ms), reset before and read
after, and a PING probe every 1 ms from another process on its own connection
(:mod:`probe`).  Each result is a dict: ``n``, ``seconds`` (wall), ``per_s``
(jobs or rows per second), ``rss_mib`` (peak RSS of the child, GNU time;
``None`` where not measured), ``slow`` (script calls and commands over 2 ms,
the longest script call in ms), ``ping`` (p50/p99/max ms), ``loadavg`` (1-min
load average at the end).  Times in seconds unless a name ends in ``_ms``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from redis.exceptions import ResponseError

from bulkload import load_dead, load_hash_job_failed, load_json_list_dead, load_stream_group_dead
from harness import Workdir, jobctl_argv
from measure import run_process
from probe import PingProbe
from redrive import slowlog

__all__ = ["SLOW_US", "LAYOUTS", "load", "dead_count", "jobctl_op", "jobctl_warm", "jobctl_floor", "bullmq_op",
           "bullmq_floor", "ceiling_op", "npm_ready", "write_catalogue"]

HERE = Path(__file__).resolve().parent
BULLMQ_DIR = HERE / "bullmq"
#: SLOWLOG threshold (µs): the issue's per-call bound of 2 ms.
SLOW_US = 2000
#: Ids per call of the minimal Lua move (the issue's reference column).
CEILING_BATCH = 1000
#: Keys a purged server may still hold (jobctl's own: journal, leases, streams).
PURGE_LEFTOVER_KEYS = 100
#: Layouts loaded by :func:`load`: name -> catalogue lines after ``layout``.
LAYOUTS = {"reliable-list": [], "stream-group": ['dead = "list"', 'group = "workers"'], "hash-job": [],
           "json-list": []}
#: A script call in SLOWLOG: EVALSHA/EVAL (and FCALL, should scripts become functions).
_SCRIPT_CMDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


def write_catalogue(work: Workdir, queues: dict[str, str]) -> None:
    """``queues``: queue name (also its tag) -> layout name of :data:`LAYOUTS`."""
    lines = []
    for name, layout in queues.items():
        lines += [f'[queues."{name}"]', f'layout = "{layout}"', f'tag = "{name}"', *LAYOUTS[layout], ""]
    work.config.write_text("\n".join(lines))


def flush(admin) -> None:
    """Empty the server: ``FLUSHALL ASYNC`` (a synchronous flush of millions
    of keys outlasts a client's socket timeout), then wait until the
    server's lazy-free thread has freed everything, so that no run is timed
    while it still works."""
    admin.flushall(asynchronous=True)
    while int(admin.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.05)


def load(admin, layout: str, queue: str, n: int, *, tenants: int = 10) -> float:
    """FLUSHALL, then ``n`` dead jobs of ``layout`` on ``queue`` (tenants
    ``t0``.. ``t{tenants-1}`` for the envelope layouts); returns seconds.
    Raises RuntimeError if the dead list does not hold ``n`` ids."""
    flush(admin)
    now = time.time_ns() // 1_000_000
    t0 = time.perf_counter()
    if layout == "reliable-list":
        got = load_dead(admin, queue, n, now_ms=now, tenants=tenants)
    elif layout == "stream-group":
        got = load_stream_group_dead(admin, queue, n, now_ms=now, tenants=tenants)
    elif layout == "json-list":
        got = load_json_list_dead(admin, queue, n, tenants=tenants)
    else:
        got = load_hash_job_failed(admin, queue, n, now_ms=now)
    if got != n:
        raise RuntimeError(f"{layout}: loaded {got} dead jobs, expected {n}")
    return time.perf_counter() - t0


def dead_count(admin, layout: str, queue: str) -> tuple[int, int]:
    """(dead list length, ready length) of ``queue`` as ``layout`` keeps them."""
    from jobctl.keys import HashJobKeys, JsonListKeys, ReliableListKeys, StreamGroupKeys

    if layout == "json-list":
        k = JsonListKeys(queue)
        return int(admin.llen(k.dead)), int(admin.llen(k.pending))
    if layout == "hash-job":
        k = HashJobKeys(queue)
        return int(admin.llen(k.failed)), int(admin.llen(k.pending))
    if layout == "stream-group":
        k = StreamGroupKeys(queue)
        return int(admin.llen(k.dead)), int(admin.xlen(k.stream)) if admin.exists(k.stream) else 0
    k = ReliableListKeys(queue)
    return int(admin.llen(k.dead)), int(admin.llen(k.ready))


def _script_names() -> dict[str, str]:
    """SHA1 -> jobctl script name, so SLOWLOG entries read as names."""
    try:
        from jobctl.scripts import SCRIPT_NAMES, source
    except ImportError:
        return {}
    out = {}
    for name in SCRIPT_NAMES:
        try:
            out[hashlib.sha1(source(name).encode()).hexdigest()] = name
        except Exception:  # noqa: BLE001 - a script renamed under us: show its sha
            continue
    return out


def _slow_summary(entries: list[tuple[str, int]]) -> dict[str, Any]:
    """SLOWLOG entries (name, µs) -> counts over the threshold and maxima."""
    names = _script_names()
    scripts = [(names.get(c.split(" ", 1)[-1], c), d) for c, d in entries if c.split(" ", 1)[0] in _SCRIPT_CMDS]
    by: dict[str, list[int]] = {}
    for c, d in entries:
        word = c.split(" ", 1)
        key = names.get(word[-1], c) if word[0] in _SCRIPT_CMDS else c
        by.setdefault(key, []).append(d)
    return {"scripts_over_2ms": len(scripts),
            "script_max_ms": max((d for _, d in scripts), default=0) / 1000,
            "commands_over_2ms": len(entries),
            "command_max_ms": max((d for _, d in entries), default=0) / 1000,
            "by_command": {k: {"count": len(v), "max_ms": max(v) / 1000}
                           for k, v in sorted(by.items(), key=lambda kv: -len(kv[1]))[:6]}}


def purge_allocator(admin) -> None:
    """``MEMORY PURGE``: the server's allocator returns its freed pages to
    the kernel now, untimed, instead of during the next timed run.  Without
    it a run inherits the last one's garbage: jemalloc hands the pages of a
    flushed 1M DLQ back over ~10 s (its decay), and while its purger does
    that the server's calls wait on its lock (docs/performance.md, "Calls
    over 2 ms"), so a run that frees little (a filtered redrive) logged calls
    over 2 ms that were the previous run's.  A server without jemalloc answers OK and does
    nothing."""
    try:
        admin.execute_command("MEMORY", "PURGE")
    except ResponseError as exc:  # a server without the command: nothing to purge
        print(f"MEMORY PURGE refused: {exc}", file=sys.stderr)


#: ``bulk_compare.py --attribute``: a :class:`calltrace.CallTracer` on the
#: server, started and stopped around every watched block (its summary lands
#: in the block's ``calls``); ``None``: no tracing.
TRACER: Any = None


@contextmanager
def watched(url: str, admin):
    """SLOWLOG (2 ms) and the 1 ms PING probe around a block, after
    :func:`purge_allocator`; yields a dict filled on exit with ``slow`` and
    ``ping`` (and ``calls`` under :data:`TRACER`)."""
    out: dict[str, Any] = {}
    purge_allocator(admin)
    with slowlog(admin, SLOW_US, 100_000) as entries:
        if TRACER is not None:
            TRACER.start()
        probe = PingProbe(url).start()
        try:
            yield out
        finally:
            ping = probe.stop()
            if TRACER is not None:
                out["calls"] = TRACER.stop()
    out["slow"] = _slow_summary(entries)
    out["ping"] = {k: ping.get(k) for k in ("count", "p50_ms", "p99_ms", "max_ms", "over_2ms", "over_10ms")}
    out["loadavg"] = os.getloadavg()[0]


#: jobctl argv after ``--url URL`` per operation (QUEUE filled in).
_JOBCTL_OPS = {
    "redrive": ["redrive", "{q}", "--yes", "--json"],
    "redrive-filtered": ["redrive", "{q}", "--yes", "--json", "--filter", "tenant = t1"],
    "purge": ["purge", "{q}", "--state", "dead", "--no-export", "--yes", "--json"],
    "export": ["export", "{q}", "--out", "{out}", "--json"],
}


def jobctl_op(url: str, admin, work: Workdir, op: str, queue: str, layout: str, n: int, *,
              timeout_s: float = 3600.0) -> dict[str, Any]:
    """Run one ``jobctl`` bulk operation on a freshly loaded DLQ of ``n``
    jobs as a child process and check the outcome in Redis.

    ``redrive-filtered`` loads 5 tenants so ``tenant = t1`` matches 20 %;
    its ``per_s`` is jobs *scanned* per second.  ``export`` writes parquet to
    a temporary directory (removed after); ``per_s`` is rows/s.  Raises
    RuntimeError on a non-zero exit or an outcome that does not add up,
    TimeoutError (the child killed) past ``timeout_s``.
    """
    tenants = 5 if op == "redrive-filtered" else 10
    load_s = load(admin, layout, queue, n, tenants=tenants)
    out_dir = work.path / "export"  # jobctl creates it
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = jobctl_argv() + ["--url", url] + [a.format(q=queue, out=out_dir) for a in _JOBCTL_OPS[op]]
    try:
        with watched(url, admin) as w:
            run = run_process(argv, env=work.env(), rss=True, timeout_s=timeout_s)
        if run.returncode != 0:
            raise RuntimeError(f"jobctl {op} ({layout}) exited {run.returncode}: {run.stderr.strip()[-400:]}")
        dead, ready = dead_count(admin, layout, queue)
        moved = {"redrive": n, "redrive-filtered": n // 5, "purge": n, "export": 0}[op]
        if dead != n - moved or (op.startswith("redrive") and ready != moved):
            raise RuntimeError(f"jobctl {op} ({layout}): dead {dead}, ready {ready}; expected dead {n - moved}")
        if op == "purge" and admin.dbsize() > PURGE_LEFTOVER_KEYS:
            raise RuntimeError(f"jobctl purge ({layout}): {admin.dbsize()} keys left; payloads not deleted?")
        rows = None
        if op == "export":
            manifest = orjson.loads((out_dir / "_manifest.json").read_bytes())
            rows = _manifest_rows(manifest)
            if rows is not None and rows != n:
                raise RuntimeError(f"jobctl export wrote {rows} rows, expected {n}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return {"tool": "jobctl", "op": op, "layout": layout, "n": n, "moved": moved, "rows": rows,
            "load_s": load_s, "seconds": run.wall_s, "per_s": n / run.wall_s,
            "rss_mib": run.max_rss_kib / 1024 if run.max_rss_kib > 0 else None,
            "cpu_s": run.user_s + run.sys_s, "jobctl_json": _json_subset(run.stdout), **w}


def _json_subset(stdout: bytes) -> dict[str, Any]:
    """What jobctl's ``--json`` says about its own run (counts, plan and
    apply seconds), read leniently: the output's shape may change."""
    try:
        doc = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out = {k: doc[k] for k in ("moved", "skipped", "rows", "exported", "operation_id") if k in doc}
    plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else {}
    if "scanned" in plan:
        out["scanned"] = plan["scanned"]
    try:
        out["plan_s"] = (doc["started_ms"] - plan["now_ms"]) / 1000
        out["apply_s"] = (doc["ended_ms"] - doc["started_ms"]) / 1000
    except (KeyError, TypeError):
        pass
    return out


def jobctl_warm(url: str, admin, work: Workdir, layouts: dict[str, str], n: int = 200) -> None:
    """Untimed: every operation the bench times, once per layout, on a DLQ
    of ``n``, so the private bytecode cache (:meth:`Workdir.env`) holds
    every module a timed run imports, as after a ``pip install``.  Before
    2026-11-25 only ``status`` warmed it, and the first filtered redrive
    (the 100k one) compiled lark and jobctl's filter and plan modules inside
    its timing (~0.1 s of 0.59)."""
    for queue, layout in layouts.items():
        ops = _JOBCTL_OPS if layout == "reliable-list" else ("redrive", "purge")
        for op in ops:
            jobctl_op(url, admin, work, op, queue, layout, n)
    flush(admin)


def jobctl_floor(url: str, admin, work: Workdir, runs: int = 3) -> float:
    """Median wall seconds of ``jobctl redrive bench --yes --json`` on an
    empty server: the fixed cost (interpreter, imports, connection) inside
    every jobctl figure, which matters at small N."""
    import statistics

    flush(admin)
    argv = jobctl_argv() + ["--url", url, "redrive", "bench", "--yes", "--json"]
    return statistics.median(run_process(argv, env=work.env()).wall_s for _ in range(runs))


def bullmq_floor(url: str, runs: int = 3) -> float:
    """Median wall seconds of ``failed_ops.js --op floor`` (node, ``require``,
    connection and one ``retryJobs`` of an empty queue): BullMQ's fixed cost,
    measured as :func:`jobctl_floor` is, which its own timing of the call
    (:func:`bullmq_op`) leaves out."""
    import statistics

    argv = ["node", str(BULLMQ_DIR / "failed_ops.js"), "--url", url, "--queue", "bench-floor", "--op", "floor"]
    walls = []
    for _ in range(runs):
        run = run_process(argv)
        if run.returncode != 0:
            raise RuntimeError(f"bullmq floor exited {run.returncode}")
        walls.append(run.wall_s)
    return statistics.median(walls)


def _manifest_rows(manifest: dict[str, Any]) -> int | None:
    """Total rows of an export manifest, whichever spelling it uses."""
    for key in ("rows", "total_rows", "row_count"):
        if isinstance(manifest.get(key), int):
            return manifest[key]
    counts = manifest.get("counts") or manifest.get("counts_by_state")
    if isinstance(counts, dict) and all(isinstance(v, int) for v in counts.values()):
        return sum(counts.values())
    parts = manifest.get("parts")
    if isinstance(parts, list) and parts and all(isinstance(p, dict) and "rows" in p for p in parts):
        return sum(int(p["rows"]) for p in parts)
    return None


def npm_ready() -> str | None:
    """``npm ci`` in bench/bullmq when node_modules is missing; returns an
    error text, or None when BullMQ is ready."""
    if (BULLMQ_DIR / "node_modules" / "bullmq").is_dir():
        return None
    if not shutil.which("node") or not shutil.which("npm"):
        return "node/npm not found on PATH"
    proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BULLMQ_DIR, capture_output=True, text=True)
    return None if proc.returncode == 0 else f"npm ci failed: {proc.stderr.strip()[-300:]}"


def bullmq_op(url: str, admin, op: str, n: int) -> dict[str, Any]:
    """``failed_ops.js --op retry|clean`` on ``n`` genuine failed BullMQ jobs:
    the node script makes them, says ``ready``, and times the operation
    alone once told to go (while SLOWLOG and the probe watch).  ``seconds``
    is BullMQ's own timing of ``retryJobs``/``clean`` (no process start-up,
    unlike the jobctl figures, which favours BullMQ)."""
    flush(admin)
    argv = ["node", str(BULLMQ_DIR / "failed_ops.js"), "--url", url, "--queue", "bench", "--n", str(n),
            "--op", op, "--wait-go"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    line = proc.stdout.readline()
    if line.strip() != b"ready":
        proc.kill()
        err = proc.communicate()[1].decode(errors="replace").strip()
        raise RuntimeError(f"bullmq {op}: setup failed: {err[-400:]}")
    with watched(url, admin) as w:
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        out = proc.stdout.readline()
        rc = proc.wait()
    err = proc.stderr.read().decode(errors="replace").strip()
    if rc != 0 or not out.strip():
        raise RuntimeError(f"bullmq {op} exited {rc}: {err[-400:]}")
    doc = orjson.loads(out)
    return {"tool": "bullmq", "op": {"retry": "retryJobs", "clean": "clean"}[op], "layout": "bullmq", "n": n,
            "moved": n, "load_s": doc["setup_seconds"], "seconds": doc["seconds"], "per_s": doc["jobs_per_s"],
            "rss_mib": None, "bullmq": doc.get("bullmq"), **w}


def ceiling_op(url: str, admin, n: int) -> dict[str, Any]:
    """``ceiling_move.lua`` unfiltered, :data:`CEILING_BATCH` ids per call,
    over a freshly loaded reliable-list DLQ of ``n`` (ids only: no plan,
    fence, envelope rewrite or journal)."""
    from jobctl.keys import ReliableListKeys

    keys = ReliableListKeys("bench")
    load_s = load(admin, "reliable-list", "bench", n)
    move = admin.register_script((HERE / "ceiling_move.lua").read_text())
    admin.script_load(move.script)
    moved = 0
    with watched(url, admin) as w:
        t0 = time.perf_counter()
        while True:
            popped, m = move(keys=[keys.dead, keys.ready], args=[CEILING_BATCH, ""])
            if not popped:
                break
            moved += m
        seconds = time.perf_counter() - t0
    if moved != n or admin.llen(keys.ready) != n:
        raise RuntimeError(f"ceiling moved {moved}, expected {n}")
    return {"tool": "lua", "op": "ceiling move", "layout": "reliable-list", "n": n, "moved": n, "load_s": load_s,
            "seconds": seconds, "per_s": n / seconds, "rss_mib": None, **w}
