"""The ``bullmq`` layout against BullMQ 6.7.0 itself, unmodified (npm,
pinned in ``tests/bullmq/package.json``): BullMQ's own ``Queue.add`` and
``Worker`` (node scripts in ``tests/bullmq/``) make the keys; jobctl reads
them through the CLI and redrives and purges failed jobs; BullMQ's own
``getJobCounts`` agrees afterwards.  Skipped without node and npm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import config_fixtures, queues_toml

HERE = Path(__file__).resolve().parent / "bullmq"
FLAG = "bulltest:flag"
#: Data as another producer would store it: a 64-bit integer as digits, a JSON number past 2^53, a slash.
RAW = '{{"name":"{name}","id64":"9223372036854775807","num":9007199254740993,"path":"a/b"}}'
NAMES = [f"{kind}-{n}" for kind in ("even", "odd") for n in range(4)]
#: Options per job name (BullMQ's own): priorities and one lifo job among the redriven ones.
OPTS = {"even-1": {"priority": 3}, "even-2": {"priority": 1}, "even-3": {"lifo": True}, "odd-1": {"priority": 2},
        "odd-2": {"deduplication": {"id": "d-odd-2", "ttl": 600_000}}}
cfg, run = config_fixtures(queues_toml(work={"layout": "bullmq"}))


@pytest.fixture(scope="session")
def node_ready() -> Path:
    """``npm ci`` of ``tests/bullmq`` once a session (from npm's cache when
    offline); skipped without node/npm, except in CI (.ci/run installs them)."""
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if not shutil.which("node") or not shutil.which("npm"):
        missing("node/npm not found on PATH: the BullMQ tests need them")
    if not (HERE / "node_modules" / "bullmq").is_dir():
        proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True, text=True)
        if proc.returncode != 0:
            missing(f"npm ci failed in tests/bullmq: {proc.stderr.strip()[-300:]}")
    return HERE


def _node(script: str, *args: str) -> str:
    proc = subprocess.run(["node", str(HERE / script), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _json(run, *args) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def failed(node_ready, redis_url, redis_client) -> dict[str, str]:
    """8 jobs added by BullMQ's ``Queue.add`` (attempts 1; ``even-0`` the
    child of a flow whose parent waits for it), their data rewritten as
    :data:`RAW`, failed by BullMQ's ``Worker`` while the flag is set (it
    stays set); ``{name: job id}`` (the flow's parent: ``parent``)."""
    jobs = [{"name": n.split("-")[0], "data": {"name": n}, "opts": {"attempts": 1, **OPTS.get(n, {})}} for n in NAMES]
    jobs[0] = {"name": "parent", "data": {"name": "parent"}, "children": [jobs[0]]}
    ids = json.loads(_node("producer.js", redis_url, "work", json.dumps(jobs)))
    for name in NAMES:
        redis_client.hset(f"bull:work:{ids[name]}", "data", RAW.format(name=name))
    redis_client.set(FLAG, 1)
    counts = json.loads(_node("worker.js", redis_url, "work", FLAG).splitlines()[-1])
    assert (counts["failed"], counts["waiting-children"]) == (len(NAMES), 1), counts
    return ids


def _dashboard_reads(cfg, redis_url) -> None:
    """What the TUI shows comes from the same reads: status, triage of the failed jobs, their page."""
    from jobctl.dashboard.facade import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    s = Session(config_file=cfg, url=redis_url)
    try:
        dash = Dashboard(s)
        assert dash.refresh().row("work").status.dead == len(NAMES)
        groups = dash.triage("work").groups
        assert sum(g.count for g in groups) == len(NAMES)
        assert len(dash.jobs("work", State.DEAD).records) == len(NAMES)
    finally:
        s.close()


def test_reads_map_bullmq_states(run, cfg, redis_url, failed, redis_client):
    st = _json(run, "status", "work")["queues"][0]
    assert (st["layout"], st["dead"], st["ready"], st["processing"], st["history"]) == ("bullmq", 8, 0, 0, 0)
    assert any("waiting-children" in w for w in st["warnings"])
    redis_client.lpush("bull:work:active", failed["odd-3"])  # as a worker that died holding it leaves it
    st = _json(run, "status", "work")["queues"][0]
    assert (st["processing"], st["stuck"]) == (1, 1)
    redis_client.delete("bull:work:active")
    assert _json(run, "inspect", "work", failed["parent"])["meta"]["bullmq_state"] == "waiting-children"
    jobs = _json(run, "ls", "work", "--state", "dead", "--limit", "50")["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted(failed[n] for n in NAMES)
    doc = _json(run, "inspect", "work", failed["even-1"])
    assert doc["state"] == "dead" and doc["meta"]["priority"] == "3" and doc["meta"]["bullmq_state"] == "failed"
    assert doc["envelope"]["failedReason"] == "flag set for even-1" and doc["envelope"]["atm"] == "1"
    _dashboard_reads(cfg, redis_url)
    flt = "attempts = 1 and dead_for < 1h and message ~ 'flag set for odd-*' and payload.num > 2"
    plan = _json(run, "redrive", "work", "--filter", flt, "--dry-run")
    assert plan["planned"] == 4 and "bullmq:6.7.0" in json.dumps(plan), plan
    redis_client.hset("bull:work:meta", "version", "bullmq:7.0.0")
    code, _, err = run("redrive", "work", "--yes")
    assert code == 6 and "bullmq:7.0.0" in err and len(err.strip().splitlines()) == 1
    assert redis_client.zcard("bull:work:failed") == 8


def test_redrive_filtered_then_bullmq_worker_runs_each_once(run, failed, redis_url, redis_client):
    before = {n: redis_client.hget(f"bull:work:{i}", "data") for n, i in failed.items()}
    redis_client.delete(FLAG)
    worker = subprocess.Popen(["node", str(HERE / "worker.js"), redis_url, "work", FLAG, "5"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "ready"  # BullMQ's worker runs during the redrive
        doc = _json(run, "redrive", "work", "--filter", "type = 'even'", "--yes")
        assert doc["moved"] == 4
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, err
    counts = json.loads(out.splitlines()[-1])
    for name, job_id in failed.items():
        runs = redis_client.get(f"bulltest:count:{job_id}")
        assert runs == (b"1" if name[0] in "ep" else None), name  # processed exactly once (the flow's parent too)
        assert redis_client.hget(f"bull:work:{job_id}", "data") == before[name]  # the stored bytes
    st = _json(run, "status", "work")["queues"][0]
    assert (counts["failed"], counts["completed"], counts["waiting"], counts["prioritized"], counts["active"]) \
        == (st["dead"], st["history"], 0, 0, st["processing"]) == (4, 5, 0, 0, 0)
    assert counts["waiting-children"] == 0 and not st["warnings"]
    assert not list(redis_client.scan_iter(match="bull:work:*:lock"))  # no in-flight structure left dirty
    events = [e for _, e in redis_client.xrange("bull:work:events") if e.get(b"prev") == b"failed"]
    assert sorted(e[b"jobId"].decode() for e in events) == sorted(i for n, i in failed.items() if n[0] == "e")


def _layout(redis_client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(redis_client, QueueConfig(name="work", layout="bullmq"))


def test_redrive_fences_each_job_and_honours_priority_and_lifo(failed, redis_client):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))
    assert plan.planned == 8
    ids = failed
    redis_client.zadd("bull:work:failed", {ids["odd-0"]: 1})  # failed again since the plan
    redis_client.hset(f"bull:work:{ids['odd-2']}", "failedReason", "another failure")
    redis_client.zrem("bull:work:failed", ids["odd-3"])  # retried by BullMQ since
    pc = int(redis_client.get("bull:work:pc") or 0)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 5 and res.skipped_reasons == {"changed": 2, "gone": 1}
    wait = [x.decode() for x in redis_client.lrange("bull:work:wait", 0, -1)]
    assert wait[-1] == ids["even-3"] and sorted(wait) == sorted([ids["even-0"], ids["even-3"]])  # lifo: taken next
    prio = {m.decode(): int(s) for m, s in redis_client.zrange("bull:work:prioritized", 0, -1, withscores=True)}
    assert {j: s >> 32 for j, s in prio.items()} == {ids["even-1"]: 3, ids["even-2"]: 1, ids["odd-1"]: 2}
    assert sorted(s & 0xFFFFFFFF for s in prio.values()) == [pc + 1, pc + 2, pc + 3]
    assert redis_client.zscore("bull:work:marker", "0") == 0
    fields = redis_client.hgetall(f"bull:work:{ids['even-0']}")
    assert fields[b"atm"] == b"1" and not {b"finishedOn", b"failedReason", b"stacktrace", b"processedOn"} & set(fields)
    assert redis_client.zcard("bull:work:failed") == 2  # the changed ones stay failed
    st = lay.status()
    assert (st.ready, st.ready_by_priority) == (5, {"wait": 2, "prioritized": 3})
    order = [r.job_id for r in lay.list_jobs(State.READY)]  # the order BullMQ's workers take them
    assert order == [ids[n] for n in ("even-3", "even-0", "even-2", "odd-1", "even-1")]


def test_bullmq_retry_jobs_wins_the_race_and_no_job_runs_twice(failed, redis_url, redis_client):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))
    redis_client.delete(FLAG)
    counts = json.loads(_node("worker.js", redis_url, "work", FLAG, "0", "retry").splitlines()[-1])
    assert (counts["completed"], counts["failed"]) == (len(NAMES) + 1, 0)  # BullMQ's retryJobs, then its worker
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {"gone": len(NAMES)}
    assert {redis_client.get(f"bulltest:count:{i}") for i in failed.values()} == {b"1"}
    assert redis_client.llen("bull:work:wait") == 0 and redis_client.zcard("bull:work:prioritized") == 0


def test_paused_queue_gets_no_marker_and_reset_attempts(failed, redis_client):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    redis_client.hset("bull:work:meta", "paused", 1)
    redis_client.delete("bull:work:marker")
    redis_client.rpush("bull:work:paused", "older")  # a queue still in the pre-6 layout: paused jobs in a list
    lay = _layout(redis_client)
    res = run_plan(lay, lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY, reset_attempts=True)),
                   journal=False)
    assert res.moved == 8 and not redis_client.exists("bull:work:marker")
    assert redis_client.llen("bull:work:paused") == 1 + 5 and not redis_client.exists("bull:work:wait")
    assert redis_client.hget(f"bull:work:{failed['even-0']}", "atm") is None


