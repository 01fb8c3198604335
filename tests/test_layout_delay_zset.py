"""The delay-zset layout (seed 004) and Redisson's delayed queue (read-only)
on a real server: status, listing, inspect, promote and purge through the
CLI followed by the seed's consumer, score fences, and the decoding of
Redisson's binary-packed members."""

from __future__ import annotations

import orjson
import pytest

from jobctl.config import QueueConfig
from jobctl.keys import DelayZsetKeys, RedissonDelayedKeys
from jobctl.layouts import layout_for
from jobctl.layouts.redisson_delayed_queue.member import decode_member, encode_member
from jobctl.model import State
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.delay_zset import ADAPTER, Consumer, Producer, RedissonDelayedQueueWriter
from helpers import run_with_config as run

SIZE = 120
COUNTS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")
Z = DelayZsetKeys("delay_queue")


def _config(tmp_path, layout="delay-zset", tag="delay_queue") -> str:
    path = tmp_path / "jobctl.toml"
    path.write_text(f'[queues.q]\nlayout = "{layout}"\ntag = "{tag}"\n')
    return str(path)


def layout(client):
    return layout_for(client, ADAPTER.queue_config("delay_queue"))


@pytest.mark.parametrize("scenario", ADAPTER.scenarios)
def test_status_matches_scenario(redis_client, scenario):
    expected = ADAPTER.load(redis_client, scenario, queue="delay_queue", size=SIZE, seed=3)
    st = layout(redis_client).status()
    assert {k: getattr(st, k) for k in COUNTS} == {k: expected[k] for k in COUNTS}
    assert st.oldest_ready_age_ms > 0 and st.next_due_ms > st.now_ms


def test_ls_and_inspect(redis_client):
    expected = ADAPTER.load(redis_client, "scheduler-lag", queue="delay_queue", size=SIZE, seed=1)
    lay = layout(redis_client)
    ready = lay.list_jobs(State.READY, limit=1000)
    assert {r.job_id for r in ready} == expected["ids_by_state"]["ready"]
    assert [r.score for r in ready] == sorted(r.score for r in ready)
    sched = lay.list_jobs(State.SCHEDULED, limit=1000)
    assert {r.job_id for r in sched} == expected["ids_by_state"]["scheduled"]
    as_json = next(r for r in ready if r.job_id.startswith("{"))
    assert as_json.envelope.job_id == orjson.loads(as_json.job_id)["id"] and not as_json.envelope.problems
    bare = next(r for r in ready if not r.job_id.startswith("{"))
    assert bare.envelope.document is None and not bare.envelope.problems
    # a JSON member is found by its id too
    rec = lay.inspect(as_json.envelope.job_id)
    assert rec.job_id == as_json.job_id and rec.state is State.READY and rec.meta["rank"] >= 0
    assert lay.inspect(sched[0].job_id).state is State.SCHEDULED
    batches = list(lay.iter_batches(State.READY, batch=7))
    assert sum(len(b) for b in batches) == len(ready)


def test_promote_then_consumer_takes_them(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "healthy", queue="delay_queue", size=SIZE, seed=2)
    cfg = _config(tmp_path)
    code, res, err = run(capsys, redis_url, cfg, "promote", "q", "--limit", "5", "--yes", "--json")
    assert code == 0 and res["moved"] == 5, err
    promoted = set(res["plan"]["sample_ids"])
    st = layout(redis_client).status()
    assert st.ready == expected["ready"] + 5
    consumer = Consumer(redis_client, Z)
    taken = []
    while (job := consumer.claim()) is not None:
        taken.append(job)
    assert promoted <= set(taken)
    assert consumer.complete(taken[0]) and consumer.fail(taken[1])
    assert redis_client.zscore(Z.zset, taken[1]) is not None


def test_purge_ready_and_scheduled(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "scheduler-lag", queue="delay_queue", size=SIZE, seed=4)
    cfg = _config(tmp_path)
    code, res, err = run(capsys, redis_url, cfg, "purge", "q", "--state", "ready", "--filter", "id ~ 'order_*'",
                         "--no-export", "--yes", "--json")
    assert code == 0 and res["moved"] > 0, err
    left = {r.job_id for r in layout(redis_client).list_jobs(State.READY, limit=1000)}
    assert all(j.startswith("{") for j in left)
    code, res, err = run(capsys, redis_url, cfg, "purge", "q", "--state", "scheduled", "--no-export", "--yes",
                         "--json")
    assert code == 0 and res["moved"] == expected["scheduled"], err
    assert layout(redis_client).status().scheduled == 0
    code, res, err = run(capsys, redis_url, cfg, "redrive", "q", "--yes")
    assert code == 2 and "not possible in layout delay-zset" in err


