"""The fixtures (jobctl_fixtures) against a real server: the protocol scripts,
the scenario loader's ground truth, and the live pool."""

from __future__ import annotations

import time

import pytest
import redis

from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.model import parse_envelope
from jobctl_fixtures.__main__ import main as fixtures_main
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.ids import java_string_hash, new_job_id, shard_index
from jobctl_fixtures.live import LivePool
from jobctl_fixtures.protocol import SCRIPT_NAMES, Producer, Scheduler, Worker, script_source
from jobctl_fixtures.scenarios import DLQ_SPIKE_DEAD, SCENARIOS, apportion, load_scenario
from jobctl_fixtures.truth import EXPECTED_FIELDS, GroundTruth
from jobctl_fixtures.verify import diff_truth

NOW = 1_782_972_000_000  # a fixed end of simulated time (epoch ms)
MIN = 60_000
HOUR = 60 * MIN


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _ids(client, key: str) -> list[str]:
    return [_s(i) for i in client.lrange(key, 0, -1)]


# -- protocol ------------------------------------------------------------------


def test_every_script_has_a_header():
    for name in SCRIPT_NAMES:
        text = script_source(name)
        assert "KEYS[1]" in text and "ARGV[1]" in text and "Returns" in text, name


def test_ids_and_shard_hash():
    # Java: "hello".hashCode() == 99162322; negative hashes use floorMod.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("job_01JZ4SZ3MXWZK7WQR0STV9Q3WZ") == -192938938
    assert shard_index("job_01JZ4SZ3MXWZK7WQR0STV9Q3WZ", 64) == (-192938938) % 64
    assert shard_index("anything", None) == 0
    import random
    a = new_job_id(NOW, random.Random(1))
    assert a.startswith("job_01") and len(a) == 30
    assert new_job_id(NOW, random.Random(1)) == a
    assert new_job_id(NOW - 1, random.Random(1)) < a  # ids sort by creation time


def test_enqueue_claim_ack(redis_client):
    import random
    k = ReliableListKeys("email")
    producer = Producer(redis_client, "email")
    worker = Worker(redis_client, "email", visibility_ms=30_000)
    env = new_envelope("job_a", "invoice.email.send", "tenant_1", NOW, random.Random(0))
    assert producer.enqueue(env, now=NOW) == "READY"
    with pytest.raises(redis.ResponseError, match="DUPLICATE_JOB"):
        producer.enqueue(env, now=NOW)
    assert redis_client.ttl(k.job("job_a")) == -1  # no TTL unless asked for
    job = worker.claim(NOW + 5)
    assert job.job_id == "job_a" and job.envelope == env and job.deadline_ms == NOW + 5 + 30_000
    assert _ids(redis_client, k.processing) == ["job_a"]
    assert redis_client.zscore(k.deadline, "job_a") == NOW + 30_005
    assert worker.claim(NOW) is None
    assert worker.ack("job_a") is True
    assert worker.ack("job_a") is False
    assert redis_client.exists(k.ready, k.processing, k.deadline, k.job("job_a")) == 0


def test_payload_ttl_is_optional(redis_client):
    import random
    producer = Producer(redis_client, "email", payload_ttl_s=3600)
    env = new_envelope("job_t", "webhook.deliver", "tenant_2", NOW, random.Random(0))
    producer.enqueue(env, now=NOW)
    assert 0 < redis_client.ttl(ReliableListKeys("email").job("job_t")) <= 3600


