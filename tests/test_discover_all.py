"""``jobctl discover`` on a keyspace holding every layout at once, sharded
tags and priority lists included, next to unrelated keys and decoys named
like queues: it finds every queue, with its evidence, and nothing else; its
``--write-config`` catalogue loads and every queue's status reads cleanly."""

from __future__ import annotations

import json

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.config import load_config
from jobctl.discovery import catalogue_toml, discover, recognizers
from jobctl.keys import DelayedEventsKeys, ReliableListKeys, StreamGroupKeys
from jobctl_fixtures.layouts import ADAPTERS
from jobctl_fixtures.layouts.delay_zset import RedissonDelayedQueueWriter
from jobctl_fixtures.layouts.delayed_events import Dispatcher, Producer
from jobctl_fixtures.layouts.stream_group import StreamProducer
from jobctl_fixtures.scenarios import load_scenario
from helpers import wall_ms

SIZE = 40

#: queue name -> (layout, tag, shards, priorities, options that must be found)
EXPECTED = {
    "email": ("reliable-list", "email", 2, None, {}),
    "webhooks": ("reliable-list", "webhooks", None, 3, {}),
    "orders": ("stream-group", "orders", None, None, {}),
    "billing": ("stream-group", "billing", 2, None, {"group": "payers"}),
    "audit": ("stream-group", "audit", None, None, {"dead": "stream"}),
    "mail": ("hash-job", "mail", None, None, {}),
    "jobs": ("json-list", "jobs", None, None, {}),
    "delayed_events": ("delayed-events", None, None, None, {}),
    "de_delayed_events": ("delayed-events", None, None, None, {"prefix": "de_"}),
    "delay_queue": ("delay-zset", "delay_queue", None, None, {}),
    "reminders": ("redisson-delayed-queue", "reminders", None, None, {}),
}

DECOYS = {
    "queue:{fake}:ready": "a list named like a ready list, holding text",
    "queue:{fake2}:dead": "a list named like a DLQ, holding JSON documents",
    "leaderboard": "a zset of unrelated scores",
    "delay_stats": "a zset named like a delay queue, scored in seconds",
    "user:1000": "a plain hash",
    "events": "a hash named like delayed-events' envelopes, without the zset",
    "stream:{metrics}:jobs": "a stream named like a job stream, with no consumer group",
    "clicks": "a stream",
    "celery": "a list",
    "session:{email}:abc": "a string",
    "delayed_events_lock": "a string named like the dispatcher lock, alone",
}


@pytest.fixture
def keyspace(redis_client):
    c, now = redis_client, wall_ms()
    load_scenario(c, "healthy", queue="email", shards=2, size=SIZE, seed=1, now_ms=now)
    load_scenario(c, "dlq-spike", queue="webhooks", priorities=3, size=SIZE, seed=2, now_ms=now)
    ADAPTERS["stream-group"].load(c, "dlq-spike", queue="orders", size=SIZE, seed=3, now_ms=now)
    for tag in ("billing:00", "billing:01"):
        p = StreamProducer(c, StreamGroupKeys(tag), group="payers")
        p.ensure_group()
        p.enqueue({"jobId": f"{tag}-1", "jobType": "invoice.email.send", "createdAtEpochMs": now})
    audit = StreamGroupKeys("audit")
    StreamProducer(c, audit).ensure_group()
    c.xadd(audit.dead_stream, {"jobId": "a1", "payload": "{}"})
    ADAPTERS["hash-job"].load(c, "healthy", queue="mail", size=SIZE, seed=4, now_ms=now)
    ADAPTERS["json-list"].load(c, "healthy", queue="jobs", size=SIZE, seed=5, now_ms=now)
    ADAPTERS["delayed-events"].load(c, "healthy", queue="events", size=SIZE, seed=6, now_ms=now)
    de = DelayedEventsKeys("de_")
    Producer(c, de).enqueue("com.acme.Ping", "1", {}, -5)
    Dispatcher(c, de).dispatch()
    ADAPTERS["delay-zset"].load(c, "healthy", queue="delay_queue", size=SIZE, seed=7, now_ms=now)
    w = RedissonDelayedQueueWriter(c, "reminders")
    w.offer(b'"call back"', now - 1000)
    w.offer(b'"later"', now + 3_600_000)
    w.transfer(now)
    # decoys
    c.rpush("queue:{fake}:ready", "hello world", "another line of text")
    c.rpush("queue:{fake2}:dead", orjson.dumps({"error": "boom", "at": 1}))
    c.zadd("leaderboard", {"ann": 10, "bob": 42})
    c.zadd("delay_stats", {"p50": 1_795_000_000, "p99": 1_795_000_100})
    c.hset("user:1000", mapping={"name": "ann"})
    c.hset("events", "x", "y")
    c.xadd("stream:{metrics}:jobs", {"jobId": "m1"})
    c.xadd("clicks", {"x": "1"})
    c.rpush("celery", "x")
    c.set("session:{email}:abc", "x")
    c.set("delayed_events_lock", "value")  # delayed_events exists: claimed by that queue
    return now


