"""The forked per-primary walks (jobctl.ops.walk.processes, parallel) on a
real 3-primary cluster: a stop counts every job the walkers moved, --rate
holds the walkers to a bounded lead, and the process that forked them does
not take their holds for orphans."""

from __future__ import annotations

from collections import Counter

from helpers import wall_ms
from jobctl.config import QueueConfig
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.scenarios import load_scenario
from test_cluster import all_ids


def _dead(cc, tags) -> int:
    return sum(cc.llen(ReliableListKeys(t).dead) for t in tags)


def test_a_stop_counts_every_job_the_walkers_moved(cc):
    """A stop after the first result: the result counts what moved."""
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=11, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    lay = ReliableList(cc, QueueConfig("email", tag="email", shards=8))
    before = _dead(cc, tags)
    seen: list[int] = []

    def stop() -> bool:
        return len(seen) > 0

    res = run_plan(lay, lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY)), batch=5,
                   stop=stop, progress=lambda done, total: seen.append(done), journal=False)
    moved = before - _dead(cc, tags)
    assert res.interrupted
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags)
    assert res.moved == moved, (res.moved, moved)


def test_rate_is_a_total_across_the_walkers(cc):
    """--rate 20: when the second result arrives (about a second in), the
    server has moved at most each walker's lead more than was counted (the
    results it may send ahead and its round trips in flight), not the queue."""
    from jobctl.ops.walk.driver import MAX_TAIL_DEPTH, TAIL_AHEAD
    from jobctl.ops.walk.processes import CREDIT

    load_scenario(cc, "dlq-spike", queue="email", shards=8, size=2400, seed=12, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    lay = ReliableList(cc, QueueConfig("email", tag="email", shards=8))
    before = _dead(cc, tags)
    seen: list[tuple[int, int]] = []

    def progress(done, total):
        seen.append((done, before - _dead(cc, tags)))

    run_plan(lay, lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY)), rate=20, batch=5,
             stop=lambda: len(seen) >= 3, progress=progress, journal=False)
    counted, on_server = seen[1]
    lead = 3 * (CREDIT + TAIL_AHEAD * MAX_TAIL_DEPTH) * 5  # 3 walkers, 5 jobs a call
    assert on_server <= counted + lead < before, (seen, before)


def test_a_live_walkers_hold_is_not_an_orphan_in_the_process_that_forked_it(cc):
    """While the forked walkers hold jobs aside, the process that runs the
    operation (the TUI's, say) must not see their holds as orphaned."""
    from jobctl.filter import compile_filter
    from jobctl.ops import orphan_holds

    load_scenario(cc, "dlq-spike", queue="email", shards=8, size=2400, seed=13, now_ms=wall_ms())
    lay = ReliableList(cc, QueueConfig("email", tag="email", shards=8))
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY,
                  filter=compile_filter("id ~ '*[02468ACEGJMPRTVXZ]'"))
    found: list = []

    def progress(done, total):
        found.extend(orphan_holds.find(lay))

    res = run_plan(lay, lay.plan(spec), batch=5, progress=progress, journal=False)
    assert res.moved > 0
    assert found == [], found[:3]




def test_a_lease_taken_by_another_operation_midway_says_what_moved(cc, cluster_url, tmp_path, capsys):
    """Another operation (on another host) holds the lease of one shard: the
    walkers of the others move their jobs, and the one-line error says how
    many moved instead of "nothing was changed"; every job in one place."""
    from test_cluster import config, run

    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=14, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    cc.set(ReliableListKeys(tags[7]).lease, "redrive-other otherhost 1", px=60_000)
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--batch", "5")
    assert code == 11 and err.count("\n") == 1, err
    moved = sum(cc.llen(ReliableListKeys(t).ready) for t in tags) - truth.expected["ready"]
    if moved:
        assert f"stopped after {moved:,} of" in err and "nothing was changed" not in err, err
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags)
