"""The delayed-events layout (seed 003) on a real server: status of each
scenario, listing and inspect, each operation through the CLI followed by
the library's own dispatcher and handlers, the dispatcher-lock fence, the
sampled split of a large zset, a data-set prefix and check."""

from __future__ import annotations

import json
import threading
import time

import orjson
import pytest

import jobctl.layouts.delayed_events.ops as de_ops
import jobctl.layouts.delayed_events.status as de_status
import jobctl.layouts.walks as walks
from jobctl.config import QueueConfig
from jobctl.keys import DelayedEventsKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.delayed_events import (ADAPTER, MAX_ATTEMPTS, Dispatcher, Handler, Producer,
                                                    envelope)
from helpers import drain, run_with_config as run

SIZE = 120
COUNTS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")
K = DelayedEventsKeys("")


def _config(tmp_path, **opts) -> str:
    lines = ["[queues.events]", 'layout = "delayed-events"', f"max_attempts = {MAX_ATTEMPTS}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in opts.items()]
    path = tmp_path / "jobctl.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def layout(client, **opts):
    return layout_for(client, QueueConfig(name="events", layout="delayed-events",
                                          options={"max_attempts": MAX_ATTEMPTS, **opts}))


@pytest.mark.parametrize("scenario", ADAPTER.scenarios)
def test_status_matches_scenario(redis_client, scenario):
    expected = ADAPTER.load(redis_client, scenario, queue="events", size=SIZE, seed=3)
    st = layout(redis_client).status()
    assert {k: getattr(st, k) for k in COUNTS} == {k: expected[k] for k in COUNTS}
    assert not st.errors and not st.warnings
    if scenario == "scheduler-lag":  # the dispatcher stopped: due events age as ready
        assert st.oldest_ready_age_ms > 60_000


def test_ls_inspect_and_attempts(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "dlq-spike", queue="events", size=SIZE, seed=1)
    lay = layout(redis_client)
    dead = lay.list_jobs(State.DEAD, limit=500)
    assert {r.job_id for r in dead} == expected["ids_by_state"]["dead"]
    assert all(r.attempts >= MAX_ATTEMPTS and r.envelope.job_type.startswith("com.acme.") for r in dead)
    ready = lay.list_jobs(State.READY, limit=500)
    assert len(ready) == expected["ready"] and {r.job_id for r in ready} == expected["ids_by_state"]["ready"]
    rec = lay.inspect(ready[0].job_id)
    assert rec.state is State.READY and rec.meta["ready_copies"] == 1 and rec.meta["retry_at_ms"] > 0
    assert rec.meta["next_envelope_attempt"] == rec.attempts + 1  # the dispatcher stored the next attempt
    assert rec.meta["event_id"] == rec.envelope.payload["id"]
    sched = lay.inspect(sorted(expected["ids_by_state"]["scheduled"])[0])
    assert sched.state is State.SCHEDULED and sched.attempts < MAX_ATTEMPTS
    assert rec.envelope.extra["logContext"]["traceId"]
    code, out, err = run(capsys, redis_url, _config(tmp_path), "attempts", "events", "--state", "dead", "--json")
    assert code == 0 and out["depth"] == expected["dead"] and not out["sampled"], err
    code, out, err = run(capsys, redis_url, _config(tmp_path), "inspect", "events", "nope###1")
    assert code == 5 and "not found" in err


def test_requeue_is_refused(redis_client, redis_url, tmp_path, capsys):
    ADAPTER.load(redis_client, "healthy", queue="events", size=20, seed=1)
    code, out, err = run(capsys, redis_url, _config(tmp_path), "requeue", "events", "--stuck", "--yes")
    assert code == 2 and "not possible in layout delayed-events" in err


def test_promote_then_dispatcher_and_handler(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "healthy", queue="events", size=SIZE, seed=2)
    cfg = _config(tmp_path)
    target = sorted(expected["ids_by_state"]["scheduled"])[:5]
    args = [a for t in target for a in ("--ids", t)]
    code, res, err = run(capsys, redis_url, cfg, "promote", "events", *args, "--yes", "--json")
    assert code == 0 and res["moved"] == 5, err
    st = layout(redis_client).status()
    assert (st.scheduled, st.ready) == (expected["scheduled"] - 5, expected["ready"] + 5)
    now = int(time.time() * 1000)
    for t in target:
        assert redis_client.zscore(K.zset, t) <= now
    claimed = drain(Handler(redis_client, K))
    assert set(target) <= set(claimed)
    handler = Handler(redis_client, K)
    assert handler.complete(target[0]) and redis_client.zscore(K.zset, target[0]) is None
    assert handler.fail(target[1]) and redis_client.zscore(K.zset, target[1]) > now


def test_redrive_resets_attempt_without_new_fields(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "dlq-spike", queue="events", size=SIZE, seed=4)
    cfg = _config(tmp_path)
    one = sorted(expected["ids_by_state"]["dead"])[0]
    before = orjson.loads(redis_client.hget(K.events, one))
    code, res, err = run(capsys, redis_url, cfg, "redrive", "events", "--filter", "type ~ '*PaymentStatusCheck'",
                         "--yes", "--json")
    assert code == 0 and res["moved"] > 0 and res["skipped"] == 0, err
    st = layout(redis_client).status()
    assert st.dead == expected["dead"] - res["moved"]
    redriven = [m for m in expected["ids_by_state"]["dead"] if "PaymentStatusCheck" in m]
    after = orjson.loads(redis_client.hget(K.events, redriven[0]))
    assert after["attempt"] == 1 and set(after) == {"type", "payload", "attempt", "logContext"}
    if "PaymentStatusCheck" not in one:
        assert orjson.loads(redis_client.hget(K.events, one)) == before
    claimed = drain(Handler(redis_client, K))
    assert set(redriven) <= set(claimed)
    # to scheduled with a delay: due later
    code, res, err = run(capsys, redis_url, cfg, "redrive", "events", "--to", "scheduled", "--delay", "1h",
                         "--limit", "2", "--yes", "--json")
    assert code == 0 and res["moved"] == 2, err


def test_suppress_unsuppress_purge_keep_zset_and_hash_together(redis_client, redis_url, tmp_path, capsys):
    expected = ADAPTER.load(redis_client, "dlq-spike", queue="events", size=SIZE, seed=5)
    cfg = _config(tmp_path)
    dead = sorted(expected["ids_by_state"]["dead"])
    snapshot = {m: (redis_client.zscore(K.zset, m), redis_client.hget(K.events, m)) for m in dead}
    code, res, err = run(capsys, redis_url, cfg, "suppress", "events", "--filter", "attempts >= 0",
                         "--reason", "known bug", "--yes", "--json")
    assert code == 0 and res["moved"] == len(dead), err
    assert all(redis_client.zscore(K.zset, m) is None and not redis_client.hexists(K.events, m) for m in dead)
    st = layout(redis_client).status()
    assert st.dead == 0 and st.suppressed == len(dead)
    rec = layout(redis_client).inspect(dead[0])
    assert rec.state is State.SUPPRESSED and rec.meta["suppressed"]["reason"] == "known bug"
    assert rec.envelope.attempt >= MAX_ATTEMPTS
    code, res, err = run(capsys, redis_url, cfg, "unsuppress", "events", "--limit", "3", "--yes", "--json")
    assert code == 0 and res["moved"] == 3, err
    back = [m for m in dead if redis_client.zscore(K.zset, m) is not None]
    assert len(back) == 3
    for m in back:
        assert (redis_client.zscore(K.zset, m), redis_client.hget(K.events, m)) == snapshot[m]
    code, res, err = run(capsys, redis_url, cfg, "purge", "events", "--state", "suppressed", "--no-export",
                         "--yes", "--json")
    assert code == 0 and res["moved"] == len(dead) - 3, err
    code, res, err = run(capsys, redis_url, cfg, "purge", "events", "--state", "dead", "--no-export",
                         "--yes", "--json")
    assert code == 0 and res["moved"] == 3, err
    assert all(redis_client.zscore(K.zset, m) is None and not redis_client.hexists(K.events, m) for m in dead)
    st = layout(redis_client).status()
    assert st.dead == st.suppressed == 0
    assert layout(redis_client).check().ok


def test_operations_wait_for_the_dispatcher_lock(redis_client, monkeypatch):
    Producer(redis_client, K).enqueue("com.acme.X", "1", {}, 60_000)
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PROMOTE, "events", State.SCHEDULED, State.READY))
    redis_client.set(K.lock, "value", ex=2)
    threading.Timer(0.2, lambda: redis_client.delete(K.lock)).start()
    res = list(lay.apply(plan))
    assert res[0].moved == ["com.acme.X###1"]
    # a lock that never goes away: reported, nothing moved
    Producer(redis_client, K).enqueue("com.acme.X", "2", {}, 60_000)
    plan = lay.plan(OpSpec(Operation.PROMOTE, "events", State.SCHEDULED, State.READY, ids=("com.acme.X###2",)))
    redis_client.set(K.lock, "value", ex=5)
    monkeypatch.setattr(de_ops, "LOCK_RETRIES", 2)
    res = list(lay.apply(plan))
    assert res[0].skipped == ["com.acme.X###2"] and res[0].reasons["com.acme.X###2"] == "locked"