def test_delayed_job_retry_and_dead_letter(redis_client):
    import random
    k = ReliableListKeys("email")
    rng = random.Random(0)
    producer = Producer(redis_client, "email")
    worker = Worker(redis_client, "email", rng=rng)
    scheduler = Scheduler(redis_client, "email")
    env = new_envelope("job_d", "report.generate", "tenant_3", NOW, rng, not_before_ms=NOW + MIN)
    assert producer.enqueue(env, now=NOW) == "SCHEDULED"
    assert redis_client.zscore(k.scheduled, "job_d") == NOW + MIN
    assert scheduler.promote("job_d", NOW) == "NOT_DUE"
    assert scheduler.promote_due(NOW + MIN) == 1
    assert _ids(redis_client, k.ready) == ["job_d"]

    # report.generate allows 3 attempts: two retries, then dead.
    for attempt in (1, 2):
        job = worker.claim(NOW + attempt * HOUR)
        assert worker.fail(job, "HTTP_503", now=NOW + attempt * HOUR) == "RETRY_SCHEDULED"
        stored = parse_envelope(redis_client.get(k.job("job_d")))
        assert stored.attempt == attempt and stored.last_error_code == "HTTP_503"
        assert stored.last_attempt_ms == NOW + attempt * HOUR
        due = redis_client.zscore(k.scheduled, "job_d")
        assert due == stored.next_attempt_ms
        backoff = 1000 * 2 ** attempt  # seed 000 s.10: base * 2^attempt, + <= 25 % jitter
        assert backoff <= due - (NOW + attempt * HOUR) <= backoff * 1.25
        assert redis_client.zcard(k.deadline) == 0 and redis_client.llen(k.processing) == 0
        assert scheduler.promote("job_d", int(due)) == "MOVED"
    job = worker.claim(NOW + 3 * HOUR)
    assert worker.fail(job, "HTTP_503", now=NOW + 3 * HOUR) == "DEAD_LETTERED"
    stored = parse_envelope(redis_client.get(k.job("job_d")))
    assert stored.attempt == 3 and stored.next_attempt_ms is None
    assert _ids(redis_client, k.dead) == ["job_d"]
    assert redis_client.exists(k.processing, k.deadline, k.scheduled, k.ready) == 0


def test_permanent_failure_and_malformed_payload_go_dead(redis_client):
    import random
    k = ReliableListKeys("email")
    producer = Producer(redis_client, "email")
    worker = Worker(redis_client, "email")
    producer.enqueue(new_envelope("job_p", "webhook.deliver", "tenant_1", NOW, random.Random(0)), now=NOW)
    producer.enqueue(b"\xff{not json", job_id="job_m", now=NOW)
    job = worker.claim(NOW)
    assert job.job_id == "job_p"
    assert worker.fail(job, "HTTP_400", now=NOW) == "DEAD_LETTERED"
    job = worker.claim(NOW)
    assert job.job_id == "job_m" and job.envelope is None and job.problem == "not UTF-8"
    assert worker.fail(job, "SERIALIZATION_ERROR", now=NOW) == "DEAD_LETTERED"
    assert redis_client.get(k.job("job_m")) == b"\xff{not json"  # kept byte for byte
    assert _ids(redis_client, k.dead) == ["job_m", "job_p"]


def test_priorities_are_polled_in_order(redis_client):
    import random
    rng = random.Random(0)
    k = ReliableListKeys("email")
    producer = Producer(redis_client, "email", priorities=3)
    worker = Worker(redis_client, "email", priorities=3)
    for n, prio in enumerate((2, 1, 0, 2)):
        producer.enqueue(new_envelope(f"job_{n}", "webhook.deliver", "tenant_1", NOW + n, rng,
                                      priority=prio), now=NOW + n)
    assert redis_client.exists(k.ready) == 0
    assert [redis_client.llen(k.ready_priority(p)) for p in range(3)] == [1, 1, 2]
    order = [worker.claim(NOW).job_id for _ in range(4)]
    assert order == ["job_2", "job_1", "job_0", "job_3"]
    assert worker.claim(NOW, block_s=0.05) is None


