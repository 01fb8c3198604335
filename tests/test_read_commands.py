"""``jobctl ls``, ``inspect`` and ``attempts`` on queues the fixtures loaded:
every state of the reliable-list layout, in the documented serving order,
checked against the raw keys and the scenario's ground truth."""

from __future__ import annotations

import functools
import json

import orjson
import pytest

import jobctl.attempts
from jobctl.attempts import attempt_histogram
from jobctl.config import QueueConfig
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, wall_ms

SIZE = 300


def cli_json(capsys, *argv: str):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def _s(v: bytes) -> str:
    return v.decode()


def suppress_some(client, tag: str, n: int, now: int) -> list[str]:
    """Move the ``n`` newest dead jobs to jobctl's suppressed zset, as the
    suppress operation leaves them (scores = suppressed-at, ms); returns the
    ids newest suppression first."""
    k = ReliableListKeys(tag)
    ids = [_s(x) for x in client.lrange(k.dead, 0, n - 1)]
    for i, job_id in enumerate(ids):
        client.lrem(k.dead, 1, job_id)
        client.zadd(k.suppressed, {job_id: now - 60_000 * (i + 1)})
    return ids


@pytest.fixture
def dlq(redis_client, redis_url):
    """An unsharded dlq-spike queue ``email`` with a few suppressed jobs."""
    now = wall_ms()
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=21, now_ms=now)
    suppressed = suppress_some(redis_client, "email", 4, now)
    return truth, suppressed


# -- ls ---------------------------------------------------------------------------


def test_ls_ready_next_to_be_claimed_first(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "ready", "--limit", "7")
    assert doc["queue"] == "email" and doc["state"] == "ready"
    want = [_s(x) for x in reversed(redis_client.lrange(k.ready, -7, -1))]
    assert [j["id"] for j in doc["jobs"]] == want
    assert [j["position"] for j in doc["jobs"]] == list(range(7))
    for j in doc["jobs"]:
        assert j["state"] == "ready" and j["envelope"]["jobId"] == j["id"] and j["problems"] == []


def test_ls_default_limit_is_20(capsys, redis_url, dlq):
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email")
    assert doc["state"] == "ready" and len(doc["jobs"]) == 20


def test_ls_scheduled_earliest_due_first(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "scheduled", "--limit", "10")
    want = [(_s(m), int(sc)) for m, sc in redis_client.zrange(k.scheduled, 0, 9, withscores=True)]
    assert [(j["id"], j["score"]) for j in doc["jobs"]] == want
    scores = [j["score"] for j in doc["jobs"]]
    assert scores == sorted(scores)


def test_ls_processing_oldest_claim_first_with_deadlines(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "processing", "--limit", "10")
    want = [_s(x) for x in reversed(redis_client.lrange(k.processing, -10, -1))]
    assert [j["id"] for j in doc["jobs"]] == want
    for j in doc["jobs"]:
        assert j["deadline_ms"] == int(redis_client.zscore(k.deadline, j["id"]))


def test_ls_dead_newest_first(capsys, redis_client, redis_url, dlq):
    truth, suppressed = dlq
    k = ReliableListKeys("email")
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "dead", "--limit", "10")
    want = [_s(x) for x in redis_client.lrange(k.dead, 0, 9)]
    assert [j["id"] for j in doc["jobs"]] == want
    assert all(j["id"] in truth.ids_by_state["dead"] and j["id"] not in suppressed for j in doc["jobs"])
    last = [j["envelope"]["lastAttemptAtEpochMs"] for j in doc["jobs"]]
    assert last == sorted(last, reverse=True)
    assert all(j["meta"]["dead_since_ms"] == j["envelope"]["lastAttemptAtEpochMs"] for j in doc["jobs"])


def test_ls_suppressed_newest_first(capsys, redis_url, dlq):
    _, suppressed = dlq
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "suppressed")
    assert [j["id"] for j in doc["jobs"]] == suppressed
    scores = [j["score"] for j in doc["jobs"]]
    assert scores == sorted(scores, reverse=True)


def test_ls_limit_larger_than_the_state(capsys, redis_url, dlq):
    truth, _ = dlq
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "processing", "--limit", "10000")
    assert {j["id"] for j in doc["jobs"]} == truth.ids_by_state["processing"]


def test_ls_empty_state(capsys, tmp_path, redis_url):
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text("[queues.idle]\n")
    doc, _ = cli_json(capsys, "--config", str(cfg), "--url", redis_url, "ls", "idle", "--state", "dead")
    assert doc["jobs"] == []


