"""``--read-from replicas`` (and a profile's ``read_from``): status, ls,
inspect, attempts, export and the exporter read a cluster's or a Sentinel
service's replicas, with the same answers as the primary once replication
caught up (``WAIT``); one server has no replicas: one line, exit 2."""

from __future__ import annotations

import json

import pytest
import redis

from helpers import cli, wall_ms, write_config
from jobctl.connection import Target, make_client
from jobctl_fixtures.scenarios import load_scenario

FIELDS = ("ready", "scheduled", "processing", "stuck", "dead", "suppressed")


def _replica_calls(nodes) -> int:
    """Read commands the replica nodes served (INFO commandstats: LLEN, LRANGE, ZCARD, ...)."""
    total = 0
    for node in nodes:
        c = node.client()
        try:
            if c.execute_command("ROLE")[0] not in (b"slave", "slave"):
                continue
            stats = c.info("commandstats")
            total += sum(v["calls"] for k, v in stats.items() if k.split("|")[0].removeprefix("cmdstat_")
                         in ("llen", "lrange", "zcard", "zcount", "zrange", "lindex", "hmget", "hget", "exists"))
        finally:
            c.close()
    return total


def _reset_stats(nodes) -> None:
    for node in nodes:
        c = node.client()
        try:
            c.config_resetstat()
        finally:
            c.close()


def _status(capsys, url, cfg, *flags):
    code, out, err = cli(capsys, "--url", url, "--config", cfg, *flags, "status", "--json")
    assert code == 0, err
    return {q["queue"]: {f: q[f] for f in FIELDS} for q in json.loads(out)["queues"]}


def test_cluster_status_from_replicas_equals_the_primaries(cc, cluster, cluster_url, tmp_path, capsys):
    load_scenario(cc, "dlq-spike", queue="email", shards=8, size=160, seed=4, now_ms=wall_ms())
    for node in cc.get_primaries():
        cc.get_redis_connection(node).execute_command("WAIT", 1, 5000)
    cfg = write_config(tmp_path, '[queues.email]\nlayout = "reliable-list"\ntag = "email"\nshards = 8\n')
    _reset_stats(cluster.nodes)
    primary = _status(capsys, cluster_url, cfg)
    assert _replica_calls(cluster.nodes) == 0
    assert _status(capsys, cluster_url, cfg, "--read-from", "replicas") == primary
    assert _replica_calls(cluster.nodes) > 0, "the reads went to the replicas"
    code, out, err = cli(capsys, "--url", cluster_url, "--config", cfg, "--read-from", "replicas",
                         "ls", "email", "--state", "dead", "--json")
    assert code == 0, err
    code, out, err = cli(capsys, "--url", cluster_url, "--config", cfg, "--read-from", "replicas",
                         "export", "email", "--out", str(tmp_path / "dead"), "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == primary["email"]["dead"]


def test_sentinel_status_from_the_replica_equals_the_primary(sentinel_deployment, tmp_path, capsys):
    url = sentinel_deployment.url
    primary_client = make_client(Target(url, "test"))
    try:
        primary_client.flushall()
        load_scenario(primary_client, "dlq-spike", queue="orders", size=80, seed=5, now_ms=wall_ms())
        primary_client.execute_command("WAIT", 1, 5000)
    finally:
        primary_client.close()
    cfg = write_config(tmp_path, '[profiles.ha]\nurl = "%s"\nread_from = "replicas"\n\n'
                                 '[queues.orders]\nlayout = "reliable-list"\n' % url)
    _reset_stats(sentinel_deployment.nodes)
    primary = _status(capsys, url, cfg)
    code, out, err = cli(capsys, "--profile", "ha", "--config", cfg, "status", "--json")
    assert code == 0, err
    assert {q["queue"]: {f: q[f] for f in FIELDS} for q in json.loads(out)["queues"]} == primary
    assert _replica_calls(sentinel_deployment.nodes) > 0, "the profile's read_from sent the reads to the replica"


def test_one_server_has_no_replicas(redis_url, capsys):
    code, out, err = cli(capsys, "--url", redis_url, "--read-from", "replicas", "status")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "replicas" in err, err


def test_a_profile_read_from_is_checked(tmp_path, capsys):
    cfg = write_config(tmp_path, '[profiles.p]\nurl = "redis://127.0.0.1:1/0"\nread_from = "replica"\n')
    code, _, err = cli(capsys, "--config", cfg, "--profile", "p", "status")
    assert code != 0 and "read_from must be one of primary, replicas" in err, err
