"""Discovery of reliable-list queues without a catalogue: a bounded SCAN with
TYPE checks (jobctl.discovery), and ``jobctl discover``."""

from __future__ import annotations

import json

import pytest

from jobctl.discovery import DEFAULT_SCAN_LIMIT, discover_reliable_lists
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, wall_ms


def by_name(discovery) -> dict:
    return {q.name: q for q in discovery.queues}


@pytest.fixture
def keyspace(redis_client):
    """Three loaded queues plus decoys."""
    now = wall_ms()
    load_scenario(redis_client, "healthy", queue="email", shards=4, size=200, seed=1, now_ms=now)
    load_scenario(redis_client, "dlq-spike", queue="webhooks", priorities=3, size=200, seed=2, now_ms=now)
    load_scenario(redis_client, "stuck-workers", queue="reports", size=100, seed=3, now_ms=now)
    # right name, wrong type: no queue
    redis_client.hset(ReliableListKeys("imposter").ready, "a", "b")
    redis_client.set(ReliableListKeys("imposter").scheduled, "x")
    # a wrong-typed key next to a real queue's good ones: rejected, queue kept
    redis_client.set(ReliableListKeys("reports").suppressed, "not a zset")
    # unrelated keys
    redis_client.rpush("queue:plain-no-tag:ready", "x")         # no hash tag
    redis_client.rpush("queue:{other}:inbox", "x")              # not a state key
    redis_client.set("session:{email}:abc", "x")
    redis_client.rpush("celery", "x")
    redis_client.set(ReliableListKeys("lonely").job("job_1"), "{}")  # payload only: not a queue
    return now


def test_finds_groups_and_detects(redis_client, keyspace):
    d = discover_reliable_lists(redis_client)
    assert d.complete and d.scanned > 0
    queues = by_name(d)
    assert sorted(queues) == ["email", "reports", "webhooks"]
    email = queues["email"]
    assert (email.tag, email.shards, email.priorities, email.discovered) == ("email", 4, None, True)
    hooks = queues["webhooks"]
    assert (hooks.tag, hooks.shards, hooks.priorities) == ("webhooks", None, 3)
    reports = queues["reports"]
    assert (reports.shards, reports.priorities) == (None, None)
    assert sorted(d.rejected) == sorted([ReliableListKeys("imposter").ready, ReliableListKeys("imposter").scheduled,
                                         ReliableListKeys("reports").suppressed])
    # job ids (hence shards) depend on the clock: compare with the keys that exist
    existing = {key for tag in shard_tags("email", 4) for key in ReliableListKeys(tag).fixed_keys
                if redis_client.exists(key)}
    assert len(existing) > 4 and existing <= set(d.evidence["email"])
    assert all(k.startswith("queue:{email:0") for k in d.evidence["email"])
    assert ReliableListKeys("reports").suppressed not in d.evidence["reports"]
    assert all(k.startswith("queue:{webhooks}:") for k in d.evidence["webhooks"])


def test_one_key_of_the_right_type_is_enough(redis_client):
    redis_client.zadd(ReliableListKeys("delays").scheduled, {"job_1": 1})
    redis_client.rpush(ReliableListKeys("billing:07").dead, "job_2")
    queues = by_name(discover_reliable_lists(redis_client))
    assert sorted(queues) == ["billing", "delays"]
    assert queues["billing"].shards == 8  # the highest shard seen fixes the count


def test_mixed_tags_are_separate_queues(redis_client):
    redis_client.rpush(ReliableListKeys("email").ready, "a")
    redis_client.rpush(ReliableListKeys("email:00").ready, "b")
    redis_client.rpush(ReliableListKeys("email:01").ready, "c")
    queues = by_name(discover_reliable_lists(redis_client))
    assert sorted(queues) == ["email", "email:00", "email:01"]
    assert all(q.shards is None for q in queues.values())


def test_priority_count_from_the_highest_list(redis_client):
    redis_client.rpush(ReliableListKeys("jobs").ready_priority(0), "a")
    redis_client.rpush(ReliableListKeys("jobs").ready_priority(4), "b")
    assert by_name(discover_reliable_lists(redis_client))["jobs"].priorities == 5


def test_empty_keyspace(redis_client):
    d = discover_reliable_lists(redis_client)
    assert d.queues == [] and d.complete and d.scanned == 0


def test_scan_is_bounded(redis_client):
    pipe = redis_client.pipeline(transaction=False)
    for i in range(3000):
        pipe.rpush(ReliableListKeys(f"q{i:04d}").dead, "x")
    pipe.execute()
    d = discover_reliable_lists(redis_client, limit=500, count=100)
    assert not d.complete
    assert 500 <= d.scanned < 1000  # stops after the page that crossed the bound
    assert 0 < len(d.queues) <= d.scanned
    full = discover_reliable_lists(redis_client, count=1000)
    assert full.complete and len(full.queues) == 3000
    assert full.scanned >= 3000  # SCAN may repeat a key while the server rehashes
    assert DEFAULT_SCAN_LIMIT == 200_000


def test_discover_command_json(capsys, redis_url, keyspace):
    code, out, err = cli(capsys, "--url", redis_url, "discover", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["complete"] is True and doc["scanned"] > 0
    rows = {q["queue"]: q for q in doc["queues"]}
    assert sorted(rows) == ["email", "reports", "webhooks"]
    assert rows["email"]["shards"] == 4 and rows["webhooks"]["priorities"] == 3
    assert rows["email"]["layout"] == "reliable-list" and rows["email"]["evidence"]
    assert ReliableListKeys("imposter").ready in doc["rejected"]


def test_discover_command_table(capsys, redis_url, keyspace):
    code, out, err = cli(capsys, "--url", redis_url, "discover")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("email\treliable-list\ttag=email shards=4")
    assert any(line.startswith("webhooks\treliable-list\ttag=webhooks priorities=3") for line in lines)
    assert "3 queue(s)" in err


def test_discover_limit_option(capsys, redis_client, redis_url):
    pipe = redis_client.pipeline(transaction=False)
    for i in range(2500):
        pipe.rpush(ReliableListKeys(f"q{i:04d}").ready, "x")
    pipe.execute()
    code, out, err = cli(capsys, "--url", redis_url, "discover", "--json", "--limit", "1000")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["complete"] is False and doc["scanned"] < 2500
    code, out, err = cli(capsys, "--url", redis_url, "discover", "--limit", "10")
    assert code == 2  # below the option's minimum


def test_status_uses_discovery_and_says_so(capsys, redis_url, keyspace):
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    # the wrong-typed suppressed key of "reports" did not hide the queue: status reports it
    assert code == 6, err
    assert "error: queue reports: key queue:{reports}:jobctl:suppressed holds the wrong Redis type" in err
    assert "no queue catalogue: discovered 3 reliable-list queue(s) by SCAN of" in err
    doc = json.loads(out)
    assert doc["catalogue"] == "discovered"
    assert [q["queue"] for q in doc["queues"]] == ["email", "reports", "webhooks"]
    assert {q["queue"]: q["shards"] for q in doc["queues"]} == {"email": 4, "reports": 1, "webhooks": 1}
