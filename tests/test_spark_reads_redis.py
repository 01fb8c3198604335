"""Spark reads a queue's dead jobs straight from Redis (the ``jobctl`` data
source): the same rows as an export of the same queue, one partition per
shard tag."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

from helpers import cli, queues_toml, wall_ms, write_config  # noqa: E402
from jobctl.config import QueueConfig  # noqa: E402
from jobctl_fixtures.scenarios import load_scenario  # noqa: E402

SHARDED = QueueConfig(name="email", layout="reliable-list", tag="email", shards=4)


def test_the_data_source_reads_what_an_export_writes(spark, redis_client, redis_url, tmp_path, capsys):
    from jobctl.analyze.redis_source import JobctlSource, queue_option

    truth = load_scenario(redis_client, "dlq-spike", queue="email", shards=4, size=200, seed=9, now_ms=wall_ms())
    redis_client.rpush("queue:{email:02}:dead", "ghost")  # an id without payload: a row too, flagged
    spark.dataSource.register(JobctlSource)
    df = spark.read.format("jobctl").option("url", redis_url).option("queue", queue_option(SHARDED)).load()
    assert df.rdd.getNumPartitions() == 4
    cols = ("queue", "shard", "state", "job_id", "position", "job_type", "last_error_code", "malformed",
            "payload_sha1", "created_at")
    got = sorted(tuple(r) for r in df.select(*cols).collect())
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 4}))
    code, _, err = cli(capsys, "--url", redis_url, "--config", cfg, "export", "email", "--out", str(tmp_path / "x"))
    assert code == 0, err
    exported = spark.read.parquet(str(tmp_path / "x"))
    assert sorted(tuple(r) for r in exported.select(*cols).collect()) == got
    assert len(got) == truth.expected["dead"] + 1
    assert {r[3] for r in got} == truth.ids_by_state["dead"] | {"ghost"}


def test_analyze_from_redis_reports_what_export_then_analyze_reports(spark, redis_client, redis_url, tmp_path,
                                                                      capsys):
    import json

    load_scenario(redis_client, "dlq-spike", queue="email", shards=4, size=300, seed=10, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 4}))
    base = ["--url", redis_url, "--config", cfg]
    code, _, err = cli(capsys, *base, "export", "email", "--out", str(tmp_path / "x"))
    assert code == 0, err
    code, _, err = cli(capsys, *base, "analyze", str(tmp_path / "x"), "--out", str(tmp_path / "a"), "--json")
    assert code == 0, err
    code, _, err = cli(capsys, *base, "analyze", "--from-redis", "email", "--out", str(tmp_path / "b"), "--json")
    assert code == 0, err
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    for key in ("rows", "by_state", "by_type_code", "by_tenant", "classes", "fingerprints", "attempts",
                "duplicate_entries"):
        assert a[key] == b[key], key
    assert b["export"]["format"] == "redis" and b["redrive"]["planned"] == a["redrive"]["planned"] > 0

    def plan(d):
        return sorted((r["id"], r["payload_sha1"]) for r in map(json.loads, (tmp_path / d / "redrive-plan.jsonl")
                                                                     .read_text().splitlines()))
    assert plan("a") == plan("b")
    code, _, err = cli(capsys, *base, "redrive", "email", "--plan", str(tmp_path / "b" / "redrive-plan.jsonl"),
                       "--yes")
    assert code == 0, err


def test_analyze_takes_one_source(redis_url, tmp_path, capsys):
    code, out, err = cli(capsys, "--url", redis_url, "analyze", str(tmp_path), "--from-redis", "q", "--out",
                         str(tmp_path / "r"))
    assert code == 2 and out == "" and err.count("\n") == 1, err
