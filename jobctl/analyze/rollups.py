"""Complete rollups of the triage job: every job counted in each table.

From one aggregation of the export (:func:`fine_groups`: job type x error
code x tenant x job version, kept in Spark's cache) come the headline table,
job type x error code (:func:`type_code_rollup`), the per-tenant table
(:func:`tenant_rollup`) and the fine groups themselves (the drill-down).
Each table's counts sum to the export's row count.  :func:`capped_table`
collects at most a cap of rows and says exactly what it left out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fine_groups", "order_groups", "type_code_rollup", "tenant_rollup", "capped_table", "whole_table"]


def fine_groups(df):
    """DataFrame ``job_type, error_code, tenant, job_version, jobs,
    first_death_ms, last_death_ms``: one row per group, unordered."""
    from pyspark.sql import functions as F

    return (df.groupBy(F.col("job_type"), F.col("last_error_code").alias("error_code"),
                       F.col("tenant_id").alias("tenant"), F.col("job_version"))
            .agg(F.count(F.lit(1)).alias("jobs"),
                 F.unix_millis(F.min("last_attempt_at")).alias("first_death_ms"),
                 F.unix_millis(F.max("last_attempt_at")).alias("last_death_ms")))


def order_groups(fine):
    """``fine`` most jobs first, then by type, code, tenant, version (nulls last)."""
    from pyspark.sql import functions as F

    return fine.orderBy(F.desc("jobs"), F.asc_nulls_last("job_type"), F.asc_nulls_last("error_code"),
                        F.asc_nulls_last("tenant"), F.asc_nulls_last("job_version"))


def _rollup(fine, keys: list[str], distinct: str, distinct_name: str):
    from pyspark.sql import functions as F

    return (fine.groupBy(*keys)
            .agg(F.sum("jobs").alias("jobs"), F.count_distinct(F.col(distinct)).alias(distinct_name),
                 F.min("first_death_ms").alias("first_death_ms"), F.max("last_death_ms").alias("last_death_ms"))
            .orderBy(F.desc("jobs"), *[F.asc_nulls_last(k) for k in keys]))


def type_code_rollup(fine):
    """DataFrame ``job_type, error_code, jobs, tenants, first_death_ms,
    last_death_ms`` from :func:`fine_groups`, most jobs first."""
    return _rollup(fine, ["job_type", "error_code"], "tenant", "tenants")


def tenant_rollup(fine):
    """DataFrame ``tenant, jobs, job_types, first_death_ms, last_death_ms``
    from :func:`fine_groups`, most jobs first."""
    return _rollup(fine, ["tenant"], "job_type", "job_types")


def capped_table(df, cap: int) -> dict[str, Any]:
    """``{"rows", "total", "listed", "more_jobs"}`` of a table with a
    ``jobs`` column: at most ``cap`` rows (in ``df``'s order), the table's
    row count, the rows listed and the jobs in the rows left out (exact;
    ``0`` when nothing is left out).  Counts the table only when capped.
    """
    from pyspark.sql import functions as F

    rows = [r.asDict(recursive=True) for r in df.limit(cap + 1).collect()]
    if len(rows) <= cap:
        return {"rows": rows, "total": len(rows), "listed": len(rows), "more_jobs": 0}
    rows = rows[:cap]
    whole = df.agg(F.count(F.lit(1)).alias("n"), F.sum("jobs").alias("jobs")).first()
    return {"rows": rows, "total": whole["n"], "listed": cap,
            "more_jobs": int(whole["jobs"] or 0) - sum(r["jobs"] for r in rows)}


def whole_table(df, table: dict[str, Any], out_dir, name: str) -> dict[str, Any]:
    """``table`` (:func:`capped_table` of ``df``); when capped, ``df`` whole
    is written as Parquet under ``out_dir/tables/name`` (by the executors:
    on a cluster ``out_dir`` must be shared with them) and ``table["file"]``
    names it, relative to ``out_dir``."""
    from pathlib import Path

    if table["total"] > table["listed"]:
        df.write.mode("overwrite").parquet(str(Path(out_dir) / "tables" / name))
        table["file"] = f"tables/{name}"
    return table