# -- scenarios -----------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_truth_matches_redis(redis_client, scenario):
    truth = load_scenario(redis_client, scenario, size=1000, seed=5, now_ms=NOW, malformed=6)
    assert set(truth.expected) == set(EXPECTED_FIELDS)
    assert diff_truth(redis_client, truth) == []
    assert truth.total == 1000 and truth.layout == "reliable-list"
    assert len(truth.malformed_ids) == 6
    assert sum(1 for i in truth.malformed_ids if i in truth.ids_by_state["dead"]) == 3
    e = truth.expected
    assert e["suppressed"] == 0 and e["ready_by_priority"] == {}
    assert e["ready"] + e["scheduled"] + e["processing"] + e["dead"] == 1000
    assert e["oldest_ready_since_ms"] is not None and e["next_due_ms"] > NOW + 10 * MIN
    if scenario == "healthy":
        assert e["stuck"] == 0 and e["scheduled_overdue"] == 0 and e["dead"] < 100
        assert NOW - e["oldest_ready_since_ms"] <= 5 * MIN
    elif scenario == "dlq-spike":
        assert e["dead"] >= 250
    elif scenario == "stuck-workers":
        assert e["stuck"] >= 200 and e["processing"] - e["stuck"] >= 50
    elif scenario == "scheduler-lag":
        assert e["scheduled_overdue"] >= 400
        assert NOW - e["oldest_overdue_due_ms"] >= 30 * MIN
    if scenario != "scheduler-lag":
        assert e["scheduled_overdue"] == 0 and e["oldest_overdue_due_ms"] is None


def test_dlq_spike_has_the_planted_distribution(redis_client):
    truth = load_scenario(redis_client, "dlq-spike", size=2000, seed=1, now_ms=NOW)
    n_dead = truth.expected["dead"]
    counts = apportion(n_dead, [w for *_, w in DLQ_SPIKE_DEAD])
    want_breakdown: dict = {}
    want_tenants: dict = {}
    for (jt, code, tenant, _), n in zip(DLQ_SPIKE_DEAD, counts):
        want_breakdown[(jt, code)] = want_breakdown.get((jt, code), 0) + n
        want_tenants[tenant] = want_tenants.get(tenant, 0) + n
    assert truth.dead_breakdown == want_breakdown
    assert truth.dead_by_tenant == want_tenants
    assert {c for _, c in truth.dead_breakdown} == {
        "HTTP_503", "HTTP_429", "HTTP_400", "DEADLINE_EXCEEDED", "SERIALIZATION_ERROR"}
    # Retries exhausted: a webhook 503 dead letter made all its attempts.
    k = ReliableListKeys("email")
    for job_id in _ids(redis_client, k.dead)[:200]:
        env = parse_envelope(redis_client.get(k.job(job_id)))
        if env.last_error_code in ("HTTP_503", "HTTP_429"):
            assert env.attempt == env.max_attempts
        elif env.last_error_code in ("HTTP_400", "SERIALIZATION_ERROR"):
            assert env.attempt <= 2
        elif env.last_error_code == "DEADLINE_EXCEEDED":
            assert env.deadline_ms < env.last_attempt_ms
    assert diff_truth(redis_client, truth) == []


def test_sharded_queue_spreads_by_job_id_hash(redis_client):
    truth = load_scenario(redis_client, "stuck-workers", queue="email", shards=4, size=2000,
                          seed=2, now_ms=NOW, malformed=4)
    assert truth.tags == shard_tags("email", 4) == ["email:00", "email:01", "email:02", "email:03"]
    assert diff_truth(redis_client, truth) == []
    assert redis_client.exists(*ReliableListKeys("email").fixed_keys) == 0
    for tag in truth.tags:
        k = ReliableListKeys(tag)
        counts = truth.counts_by_tag[tag]
        assert 300 <= sum(counts.values()) <= 700  # roughly even
        assert redis_client.llen(k.ready) == counts["ready"] > 0
        assert redis_client.llen(k.processing) == counts["processing"] > 0
        assert redis_client.zcard(k.scheduled) == counts["scheduled"] > 0
        assert redis_client.llen(k.dead) == counts["dead"] > 0
        for job_id in _ids(redis_client, k.ready):
            assert shard_index(job_id, 4) == truth.tags.index(tag)