def test_ls_table(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    code, out, err = cli(capsys, "--url", redis_url, "ls", "email", "--state", "scheduled", "--limit", "5")
    assert code == 0, err
    want = [_s(m) for m in redis_client.zrange(k.scheduled, 0, 4)]
    lines = [line for line in out.splitlines() if "job_" in line]
    assert [next(w for w in want if w in line) for line in lines] == want
    assert "due in" in out
    assert not out.lstrip().startswith("{")


def test_ls_priorities_p0_first_then_lower(capsys, redis_client, redis_url):
    load_scenario(redis_client, "healthy", priorities=3, size=SIZE, seed=22, now_ms=wall_ms())
    k = ReliableListKeys("email")
    p0 = redis_client.llen(k.ready_priority(0))
    assert 0 < p0 < 60
    limit = p0 + 5  # crosses into p1
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--limit", str(limit))
    want = []
    for p in range(3):
        want += [(_s(x), f"p{p}") for x in reversed(redis_client.lrange(k.ready_priority(p), 0, -1))]
    assert [(j["id"], j["meta"]["priority"]) for j in doc["jobs"]] == want[:limit]


def test_ls_sharded_merges_shards_in_serving_order(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "dlq-spike", shards=4, size=SIZE, seed=23, now_ms=wall_ms())
    tags = shard_tags("email", 4)
    # scheduled: the globally earliest due, from every shard
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "scheduled", "--limit", "12")
    everything = sorted(int(sc) for t in tags
                        for _, sc in redis_client.zrange(ReliableListKeys(t).scheduled, 0, -1, withscores=True))
    assert [j["score"] for j in doc["jobs"]] == everything[:12]
    for j in doc["jobs"]:
        assert j["shard"] == truth.tag_of(j["id"])
    assert len({j["shard"] for j in doc["jobs"]}) > 1
    # dead: newest dead-lettered first over all shards
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "dead", "--limit", "12")
    dead_times = []
    for t in tags:
        k = ReliableListKeys(t)
        ids = redis_client.lrange(k.dead, 0, -1)
        dead_times += [orjson.loads(raw)["lastAttemptAtEpochMs"] for raw in redis_client.mget(
            [k.job(_s(i)) for i in ids])]
    got = [j["envelope"]["lastAttemptAtEpochMs"] for j in doc["jobs"]]
    assert got == sorted(dead_times, reverse=True)[:12]
    # ready: the longest waiting first
    doc, _ = cli_json(capsys, "--url", redis_url, "ls", "email", "--state", "ready", "--limit", "12")
    assert len(doc["jobs"]) == 12
    assert {j["id"] for j in doc["jobs"]} <= truth.ids_by_state["ready"]
    tails = set()
    for t in tags:
        tail = redis_client.lindex(ReliableListKeys(t).ready, -1)
        if tail is not None:
            tails.add(_s(tail))
    assert doc["jobs"][0]["id"] in tails


def test_ls_malformed_warns_and_carries_on(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=24, malformed=12, now_ms=wall_ms())
    bad_dead = {i for i in truth.malformed_ids if truth.state_of(i) == "dead"}
    code, out, err = cli(capsys, "--url", redis_url, "ls", "email", "--state", "dead", "--limit", "1000",
                         "--json")
    assert code == 0, err
    jobs = json.loads(out)["jobs"]
    assert len(jobs) == len(truth.ids_by_state["dead"])
    flagged = {j["id"] for j in jobs if j["problems"]}
    assert flagged == bad_dead
    for job_id in bad_dead:
        assert f"warning: job {job_id}: malformed envelope" in err
    assert "Traceback" not in err
    # the table shows them too
    code, out, err = cli(capsys, "--url", redis_url, "ls", "email", "--state", "dead", "--limit", "1000")
    assert code == 0 and "malformed" in out


