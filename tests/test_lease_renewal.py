"""A one-server walk over many shards takes every shard's lease first and
walks the shards in turn: the leases still waiting are renewed on the
run's clock, across shards, not per shard walk (a run of 8 short shard
walks that together outlast the lease's TTL once lost the last shard's
lease and stopped with exit 11).  The clock is stepped, no sleeps."""

from __future__ import annotations

import itertools

from helpers import queues_toml, wall_ms, write_config
from jobctl.cli.main import main
from jobctl.ops.walk import lifecycle
from jobctl_fixtures.scenarios import load_scenario


def test_waiting_leases_are_renewed_across_short_shard_walks(redis_client, redis_url, tmp_path, monkeypatch, capsys):
    truth = load_scenario(redis_client, "dlq-spike", queue="rn", shards=8, size=240, seed=4, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(rn={"layout": "reliable-list", "tag": "rn", "shards": 8}))
    ticks = itertools.count(step=4.0)  # every look at the clock: 4 s later
    monkeypatch.setattr(lifecycle, "monotonic", lambda: next(ticks))
    renewed: list[list[str]] = []
    renew = lifecycle.Renewal.renew

    def spy(self, taken, value):
        renewed.append([src.lease for src in taken])
        renew(self, taken, value)

    monkeypatch.setattr(lifecycle.Renewal, "renew", spy)
    code = main(["--url", redis_url, "--config", cfg, "redrive", "rn", "--yes", "--batch", "1000"])
    assert code == 0, capsys.readouterr().err
    last = "queue:{rn:07}:jobctl:lease"
    assert sum(last in leases for leases in renewed) >= 2, renewed  # the last shard's lease, while it waited
    assert redis_client.llen("queue:{rn:07}:dead") == 0 and truth.expected["dead"] > 0
