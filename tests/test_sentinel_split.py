"""A redrive whose writes go to a primary the Sentinels no longer name is
not reported as done.

The split-brain window of a Sentinel failover is made on purpose and held:
after the first batch, the replica is promoted and the Sentinel is told to
watch it as the service's primary, while the old primary keeps answering as
master (as both nodes did for up to 11 s in a real failover).  The run's
remaining writes land on the old primary; jobctl must exit 3 ("run the same
command again"), and the rerun, on the new primary, moves every job once.
"""

from __future__ import annotations

from collections import Counter

import pytest
import redis

import cluster_servers as cs
from jobctl.connection import Target, make_client
from jobctl_fixtures.scenarios import load_scenario
from helpers import wall_ms
from test_cluster import _after_first_batch, all_ids, config, run


@pytest.fixture
def split_sentinel(pytestconfig):
    """A Sentinel deployment of this test's own (it is reconfigured)."""
    topo = cs.start_sentinel(cs._binary(pytestconfig))
    yield topo
    topo.stop()


def _split(topo) -> None:
    """Promote the replica and make the Sentinel name it, leaving the old
    primary a master too."""
    primary, replica = (n.client() for n in topo.nodes)
    sentinel = topo.sentinels[0].client()
    primary.execute_command("WAIT", 1, 5000)  # what moved so far is on the replica
    replica.execute_command("REPLICAOF", "NO", "ONE")
    service = cs.SENTINEL_SERVICE
    sentinel.execute_command("SENTINEL", "REMOVE", service)
    sentinel.execute_command("SENTINEL", "MONITOR", service, "127.0.0.1", topo.nodes[1].port, 1)
    assert primary.execute_command("ROLE")[0] == b"master" and replica.execute_command("ROLE")[0] == b"master"
    for c in (primary, replica, sentinel):
        c.close()


def test_writes_to_a_primary_the_sentinels_no_longer_name_exit_3(split_sentinel, tmp_path, capsys, monkeypatch):
    url = split_sentinel.url
    client = make_client(Target(url, "test"))
    truth = load_scenario(client, "dlq-spike", queue="sq", size=150, seed=6, now_ms=wall_ms())
    every = set().union(*truth.ids_by_state.values())
    client.close()
    cfg = config(tmp_path, {"sq": {"layout": "reliable-list", "tag": "sq"}})
    _after_first_batch(monkeypatch, lambda: _split(split_sentinel))
    code, _, err = run(capsys, url, cfg, "redrive", "sq", "--yes", "--batch", "5")
    assert code == 3, err
    assert "run the same command again" in err and "Sentinels now name" in err and err.count("\n") == 1, err
    monkeypatch.undo()
    code, _, err = run(capsys, url, cfg, "redrive", "sq", "--yes")
    assert code == 0, err
    new_primary = redis.Redis(port=split_sentinel.nodes[1].port)
    assert all_ids(new_primary, ["sq"]) == Counter({i: 1 for i in every})
    assert new_primary.llen("queue:{sq}:dead") == 0
    new_primary.close()
