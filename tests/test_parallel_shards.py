"""The shards of a queue on a Redis Cluster are walked in parallel, one
thread per primary (jobctl.ops.walk.parallel): one result and exit code,
every job moved exactly once, and on an error in one shard the others stop,
their moves are counted and every hold is given back."""

from __future__ import annotations

import threading
from collections import Counter

from test_cluster import all_ids, config, run, status_of
from helpers import wall_ms
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.ops.walk import parallel
from jobctl_fixtures.scenarios import load_scenario


def _spy(monkeypatch) -> list[set[str]]:
    """The thread names that built each parallel run's shard walks."""
    runs: list[set[str]] = []
    real = parallel.walk_in_parallel

    def spied(groups, make_walk, *args):
        names: set[str] = set()
        runs.append(names)

        def recording(src, halted):
            names.add(threading.current_thread().name)
            return make_walk(src, halted)

        return real(groups, recording, *args)

    monkeypatch.setattr("jobctl.ops.walk.driver.walk_in_parallel", spied)
    return runs


def test_each_primary_walks_its_shards_in_a_thread_of_its_own(cc, cluster_url, tmp_path, capsys, monkeypatch):
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=7, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    runs = _spy(monkeypatch)
    for args in (("--filter", "id ~ '*[02468ACEGJMPRTVXZ]'"), ()):  # per job (about half, every shard), then tail mode
        code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json", "--batch", "5", *args)
        assert code == 0, err
    assert len(runs) == 2 and all(len(names) == 3 for names in runs), runs
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "email")
    assert (st["dead"], st["ready"]) == (0, truth.expected["ready"] + truth.expected["dead"])
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags), "every hold given back"


def test_an_error_in_one_shard_stops_the_others_and_counts_their_moves(cc, cluster_url, tmp_path, capsys):
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=8, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    broken = ReliableListKeys(tags[5])
    cc.set(broken.hold, "not a list")  # that shard's walk fails before it moves anything
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json", "--batch", "5")
    assert code != 0 and err.count("\n") >= 1
    cc.delete(broken.hold)
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "email")
    assert all_ids(cc, tags) == Counter({i: 1 for i in every}), "no job lost or duplicated"
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags)
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json")  # the rerun finishes
    assert code == 0, err
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "email")
    assert (st["dead"], st["ready"]) == (0, truth.expected["ready"] + truth.expected["dead"])
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})
