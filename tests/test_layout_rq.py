"""The ``rq`` layout against RQ 2.x itself, unmodified (a test extra):
RQ's own producer (``Queue.enqueue``) and worker (``SimpleWorker``, burst
mode, in-process) make the keys; jobctl reads them through the CLI, and
redrives and purges the failed registry; RQ's own API agrees on every count
afterwards."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

rq = pytest.importorskip("rq")
from rq import Queue, SimpleWorker  # noqa: E402
from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry  # noqa: E402

import rq_jobs  # noqa: E402
from helpers import config_fixtures, queues_toml  # noqa: E402

BIG = 2 ** 63 - 1
cfg, run = config_fixtures(queues_toml(work={"layout": "rq"}))


def _enqueue(q: Queue, names: list[str]) -> dict[str, str]:
    """RQ's own producer: one job per name; ``{name: job id}``."""
    return {name: q.enqueue(rq_jobs.fail_while_flag, name, BIG).id for name in names}


def _work(q: Queue) -> None:
    SimpleWorker([q], connection=q.connection).work(burst=True)


def _json(run, *args) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _status(run) -> dict:
    return _json(run, "status", "work")["queues"][0]


@pytest.fixture
def failed(redis_client) -> tuple[Queue, dict[str, str]]:
    """12 jobs that RQ's worker failed while the flag was set (the flag stays)."""
    redis_client.set(rq_jobs.FLAG, 1)
    q = Queue("work", connection=redis_client)
    ids = _enqueue(q, [f"{kind}-{n}" for kind in ("even", "odd") for n in range(6)])
    _work(q)
    assert FailedJobRegistry(queue=q).count == 12
    return q, ids


def test_status_ls_and_inspect_read_rq_keys(run, failed, redis_client):
    q, ids = failed
    _enqueue(q, ["waiting-1", "waiting-2"])
    q.enqueue_in(timedelta(hours=1), rq_jobs.fail_while_flag, "later", BIG)
    st = _status(run)
    assert (st["layout"], st["ready"], st["dead"], st["scheduled"], st["processing"]) == ("rq", 2, 12, 1, 0)
    assert st["oldest_ready_age_ms"] is not None and st["dead_expiring"] == 0
    jobs = _json(run, "ls", "work", "--state", "dead", "--limit", "50")["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted(ids.values())
    one = jobs[0]
    assert one["envelope"]["status"] == "failed" and "pickled: not decoded" in one["envelope"]["data"]
    assert "RuntimeError: flag set for" in one["envelope"]["exception"]
    assert one["meta"]["failed_registry_expires_at_ms"] > one["meta"]["dead_since_ms"]
    doc = _json(run, "inspect", "work", ids["even-0"])
    assert doc["state"] == "dead" and "not the failure time" in doc["meta"]["ages"]
    assert doc["envelope"]["description"] == f"rq_jobs.fail_while_flag('even-0', {BIG})"
    ready = _json(run, "ls", "work", "--state", "ready")["jobs"]
    assert [j["envelope"]["description"].split("'")[1] for j in ready] == ["waiting-1", "waiting-2"]
    assert len(ScheduledJobRegistry(queue=q)) == st["scheduled"]


def test_redrive_filtered_then_rq_worker_runs_each_once(run, failed, redis_client):
    q, ids = failed
    worker = SimpleWorker([q], connection=redis_client)
    worker.register_birth()  # RQ's own registration: the plan names its version
    code, out, err = run("redrive", "work", "--filter", "payload.description ~ '*even-*'", "--dry-run")
    assert code == 0, err
    assert f"RQ {rq.__version__} (its workers' version)" in " ".join(out.split())
    worker.register_death()
    assert FailedJobRegistry(queue=q).count == 12  # a dry run writes nothing
    doc = _json(run, "redrive", "work", "--filter", "payload.description ~ '*even-*'", "--yes")
    assert doc["moved"] == 6
    redis_client.delete(rq_jobs.FLAG)
    _work(q)
    for name in ids:
        runs = redis_client.get(f"rqtest:count:{name}")
        if name.startswith("even-"):
            assert runs == b"1", name  # processed exactly once
            assert redis_client.get(f"rqtest:arg:{name}") == f"int:{BIG}".encode()
        else:
            assert runs is None, name
    registry = FailedJobRegistry(queue=q)
    assert sorted(registry.get_job_ids()) == sorted(i for n, i in ids.items() if n.startswith("odd-"))
    st = _status(run)
    assert (st["dead"], st["ready"], st["history"]) == (registry.count, q.count, len(FinishedJobRegistry(queue=q)))
    assert (st["dead"], st["ready"], st["history"]) == (6, 0, 6)


def test_a_job_requeued_by_rq_since_the_plan_is_not_redriven_twice(redis_client, failed):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    q, ids = failed
    lay = layout_for(redis_client, QueueConfig(name="work", layout="rq"))
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))
    FailedJobRegistry(queue=q).requeue(ids["odd-0"])  # RQ's own requeue wins the race
    redis_client.zadd(lay.keys.failed, {ids["odd-1"]: 4_000_000_000})  # another expiry: failed again since
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 10 and res.skipped_reasons == {"gone": 1, "changed": 1}
    queued = [x.decode() for x in redis_client.lrange(lay.keys.queue, 0, -1)]
    assert len(queued) == 11 and queued.count(ids["odd-0"]) == 1 and ids["odd-1"] not in queued
    redis_client.delete(rq_jobs.FLAG)
    _work(q)
    runs = {name: redis_client.get(f"rqtest:count:{name}") for name in ids}
    assert runs.pop("odd-1") is None and set(runs.values()) == {b"1"}  # never processed twice
    assert FailedJobRegistry(queue=q).get_job_ids() == [ids["odd-1"]]


