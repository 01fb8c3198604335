"""``purge --export-to`` with a filter says what it exports and what it
purges: malformed dead jobs are exported for review (the filter cannot read
them) but not purged, and the words never claim it purges exactly what it
exported."""

from __future__ import annotations

import json

from jobctl_fixtures.scenarios import load_scenario
from helpers import config_fixtures, queues_toml

cfg, run = config_fixtures(queues_toml(email={"layout": "reliable-list"}))


def test_a_filtered_purge_counts_the_malformed_exported_for_review(redis_client, run, tmp_path):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=400, seed=2, malformed=20)
    code, out, err = run("purge", "email", "--state", "dead", "--filter", "error = HTTP_400",
                         "--export-to", str(tmp_path / "x"), "--yes", "--json")
    assert code == 0, err
    manifest = json.loads((tmp_path / "x" / "_manifest.json").read_text())
    assert manifest["malformed"] > 0, manifest
    res = json.loads(out)
    assert res["moved"] == manifest["rows"] - manifest["malformed"]
    assert f"{manifest['malformed']:,} malformed, exported for review" in err, err
    assert "purging exactly those" not in err and "still match the filter" in err, err
    assert truth.expected["dead"] > res["moved"]