def test_purge_exports_first_and_leaves_no_orphan_keys(run, failed, redis_client, tmp_path):
    import pyarrow.parquet as pq

    redis_client.rpush(f"bull:work:{failed['odd-0']}:logs", "a log line")
    assert redis_client.get("bull:work:de:d-odd-2") == failed["odd-2"].encode()
    out = tmp_path / "dead"
    doc = _json(run, "purge", "work", "--state", "dead", "--filter", "payload.name ~ 'odd-*'", "--export-to", str(out),
                "--yes")
    assert doc["moved"] == 4
    rows = [r for part in sorted(out.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert {r["job_id"]: r["raw"] for r in rows} == {
        failed[n]: RAW.format(name=n) for n in NAMES if n.startswith("odd-")}  # the stored bytes
    left = {k.decode() for k in redis_client.scan_iter(count=1000)}
    gone = {i for n, i in failed.items() if n.startswith("odd-")}
    assert not [k for k in left if k.startswith("bull:work:") and k.split(":")[2] in gone]
    assert not redis_client.exists("bull:work:de:d-odd-2")
    assert {m.decode() for m in redis_client.zrange("bull:work:failed", 0, -1)} == {failed[n] for n in NAMES} - gone


def test_discover_recognises_a_bullmq_queue(run, failed):
    queues = _json(run, "discover")["queues"]
    assert any(q["queue"] == "work" and q["layout"] == "bullmq" for q in queues), queues