def _layout(redis_client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(redis_client, QueueConfig(name="work", layout="rq"))


@pytest.mark.parametrize("filtered", [False, True])
def test_each_job_is_fenced_by_its_hash(redis_client, failed, filtered):
    from jobctl.filter import compile_filter
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    q, ids = failed
    lay = _layout(redis_client)
    flt = compile_filter("type = 'rq_jobs.fail_while_flag'") if filtered else None
    spec = OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY, **({"filter": flt} if flt else {}))
    plan = lay.plan(spec)
    assert plan.planned == 12
    redis_client.delete(lay.keys.job(ids["odd-0"]))  # the hash expired since the plan
    redis_client.hset(lay.keys.job(ids["odd-1"]), "status", "started")  # another client took it
    redis_client.hset(lay.keys.job(ids["odd-2"]), "origin", "elsewhere")
    redis_client.delete(lay.keys.job(ids["odd-3"]))
    redis_client.set(lay.keys.job(ids["odd-3"]), "not a hash")
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 8 and res.skipped_reasons == {"gone": 1, "changed": 2} and res.failed == 1
    left = {m.decode() for m in redis_client.zrange(lay.keys.failed, 0, -1)}
    assert left == {ids[f"odd-{n}"] for n in range(4)}  # each skipped job stays failed
    assert redis_client.llen(lay.keys.queue) == 8


def test_a_key_of_the_wrong_type_stops_before_any_write(run, failed, redis_client):
    redis_client.delete("rq:queues")
    redis_client.set("rq:queues", "x")
    code, _, err = run("redrive", "work", "--yes")
    assert code == 6 and "rq:queues" in err
    assert FailedJobRegistry(queue=failed[0]).count == 12 and redis_client.llen("rq:queue:work") == 0


def test_purge_leaves_no_orphan_keys(run, failed, redis_client):
    q, ids = failed
    doc = _json(run, "purge", "work", "--state", "dead", "--filter", "payload.description ~ '*odd-*'",
                "--no-export", "--yes")
    assert doc["moved"] == 6
    gone = [i for n, i in ids.items() if n.startswith("odd-")]
    left = [k.decode() for k in redis_client.scan_iter(count=1000)]
    assert not [k for k in left if any(i in k for i in gone)]
    registry = FailedJobRegistry(queue=q)
    assert registry.count == 6 and _status(run)["dead"] == 6
    assert sorted(registry.get_job_ids()) == sorted(i for n, i in ids.items() if n.startswith("even-"))


def test_a_started_job_reads_as_processing(redis_client):
    q = Queue("work", connection=redis_client)
    job = q.enqueue(rq_jobs.observe_self, "work")
    _work(q)
    seen = json.loads(redis_client.get("rqtest:seen"))
    assert (seen["processing"], seen["stuck"], seen["state"]) == (1, 0, "processing")
    assert seen["listed"] == [job.id] and seen["deadline"] and seen["execution"]


def test_scheduled_and_retry_budget(run, redis_client):
    q = Queue("work", connection=redis_client)
    later = q.enqueue_in(timedelta(minutes=5), rq_jobs.fail_while_flag, "later", BIG)
    jobs = _json(run, "ls", "work", "--state", "scheduled")["jobs"]
    assert [j["id"] for j in jobs] == [later.id] and jobs[0]["score"] > _status(run)["now_ms"]
    code, _, err = run("redrive", "work", "--reset-attempts", "--yes")
    assert code == 2 and "retries_left" in err