def test_score_fence_skips_a_member_the_app_rescheduled(redis_client):
    Producer(redis_client, Z).offer("a", 9_999_999_999_999)
    Producer(redis_client, Z).offer(b"\xff\xfebinary", 9_999_999_999_998)
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PROMOTE, "delay_queue", State.SCHEDULED, State.READY))
    assert plan.planned == 2
    redis_client.zadd(Z.zset, {"a": 9_999_999_999_000})
    res = list(lay.apply(plan))
    assert res[0].reasons == {"a": "changed"}
    assert res[0].moved == [b"\xff\xfebinary".decode("utf-8", "surrogateescape")]
    assert lay.status().ready == 1


def test_check_reports_seconds_scores(redis_client):
    redis_client.zadd(Z.zset, {"ok": 1_795_000_000_000, "secs": 1_795_000_000})
    report = layout(redis_client).check()
    assert [(p.kind, p.job_id) for p in report.problems] == [("bad_score", "secs")]


# -- Redisson ---------------------------------------------------------------------


def test_member_codec_round_trip():
    packed = encode_member(123.5, b'"helloworld00"')
    assert packed[8:16] == b"\x0e" + b"\x00" * 7  # little-endian length, as Redis's Lua struct packs it
    m = decode_member(packed)
    assert m.random_id == 123.5 and m.value == b'"helloworld00"' and m.problem is None
    assert decode_member(packed[:-1]).problem and decode_member(b"abc").problem


def test_redisson_read_only(redis_client, redis_url, tmp_path, capsys):
    w = RedissonDelayedQueueWriter(redis_client, "delay_queue")
    now = 1_795_000_000_000
    for i in range(4):
        w.offer(orjson.dumps({"@class": "com.acme.Reminder", "id": f"r{i}"}), now + i * 1000)
    w.offer(b'"helloworld00"', 9_999_999_999_999)
    assert w.transfer(now + 1500) == 2
    lay = layout_for(redis_client, QueueConfig(name="q", layout="redisson-delayed-queue", tag="delay_queue"))
    st = lay.status()
    assert (st.ready, st.scheduled) == (2, 3) and st.scheduled_overdue >= 2 and not st.warnings
    sched = lay.list_jobs(State.SCHEDULED)
    assert [r.envelope.job_id for r in sched][:2] == [sched[0].job_id, sched[1].job_id]
    assert sched[0].envelope.document["id"] == "r2" and sched[-1].raw == b'"helloworld00"'
    assert isinstance(sched[0].meta["random_id"], float)
    rec = lay.inspect(sched[1].job_id)
    assert rec.state is State.SCHEDULED and rec.envelope.document["id"] == "r3"
    ready = lay.list_jobs(State.READY)
    assert [r.envelope.document["id"] for r in ready] == ["r0", "r1"]
    assert lay.inspect(ready[1].job_id).position == 1
    assert lay.check().ok
    cfg = _config(tmp_path, layout="redisson-delayed-queue")
    for argv in (["promote", "q", "--yes"], ["purge", "q", "--state", "scheduled", "--no-export", "--yes"]):
        code, out, err = run(capsys, redis_url, cfg, *argv)
        assert code == 2 and "read-only" in err and "Traceback" not in err
    code, out, err = run(capsys, redis_url, cfg, "ls", "q", "--state", "scheduled", "--json")
    assert code == 0 and len(out["jobs"]) == 3
    code, out, err = run(capsys, redis_url, cfg, "status", "q", "--json")
    assert code == 0 and out["queues"][0]["scheduled"] == 3
    # a member that is not Redisson's format is reported, not fatal
    redis_client.zadd(RedissonDelayedKeys("delay_queue").timeout, {b"junk": now})
    report = lay.check()
    assert report.counts() == {"bad_member": 1, "order_mismatch": 1}
