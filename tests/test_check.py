"""``jobctl check`` (``jobctl/layouts/reliable_list/check.py``,
``jobctl/lua/rl_repair.lua``): the invariants of a reliable-list queue, the
unambiguous repairs, and their journal entry."""

from __future__ import annotations

import json

import orjson
import pytest

from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.scripts import script
from jobctl_fixtures.scenarios import SCENARIOS, load_scenario
from test_operations import (  # noqa: F401 - fixtures
    assert_consistent, cfg, envelope, ids, run, snapshot, wall_ms,
)

K = ReliableListKeys("email")


def _base(client):
    """A small healthy queue: ready, scheduled, processing and dead jobs."""
    return load_scenario(client, "healthy", size=120, seed=11)


def _one(truth, state: str) -> str:
    return sorted(truth.ids_by_state[state])[0]


BREAKERS = {
    # kind: (how to break a healthy queue, repairable)
    "multiple_states": (lambda c, t: c.lpush(K.dead, _one(t, "ready")), False),
    "duplicate": (lambda c, t: c.lpush(K.ready, _one(t, "ready")), True),
    "dangling": (lambda c, t: c.delete(K.job(_one(t, "dead"))), True),
    "orphan_payload": (lambda c, t: c.set(K.job("job_orphan"), b'{"jobId":"job_orphan"}'), False),
    "missing_deadline": (lambda c, t: c.zrem(K.deadline, _one(t, "processing")), True),
    "stray_deadline": (lambda c, t: c.zadd(K.deadline, {_one(t, "ready"): wall_ms() + 60_000}), True),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("shape", [(None, None), (4, None), (None, 3)], ids=["plain", "sharded", "priorities"])
def test_loaded_scenarios_are_healthy(redis_client, tmp_path, capsys, redis_url, scenario, shape):
    from jobctl.cli.main import main

    shards, priorities = shape
    truth = load_scenario(redis_client, scenario, queue="q", shards=shards, priorities=priorities, size=150,
                          seed=1, malformed=4)
    conf = tmp_path / "c.toml"
    conf.write_text("[queues.q]\n" + (f"shards = {shards}\n" if shards else "")
                    + (f"priorities = {priorities}\n" if priorities else ""))
    before = snapshot(redis_client)
    code = main(["--url", redis_url, "--config", str(conf), "check"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert out.startswith(f"q: ok ({truth.size:,} ids, {truth.size:,} payload keys)")
    code = main(["--url", redis_url, "--config", str(conf), "check", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True and doc["queues"][0]["problems"] == []
    assert snapshot(redis_client) == before   # check reads only


@pytest.mark.parametrize("kind", list(BREAKERS))
def test_each_broken_invariant_is_found(redis_client, run, kind):
    truth = _base(redis_client)
    breaker, repairable = BREAKERS[kind]
    breaker(redis_client, truth)
    before = snapshot(redis_client)
    code, out, err = run("check", "email", "--json")
    assert code == 7, err
    [q] = json.loads(out)["queues"]
    assert q["ok"] is False and q["counts"] == {kind: 1}
    [problem] = q["problems"]
    assert problem["kind"] == kind and problem["shard"] == "email" and problem["repaired"] is False
    assert (problem["repair"] is not None) == repairable
    code, out, err = run("check", "email")
    assert code == 7 and kind in out and problem["id"] in out
    assert snapshot(redis_client) == before


def test_repair_fixes_the_unambiguous_problems_and_journals(redis_client, run):
    truth = _base(redis_client)
    for breaker, _ in BREAKERS.values():
        breaker(redis_client, truth)
    dup = _one(truth, "ready")
    dangling = _one(truth, "dead")
    unclaimed = _one(truth, "processing")
    t0 = wall_ms()
    code, out, err = run("check", "email", "--repair", "--yes", "--json")
    assert code == 7, err   # two problems need a human
    [q] = json.loads(out)["queues"]
    assert q["repaired"] == 4
    assert {p["kind"] for p in q["problems"] if not p["repaired"]} == {"multiple_states", "orphan_payload"}
    # what the repairs did
    assert ids(redis_client, K.ready).count(dup) == 1
    assert dangling not in ids(redis_client, K.dead)
    assert t0 <= redis_client.zscore(K.deadline, unclaimed) <= wall_ms()
    assert redis_client.zscore(K.deadline, dup) is None
    # journaled like any other operation
    [entry] = [orjson.loads(f[b"entry"]) for _, f in redis_client.xrange(K.journal)]
    assert entry["operation"] == "check --repair" and entry["moved"] == 4 and entry["queue"] == "email"
    assert "check email --repair --yes" in entry["command"] and len(entry["repairs"]) == 4
    # what is left, then fixed by hand: healthy again
    code, out, err = run("check", "email", "--json")
    assert code == 7 and json.loads(out)["queues"][0]["counts"] == {"multiple_states": 1,
                                                                   "orphan_payload": 1}
    redis_client.lrem(K.dead, 1, dup)
    redis_client.delete(K.job("job_orphan"))
    code, out, err = run("check")
    assert code == 0, out
    assert_consistent(redis_client, ["email"])
    # the job whose deadline was missing is stuck now, and requeue --stuck takes it
    code, out, err = run("requeue", "email", "--stuck", "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 1
    assert ids(redis_client, K.ready)[0] == unclaimed


def test_repair_needs_yes_and_is_refused_in_read_only_mode(redis_client, run):
    truth = _base(redis_client)
    BREAKERS["duplicate"][0](redis_client, truth)
    before = snapshot(redis_client)
    code, out, err = run("check", "--repair")
    assert code == 2 and "--yes" in err
    code, out, err = run("--read-only", "check", "--repair", "--yes")
    assert code == 9 and "read-only" in err
    code, out, err = run("--read-only", "check")
    assert code == 7
    assert snapshot(redis_client) == before


def test_healthy_after_operations(redis_client, run):
    load_scenario(redis_client, "dlq-spike", size=200, seed=3, malformed=6)
    assert run("redrive", "email", "--filter", "error = HTTP_503", "--yes")[0] == 0
    assert run("suppress", "email", "--filter", "error = HTTP_400", "--reason", "r", "--yes")[0] == 0
    assert run("purge", "email", "--state", "suppressed", "--no-export", "--yes")[0] == 0
    assert run("redrive", "email", "--to", "scheduled", "--delay", "1h", "--yes")[0] == 0
    assert run("promote", "email", "--yes")[0] == 0
    code, out, err = run("check")
    assert code == 0, out


def test_sharded_queue_problems_name_their_shard(redis_client, run):
    truth = load_scenario(redis_client, "healthy", queue="shq", shards=4, size=200, seed=2)
    tag = shard_tags("shq", 4)[2]
    k = ReliableListKeys(tag)
    victim = sorted(i for i in truth.ids_by_state["ready"] if truth.tag_of(i) == tag)[0]
    redis_client.lpush(k.ready, victim)
    code, out, err = run("check", "shq", "--json")
    assert code == 7
    [problem] = json.loads(out)["queues"][0]["problems"]
    assert (problem["kind"], problem["shard"], problem["id"]) == ("duplicate", tag, victim)
    code, out, err = run("check", "shq", "--repair", "--yes")
    assert code == 0, out
    assert ids(redis_client, k.ready).count(victim) == 1
    code, out, err = run("check", "nosuch")
    assert code == 5


def test_repairs_recheck_their_condition_atomically(redis_client):
    """rl_repair.lua does nothing when the state changed since the check
    (regression: on a live queue a duplicate seen by the windowed read, or a
    deadline read just after a claim, used to be "repaired" into data loss)."""
    truth = _base(redis_client)
    fix = script(redis_client, "rl_repair")

    def repair(kind: str, key: str, job_id: str, arg: str) -> int:
        return fix(keys=[key, K.job(job_id), K.deadline, K.processing], args=[kind, job_id, arg])

    # dangling: the payload is back
    job = _one(truth, "dead")
    assert repair("dangling_list", K.dead, job, "") == 0
    assert job in ids(redis_client, K.dead)
    # stray deadline: renewed to another score since the check
    ready = _one(truth, "ready")
    redis_client.zadd(K.deadline, {ready: 5})
    assert repair("stray_deadline", K.deadline, ready, "6") == 0
    assert redis_client.zscore(K.deadline, ready) == 5
    redis_client.zrem(K.deadline, ready)
    # stray deadline: the check read the deadline of a claim it had not seen in processing
    proc = _one(truth, "processing")
    score = redis_client.zscore(K.deadline, proc)
    assert repair("stray_deadline", K.deadline, proc, str(int(score))) == 0
    assert redis_client.zscore(K.deadline, proc) == score
    # missing deadline: a worker set one meanwhile; NX keeps it
    assert repair("missing_deadline", K.processing, proc, "1") == 0
    assert redis_client.zscore(K.deadline, proc) == score
    # missing deadline: the job was acked meanwhile; no stray deadline appears
    assert repair("missing_deadline", K.processing, "job_acked_meanwhile", "1") == 0
    assert redis_client.zscore(K.deadline, "job_acked_meanwhile") is None
    # duplicate: the windowed read saw one copy twice; the only copy stays
    assert repair("duplicate", K.ready, ready, "2") == 0
    assert ids(redis_client, K.ready).count(ready) == 1
    # a real duplicate: three copies, one is kept
    redis_client.rpush(K.ready, ready, ready)
    assert repair("duplicate", K.ready, ready, "2") == 1
    assert ids(redis_client, K.ready).count(ready) == 1
    assert envelope(redis_client, "email", ready)["jobId"] == ready
    assert_consistent(redis_client, ["email"])