def test_fence_skips_an_event_the_dispatcher_moved(redis_client):
    Producer(redis_client, K).enqueue("com.acme.X", "1", {}, 60_000)
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PROMOTE, "events", State.SCHEDULED, State.READY))
    assert plan.planned == 1
    redis_client.zadd(K.zset, {"com.acme.X###1": 1})  # it came due and the dispatcher took it
    assert Dispatcher(redis_client, K).dispatch() == 1
    res = list(lay.apply(plan))
    assert res[0].reasons == {"com.acme.X###1": "changed"}


def test_large_zset_is_split_from_a_sample(redis_client, monkeypatch):
    ADAPTER.load(redis_client, "dlq-spike", queue="events", size=300, seed=7)
    exact = layout(redis_client).status()
    monkeypatch.setattr(de_status, "EXACT_BOUND", 100)
    monkeypatch.setattr(de_status, "WINDOW", 50)
    monkeypatch.setattr(de_status, "SAMPLE_WINDOWS", 3)
    monkeypatch.setattr(walks, "random", __import__("random").Random(5))
    st = layout(redis_client).status()
    assert any("estimated from 150 envelopes" in w for w in st.warnings) and not exact.warnings
    assert st.dead + st.scheduled <= redis_client.zcard(K.zset) and st.scheduled > 0


