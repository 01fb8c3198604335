"""A queue whose slot is being resharded (``CLUSTER SETSLOT <slot>
IMPORTING`` on the destination, ``MIGRATING`` on the source, no key moved
yet) still reads: a multi-key command over absent keys of that slot gets
``TRYAGAIN`` until redis-py gives up, so the read paths send single-key
commands there (pipelined).  One module-scoped 3-primary cluster, no
replica (a migration needs only a source and a destination)."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

import cluster_servers as cs
from helpers import queues_toml, wall_ms, write_config
from jobctl.cli.main import main
from jobctl_fixtures.scenarios import load_scenario

STATUS_FIELDS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")


@pytest.fixture(scope="module")
def cluster(pytestconfig):
    """3 primaries; overrides the session's 3+3 cluster for this module."""
    topo = cs.start_cluster(cs._binary(pytestconfig), masters=3, replicas=0)
    yield topo
    topo.stop()


@contextmanager
def migrating(cc, tag: str):
    """The slot of ``{tag}`` set IMPORTING on another primary and MIGRATING
    on its owner, no key moved; made stable on its owner afterwards."""
    slot = cc.keyslot("{" + tag + "}")
    owner = cc.get_node_from_key("{" + tag + "}")
    other = next(n for n in cc.get_primaries() if n.name != owner.name)
    src, dst = cc.get_redis_connection(owner), cc.get_redis_connection(other)
    src_id, dst_id = (c.execute_command("CLUSTER MYID").decode() for c in (src, dst))
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    try:
        yield slot
    finally:
        for c in (src, dst):
            c.execute_command("CLUSTER SETSLOT", slot, "NODE", src_id)


def test_status_check_and_export_read_a_queue_whose_slot_is_migrating(cc, cluster_url, tmp_path, capsys):
    truth = load_scenario(cc, "dlq-spike", queue="fo", shards=8, size=240, seed=3, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(fo={"layout": "reliable-list", "tag": "fo", "shards": 8}))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["--url", cluster_url, "--config", cfg, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    with migrating(cc, "fo:05"):
        code, out, err = run("status", "--json")
        assert code == 0, err
        st = json.loads(out)["queues"][0]
        assert {f: st[f] for f in STATUS_FIELDS} == {f: truth.expected[f] for f in STATUS_FIELDS}
        code, out, err = run("check", "fo")
        assert code == 0, err
        code, out, err = run("export", "fo", "--out", str(tmp_path / "dead"), "--json")
        assert code == 0, err
