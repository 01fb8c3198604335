"""Every table of the triage report from one Spark action over the cached scan.

One ``groupingSets`` aggregation of the scan (:func:`grouped`: jobs and
first/last death per fine group, attempt, age bucket, hour, job type x error
code x hour, and rule), read by every table through one lazy local checkpoint
(:func:`_shared`), is the source of the rollups, the trend and the histograms
(one table split on the driver by grouping id); the fingerprints, the
per-state counts and the age statistics are aggregations of the scan beside
it.  Each table becomes rows ``(t, j)`` (its name, one row as JSON) and their
union is collected once
(:func:`collect_tables`): aggregates only, at most one row past a cap for the
tables that grow with the data (a table past its cap is then counted whole:
one more job, only then).  The driver splits and orders the rows (bounded:
no per-job work).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import reduce
from typing import Any

import orjson

from jobctl.analyze.aggregations import AGE_BUCKETS, age_bucket_column, age_stats_frame, age_stats_of, fingerprints
from jobctl.analyze.rollups import order_groups, tenant_rollup, type_code_rollup
from jobctl.analyze.rules import CLASSES
from jobctl.analyze.trend import TREND_GROUPS

__all__ = ["GROUPING_SETS", "grouped", "collect_tables"]

#: The grouping sets of :func:`grouped`: name -> its columns.
GROUPING_SETS: dict[str, tuple[str, ...]] = {
    "fine": ("job_type", "error_code", "tenant", "job_version"),
    "attempts": ("attempt",),
    "age": ("bucket_index",),
    "hours": ("hour",),
    "trend": ("job_type", "error_code", "hour"),
    "classes": ("class", "rule", "redrive"),
}
_KEYS = ("job_type", "error_code", "tenant", "job_version", "attempt", "bucket_index", "hour", "class", "rule",
         "redrive")
#: The histograms of :data:`GROUPING_SETS` collected as one table: name -> its columns (then ``jobs``).
_HISTOGRAMS: dict[str, tuple[str, ...]] = {"attempts": ("attempt",), "age": ("bucket_index",),
                                           "hours": ("hour_ms",), "classes": ("class", "rule", "redrive")}
#: The capped tables (name -> the ordered DataFrame of it, from the grouped scan and the scan).
_CAPPED = ("by_type_code", "by_tenant", "groups", "fingerprints")


def _gid(name: str) -> int:
    """``grouping_id()`` of a set: a bit for each key not in it, the first key the most significant."""
    keys = GROUPING_SETS[name]
    return sum(1 << (len(_KEYS) - 1 - i) for i, k in enumerate(_KEYS) if k not in keys)


def grouped(df):
    """DataFrame ``<the keys>, gid, jobs, first_death_ms, last_death_ms``: one
    aggregation of the (classified) scan ``df`` over :data:`GROUPING_SETS`;
    ``gid`` tells the set a row belongs to (a key outside its set is null)."""
    from pyspark.sql import functions as F

    ts = F.col("last_attempt_at")
    rows = df.select("job_type", F.col("last_error_code").alias("error_code"), F.col("tenant_id").alias("tenant"),
                     "job_version", "attempt", age_bucket_column().alias("bucket_index"),
                     F.date_trunc("hour", ts).alias("hour"), "class", "rule", "redrive", ts.alias("ts"))
    return (rows.groupingSets([list(keys) for keys in GROUPING_SETS.values()], *_KEYS)
            .agg(F.grouping_id().alias("gid"), F.count(F.lit(1)).alias("jobs"),
                 F.unix_millis(F.min("ts")).alias("first_death_ms"),
                 F.unix_millis(F.max("ts")).alias("last_death_ms")))


def _set(g, name: str, *cols):
    from pyspark.sql import functions as F

    return g.where(F.col("gid") == _gid(name)).select(*cols)


def _shared(g):
    """``g`` behind a lazy local checkpoint: every table reads one aggregation
    of the scan.  Without it the optimiser pushes each table's filter on
    ``gid`` below the aggregation and each table aggregates the scan again;
    a cached ``g`` is not matched in the union's later branches.  Made under
    :func:`_query_settings` (adaptive execution would run it; the
    checkpoint's RDD keeps the shuffle partitions it was made with)."""
    return g.localCheckpoint(eager=False)


def _per_state(df):
    from pyspark.sql import functions as F

    exhausted = F.coalesce(F.col("attempt") >= F.col("max_attempts"), F.lit(False))
    return df.groupBy("state").agg(
        F.count(F.lit(1)).alias("jobs"), F.countDistinct("job_id").alias("ids"),
        F.sum(F.when(F.col("malformed"), 1).otherwise(0)).alias("malformed"),
        F.sum(F.when(exhausted, 1).otherwise(0)).alias("exhausted"))


def _trend(g, by_type_code, listed: int):
    """Deaths per hour of the top :data:`~.trend.TREND_GROUPS` type x code groups, at most the ``listed``
    rows of that table (nulls matched as nulls)."""
    from pyspark.sql import functions as F

    top = by_type_code.limit(min(TREND_GROUPS, listed)).select(F.col("job_type").alias("top_type"),
                                                  F.col("error_code").alias("top_code"))
    hours = _set(g, "trend", "job_type", "error_code", "hour", "jobs").where(F.col("hour").isNotNull())
    on = F.col("job_type").eqNullSafe(F.col("top_type")) & F.col("error_code").eqNullSafe(F.col("top_code"))
    # a shuffled join, not a broadcast: a broadcast would run the top groups as a Spark job of their own
    return hours.join(top.hint("shuffle_hash"), on).select("job_type", "error_code",
                                                   F.unix_millis(F.col("hour")).alias("hour_ms"), "jobs")


def _tables(df, caps: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(listed, capped)``: name -> DataFrame to collect, and the capped
    tables (name -> ordered DataFrame; listed up to one row past its cap)."""
    from pyspark.sql import functions as F

    g = _shared(grouped(df))
    fine = _set(g, "fine", "job_type", "error_code", "tenant", "job_version", "jobs", "first_death_ms",
                "last_death_ms")
    by_type_code = type_code_rollup(fine)
    capped = {"by_type_code": by_type_code, "by_tenant": tenant_rollup(fine), "groups": order_groups(fine),
              "fingerprints": fingerprints(df)}
    listed = {
        "per_state": _per_state(df), "age_stats": age_stats_frame(df),
        "trend": _trend(g, by_type_code, caps["by_type_code"]),
        # the small histograms as one table, split on the driver by grouping id
        "histograms": g.where(F.col("gid").isin(*[_gid(name) for name in _HISTOGRAMS]))
        .select("gid", "attempt", "bucket_index", F.unix_millis(F.col("hour")).alias("hour_ms"), "class", "rule",
                "redrive", "jobs"),
    }
    for name, table in capped.items():  # one row past the cap tells a capped table
        listed[name] = table.limit(caps[name] + 1)
    return listed, capped


def collect_tables(df, caps: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every table of the report from the cached, classified scan ``df`` in
    one Spark action (and one more for each table longer than its cap, to
    count it).  ``caps``: the row cap of ``by_type_code``,
    ``by_tenant``, ``groups`` and ``fingerprints``.

    Returns ``(tables, capped)``: ``tables`` maps ``per_state``,
    ``attempts``, ``age`` (``bucket_index, bucket, jobs``), ``hours``,
    ``trend``, ``classes`` to lists of row dicts in report order,
    ``age_stats`` to :func:`~.aggregations.age_stats_of`, and each capped table to
    ``{"rows", "total", "listed", "more_jobs"}`` (exact counts);
    ``capped`` maps a capped table's name to its whole ordered DataFrame
    (for writing it as Parquet).  Spark's errors propagate.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    with _query_settings(df.sparkSession):
        listed, capped = _tables(df, caps)
        as_json = [t.select(F.lit(name).alias("t"),
                            F.to_json(F.struct(*t.columns), {"ignoreNullFields": "false"}).alias("j"))
                   for name, t in listed.items()]
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in listed}
        for r in reduce(DataFrame.unionByName, as_json).collect():
            rows[r["t"]].append(orjson.loads(r["j"]))
    rows.update(_histograms(rows.pop("histograms")))
    return split(rows, caps, capped), capped


def _histograms(rows: list[dict]) -> dict[str, list[dict]]:
    """The :data:`_HISTOGRAMS` tables (name -> rows ``{<its columns>, jobs}``)
    from the rows of their one table, by grouping id; the hours without one
    (no time of death) are left out."""
    names = {_gid(name): name for name in _HISTOGRAMS}
    out: dict[str, list[dict]] = {name: [] for name in _HISTOGRAMS}
    for r in rows:
        name = names[r["gid"]]
        if name != "hours" or r["hour_ms"] is not None:
            out[name].append({**{k: r[k] for k in _HISTOGRAMS[name]}, "jobs": r["jobs"]})
    return out


#: Shuffle partitions at most for the one query: its shuffles carry aggregates
#: (bounded by the groups), and without adaptive execution nothing coalesces
#: Spark's default 200 (a standalone master ran 200 tasks a stage).
QUERY_PARTITIONS = 16


@contextmanager
def _query_settings(spark) -> Iterator[None]:
    """The settings of the one query, the session's restored after it:
    adaptive execution off (it would run each of the union's shuffles as a
    job of its own, all at once), so the query is one Spark job with the
    identical shuffles reused; at most :data:`QUERY_PARTITIONS` shuffle
    partitions."""
    parts = spark.conf.get("spark.sql.shuffle.partitions", "200")
    settings = {"spark.sql.adaptive.enabled": "false",
                "spark.sql.shuffle.partitions": str(min(int(parts), QUERY_PARTITIONS))}
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _last(v):
    """Sort key part: ``v`` ascending, nulls last."""
    return (1, 0) if v is None else (0, v)


def _capped(rows: list[dict], table, cap: int) -> dict[str, Any]:
    """``{"rows", "total", "listed", "more_jobs"}`` of a table listed up to
    one row past ``cap``; only a capped one is counted whole (a Spark job)."""
    if len(rows) <= cap:
        return {"rows": rows, "total": len(rows), "listed": len(rows), "more_jobs": 0}
    from pyspark.sql import functions as F

    whole = table.agg(F.count(F.lit(1)).alias("n"), F.sum("jobs").alias("jobs")).first()
    listed = rows[:cap]
    return {"rows": listed, "total": whole["n"], "listed": cap,
            "more_jobs": int(whole["jobs"] or 0) - sum(r["jobs"] for r in listed)}


def split(rows: dict[str, list[dict]], caps: dict[str, int], capped: dict[str, Any]) -> dict[str, Any]:
    """The tables of :func:`collect_tables` from its rows by table name, in
    the report's order (Spark's: binary string order, nulls last unless
    said); ``capped``: the capped tables' DataFrames, counted when capped."""
    keys = {
        "by_type_code": lambda r: (-r["jobs"], _last(r["job_type"]), _last(r["error_code"])),
        "by_tenant": lambda r: (-r["jobs"], _last(r["tenant"])),
        "groups": lambda r: (-r["jobs"], _last(r["job_type"]), _last(r["error_code"]), _last(r["tenant"]),
                             _last(r["job_version"])),
        "fingerprints": lambda r: (-r["jobs"], _last(r["pattern"])),
        "per_state": lambda r: (r["state"] is not None, r["state"] or ""),  # nulls first, as orderBy("state")
        "attempts": lambda r: _last(r["attempt"]),
        "age": lambda r: r["bucket_index"],
        "hours": lambda r: r["hour_ms"],
        "classes": lambda r: (CLASSES.index(r["class"]) if r["class"] in CLASSES else -1, -r["jobs"],
                              _last(r["rule"])),
    }
    out: dict[str, Any] = {name: sorted(rows[name], key=key) for name, key in keys.items()}
    rank = {(r["job_type"], r["error_code"]): i for i, r in enumerate(out["by_type_code"])}
    # by hour, most deaths first; a tie goes to the group higher in the headline table
    out["trend"] = sorted(rows["trend"], key=lambda r: (r["hour_ms"], -r["jobs"],
                                                         rank.get((r["job_type"], r["error_code"]), len(rank))))
    labels = [label for label, _ in AGE_BUCKETS] + ["unknown"]
    out["age"] = [{"bucket_index": r["bucket_index"], "bucket": labels[r["bucket_index"]], "jobs": r["jobs"]}
                  for r in out["age"]]
    out["age_stats"] = age_stats_of(rows["age_stats"][0])
    for name in _CAPPED:
        out[name] = _capped(out[name], capped[name], caps[name])
    return out