def test_priorities_and_shards(redis_client):
    truth = load_scenario(redis_client, "healthy", shards=2, priorities=3, size=1500, seed=4,
                          now_ms=NOW)
    assert diff_truth(redis_client, truth) == []
    by_p = truth.expected["ready_by_priority"]
    assert set(by_p) == {"p0", "p1", "p2"} and sum(by_p.values()) == truth.expected["ready"]
    assert by_p["p0"] < by_p["p2"]  # lower priorities are more common
    for tag in truth.tags:
        assert redis_client.exists(ReliableListKeys(tag).ready) == 0


def test_deterministic_given_seed(redis_client):
    a = load_scenario(redis_client, "dlq-spike", queue="a", size=1000, seed=9, now_ms=NOW, malformed=3)
    b = load_scenario(redis_client, "dlq-spike", queue="b", size=1000, seed=9, now_ms=NOW, malformed=3)
    c = load_scenario(redis_client, "dlq-spike", queue="c", size=1000, seed=10, now_ms=NOW)
    assert a.ids_by_state == b.ids_by_state and a.expected == b.expected
    assert a.attempts_histogram == b.attempts_histogram and a.malformed_kinds == b.malformed_kinds
    for state in ("ready", "dead"):
        assert _ids(redis_client, ReliableListKeys("a").ready if state == "ready" else
                    ReliableListKeys("a").dead) == \
            _ids(redis_client, ReliableListKeys("b").ready if state == "ready" else
                 ReliableListKeys("b").dead)
    for job_id in sorted(a.ids_by_state["dead"])[:50]:
        assert redis_client.get(ReliableListKeys("a").job(job_id)) == \
            redis_client.get(ReliableListKeys("b").job(job_id))
    assert not (a.ids_by_state["ready"] & c.ids_by_state["ready"])


def test_wall_clock_margins(redis_client):
    """With the default clock, classifications stay put for minutes."""
    truth = load_scenario(redis_client, "scheduler-lag", size=1000, seed=3)
    assert abs(truth.now_ms - time.time() * 1000) < 60_000
    later = truth.now_ms + 50_000  # 50 s later nothing has changed state
    k = ReliableListKeys("email")
    assert redis_client.zcount(k.scheduled, "-inf", later) == truth.expected["scheduled_overdue"]
    assert redis_client.zcount(k.deadline, "-inf", f"({later}") == truth.expected["stuck"]
    assert diff_truth(redis_client, truth) == []


def test_refuses_a_queue_in_use_unless_replace(redis_client):
    load_scenario(redis_client, "healthy", size=1000, seed=1, now_ms=NOW)
    with pytest.raises(ValueError, match="already exist"):
        load_scenario(redis_client, "healthy", size=1000, seed=1, now_ms=NOW)
    truth = load_scenario(redis_client, "stuck-workers", size=1000, seed=1, now_ms=NOW, replace=True)
    assert diff_truth(redis_client, truth) == []
    with pytest.raises(ValueError, match="unknown scenario"):
        load_scenario(redis_client, "nope")


def test_truth_json_round_trip(redis_client, tmp_path):
    truth = load_scenario(redis_client, "dlq-spike", shards=2, priorities=2, size=1000, seed=1,
                          now_ms=NOW, malformed=3)
    path = tmp_path / "truth.json"
    truth.save(path)
    again = GroundTruth.load(path)
    assert again == truth
    assert again.tag_of(next(iter(truth.ids_by_state["dead"]))) in truth.tags


