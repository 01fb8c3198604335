"""A discovery whose scan reached its bound: every primary scans with a
budget of its own and says what it scanned, and the shard count of a
sharded queue is counted by probing its computable shard tags, so a written
config never carries a count inferred from the shards the scan happened to see."""

from __future__ import annotations

import json
import tomllib

import pytest

from helpers import cli, wall_ms
from jobctl.config import QueueConfig
from jobctl.discovery import discover
from jobctl.discovery.shard_probe import probe_shards
from jobctl_fixtures.scenarios import load_scenario

FILLER = 2500  # keys per server beyond the 1,000-key bound


def _fill(client, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"cache:item:{i}", "x")
    pipe.execute()


@pytest.mark.parametrize("seen", [1, 5, 7, 8])
def test_the_probe_counts_every_shard_whatever_the_scan_saw(redis_client, seen):
    load_scenario(redis_client, "dlq-spike", queue="email", shards=8, size=80, seed=1, now_ms=wall_ms())
    found = QueueConfig(name="email", layout="reliable-list", tag="email", shards=seen, discovered=True)
    queues, probed = probe_shards(redis_client, [found, QueueConfig(name="one", layout="reliable-list", tag="one")])
    assert [q.shards for q in queues] == [8, None]
    assert probed == {"email": (seen, 8)}


def test_a_bounded_discover_writes_the_true_shard_count(redis_client, redis_url, tmp_path, capsys):
    load_scenario(redis_client, "dlq-spike", queue="email", shards=8, size=80, seed=2, now_ms=wall_ms())
    _fill(redis_client, FILLER)
    d = discover(redis_client, limit=1000)
    assert not d.complete and len(d.nodes) == 1 and not d.nodes[0].complete
    assert all(q.shards == 8 for q in d.queues if q.name == "email")
    out = tmp_path / "found.toml"
    code, _, err = cli(capsys, "--url", redis_url, "discover", "--limit", "1000", "--write-config", str(out))
    assert code == 0, err
    assert "bound reached" in err
    written = tomllib.loads(out.read_text())["queues"]
    assert all(q.get("shards") == 8 for name, q in written.items() if name == "email")


def test_every_cluster_primary_scans_with_a_budget_of_its_own(cc, cluster_url, capsys):
    load_scenario(cc, "dlq-spike", queue="email", shards=8, size=80, seed=3, now_ms=wall_ms())
    _fill(cc, 3 * FILLER)
    code, out, err = cli(capsys, "--url", cluster_url, "discover", "--limit", "1000", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["nodes"]) == 3 and not doc["complete"]
    assert all(n["scanned"] >= 1000 and not n["complete"] for n in doc["nodes"]), doc["nodes"]
    assert doc["scanned"] == sum(n["scanned"] for n in doc["nodes"])
    assert all(q["shards"] == 8 for q in doc["queues"] if q["queue"] == "email")
    code, _, err = cli(capsys, "--url", cluster_url, "discover", "--limit", "1000")
    assert code == 0 and err.count("node ") == 3 and "bound reached" in err, err


def test_keys_the_user_may_not_read_are_skipped_and_counted(redis_client, redis_url, capsys):
    now = wall_ms()
    load_scenario(redis_client, "dlq-spike", queue="mine", size=40, seed=5, now_ms=now)
    load_scenario(redis_client, "dlq-spike", queue="theirs", size=40, seed=6, now_ms=now)
    redis_client.acl_setuser("scout", enabled=True, passwords=["+pw"], reset=True, commands=["+@all"],
                             keys=["~queue:{mine}:*"])
    try:
        url = redis_url.replace("redis://", "redis://scout:pw@", 1)
        code, out, err = cli(capsys, "--url", url, "discover", "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert [q["queue"] for q in doc["queues"]] == ["mine"]
        assert doc["nodes"][0]["unreadable"] == redis_client.dbsize() - len(redis_client.keys("queue:{mine}:*"))
        code, _, err = cli(capsys, "--url", url, "discover")
        assert code == 0 and "this user may not read, skipped" in err, err
    finally:
        redis_client.acl_deluser("scout")
