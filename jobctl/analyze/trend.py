"""Which group made the spike: deaths per hour of the top job type x error
code groups, and the hour with the most deaths with the group that led it.
Computed from the triage job's cached scan (:func:`jobctl.analyze.job.analyse`)."""

from __future__ import annotations

from typing import Any

__all__ = ["TREND_GROUPS", "group_trend", "spike"]

#: The job type x error code groups (most jobs first) whose hours are reported.
TREND_GROUPS = 8


def group_trend(df, groups: list[dict[str, Any]]):
    """DataFrame ``job_type, error_code, hour_ms, jobs``: deaths per UTC hour
    of ``last_attempt_at`` of each of ``groups`` (rows of the type x code
    rollup: ``job_type``, ``error_code``; nulls matched as nulls)."""
    from functools import reduce

    from pyspark.sql import functions as F

    picked = [(F.col("job_type").eqNullSafe(F.lit(g["job_type"]))
               & F.col("last_error_code").eqNullSafe(F.lit(g["error_code"]))) for g in groups]
    if not picked:
        return None
    return (df.where(F.col("last_attempt_at").isNotNull() & reduce(lambda a, b: a | b, picked))
            .groupBy(F.col("job_type"), F.col("last_error_code").alias("error_code"),
                     F.date_trunc("hour", "last_attempt_at").alias("hour"))
            .agg(F.count(F.lit(1)).alias("jobs"))
            .select("job_type", "error_code", F.unix_millis(F.col("hour")).alias("hour_ms"), "jobs")
            .orderBy("hour_ms", F.desc("jobs")))


def spike(per_hour: list[dict[str, Any]], trend: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"hour_ms", "jobs", "job_type", "error_code", "group_jobs"}``: the
    hour with the most deaths (the latest on a tie) and the trend group with
    the most deaths in it (``job_type`` ``None`` when no top group died then);
    ``None`` when nothing died with a known time."""
    if not per_hour:
        return None
    top = max(per_hour, key=lambda h: (h["jobs"], h["hour_ms"]))
    in_hour = [t for t in trend if t["hour_ms"] == top["hour_ms"]]
    lead = max(in_hour, key=lambda t: t["jobs"], default=None)
    return {"hour_ms": top["hour_ms"], "jobs": top["jobs"],
            "job_type": lead["job_type"] if lead else None, "error_code": lead["error_code"] if lead else None,
            "group_jobs": lead["jobs"] if lead else 0}