def test_cli_load(redis_url, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert fixtures_main(["load", "--url", redis_url, "--scenario", "healthy", "--size", "1000",
                          "--shards", "2", "--seed", "3", "--truth", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("loaded healthy into email (2 shards): 1000 jobs") and "\n" not in line
    truth = GroundTruth.load(out)
    with redis.Redis.from_url(redis_url) as client:
        assert diff_truth(client, truth) == []
    assert fixtures_main(["load", "--url", redis_url, "--scenario", "healthy", "--shards", "2"]) == 2


@pytest.mark.slow
def test_large_load_is_right(redis_client):
    truth = load_scenario(redis_client, "dlq-spike", size=100_000, seed=1, shards=4)
    # its speed is measured in bench/ (a timed assertion here fails on a loaded machine)
    assert diff_truth(redis_client, truth, check_envelopes=False) == []


# -- live pool -------------------------------------------------------------------


def _enough(c) -> bool:
    return c["enqueued"] > 200 and c["claimed"] > 100 and c["acked"] > 50 and c["promoted"] > 0


def test_live_pool_runs_and_stops(redis_client):
    pool = LivePool(redis_client, queue="live", shards=2, priorities=2, rate=400, workers=3,
                    visibility_ms=60_000, seed=1)
    with pool:
        deadline = time.monotonic() + 120  # a hang guard: enough traffic for the checks below
        while not _enough(pool.counters) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.running
    t0 = time.monotonic()
    pool.stop()
    assert time.monotonic() - t0 < 30 and not pool.running  # stops promptly, not after its jobs
    c = pool.counters
    assert c["errors"] == 0, pool.last_error
    assert c["enqueued"] > 200 and c["claimed"] > 100 and c["acked"] > 50
    assert c["promoted"] > 0  # delayed jobs and retries came back

    # Every job enqueued and not acked is in exactly one state key.
    seen: dict[str, str] = {}
    for tag in shard_tags("live", 2):
        k = ReliableListKeys(tag)
        members = {
            "ready": _ids(redis_client, k.ready_priority(0)) + _ids(redis_client, k.ready_priority(1)),
            "processing": _ids(redis_client, k.processing),
            "dead": _ids(redis_client, k.dead),
            "scheduled": [_s(m) for m in redis_client.zrange(k.scheduled, 0, -1)],
        }
        for state, ids in members.items():
            for job_id in ids:
                assert job_id not in seen, (job_id, seen.get(job_id), state)
                seen[job_id] = state
                assert redis_client.exists(k.job(job_id))
        assert set(members["processing"]) == {_s(m) for m in redis_client.zrange(k.deadline, 0, -1)}
    assert len(seen) == c["enqueued"] - c["acked"]
    assert sum(1 for s in seen.values() if s == "processing") == c["crashed"]


def test_live_pool_scheduler_down(redis_client):
    with LivePool(redis_client, queue="lag", scenario="scheduler-lag", rate=300, seed=2) as pool:
        time.sleep(1.0)
    assert pool.counters["promoted"] == 0
    assert redis_client.zcard(ReliableListKeys("lag").scheduled) > 0


def test_simulated_time_is_consistent(redis_client):
    """Stories happen within now - 6 h .. now, and lists are in time order."""
    truth = load_scenario(redis_client, "stuck-workers", size=1000, seed=8, now_ms=NOW)
    k = ReliableListKeys("email")
    for state in ("ready", "scheduled", "processing", "dead"):
        for job_id in truth.ids_by_state[state]:
            env = parse_envelope(redis_client.get(k.job(job_id)))
            assert NOW - 6 * HOUR <= env.created_ms <= NOW
            assert env.last_attempt_ms is None or env.created_ms <= env.last_attempt_ms <= NOW
            if state == "ready":
                assert env.ready_since_ms <= NOW
    # Claim end (right) first: the oldest dead letter and the earliest deadline.
    dead = [parse_envelope(redis_client.get(k.job(i))).last_attempt_ms
            for i in reversed(_ids(redis_client, k.dead))]
    assert dead == sorted(dead)
    deadlines = [redis_client.zscore(k.deadline, i) for i in reversed(_ids(redis_client, k.processing))]
    assert deadlines == sorted(deadlines)