# -- inspect ------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["ready", "scheduled", "processing", "dead"])
def test_inspect_each_state(capsys, redis_client, redis_url, dlq, state):
    truth, _ = dlq
    k = ReliableListKeys("email")
    job_id = sorted(truth.ids_by_state[state])[len(truth.ids_by_state[state]) // 2]
    rec, _ = cli_json(capsys, "--url", redis_url, "inspect", "email", job_id)
    assert rec["id"] == job_id and rec["state"] == state and rec["shard"] == "email"
    assert rec["envelope"]["jobId"] == job_id
    assert rec["raw"] == _s(redis_client.get(k.job(job_id)))
    assert rec["meta"]["payload_key"] == k.job(job_id)
    if state in ("ready", "processing"):
        key = k.ready if state == "ready" else k.processing
        assert rec["position"] == redis_client.llen(key) - 1 - redis_client.lpos(key, job_id)
        assert rec["meta"]["state_key"] == key
    elif state == "dead":
        assert rec["position"] == redis_client.lpos(k.dead, job_id)
        assert rec["meta"]["dead_since_ms"] == rec["envelope"]["lastAttemptAtEpochMs"]
    else:
        assert rec["score"] == int(redis_client.zscore(k.scheduled, job_id))
    if state == "processing":
        assert rec["deadline_ms"] == int(redis_client.zscore(k.deadline, job_id))
    else:
        assert rec["deadline_ms"] is None


def test_inspect_suppressed(capsys, redis_client, redis_url, dlq):
    _, suppressed = dlq
    k = ReliableListKeys("email")
    rec, _ = cli_json(capsys, "--url", redis_url, "inspect", "email", suppressed[0])
    assert rec["state"] == "suppressed"
    assert rec["score"] == int(redis_client.zscore(k.suppressed, suppressed[0]))


def test_inspect_table_shows_state_position_deadline(capsys, redis_client, redis_url, dlq):
    truth, _ = dlq
    job_id = sorted(truth.ids_by_state["processing"])[0]
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", job_id)
    assert code == 0, err
    for word in ("state", "processing", "position", "deadline", "envelope", job_id):
        assert word in out


def test_inspect_sharded_and_priority(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "healthy", shards=4, priorities=3, size=SIZE, seed=25, now_ms=wall_ms())
    job_id = sorted(truth.ids_by_state["ready"])[0]
    rec, _ = cli_json(capsys, "--url", redis_url, "inspect", "email", job_id)
    assert rec["state"] == "ready" and rec["shard"] == truth.tag_of(job_id)
    prio = rec["meta"]["priority"]
    key = ReliableListKeys(rec["shard"]).ready_priority(int(prio[1:]))
    assert rec["meta"]["state_key"] == key
    assert redis_client.lpos(key, job_id) is not None


@pytest.mark.parametrize("kind", ["bad-json", "non-utf8", "missing-fields"])
def test_inspect_malformed_shows_the_raw_value(capsys, redis_client, redis_url, kind):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=26, malformed=12, now_ms=wall_ms())
    job_id = sorted(i for i, kd in truth.malformed_kinds.items() if kd == kind)[0]
    raw = redis_client.get(ReliableListKeys("email").job(job_id))
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", job_id, "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["problems"] and f"warning: job {job_id}:" in err
    assert rec["state"] == truth.state_of(job_id)
    if kind == "non-utf8":
        assert rec["raw"] is None and bytes.fromhex(rec["raw_hex"]) == raw
    else:
        assert rec["raw"] == raw.decode()
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", job_id)
    assert code == 0, err
    if kind == "missing-fields":
        assert "envelope" in out  # parsed JSON, with problems listed
        assert "missing field" in out
    else:
        assert "raw value" in out
        assert job_id in out
        assert "problem" in out


