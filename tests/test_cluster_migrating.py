"""A queue whose slot is being resharded (``CLUSTER SETSLOT <slot>
IMPORTING`` on the destination, ``MIGRATING`` on the source; no key moved
yet, then half of them) still reads: a multi-key command over keys of that
slot that are absent or split between the two nodes gets ``TRYAGAIN``
until redis-py gives up, so the read paths send single-key commands there
(pipelined: status's key probe; an ``MGET`` refused so,
:mod:`jobctl.client_classes`).  A redrive then finishes, or stops between
calls with exit 3 and its rerun finishes: every job exactly once.  One
module-scoped 3-primary cluster, no replica (a migration needs only a
source and a destination)."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import contextmanager

import pytest

import cluster_servers as cs
from helpers import queues_toml, wall_ms, write_config
from jobctl.cli.main import main
from jobctl.keys import shard_tags
from test_cluster import all_ids
from jobctl_fixtures.scenarios import load_scenario

STATUS_FIELDS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")


@pytest.fixture(scope="module")
def cluster(pytestconfig):
    """3 primaries; overrides the session's 3+3 cluster for this module."""
    topo = cs.start_cluster(cs._binary(pytestconfig), masters=3, replicas=0)
    yield topo
    topo.stop()


class Migration:
    """The slot of ``{tag}`` being moved from its owner to another primary:
    IMPORTING on the destination, MIGRATING on the source, no key moved."""

    def __init__(self, cc, tag: str) -> None:
        self.cc = cc
        self.slot = cc.keyslot("{" + tag + "}")
        owner = cc.get_node_from_key("{" + tag + "}")
        self.dst_node = next(n for n in cc.get_primaries() if n.name != owner.name)
        self.src, self.dst = cc.get_redis_connection(owner), cc.get_redis_connection(self.dst_node)
        self.src_id, self.dst_id = (c.execute_command("CLUSTER MYID").decode() for c in (self.src, self.dst))
        self.dst.execute_command("CLUSTER SETSLOT", self.slot, "IMPORTING", self.src_id)
        self.src.execute_command("CLUSTER SETSLOT", self.slot, "MIGRATING", self.dst_id)

    def move(self, every: int = 1) -> int:
        """``MIGRATE`` every ``every``-th key still on the source; returns how many."""
        keys = self.src.execute_command("CLUSTER GETKEYSINSLOT", self.slot, 100_000)[::every]
        if keys:
            self.src.execute_command("MIGRATE", "127.0.0.1", self.dst_node.port, "", 0, 5000, "KEYS", *keys)
        return len(keys)

    def finish(self) -> None:
        """Move the rest and give the slot to the destination on every primary."""
        self.move()
        for node in self.cc.get_primaries():
            self.cc.get_redis_connection(node).execute_command("CLUSTER SETSLOT", self.slot, "NODE", self.dst_id)


@contextmanager
def migrating(cc, tag: str):
    """A :class:`Migration` of ``{tag}``'s slot, finished afterwards."""
    migration = Migration(cc, tag)
    try:
        yield migration
    finally:
        migration.finish()


def test_a_queue_whose_slot_is_migrating_reads_and_a_redrive_keeps_every_job(cc, cluster_url, tmp_path, capsys):
    truth = load_scenario(cc, "dlq-spike", queue="fo", shards=8, size=240, seed=3, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(fo={"layout": "reliable-list", "tag": "fo", "shards": 8}))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["--url", cluster_url, "--config", cfg, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    with migrating(cc, "fo:05") as migration:
        for moved in ("none", "half"):
            if moved == "half":
                assert migration.move(every=2) > 10
            code, out, err = run("status", "--json")
            assert code == 0, (moved, err)
            st = json.loads(out)["queues"][0]
            assert {f: st[f] for f in STATUS_FIELDS} == {f: truth.expected[f] for f in STATUS_FIELDS}, moved
            for argv in (("check", "fo"), ("ls", "fo", "--state", "dead"), ("attempts", "fo")):
                code, out, err = run(*argv)
                assert code == 0, (moved, argv, err)
            code, out, err = run("export", "fo", "--out", str(tmp_path / moved), "--json")
            assert code == 0, (moved, err)
            assert json.loads(out)["rows"] == truth.expected["dead"], out
        # a redrive meets the half-moved slot: done, or stopped between calls (exit 3: run it again)
        code, out, err = run("redrive", "fo", "--yes")
        assert code in (0, 3), err
    code, out, err = run("redrive", "fo", "--yes")  # the slot has moved: the rerun finishes
    assert code == 0, err
    every = set().union(*truth.ids_by_state.values())
    assert all_ids(cc, shard_tags("fo", 8)) == Counter({i: 1 for i in every}), "every job exactly once"
    code, out, err = run("status", "--json")
    st = json.loads(out)["queues"][0]
    assert (st["dead"], st["ready"]) == (0, truth.expected["ready"] + truth.expected["dead"])
