"""The stream-group layout (seed 000 sections 11-13) on a real server: status
of every scenario, listing and inspect with PEL metadata, each operation
through the CLI followed by the layout's own worker, fences, the Redis 7.0
lag fallback, the dead-stream variant, sharding and check."""

from __future__ import annotations

import json

import orjson
import pytest

from jobctl.config import QueueConfig
from jobctl.keys import StreamGroupKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.stream_group import (ADAPTER, GROUP, VISIBILITY_TIMEOUT_MS, StreamProducer,
                                                  StreamScheduler, StreamWorker)
from helpers import drain, run_with_config as run

SIZE = 120
COUNTS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")


def _config(tmp_path, **opts) -> str:
    lines = ["[queues.email]", 'layout = "stream-group"', 'tag = "email"',
             f"visibility_timeout_ms = {VISIBILITY_TIMEOUT_MS}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in opts.items()]
    path = tmp_path / "jobctl.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def layout(client, **opts):
    q = ADAPTER.queue_config("email")
    return layout_for(client, QueueConfig(name=q.name, layout=q.layout, tag=q.tag, shards=q.shards,
                                          visibility_timeout_ms=q.visibility_timeout_ms, options=opts))


def counts(st) -> dict:
    return {k: getattr(st, k) for k in COUNTS}


@pytest.mark.parametrize("scenario", ADAPTER.scenarios)
def test_status_matches_scenario(redis_client, scenario):
    expected = ADAPTER.load(redis_client, scenario, queue="email", size=SIZE, seed=3)
    st = layout(redis_client).status()
    assert counts(st) == {k: expected[k] for k in COUNTS}
    assert not st.errors and not st.warnings
    if expected["ready"]:
        assert st.oldest_ready_age_ms is not None and st.oldest_ready_age_ms > 0


def test_ls_and_inspect_show_pel_metadata(redis_client):
    expected = ADAPTER.load(redis_client, "stuck-workers", queue="email", size=SIZE, seed=1)
    lay = layout(redis_client)
    procs = lay.list_jobs(State.PROCESSING, limit=500)
    assert {r.job_id for r in procs} == expected["ids_by_state"]["processing"]
    deadlines = [r.deadline_ms for r in procs]
    assert deadlines == sorted(deadlines)
    for r in procs:
        assert r.meta["consumer"].startswith("worker-")
        assert r.meta["idle_ms"] >= 0 and r.attempts == r.meta["delivery_count"] >= 1
    ready = lay.list_jobs(State.READY, limit=5)
    assert [r.position for r in ready] == list(range(5))
    entered = [r.meta["entered_ms"] for r in ready]
    assert entered == sorted(entered)
    rec = lay.inspect(procs[0].job_id)
    assert rec.state is State.PROCESSING and rec.meta["consumer"] == procs[0].meta["consumer"]
    assert rec.meta["delivery_count"] == procs[0].meta["delivery_count"]
    assert rec.envelope.job_type and rec.meta["entry_id"] == procs[0].meta["entry_id"]
    dead = next(iter(expected["ids_by_state"]["dead"]))
    rec = lay.inspect(dead)
    assert rec.state is State.DEAD and rec.envelope.last_error_code
    sched = next(iter(expected["ids_by_state"]["scheduled"]))
    assert lay.inspect(sched).state is State.SCHEDULED
    assert lay.inspect(ready[0].job_id).state is State.READY
    hist = lay.list_jobs(State.DEAD, limit=3)
    assert [r.position for r in hist] == [0, 1, 2]


def test_requeue_stuck_then_workers_take_them(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "stuck-workers", queue="email", size=SIZE, seed=2)
    cfg = _config(tmp_path)
    stuck = expected["stuck"]
    before = layout(redis_client).status()
    code, res, err = run(capsys, redis_url, cfg, "requeue", "email", "--stuck", "--yes", "--json")
    assert code == 0, err
    assert res["moved"] == stuck and res["skipped"] == 0
    after = layout(redis_client).status()
    assert after.stuck == 0
    assert after.processing == before.processing - stuck
    assert after.ready == before.ready + stuck
    # the layout's own worker reads the requeued jobs with XREADGROUP > and completes/fails them
    stuck_ids = expected["ids_by_state"]["processing"] - {r.job_id for r in layout(redis_client).list_jobs(
        State.PROCESSING, limit=1000)}
    assert len(stuck_ids) == stuck
    worker = StreamWorker(redis_client, StreamGroupKeys("email"))
    claimed = drain(worker)
    assert stuck_ids <= set(claimed)
    touched = sorted(stuck_ids)
    assert worker.complete(touched[0])
    assert worker.fail(touched[1], "HTTP_503")
    assert worker.fail(touched[2], "HTTP_400")  # permanent: dead-lettered
    assert redis_client.lpos(StreamGroupKeys("email").dead, touched[2]) == 0


def test_requeue_is_fenced_by_delivery_count(redis_client):
    ADAPTER.load(redis_client, "stuck-workers", queue="email", size=60, seed=4)
    lay = layout(redis_client)
    spec = OpSpec(Operation.REQUEUE, "email", State.PROCESSING, State.READY, stuck_only=True)
    plan = lay.plan(spec)
    assert plan.planned > 2
    # a worker recovers one stuck entry (XAUTOCLAIM) between plan and apply
    worker = StreamWorker(redis_client, StreamGroupKeys("email"), consumer="worker-9")
    recovered = worker.claim()
    moved = skipped = 0
    for br in lay.apply(plan):
        moved += len(br.moved)
        skipped += len(br.skipped)
        assert set(br.reasons.values()) <= {"changed"}
    assert skipped == 1 and moved == plan.planned - 1
    assert worker.complete(recovered)
    # the old claimant of a requeued entry can no longer acknowledge it
    assert lay.status().stuck == 0


def test_stale_claim_refused_after_requeue_by_ids(redis_client, redis_url, tmp_path, capsys):
    keys = StreamGroupKeys("email")
    producer = StreamProducer(redis_client, keys)
    producer.ensure_group()
    producer.enqueue({"jobId": "j1", "jobType": "webhook.deliver", "createdAtEpochMs": 1, "maxAttempts": 3})
    slow = StreamWorker(redis_client, keys, consumer="slow")
    assert slow.claim() == "j1"
    code, res, err = run(capsys, redis_url, _config(tmp_path), "requeue", "email", "--ids", "j1", "--yes", "--json")
    assert code == 0 and res["moved"] == 1, err
    fresh = StreamWorker(redis_client, keys, consumer="fresh")
    assert fresh.claim() == "j1"
    assert not slow.complete("j1")  # its entry was acknowledged by the requeue
    assert fresh.complete("j1")
    assert layout(redis_client).status().processing == 0


def test_promote_moves_due_ids_into_the_stream(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "scheduler-lag", queue="email", size=SIZE, seed=5)
    cfg = _config(tmp_path)
    before = layout(redis_client).status()
    code, res, err = run(capsys, redis_url, cfg, "promote", "email", "--filter", "type = webhook.deliver",
                         "--yes", "--json")
    assert code == 0, err
    n = res["moved"]
    assert n > 0 and res["skipped"] == 0
    after = layout(redis_client).status()
    assert after.scheduled == before.scheduled - n and after.ready == before.ready + n
    promoted = {r.job_id for r in layout(redis_client).list_jobs(State.READY, limit=1000)} & \
        expected["ids_by_state"]["scheduled"]
    assert len(promoted) == n
    claimed = drain(StreamWorker(redis_client, StreamGroupKeys("email")))
    assert promoted <= set(claimed)
    # the layout's scheduler still works on what is left
    assert StreamScheduler(redis_client, StreamGroupKeys("email")).promote_due(after.now_ms) == \
        after.scheduled_overdue


def test_redrive_suppress_unsuppress_purge(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "dlq-spike", queue="email", size=SIZE, seed=6)
    cfg = _config(tmp_path)
    keys = StreamGroupKeys("email")
    dead = expected["dead"]
    code, res, err = run(capsys, redis_url, cfg, "redrive", "email", "--filter", "error = HTTP_503",
                         "--reset-attempts", "--yes", "--json")
    assert code == 0, err
    redriven = res["moved"]
    assert redriven > 0 and layout(redis_client).status().dead == dead - redriven
    worker = StreamWorker(redis_client, keys)
    claimed = drain(worker)
    redriven_ids = [j for j in claimed if j in expected["ids_by_state"]["dead"]]
    assert len(redriven_ids) == redriven
    env = orjson.loads(redis_client.get(keys.job(redriven_ids[0])))
    assert env["redriveCount"] == 1 and env["attempt"] == 0 and env["redriveOperation"] == res["operation_id"]
    assert worker.complete(redriven_ids[0])
    assert worker.fail(redriven_ids[1], "SERIALIZATION_ERROR")  # straight back to the DLQ

    code, res, err = run(capsys, redis_url, cfg, "suppress", "email", "--filter", "error = HTTP_400",
                         "--reason", "bad input", "--yes", "--json")
    assert code == 0 and res["moved"] > 0, err
    suppressed = res["moved"]
    st = layout(redis_client).status()
    assert st.suppressed == suppressed
    recs = layout(redis_client).list_jobs(State.SUPPRESSED, limit=100)
    assert recs[0].meta["suppressed"]["reason"] == "bad input"
    code, res, err = run(capsys, redis_url, cfg, "unsuppress", "email", "--limit", "2", "--yes", "--json")
    assert code == 0 and res["moved"] == 2, err
    assert layout(redis_client).status().suppressed == suppressed - 2
    code, res, err = run(capsys, redis_url, cfg, "purge", "email", "--state", "suppressed", "--no-export",
                         "--yes", "--json")
    assert code == 0 and res["moved"] == suppressed - 2, err
    assert redis_client.exists(keys.job(recs[-1].job_id)) == 0 or recs[-1].job_id in \
        {r.job_id for r in layout(redis_client).list_jobs(State.DEAD, limit=1000)}
    before = layout(redis_client).status().dead
    code, res, err = run(capsys, redis_url, cfg, "redrive", "email", "--to", "scheduled", "--delay", "1h",
                         "--limit", "3", "--yes", "--json")
    assert code == 0 and res["moved"] == 3, err
    st = layout(redis_client).status()
    assert st.dead == before - 3 and st.scheduled == expected["scheduled"] + 3
    assert layout(redis_client).check().ok


def dead_stream_queue(redis_client):
    """A stream-group queue whose dead letters are a stream: five entries
    carrying their job, one (d9) with a payload key.  ``(keys, layout)``."""
    keys = StreamGroupKeys("email")
    StreamProducer(redis_client, keys).ensure_group()
    for i in range(5):
        redis_client.xadd(keys.dead_stream, {"jobId": f"d{i}", "jobType": "webhook.deliver",
                                             "payload": json.dumps({"n": i}), "lastErrorCode": "HTTP_503"})
    redis_client.set(keys.job("d9"), orjson.dumps({"jobId": "d9", "jobType": "webhook.deliver",
                                                   "createdAtEpochMs": 1}))
    redis_client.xadd(keys.dead_stream, {"jobId": "d9"})
    return keys, layout(redis_client, dead="stream")


def test_dead_stream_variant(redis_client):
    keys, lay = dead_stream_queue(redis_client)
    assert lay.status().dead == 6
    dead = lay.list_jobs(State.DEAD, limit=10)
    assert dead[0].job_id == "d9" and dead[1].envelope.payload == {"n": 4}
    assert lay.inspect("d2").state is State.DEAD
    run_op = lambda op, src, dst, **kw: list(lay.apply(lay.plan(OpSpec(op, "email", src, dst, **kw))))  # noqa: E731
    res = run_op(Operation.REDRIVE, State.DEAD, State.READY, ids=("d0", "d9"))
    assert sorted(j for br in res for j in br.moved) == ["d0", "d9"]
    claimed = drain(StreamWorker(redis_client, keys))
    assert sorted(claimed) == ["d0", "d9"]
    res = run_op(Operation.SUPPRESS, State.DEAD, State.SUPPRESSED, reason="x", ids=("d1",))
    assert res[0].moved == ["d1"] and lay.status().suppressed == 1
    res = run_op(Operation.UNSUPPRESS, State.SUPPRESSED, State.DEAD)
    assert res[0].moved == ["d1"]
    back = lay.inspect("d1")
    assert back.state is State.DEAD and back.meta["entry_fields"]["lastErrorCode"] == "HTTP_503"
    res = run_op(Operation.PURGE, State.DEAD, None)
    assert len(res[0].moved) == 4 and lay.status().dead == 0


def test_lag_fallback_when_server_reports_none(redis_client):
    keys = StreamGroupKeys("email")
    producer = StreamProducer(redis_client, keys)
    producer.ensure_group()
    for i in range(6):
        producer.enqueue({"jobId": f"j{i}", "jobType": "webhook.deliver", "createdAtEpochMs": 1})
    StreamWorker(redis_client, keys).claim()
    entries = redis_client.xrange(keys.stream)
    redis_client.xdel(keys.stream, entries[3][0])  # an undelivered entry: the lag becomes unknown
    assert redis_client.xinfo_groups(keys.stream)[0]["lag"] is None
    st = layout(redis_client).status()
    assert st.ready == 4 and st.processing == 1 and not st.warnings


def test_missing_stream_and_group_are_warnings(redis_client):
    st = layout(redis_client).status()
    assert st.ready == 0 and any("does not exist" in w for w in st.warnings) and not st.errors
    redis_client.xadd(StreamGroupKeys("email").stream, {"jobId": "x"})
    st = layout(redis_client).status()
    assert any(f"consumer group {GROUP}" in w for w in st.warnings)


def test_sharded_queue_sums_shards(redis_client):
    total = 0
    for tag in ("email:00", "email:01"):
        keys = StreamGroupKeys(tag)
        producer = StreamProducer(redis_client, keys)
        producer.ensure_group()
        for i in range(3):
            producer.enqueue({"jobId": f"{tag}-{i}", "jobType": "webhook.deliver", "createdAtEpochMs": 1})
            total += 1
    lay = layout_for(redis_client, QueueConfig(name="email", layout="stream-group", tag="email", shards=2))
    assert lay.status().ready == total == 6
    assert len(lay.list_jobs(State.READY, limit=10)) == 6
    assert lay.inspect("email:01-2").shard == "email:01"


def test_check_repairs_deleted_pending_entries(redis_client):
    keys = StreamGroupKeys("email")
    producer = StreamProducer(redis_client, keys)
    producer.ensure_group()
    producer.enqueue({"jobId": "a", "jobType": "webhook.deliver", "createdAtEpochMs": 1})
    worker = StreamWorker(redis_client, keys)
    assert worker.claim() == "a"
    redis_client.xdel(keys.stream, redis_client.xrange(keys.stream)[0][0])
    redis_client.zadd(keys.scheduled, {"ghost": 1})
    report = layout(redis_client).check()
    assert not report.ok and report.counts() == {"deleted_pending": 1, "dangling": 1}
    report = layout(redis_client).check(repair=True)
    assert [p.kind for p in report.remaining] == ["dangling"]
    assert layout(redis_client).status().processing == 0


def test_refused_xadd_leaves_every_dead_job_dead_once(redis_client, redis_url, tmp_path, capsys):
    """An unfiltered redrive (the tail walk's bulk path) whose stream refuses
    every XADD (its last id is the largest there is): no entry is added, each
    job is reported failed and stays on the dead list exactly once, in its
    place; once the stream takes entries again, a rerun moves them all, in
    tail order."""
    expected = ADAPTER.load(redis_client, "dlq-spike", queue="email", size=SIZE, seed=6)
    keys = StreamGroupKeys("email")
    dead_before = [x.decode() for x in redis_client.lrange(keys.dead, 0, -1)]
    assert len(dead_before) == expected["dead"] > 0
    top = "18446744073709551615-18446744073709551615"
    redis_client.xadd(keys.stream, {"jobId": "top"}, id=top)
    length = redis_client.xlen(keys.stream)
    cfg = _config(tmp_path)
    code, res, err = run(capsys, redis_url, cfg, "redrive", "email", "--yes", "--json")
    assert code == 8 and res["moved"] == 0 and res["failed"] == len(dead_before), err
    assert redis_client.xlen(keys.stream) == length
    assert [x.decode() for x in redis_client.lrange(keys.dead, 0, -1)] == dead_before
    redis_client.delete(keys.stream)  # a stream that takes entries again (its group recreated)
    StreamProducer(redis_client, keys).ensure_group()
    code, res, err = run(capsys, redis_url, cfg, "redrive", "email", "--yes", "--json")
    assert code == 0 and res["moved"] == len(dead_before), err
    added = [f[b"jobId"].decode() for _, f in redis_client.xrange(keys.stream)]
    assert added == dead_before[::-1] and redis_client.llen(keys.dead) == 0


def test_tail_calls_are_wider_than_per_job_calls(redis_client):
    """An unfiltered redrive of the dead list is walked in tail calls of
    ``SG_TAIL_WINDOW`` positions; a filtered one per job, ``SG_WINDOW`` a call."""
    from jobctl.filter import compile_filter
    from jobctl.layouts.stream_group.ops import SG_TAIL_WINDOW, SG_WINDOW, dead_sources

    lay = layout(redis_client)
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY)
    assert [s.window for s in dead_sources(lay, spec)] == [SG_TAIL_WINDOW] * len(lay.shards)
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, filter=compile_filter('type = "x"'))
    assert [s.window for s in dead_sources(lay, spec)] == [SG_WINDOW] * len(lay.shards)
    assert SG_TAIL_WINDOW > SG_WINDOW
