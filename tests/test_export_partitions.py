"""``export --partition-by day|type``: parts in Hive-style directories,
listed in the manifest with their SHA-256, every row once, read whole by
pyarrow, pandas and DuckDB (the partition a column), resumable, and used by
a purge from the export like any export.  Real test server."""

from __future__ import annotations

import json
import pyarrow.dataset as ds
import pytest

from helpers import cli_runner, queues_toml, wall_ms, write_config
from jobctl.export.manifest import load_manifest
from jobctl.export.partitions import NULL_PARTITION
from jobctl_fixtures.scenarios import load_scenario


@pytest.fixture
def run(redis_client, redis_url, tmp_path, capsys):
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 2}))
    return cli_runner(capsys, redis_url, cfg)


@pytest.fixture
def truth(redis_client):
    return load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=400, seed=9, now_ms=wall_ms(),
                         malformed=3)


@pytest.mark.parametrize("by", ["day", "type"])
def test_partitioned_export_is_a_hive_dataset(run, truth, tmp_path, by):
    out = tmp_path / "x"
    code, stdout, err = run("export", "email", "--out", str(out), "--partition-by", by, "--part-rows", "1000",
                            "--batch", "50", "--json")
    assert code == 0, err
    m = load_manifest(out)  # every part's SHA-256 verified
    assert m.rows == truth.expected["dead"] and m.selector["partition_by"] == by
    dirs = {p.file.split("/")[0] for p in m.parts}
    assert len(dirs) > 1 and all(d.startswith(f"{by}=") for d in dirs), dirs
    table = ds.dataset(out, format="parquet", partitioning="hive", exclude_invalid_files=True).to_table()
    assert table.num_rows == m.rows and by in table.column_names
    rows = table.to_pylist()
    assert len({r["job_id"] for r in rows}) == m.rows  # every job once
    if by == "type":
        for r in rows:
            assert r["type"] == (r["job_type"] or NULL_PARTITION)
    import duckdb
    import pandas as pd

    assert len(pd.read_parquet(out)) == m.rows
    [(n,)] = duckdb.sql(f"select count(*) from read_parquet('{out}/*/*.parquet', hive_partitioning=true)").fetchall()
    assert n == m.rows


def test_partitioned_export_resumes_and_a_purge_uses_it(run, truth, redis_client, tmp_path):
    out = tmp_path / "x"
    assert run("export", "email", "--out", str(out), "--partition-by", "type", "--json")[0] == 0
    code, stdout, err = run("export", "email", "--out", str(out), "--partition-by", "type", "--json")
    assert code == 0 and json.loads(stdout)["already_complete"] is True, (stdout, err)
    code, stdout, err = run("export", "email", "--out", str(out), "--json")  # another export there: refused
    assert code == 2 and "another export" in err, err
    code, stdout, err = run("purge", "email", "--state", "dead", "--export-to", str(tmp_path / "p"), "--yes")
    assert code == 0, err
    assert redis_client.llen("queue:{email:00}:dead") + redis_client.llen("queue:{email:01}:dead") == 0


def test_an_unknown_partitioning_is_refused(run, truth, tmp_path):
    code, out, err = run("export", "email", "--out", str(tmp_path / "x"), "--partition-by", "tenant")
    assert code == 2 and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