def test_prefix_and_event_lists_options(redis_client):
    keys = DelayedEventsKeys("de_")
    Producer(redis_client, keys).enqueue("com.acme.Ping", "7", {"x": 1}, -5)
    Dispatcher(redis_client, keys).dispatch()
    assert redis_client.llen("de_ping") == 1
    lay = layout(redis_client, prefix="de_")
    st = lay.status()
    assert (st.ready, st.scheduled) == (1, 0)  # the member waits behind its dispatched copy
    lay = layout(redis_client, prefix="de_", event_lists=["de_ping", "de_other"])
    assert lay.status().ready == 1


def test_check_reports_broken_invariants(redis_client):
    redis_client.zadd(K.zset, {"com.acme.X###1": 1, "garbage": 2, "com.acme.X###3": 3})
    redis_client.hset(K.events, "com.acme.X###3", envelope("com.acme.X", "4", {}))
    redis_client.hset(K.events, "com.acme.X###9", envelope("com.acme.X", "9", {}))
    report = layout(redis_client).check()
    assert report.counts() == {"dangling": 2, "bad_member": 1, "mismatch": 1, "orphan_envelope": 1}


def test_check_finding_that_no_longer_holds_is_transient(redis_client):
    """A member that moved between the check's two reads is not reported
    (issue 12, item 10): the dispatcher wrote its envelope after the window."""
    from jobctl.layouts.delayed_events.check import _recheck
    from jobctl.layouts.reliable_list.check import CheckReport, Problem

    redis_client.zadd(K.zset, {"com.acme.X###1": 1, "com.acme.X###2": 2})
    redis_client.hset(K.events, "com.acme.X###2", envelope("com.acme.X", "2", {}))
    report = CheckReport(queue="q", layout="delayed-events")
    report.problems = [Problem("dangling", "", "com.acme.X###1", "no envelope"),
                       Problem("dangling", "", "com.acme.X###2", "no envelope")]  # written since
    _recheck(redis_client, K, report, {})
    assert [p.job_id for p in report.problems] == ["com.acme.X###1"] and report.transient == 1