def test_finds_every_queue_and_nothing_else(redis_client, keyspace):
    d = discover(redis_client)
    assert d.complete
    found = {q.name: (q.layout, q.tag, q.shards, q.priorities) for q in d.queues}
    assert found == {name: e[:4] for name, e in EXPECTED.items()}
    for q in d.queues:
        for key, value in EXPECTED[q.name][4].items():
            assert q.options.get(key) == value, (q.name, key, q.options)
        assert q.discovered and d.evidence[q.name]
    claimed = {k for ev in d.evidence.values() for k in ev}
    assert not claimed & set(DECOYS) - {"delayed_events_lock", "events"}
    assert "queue:{fake}:ready" in d.rejected and "queue:{fake2}:dead" in d.rejected
    # evidence: the keys a queue is made of
    assert StreamGroupKeys("orders").scheduled in d.evidence["orders"]
    assert StreamGroupKeys("orders").dead in d.evidence["orders"]
    assert StreamGroupKeys("billing:01").stream in d.evidence["billing"]
    assert ReliableListKeys("webhooks").ready_priority(2) in d.evidence["webhooks"]
    assert "redisson_delay_queue_timeout:{reminders}" in d.evidence["reminders"]
    assert "reminders" in d.evidence["reminders"]
    assert {"delayed_events", "events", "delayed_events_lock"} <= set(d.evidence["delayed_events"])
    assert any(k in d.evidence["delayed_events"] for k in ("paymentstatuscheck", "clientnotification"))
    assert d.queues[[q.name for q in d.queues].index("de_delayed_events")].options["event_lists"] == ["de_ping"]


def test_recognizers_order_generic_last():
    names = [n for n, _ in recognizers()]
    assert names[-1] == "reliable-list"
    assert {"stream-group", "delayed-events", "delay-zset", "hash-job", "json-list"} <= set(names)


def test_discover_json_and_table(capsys, redis_url, keyspace):
    assert main(["--url", redis_url, "discover", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {q["queue"]: q for q in doc["queues"]}
    assert set(rows) == set(EXPECTED)
    assert rows["billing"]["options"] == {"group": "payers"} and rows["billing"]["shards"] == 2
    assert rows["orders"]["evidence"] == sorted(rows["orders"]["evidence"])
    assert main(["--url", redis_url, "discover"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == len(EXPECTED)
    assert any(line.startswith("billing\tstream-group\ttag=billing shards=2 group=payers\t(") for line in lines)
    assert any(line.startswith("delayed_events\tdelayed-events\t-") for line in lines)
    assert f"{len(EXPECTED)} queue(s)" in err


def test_write_config_round_trip(capsys, redis_client, redis_url, keyspace, tmp_path):
    path = tmp_path / "found.toml"
    assert main(["--url", redis_url, "discover", "--write-config", str(path)]) == 0
    _, err = capsys.readouterr()
    assert f"wrote {len(EXPECTED)} queue(s)" in err
    cfg = load_config(path)
    assert set(cfg.queues) == set(EXPECTED)
    assert cfg.queues["billing"].options == {"group": "payers"} and cfg.queues["billing"].shards == 2
    assert cfg.queues["webhooks"].priorities == 3
    assert cfg.queues["de_delayed_events"].options == {"prefix": "de_", "event_lists": ["de_ping"]}
    # the catalogue drives every command
    code = main(["--url", redis_url, "--config", str(path), "status", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["catalogue"] == "config"
    by_name = {q["queue"]: q for q in doc["queues"]}
    assert all(not q["errors"] for q in by_name.values())
    assert by_name["orders"]["dead"] > 0 and by_name["reminders"]["ready"] == 1
    assert by_name["delay_queue"]["scheduled"] > 0 and by_name["jobs"]["ready"] > 0
    # it never overwrites a file
    assert main(["--url", redis_url, "discover", "--write-config", str(path)]) == 2
    assert "exists" in capsys.readouterr().err


def test_catalogue_toml_quotes_names_and_values(tmp_path):
    from jobctl.config import QueueConfig

    text = catalogue_toml([QueueConfig(name='we"ird:00', layout="delayed-events", tag="a b",
                                       options={"prefix": "x\\y", "event_lists": ["p", "q"], "max_attempts": 3})],
                          header="line one\nline two")
    path = tmp_path / "c.toml"
    path.write_text(text)
    q = load_config(path).queues['we"ird:00']
    assert (q.layout, q.tag) == ("delayed-events", "a b")
    assert q.options == {"prefix": "x\\y", "event_lists": ["p", "q"], "max_attempts": 3}
    assert text.startswith("# line one\n# line two\n")


def test_empty_keyspace_finds_nothing(redis_client):
    d = discover(redis_client)
    assert d.queues == [] and d.complete and d.scanned == 0