def test_purge_exports_first_and_the_export_fences_it(run, failed, redis_client, tmp_path):
    q, ids = failed
    out = tmp_path / "dead"
    doc = _json(run, "purge", "work", "--state", "dead", "--filter", "payload.description ~ '*odd-*'",
                "--export-to", str(out), "--yes")
    assert doc["moved"] == 6
    import pyarrow.parquet as pq

    rows = [r for part in sorted(out.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert {r["layout"] for r in rows} == {"rq"} and all(r["raw_base64"] for r in rows)  # the stored bytes
    assert sorted(r["job_id"] for r in rows) == sorted(i for n, i in ids.items() if n.startswith("odd-"))
    assert FailedJobRegistry(queue=q).count == 6


def test_discover_recognises_rq_keys(run, failed):
    code, out, err = run("discover", "--json")
    assert code == 0, err
    queues = json.loads(out)["queues"]
    assert any(q["queue"] == "work" and q["layout"] == "rq" for q in queues), queues


def test_the_dashboard_reads_an_rq_queue(cfg, redis_url, failed):
    """What the TUI shows comes from the same reads: status, detail,
    histograms, the triage of the failed registry and its job page."""
    from jobctl.dashboard.facade import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    s = Session(config_file=cfg, url=redis_url)
    try:
        dash = Dashboard(s)
        assert dash.refresh().row("work").status.dead == 12
        dash.queue_detail("work")
        assert "dead" in dash.histograms("work")
        groups = dash.triage("work").groups
        assert sum(g.count for g in groups) == 12
        assert len(dash.jobs("work", State.DEAD).records) == 12
    finally:
        s.close()


def test_check_finds_what_a_crashed_requeue_leaves(run, failed, redis_client):
    q, ids = failed
    code, out, err = run("check", "work", "--json")
    assert code == 0, err
    assert json.loads(out)["queues"][0]["ok"]
    redis_client.zrem("rq:failed:work", ids["odd-0"])  # RQ's requeue: step 1 of 3, then a crash
    redis_client.delete(f"rq:job:{ids['odd-1']}")  # a failed entry whose hash went first
    redis_client.hset(f"rq:job:{ids['odd-2']}", "status", "finished")
    code, out, err = run("check", "work", "--json")
    found = {(p["kind"], p["id"]) for p in json.loads(out)["queues"][0]["problems"]}
    assert code != 0 and found == {("orphan_job", ids["odd-0"]), ("dangling", ids["odd-1"]),
                                   ("status_mismatch", ids["odd-2"])}


def test_suppress_unsuppress_and_purge_suppressed(run, failed, redis_client):
    q, ids = failed
    odd = sorted(i for n, i in ids.items() if n.startswith("odd-"))
    ttl_before = redis_client.pttl(f"rq:job:{odd[0]}")
    doc = _json(run, "suppress", "work", "--filter", "payload.description ~ '*odd-*'", "--reason", "known bad",
                "--yes")
    assert doc["moved"] == 6
    st = _status(run)
    assert (st["dead"], st["suppressed"]) == (6, 6) and FailedJobRegistry(queue=q).count == 6
    assert redis_client.pttl(f"rq:job:{odd[0]}") == -1  # out of RQ's cleanup: the hash no longer expires
    rec = _json(run, "inspect", "work", odd[0])
    assert rec["state"] == "suppressed" and rec["meta"]["suppressed"]["reason"] == "known bad"
    doc = _json(run, "unsuppress", "work", "--filter", f"id = '{odd[0]}'", "--yes")
    assert doc["moved"] == 1 and odd[0] in FailedJobRegistry(queue=q).get_job_ids()
    assert 0 < redis_client.pttl(f"rq:job:{odd[0]}") <= ttl_before
    doc = _json(run, "purge", "work", "--state", "suppressed", "--no-export", "--yes")
    assert doc["moved"] == 5
    left = [k.decode() for k in redis_client.scan_iter(count=1000)]
    assert not [k for k in left if any(i in k for i in odd[1:])]
    st = _status(run)
    assert (st["dead"], st["suppressed"]) == (7, 0) and FailedJobRegistry(queue=q).count == 7


def test_redrive_while_the_worker_runs(cfg, redis_url, failed, redis_client):
    """The redrive runs inside a job of RQ's own worker; the same worker
    run then takes the redriven jobs from the queue."""
    q, ids = failed
    q.enqueue(rq_jobs.redrive_while_working, redis_url, cfg, "payload.description ~ '*odd-*'")
    _work(q)
    assert redis_client.get("rqtest:redrive_code") == b"0"
    runs = {name: redis_client.get(f"rqtest:count:{name}") for name in ids}
    assert runs == {name: (b"1" if name.startswith("odd-") else None) for name in ids}
    registry = FailedJobRegistry(queue=q)
    assert sorted(registry.get_job_ids()) == sorted(i for n, i in ids.items() if n.startswith("even-"))
    assert q.count == 0 and redis_client.zcard("rq:wip:work") == 0  # no in-flight structure left dirty
    assert redis_client.llen("rq:queue:work:intermediate") == 0


def test_an_id_planned_twice_is_pushed_once(redis_client, failed):
    """A registry window that shifted at plan time can list an id twice: a
    second copy in the same call is ``gone`` (the call reads every fence
    before it removes any), and so is a third in the next call of the same
    round trip."""
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    q, ids = failed
    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))
    first = plan.jobs[0]
    plan.jobs.append(first)
    plan.jobs.append(first)
    res = run_plan(lay, plan, journal=False, batch=13)  # 0..12: the id twice; 13: once more
    assert res.moved == 12 and res.skipped_reasons == {"gone": 2}
    queued = [x.decode() for x in redis_client.lrange(lay.keys.queue, 0, -1)]
    assert len(queued) == 12 and queued.count(first.job_id) == 1
    assert FailedJobRegistry(queue=q).count == 0