def test_inspect_dangling_id(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    redis_client.lpush(k.dead, "job_ghost")
    rec, err = cli_json(capsys, "--url", redis_url, "inspect", "email", "job_ghost")
    assert rec["state"] == "dead" and rec["position"] == 0
    assert rec["raw"] is None and "dangling" in rec["meta"]["problem"]
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", "job_ghost")
    assert code == 0 and "dangling" in out and "no payload" in out


def test_inspect_orphan_payload(capsys, redis_client, redis_url, dlq):
    k = ReliableListKeys("email")
    redis_client.set(k.job("job_orphan"), orjson.dumps({"jobId": "job_orphan", "jobType": "t",
                                                        "createdAtEpochMs": 1}))
    rec, _ = cli_json(capsys, "--url", redis_url, "inspect", "email", "job_orphan")
    assert rec["state"] is None and "orphan" in rec["meta"]["problem"]


def test_inspect_unknown_job_exits_5(capsys, redis_url, dlq):
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", "job_nope")
    assert code == 5 and out == ""
    assert err.strip() == "jobctl: error: job 'job_nope' not found in queue email"


# -- attempts -----------------------------------------------------------------------


@pytest.mark.parametrize("shards", [None, 4], ids=["plain", "sharded"])
def test_attempts_dead_equals_ground_truth(capsys, redis_client, redis_url, shards):
    truth = load_scenario(redis_client, "dlq-spike", shards=shards, size=SIZE, seed=27, malformed=10,
                          now_ms=wall_ms())
    hist, err = cli_json(capsys, "--url", redis_url, "attempts", "email")
    dead = truth.ids_by_state["dead"]
    assert hist["state"] == "dead" and hist["sampled"] is False
    assert hist["depth"] == hist["read"] == len(dead)
    assert hist["counts"] == {str(a): n for a, n in sorted(truth.attempts_histogram["dead"].items())}
    assert hist["unknown"] == len(truth.malformed_ids & dead) > 0
    assert f"{hist['unknown']} job(s) without a readable attempt field" in err
    assert "sampled" not in err


@pytest.mark.parametrize("state", ["ready", "scheduled", "processing"])
def test_attempts_other_states(capsys, redis_client, redis_url, state):
    truth = load_scenario(redis_client, "scheduler-lag", priorities=2, size=SIZE, seed=28, now_ms=wall_ms())
    hist, _ = cli_json(capsys, "--url", redis_url, "attempts", "email", "--state", state)
    assert hist["counts"] == {str(a): n for a, n in sorted(truth.attempts_histogram[state].items())}


def test_attempts_table(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=31, now_ms=wall_ms())
    code, out, err = cli(capsys, "--url", redis_url, "attempts", "email")
    assert code == 0, err
    assert "email dead: attempts" in out and "sampled" not in out
    rows = {tuple(c.strip() for c in line.split("│")[1:3]) for line in out.splitlines() if "│" in line}
    for attempt, n in truth.attempts_histogram["dead"].items():
        assert (str(attempt), f"{n:,}") in rows


def test_attempt_histogram_samples_beyond_the_bound(redis_client, redis_url, monkeypatch):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=29, now_ms=wall_ms())
    layout = ReliableList(redis_client, QueueConfig(name="email"))
    depth = len(truth.ids_by_state["dead"])
    exact = attempt_histogram(layout, State.DEAD)
    assert not exact.sampled and exact.read == depth
    monkeypatch.setattr(jobctl.attempts, "SAMPLE_WINDOWS", 3)
    monkeypatch.setattr(jobctl.attempts, "SAMPLE_WINDOW", 10)
    hist = attempt_histogram(layout, State.DEAD, exact_bound=50)
    assert depth > 50
    assert hist.sampled and hist.to_json()["sampled"] is True
    assert hist.depth == depth and hist.read == 30 < depth
    assert set(hist.counts) <= set(truth.attempts_histogram["dead"])
    # scaled to the depth (up to rounding per bucket)
    assert abs(sum(hist.counts.values()) + hist.unknown - depth) <= len(hist.counts) + 1


def test_sampled_windows_never_count_a_job_twice(redis_client):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=31, now_ms=wall_ms())
    layout = ReliableList(redis_client, QueueConfig(name="email"))
    dead = truth.ids_by_state["dead"]
    for _ in range(20):
        ids = [r.job_id for b in layout.iter_batches(State.DEAD, batch=1000, sample=(8, 7)) for r in b]
        assert len(ids) == len(set(ids)) == min(8, len(dead) // 7) * 7
        assert set(ids) <= set(dead)


def test_attempts_cli_says_when_it_sampled(capsys, redis_client, redis_url, monkeypatch):
    load_scenario(redis_client, "dlq-spike", size=SIZE, seed=30, now_ms=wall_ms())
    monkeypatch.setattr(jobctl.attempts, "attempt_histogram",
                        functools.partial(jobctl.attempts.attempt_histogram, exact_bound=20))
    code, out, err = cli(capsys, "--url", redis_url, "attempts", "email")
    assert code == 0, err
    assert "histogram sampled from" in err
    assert "(sampled)" in out and "~" in out
    hist, err = cli_json(capsys, "--url", redis_url, "attempts", "email")
    assert hist["sampled"] is True


def test_inspect_table_shows_readable_times_beside_raw_ms(capsys, redis_url, dlq):
    """A dead job's ``dead_since_ms`` reads as a UTC time and an age beside the
    raw ms; ``--json`` keeps the raw ms alone."""
    truth, _ = dlq
    job_id = sorted(truth.ids_by_state["dead"])[0]
    rec, _ = cli_json(capsys, "--url", redis_url, "inspect", "email", job_id)
    raw = rec["meta"]["dead_since_ms"]
    assert isinstance(raw, int)
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", job_id)
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "dead_since_ms" in ln)
    from jobctl.humanize import stamp

    assert f"{raw} ({stamp(raw)}, " in line and " ago)" in line
