"""``jobctl analyze`` outputs as sets and datasets: a duplicated dead entry is
planned and moved once, and the export directory reads whole.

One SparkSession (local[2]) serves the module (an active one is reused).
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.errors import DataError
from jobctl.export.fence import read_redrive_plan
from jobctl.keys import ReliableListKeys

pytest.importorskip("pyspark")
pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

NOW = time.time_ns() // 1_000_000  # the export's snapshot is the wall clock
K = ReliableListKeys("dups")


def _job(job_id: str, code: str = "HTTP_503") -> bytes:
    return orjson.dumps({"jobId": job_id, "jobType": "webhook.deliver", "jobVersion": 2, "tenantId": "t1",
                         "idempotencyKey": f"k-{job_id}", "createdAtEpochMs": NOW - 60_000,
                         "deadlineEpochMs": NOW + 86_400_000, "attempt": 5, "maxAttempts": 5,
                         "payload": {}, "lastAttemptAtEpochMs": NOW - 1_000, "lastErrorCode": code,
                         "lastErrorMessage": f"upstream unavailable after {len(job_id)}ms"})


def test_a_duplicated_dead_entry_is_planned_and_moved_once(spark, redis_url, redis_client, tmp_path, capsys):
    ids = [f"d{i:02d}" for i in range(6)]
    for job_id in ids:
        redis_client.set(K.job(job_id), _job(job_id))
    redis_client.lpush(K.dead, *ids)
    redis_client.lpush(K.dead, "d03", "d03")  # LPUSH dead X X: three entries of d03
    export_dir, report_dir = tmp_path / "dlq", tmp_path / "report"
    assert main(["--url", redis_url, "export", "dups", "--out", str(export_dir)]) == 0
    capsys.readouterr()

    assert main(["analyze", str(export_dir), "--out", str(report_dir)]) == 0
    captured = capsys.readouterr()
    assert "2 duplicate entr(ies)" in captured.err
    report = orjson.loads((report_dir / "report.json").read_bytes())
    assert report["rows"] == 8 and report["duplicate_entries"] == 2
    assert report["duplicate_entries_by_state"] == {"dead": 2}
    assert "duplicate entries (an id held twice; planned once): 2" in (report_dir / "report.md").read_text()
    plan_path = report_dir / "redrive-plan.jsonl"
    plan = [orjson.loads(line) for line in plan_path.read_bytes().splitlines()]
    assert sorted(p["id"] for p in plan) == ids and report["redrive"]["planned"] == 6

    rc = main(["--url", redis_url, "redrive", "dups", "--plan", str(plan_path), "--yes", "--json"])
    res = orjson.loads(capsys.readouterr().out)
    assert rc == 8 and res["moved"] == 6  # the extra entries are reported, not moved
    assert res["skipped_reasons"] == {"duplicate entry": 1}
    ready = [x.decode() for x in redis_client.lrange(K.ready, 0, -1)]
    assert sorted(ready) == ids  # d03 once
    assert [x.decode() for x in redis_client.lrange(K.dead, 0, -1)] == ["d03", "d03"]


def test_the_plan_reader_dedupes_ids(tmp_path):
    path = tmp_path / "plan.jsonl"
    line = {"queue": "q", "id": "a", "payload_sha1": "s1"}
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in
                              (line, line, {**line, "id": "b"}, {**line, "queue": "other", "id": "a"})))
    assert read_redrive_plan(path, "q") == {"a": "s1", "b": "s1"}
    path.write_bytes(orjson.dumps(line) + b"\n" + orjson.dumps({**line, "payload_sha1": "s2"}) + b"\n")
    with pytest.raises(DataError, match="line 2: job a is listed twice with different payload_sha1"):
        read_redrive_plan(Path(path), "q")


def test_the_export_directory_reads_whole_as_a_dataset(spark, redis_url, redis_client, tmp_path):
    import pyarrow.dataset as ds

    from jobctl.export.manifest import LEGACY_MANIFEST_NAME, MANIFEST_NAME, find_manifest, load_manifest

    ids = [f"e{i:03d}" for i in range(300)]
    for job_id in ids:
        redis_client.set(K.job(job_id), _job(job_id))
    redis_client.lpush(K.dead, *ids)
    out = tmp_path / "dlq"
    assert main(["--url", redis_url, "export", "dups", "--out", str(out), "--part-rows", "1000",
                 "--batch", "100"]) == 0
    assert (out / MANIFEST_NAME).is_file() and not (out / LEGACY_MANIFEST_NAME).exists()
    assert spark.read.parquet(str(out)).count() == 300
    assert ds.dataset(str(out), format="parquet").count_rows() == 300
    import duckdb  # both in the test extra
    import pandas as pd

    assert len(pd.read_parquet(out)) == 300
    with duckdb.connect() as con:  # DuckDB's idiom for a directory: a glob of its parts
        assert con.execute(f"select count(*) from read_parquet('{out}/*.parquet')").fetchall() == [(300,)]

    (out / MANIFEST_NAME).rename(out / LEGACY_MANIFEST_NAME)  # an export of an older jobctl
    assert load_manifest(out).rows == 300
    find_manifest(out).save(out)  # saving it again renames it
    assert sorted(p.name for p in out.iterdir() if "manifest" in p.name) == [MANIFEST_NAME]


def test_a_cut_table_says_exactly_what_it_leaves_out():
    from jobctl.analyze.report import _more

    rows = [{"jobs": 5}, {"jobs": 3}, {"jobs": 2}]  # 3 listed of 5 rows; the 2 beyond the cap hold 4 jobs
    assert _more(rows, 5, 4, top=1) == [
        "(4 more row(s) holding 9 job(s) not shown here; report.json lists 2 of them; 2 row(s) holding "
        "4 job(s) are beyond the cap of 3 and listed nowhere)", ""]
    assert _more(rows, 3, 0, top=3) == []


def test_a_partitioned_export_reads_whole_with_its_partition_column(spark, redis_url, redis_client, tmp_path):
    ids = [f"p{i:03d}" for i in range(120)]
    for job_id in ids:
        redis_client.set(K.job(job_id), _job(job_id))
    redis_client.lpush(K.dead, *ids)
    out = tmp_path / "dlq"
    assert main(["--url", redis_url, "export", "dups", "--out", str(out), "--partition-by", "day"]) == 0
    df = spark.read.parquet(str(out))
    assert df.count() == 120 and "day" in df.columns
    assert sorted(r["job_id"] for r in df.select("job_id").collect()) == ids
