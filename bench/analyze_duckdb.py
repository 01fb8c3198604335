"""The side of ``analyze_bench`` that is not Spark: the same groups computed
by DuckDB (in-process) over the same Parquet part files, and the Spark job
and stage counts of one ``jobctl analyze``, read from Spark's event log.

DuckDB is a bench-only dependency (``pip install duckdb``); without it the
comparison is skipped and said so.
"""

from __future__ import annotations

import glob
import time
from pathlib import Path

import orjson

__all__ = ["QUERIES", "duckdb_seconds", "event_log_conf", "spark_job_stage_counts"]

#: The rollups ``jobctl analyze`` writes, as DuckDB SQL over the view ``dead``:
#: the groups (type x code x tenant x version), type x code, per tenant, per
#: error fingerprint (messages with numbers, hex and UUIDs normalised), per
#: hour of death, and the attempt histogram.
QUERIES = {
    "groups": "SELECT job_type, last_error_code, tenant_id, job_version, count(*) FROM dead GROUP BY ALL",
    "type_code": "SELECT job_type, last_error_code, count(*) FROM dead GROUP BY ALL",
    "tenant": "SELECT tenant_id, count(*) FROM dead GROUP BY ALL",
    "fingerprint": r"""SELECT fp, count(*), min(last_error_message), max(last_error_message) FROM (
        SELECT last_error_message, regexp_replace(regexp_replace(regexp_replace(last_error_message,
            '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
            '\b[0-9]+(\.[0-9]+)?\s?(ms|s|m|h|KiB|MiB|GiB|KB|MB|GB)\b', '<n><unit>', 'g'),
            '[0-9]+', '<n>', 'g') AS fp FROM dead) GROUP BY fp""",
    "hour": "SELECT date_trunc('hour', last_attempt_at), count(*) FROM dead GROUP BY ALL",
    "attempts": "SELECT attempt, count(*) FROM dead GROUP BY ALL",
}


def _parts(export_dir: Path) -> list[str]:
    return sorted(glob.glob(str(export_dir / "**" / "part-*.parquet"), recursive=True))


def duckdb_seconds(export_dir: Path) -> tuple[float, dict[str, int], float] | None:
    """``(seconds, {query: result rows}, CPU seconds of this process)`` of every :data:`QUERIES` rollup
    over the export's part files in one DuckDB connection (``threads`` left
    at DuckDB's default: every core); ``None`` when duckdb is not installed."""
    try:
        import duckdb
    except ImportError:
        return None
    t0, cpu0 = time.monotonic(), time.process_time()
    con = duckdb.connect()
    try:
        parts = ", ".join("'" + p.replace("'", "''") + "'" for p in _parts(export_dir))
        con.execute(f"CREATE VIEW dead AS SELECT * FROM read_parquet([{parts}])")
        rows = {name: len(con.execute(sql).fetchall()) for name, sql in QUERIES.items()}
    finally:
        con.close()
    return time.monotonic() - t0, rows, time.process_time() - cpu0


def event_log_conf(directory: Path) -> str:
    """``PYSPARK_SUBMIT_ARGS`` that make a PySpark driver write its event
    log under ``directory`` (read back by :func:`spark_job_stage_counts`)."""
    directory.mkdir(parents=True, exist_ok=True)
    return (f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file://{directory} "
            "--conf spark.eventLog.compress=false pyspark-shell")


def spark_job_stage_counts(directory: Path) -> tuple[int, int, int]:
    """``(jobs, stages run, stages skipped)`` in the event logs under
    ``directory``: ``SparkListenerJobStart`` events, ``SparkListenerStageCompleted``
    events, and stages a job listed but never ran (their shuffle output reused)."""
    jobs = completed = listed = 0
    for log in (p for p in directory.rglob("*") if p.is_file()):
        for line in log.read_bytes().splitlines():
            if b'"SparkListenerJobStart"' in line:
                jobs += 1
                listed += len(orjson.loads(line).get("Stage Infos", []))
            elif b'"SparkListenerStageCompleted"' in line:
                completed += 1
    return jobs, completed, max(0, listed - completed)
