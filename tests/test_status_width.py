"""``jobctl status`` on an 80-column terminal: the table drops its least
important columns rather than cutting a number short."""

from __future__ import annotations

import json

from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, wall_ms


def test_status_at_80_columns_keeps_every_count_whole(capsys, monkeypatch, redis_client, redis_url):
    now = wall_ms()
    load_scenario(redis_client, "dlq-spike", queue="email", shards=4, priorities=3, size=4000, seed=2, now_ms=now)
    load_scenario(redis_client, "stuck-workers", queue="billing", size=3000, seed=3, now_ms=now)
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    counts = {q["queue"]: q for q in json.loads(out)["queues"]}
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(capsys, "--url", redis_url, "status")
    assert code == 0, err
    lines = out.splitlines()
    assert "…" not in out
    assert max(len(line) for line in lines) <= 80, out
    header = next(line for line in lines if "queue" in line and "dead" in line)
    for col in ("dead", "stuck", "oldest ready", "ready"):
        assert col in header, header
    for name, q in counts.items():
        row = next(line for line in lines if line.startswith(f"│ {name}"))
        for field in ("dead", "stuck", "ready"):
            assert f"{q[field]:,}" in row, (field, row)
