"""Reads and a redrive while the queue's own slot is resharded live (what
``redis-cli --cluster reshard`` does: IMPORTING / MIGRATING, then
``MIGRATE`` of the slot's keys a few at a time, then ``SETSLOT NODE``),
on a 3-primary cluster: status, check and export count every job once; a
redrive ends with exit 0, or exit 3 naming the slot and a rerun finishes;
every job exactly once."""

from __future__ import annotations

import json
import threading
from collections import Counter

from helpers import queues_toml, wall_ms, write_config
from jobctl.cli.main import main
from jobctl.keys import shard_tags
from test_cluster import all_ids
from test_cluster_migrating import Migration, cluster  # noqa: F401  (the module's 3-primary cluster)
from jobctl_fixtures.scenarios import load_scenario


def _reshard(migration: Migration, halfway: threading.Event, keys_per_call: int = 5) -> None:
    """Move half of the slot's keys, say so, move the rest ``keys_per_call``
    at a time (while the redrive runs), then hand the slot over."""
    migration.move(every=2)
    halfway.set()
    while True:
        keys = migration.src.execute_command("CLUSTER GETKEYSINSLOT", migration.slot, keys_per_call)
        if not keys:
            break
        migration.src.execute_command("MIGRATE", "127.0.0.1", migration.dst_node.port, "", 0, 5000, "KEYS", *keys)
    migration.finish()


def test_a_redrive_during_a_live_reshard_of_its_slot_keeps_every_job(cc, cluster_url, tmp_path, capsys):
    truth = load_scenario(cc, "dlq-spike", queue="lr", shards=4, size=2400, seed=5, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(lr={"layout": "reliable-list", "tag": "lr", "shards": 4}))
    halfway = threading.Event()
    migration = Migration(cc, "lr:02")
    mover = threading.Thread(target=_reshard, args=(migration, halfway), daemon=True)
    mover.start()
    assert halfway.wait(timeout=60)
    base = ["--url", cluster_url, "--config", cfg]
    assert main([*base, "status", "--json"]) == 0  # reads while the keys move: every job counted once
    assert json.loads(capsys.readouterr().out)["queues"][0]["dead"] == truth.expected["dead"]
    code = main([*base, "check", "lr"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main([*base, "export", "lr", "--out", str(tmp_path / "x"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == truth.expected["dead"]
    codes, errors = [], []
    for _ in range(6):
        code = main(["--url", cluster_url, "--config", cfg, "redrive", "lr", "--yes", "--batch", "20"])
        err = capsys.readouterr().err
        codes.append(code)
        assert code in (0, 3), err
        if code == 3:
            errors.append(err)
        elif not mover.is_alive():
            break
    mover.join(timeout=120)
    assert not mover.is_alive() and codes[-1] == 0, codes
    for err in errors:  # a stop is one line that names the slot and says to run it again
        assert err.count("\n") == 1 and str(migration.slot) in err and "again" in err, err
    every = set().union(*truth.ids_by_state.values())
    assert all_ids(cc, shard_tags("lr", 4)) == Counter({i: 1 for i in every}), "every job exactly once"
