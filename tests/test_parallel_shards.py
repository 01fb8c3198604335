"""The shards of a queue on a Redis Cluster are walked in parallel, one
process per primary (jobctl.ops.walk.parallel): one result and exit code,
every job moved exactly once, and on an error in one shard the others stop,
their moves are counted and every hold is given back."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from test_cluster import all_ids, config, run, status_of
from helpers import wall_ms
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.ops.walk import parallel
from jobctl_fixtures.scenarios import load_scenario


def _spy(monkeypatch, tmp_path) -> list:
    """Per parallel run, a file that gets the pid of each process that built
    one of its shard walks (they are children: only a file reaches back)."""
    runs: list = []
    real = parallel.walk_in_parallel

    def spied(groups, make_walk, *args):
        log = tmp_path / f"walkers-{len(runs)}"
        runs.append(log)

        def recording(src, halted):
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
            return make_walk(src, halted)

        return real(groups, recording, *args)

    monkeypatch.setattr("jobctl.ops.walk.driver.walk_in_parallel", spied)
    return runs


def test_each_primary_walks_its_shards_in_a_process_of_its_own(cc, cluster_url, tmp_path, capsys, monkeypatch):
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=7, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    runs = _spy(monkeypatch, tmp_path)
    for args in (("--filter", "id ~ '*[02468ACEGJMPRTVXZ]'"), ()):  # per job (about half, every shard), then tail mode
        code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json", "--batch", "5", *args)
        assert code == 0, err
    pids = [set(log.read_text().split()) for log in runs]
    assert len(pids) == 2 and all(len(p) == 3 and str(os.getpid()) not in p for p in pids), pids
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


def test_a_walker_killed_mid_walk_ends_with_exit_3_and_the_rerun_finishes(cc, cluster_url, tmp_path, capsys,
                                                                            monkeypatch):
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=9, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    real = parallel.walk_in_parallel

    def killing(groups, make_walk, *args):
        def walk(src, halted):  # the walker of shard 2 dies (kill -9) once its first call's result is sent
            for br in make_walk(src, halted):
                yield br
                if src.shard == 2:
                    os.kill(os.getpid(), 9)

        return real(groups, walk, *args)

    monkeypatch.setattr("jobctl.ops.walk.driver.walk_in_parallel", killing)
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json", "--batch", "5")
    assert code == 3 and "rerun" in err and "Traceback" not in err, err
    assert all_ids(cc, tags) == Counter({i: 1 for i in every}), "no job lost or duplicated"
    monkeypatch.setattr("jobctl.ops.walk.driver.walk_in_parallel", real)
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json")  # the rerun finishes
    assert code == 0, err
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "email")
    assert (st["dead"], st["ready"]) == (0, truth.expected["ready"] + truth.expected["dead"])
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags), "every hold given back"


@pytest.mark.parametrize("op, scanner", [
    (("redrive",), "predicate_plan._shard_parts"),  # the filter's rule-outs run on each primary
    (("suppress", "--reason", "noise"), "lean_plan._scan_shards"),  # read and filtered by the client
])
def test_a_filtered_plan_reads_each_primary_in_a_process_and_matches_the_plan_made_in_one(cc, cluster_url, tmp_path,
                                                                                          capsys, monkeypatch, op,
                                                                                          scanner):
    import importlib

    from jobctl.ops.walk import processes

    load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=10, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    cc.lpush(ReliableListKeys(tags[1]).dead, "dangling-1")  # no payload
    bad = ReliableListKeys(tags[6])
    cc.lpush(bad.dead, "bad-1")
    cc.set(bad.job("bad-1"), b"{not json")
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    log = tmp_path / "scanners"
    module_name, name = scanner.split(".")
    module = importlib.import_module(f"jobctl.layouts.reliable_list.{module_name}")
    real = getattr(module, name)

    def recording(*args):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args)

    monkeypatch.setattr(module, name, recording)
    argv = (op[0], "email", *op[1:], "--dry-run", "--json", "--filter", "type != 'nope' and attempts >= 1")
    code, forked, err = run(capsys, cluster_url, cfg, *argv)
    assert code == 0, err
    pids = set(log.read_text().split())
    assert len(pids) == 3 and str(os.getpid()) not in pids, pids
    monkeypatch.setattr(processes, "FORKS", False)
    monkeypatch.setattr(parallel, "FORKS", False)
    code, alone, err = run(capsys, cluster_url, cfg, *argv)
    assert code == 0, err
    if module_name == "lean_plan":
        assert str(os.getpid()) in log.read_text().split(), "planned in this process"
    forked, alone = forked["plan"], alone["plan"]
    for key in ("planned", "scanned", "malformed", "dangling", "malformed_sample", "dangling_sample"):
        assert forked[key] == alone[key], (key, forked, alone)
    assert forked["planned"] > 0 and forked["malformed_sample"] == ["bad-1"] and forked["dangling"] == 1

    def groups(plan):
        return sorted((g["type"], g["error"], g["count"]) for g in plan["breakdown"])

    assert groups(forked) == groups(alone)
