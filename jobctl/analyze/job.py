"""The PySpark triage job of a DLQ export (``jobctl analyze``).

Reads the parts an export's manifest lists (Parquet, JSONL or CSV) with an
explicit schema (:func:`spark_schema`, from :mod:`jobctl.export.schema`) and
computes, with Spark's built-in functions only (no Python UDF, so executors
need nothing but Spark):

* counts by job type x error code x tenant x job version (:func:`group_counts`);
* error-message fingerprints with first/last seen and samples (:func:`fingerprints`);
* the attempt histogram (:func:`attempt_histogram`);
* age at death, ``lastAttemptAt - createdAt`` (:func:`age_buckets`, :func:`age_stats`);
* deaths per hour (:func:`deaths_per_hour`);
* the classification by rules (:func:`classify`, :mod:`jobctl.analyze.rules`)
  and the redrive plan (:func:`redrive_plan`).

:func:`run_analysis` writes ``report.json``, ``report.md`` and
``redrive-plan.jsonl`` (each under a temporary name, then renamed).

Run on a cluster with ``spark-submit`` (this file is the application)::

    spark-submit --master spark://host:7077 "$(python3 -c \\
        'import jobctl.analyze.job as j; print(j.__file__)')" EXPORT_DIR --out REPORT_DIR \\
        [--rules FILE]

jobctl must be installed where the driver runs; the export directory may be
any path the executors read (``hdfs://``, ``s3a://``, a shared mount).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from jobctl import __version__
from jobctl.analyze.rules import CLASSES, UNCLASSIFIED, RuleSet, load_rules, rule_index_column
from jobctl.errors import DataError, JobctlError, UsageError
from jobctl.export.manifest import MANIFEST_NAME, Manifest, load_manifest
from jobctl.export.schema import COLUMNS

__all__ = ["spark_schema", "read_export", "group_counts", "fingerprints", "attempt_histogram",
           "age_buckets", "age_stats", "deaths_per_hour", "classify", "class_counts", "redrive_plan",
           "run_analysis", "AGE_BUCKETS", "REPORT_SCHEMA_VERSION", "main"]

#: Version of report.json's layout.
REPORT_SCHEMA_VERSION = 1
#: Age-at-death buckets: (label, upper bound in ms, exclusive; None: no bound).
AGE_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("< 1m", 60_000), ("1m-5m", 300_000), ("5m-15m", 900_000), ("15m-1h", 3_600_000),
    ("1h-6h", 21_600_000), ("6h-24h", 86_400_000), ("1d-7d", 604_800_000), (">= 7d", None),
)
_MAX_GROUPS = 10_000
_MAX_FINGERPRINTS = 1_000


# -- reading ------------------------------------------------------------------

def spark_schema():
    """The export's explicit Spark ``StructType`` (all columns nullable)."""
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "int64": T.LongType(), "bool": T.BooleanType(),
             "timestamp": T.TimestampType()}
    return T.StructType([T.StructField(c.name, types[c.kind], True) for c in COLUMNS])


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def read_manifest(spark, export_dir: str) -> Manifest:
    """The complete export's manifest.  Local directories are verified
    (every part's size and SHA-256); others are read through Spark.

    Raises :class:`~jobctl.errors.NotFound` or :class:`DataError`.
    """
    if _is_local(export_dir):
        return load_manifest(_local(export_dir), verify=True, complete=True)
    try:
        text = spark.read.text(_join(export_dir, MANIFEST_NAME), wholetext=True).first()[0]
    except Exception as exc:  # noqa: BLE001 - Spark raises many kinds
        raise DataError(f"{export_dir}: cannot read {MANIFEST_NAME}: {_first_line(exc)}") from None
    m = Manifest.from_json(orjson.loads(text))
    if not m.complete:
        raise DataError(f"{export_dir}: the export is incomplete: rerun the same `jobctl export` to finish it")
    return m


def read_export(spark, export_dir: str, manifest: Manifest | None = None):
    """``(DataFrame, Manifest)`` of the export in ``export_dir`` (explicit schema)."""
    m = manifest or read_manifest(spark, export_dir)
    schema = spark_schema()
    files = [_join(export_dir, p.file) for p in m.parts]
    if not files:
        return spark.createDataFrame([], schema), m
    ts_format = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    reader = spark.read.schema(schema)
    if m.format == "parquet":
        df = reader.parquet(*files)
    elif m.format == "jsonl":
        df = reader.option("mode", "FAILFAST").option("timestampFormat", ts_format).json(files)
    elif m.format == "csv":
        df = (reader.option("header", True).option("multiLine", True).option("escape", '"')
              .option("mode", "FAILFAST").option("timestampFormat", ts_format).csv(files))
    else:
        raise DataError(f"{export_dir}: unknown export format {m.format!r}")
    return df, m


# -- aggregations -------------------------------------------------------------

def _ms(col):
    from pyspark.sql import functions as F

    return F.unix_millis(col)


def group_counts(df):
    """DataFrame ``job_type, error_code, tenant, job_version, jobs,
    first_death_ms, last_death_ms``: one row per group, most jobs first."""
    from pyspark.sql import functions as F

    return (df.groupBy(F.col("job_type"), F.col("last_error_code").alias("error_code"),
                       F.col("tenant_id").alias("tenant"), F.col("job_version"))
            .agg(F.count(F.lit(1)).alias("jobs"),
                 _ms(F.min("last_attempt_at")).alias("first_death_ms"),
                 _ms(F.max("last_attempt_at")).alias("last_death_ms"))
            .orderBy(F.desc("jobs"), F.asc_nulls_last("job_type"), F.asc_nulls_last("error_code"),
                     F.asc_nulls_last("tenant"), F.asc_nulls_last("job_version")))


def fingerprints(df):
    """DataFrame ``fingerprint, pattern, jobs, error_codes, job_types,
    first_seen_ms, last_seen_ms, first_id, first_message, last_id,
    last_message``, most jobs first.

    Messages are grouped first, so the regex normalisation runs once per
    distinct message; first/last are by ``last_attempt_at`` (ties: the
    smaller/larger job id), over jobs that have one.
    """
    from pyspark.sql import functions as F

    from .fingerprint import fingerprint_column, normalise_column

    ts = F.col("last_attempt_at")
    per_message = (df.groupBy(F.col("last_error_message").alias("message"))
                   .agg(F.count(F.lit(1)).alias("jobs"),
                        F.min(F.when(ts.isNotNull(), F.struct(ts.alias("ts"), F.col("job_id").alias("id"))))
                        .alias("first"),
                        F.max(F.when(ts.isNotNull(), F.struct(ts.alias("ts"), F.col("job_id").alias("id"))))
                        .alias("last"),
                        F.collect_set("last_error_code").alias("codes"),
                        F.collect_set("job_type").alias("types")))
    pattern = normalise_column(F.col("message"))
    with_fp = per_message.withColumn("pattern", pattern).withColumn("fingerprint",
                                                                    fingerprint_column(F.col("pattern")))

    def _edge(fn, name):
        c = F.col(name)
        return fn(F.when(c.isNotNull(), F.struct(c["ts"].alias("ts"), c["id"].alias("id"),
                                                 F.col("message").alias("message"))))

    agg = (with_fp.groupBy("fingerprint", "pattern")
           .agg(F.sum("jobs").alias("jobs"), _edge(F.min, "first").alias("first"),
                _edge(F.max, "last").alias("last"),
                F.array_sort(F.array_distinct(F.flatten(F.collect_list("codes")))).alias("error_codes"),
                F.array_sort(F.array_distinct(F.flatten(F.collect_list("types")))).alias("job_types")))
    return (agg.select("fingerprint", "pattern", "jobs", "error_codes", "job_types",
                       _ms(F.col("first.ts")).alias("first_seen_ms"), _ms(F.col("last.ts")).alias("last_seen_ms"),
                       F.col("first.id").alias("first_id"), F.col("first.message").alias("first_message"),
                       F.col("last.id").alias("last_id"), F.col("last.message").alias("last_message"))
            .orderBy(F.desc("jobs"), F.asc_nulls_last("pattern")))


def attempt_histogram(df):
    """DataFrame ``attempt, jobs`` (``attempt`` null: unknown), by attempt."""
    from pyspark.sql import functions as F

    return df.groupBy("attempt").agg(F.count(F.lit(1)).alias("jobs")).orderBy(F.asc_nulls_last("attempt"))


def _age_ms():
    from pyspark.sql import functions as F

    return _ms(F.col("last_attempt_at")) - _ms(F.col("created_at"))


def age_buckets(df):
    """DataFrame ``bucket_index, bucket, jobs``: age at death
    (``lastAttemptAt - createdAt``) in :data:`AGE_BUCKETS`; index
    ``len(AGE_BUCKETS)`` is ``unknown``.  Only non-empty buckets."""
    from pyspark.sql import functions as F

    age = _age_ms()
    idx = None
    for i, (_, upper) in enumerate(AGE_BUCKETS):
        if upper is None:
            idx = idx.otherwise(F.lit(i))
            break
        cond = age < F.lit(upper)
        idx = F.when(cond, F.lit(i)) if idx is None else idx.when(cond, F.lit(i))
    idx = F.when(age.isNull(), F.lit(len(AGE_BUCKETS))).otherwise(idx)
    labels = F.array(*[F.lit(label) for label, _ in AGE_BUCKETS], F.lit("unknown"))
    return (df.select(idx.alias("bucket_index"))
            .groupBy("bucket_index").agg(F.count(F.lit(1)).alias("jobs"))
            .select("bucket_index", F.element_at(labels, F.col("bucket_index") + 1).alias("bucket"), "jobs")
            .orderBy("bucket_index"))


def age_stats(df) -> dict[str, Any]:
    """``{"known", "min_ms", "max_ms", "avg_ms", "p50_ms", "p90_ms", "p99_ms"}``
    of the age at death; percentiles are ``percentile_approx`` (accuracy
    10,000: within 0.01 % of the rank), the rest exact."""
    from pyspark.sql import functions as F

    age = _age_ms()
    row = df.select(age.alias("age")).where(F.col("age").isNotNull()).agg(
        F.count(F.lit(1)).alias("known"), F.min("age").alias("min_ms"), F.max("age").alias("max_ms"),
        F.avg("age").alias("avg_ms"),
        F.percentile_approx("age", [0.5, 0.9, 0.99], 10_000).alias("pct")).first()
    pct = row["pct"] or [None, None, None]
    return {"known": row["known"], "min_ms": row["min_ms"], "max_ms": row["max_ms"],
            "avg_ms": None if row["avg_ms"] is None else round(row["avg_ms"]),
            "p50_ms": pct[0], "p90_ms": pct[1], "p99_ms": pct[2]}


def deaths_per_hour(df):
    """DataFrame ``hour_ms, jobs``: jobs by the UTC hour of ``last_attempt_at``."""
    from pyspark.sql import functions as F

    return (df.where(F.col("last_attempt_at").isNotNull())
            .groupBy(F.date_trunc("hour", "last_attempt_at").alias("hour"))
            .agg(F.count(F.lit(1)).alias("jobs"))
            .select(_ms(F.col("hour")).alias("hour_ms"), "jobs").orderBy("hour_ms"))


def classify(df, rules: RuleSet, snapshot_ms: int):
    """``df`` plus ``rule`` (name, ``None``: no rule matched), ``class`` and
    ``redrive`` (bool): the first matching rule of ``rules`` at ``snapshot_ms``."""
    from pyspark.sql import functions as F

    names = F.array(*[F.lit(r.name) for r in rules.rules]) if rules.rules else None
    classes = F.array(*[F.lit(r.cls) for r in rules.rules]) if rules.rules else None
    redrives = F.array(*[F.lit(r.redrive) for r in rules.rules]) if rules.rules else None
    out = df.withColumn("_rule", rule_index_column(rules, snapshot_ms))
    if names is None:
        return (out.withColumn("rule", F.lit(None).cast("string")).withColumn("class", F.lit(UNCLASSIFIED))
                .withColumn("redrive", F.lit(False)).drop("_rule"))
    matched = F.col("_rule") >= 0
    return (out.withColumn("rule", F.when(matched, F.element_at(names, F.col("_rule") + 1)))
            .withColumn("class", F.when(matched, F.element_at(classes, F.col("_rule") + 1))
                        .otherwise(F.lit(UNCLASSIFIED)))
            .withColumn("redrive", F.when(matched, F.element_at(redrives, F.col("_rule") + 1))
                        .otherwise(F.lit(False)))
            .drop("_rule"))


def class_counts(classified):
    """DataFrame ``class, rule, redrive, jobs`` in class order, then most jobs."""
    from pyspark.sql import functions as F

    order = F.array_position(F.array(*[F.lit(c) for c in CLASSES]), F.col("class"))
    return (classified.groupBy("class", "rule", "redrive").agg(F.count(F.lit(1)).alias("jobs"))
            .orderBy(order, F.desc("jobs"), F.asc_nulls_last("rule")))


def redrive_plan(classified):
    """DataFrame of the jobs judged safe to redrive: dead, well-formed, of a
    rule with ``redrive = true``; columns ``queue, id, payload_sha1, rule,
    class, shard, job_type, error_code, tenant``, by id."""
    from pyspark.sql import functions as F

    return (classified.where((F.col("state") == "dead") & ~F.coalesce(F.col("malformed"), F.lit(True))
                             & F.col("redrive"))
            .select("queue", F.col("job_id").alias("id"), "payload_sha1", "rule", "class", "shard", "job_type",
                    F.col("last_error_code").alias("error_code"), F.col("tenant_id").alias("tenant"))
            .orderBy("id"))


# -- the whole job -------------------------------------------------------------

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return exc.__class__.__name__


def _rows(df, limit: int | None = None) -> list[dict[str, Any]]:
    if limit is not None:
        df = df.limit(limit)
    return [r.asDict(recursive=True) for r in df.collect()]


def _capped(df, cap: int) -> tuple[list[dict[str, Any]], int]:
    """At most ``cap`` rows of ``df`` and its row count (counted only when capped)."""
    rows = _rows(df, cap + 1)
    if len(rows) <= cap:
        return rows, len(rows)
    return rows[:cap], df.count()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_plan(path: Path, plan_df) -> int:
    tmp = path.with_name(f".{path.name}.tmp")
    n = 0
    with open(tmp, "wb", buffering=1 << 20) as f:
        for row in plan_df.toLocalIterator(prefetchPartitions=True):
            f.write(orjson.dumps(row.asDict()) + b"\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def analyse(spark, export_dir: str, out_dir: str | Path, *, rules: RuleSet, top: int = 50,
            master: str | None = None) -> dict[str, Any]:
    """Run the triage on ``spark`` and write the three files; returns the
    report document (what ``report.json`` holds).

    Raises :class:`DataError` (unreadable or incomplete export),
    :class:`~jobctl.errors.NotFound` (no manifest).
    """
    from pyspark.sql import functions as F

    from .report import render_markdown

    started = time.monotonic()
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # hours and dates in UTC, whoever started Spark
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df, m = read_export(spark, export_dir)
    snapshot = m.snapshot_ms
    classified = classify(df, rules, snapshot)

    per_state = _rows(df.groupBy("state").agg(
        F.count(F.lit(1)).alias("jobs"),
        F.sum(F.when(F.col("malformed"), 1).otherwise(0)).alias("malformed"),
        F.sum(F.when(F.coalesce(F.col("attempt") >= F.col("max_attempts"), F.lit(False)), 1).otherwise(0))
        .alias("exhausted")).orderBy("state"))
    by_state = {r["state"]: r["jobs"] for r in per_state}
    groups, groups_total = _capped(group_counts(df), _MAX_GROUPS)
    fps, fps_total = _capped(fingerprints(df), _MAX_FINGERPRINTS)
    classes = _rows(class_counts(classified))
    descriptions = {r.name: r.description for r in rules.rules}
    for c in classes:
        c["description"] = descriptions.get(c["rule"], "no rule matched" if c["rule"] is None else "")
    class_totals = {c: 0 for c in CLASSES}
    for c in classes:
        class_totals[c["class"]] = class_totals.get(c["class"], 0) + c["jobs"]
    plan_path = out / "redrive-plan.jsonl"
    planned = _write_plan(plan_path, redrive_plan(classified))
    report: dict[str, Any] = {
        "kind": "jobctl-analyze-report", "schema_version": REPORT_SCHEMA_VERSION, "jobctl_version": __version__,
        "generated_ms": time.time_ns() // 1_000_000,
        "export": {"directory": export_dir, "queue": m.queue, "layout": m.selector.get("layout"),
                   "states": m.selector.get("states"), "filter": m.selector.get("filter"), "format": m.format,
                   "snapshot_ms": snapshot, "server": m.source.get("server"), "rows": m.rows,
                   "parts": len(m.parts)},
        "spark": {"master": master or spark.sparkContext.master, "version": spark.version},
        "rows": sum(by_state.values()), "by_state": by_state,
        "malformed": sum(r["malformed"] or 0 for r in per_state),
        "groups": groups, "groups_total": groups_total,
        "fingerprints": fps, "fingerprints_total": fps_total,
        "attempts": _rows(attempt_histogram(df)),
        "attempts_exhausted": sum(r["exhausted"] or 0 for r in per_state),
        "age_at_death": {"buckets": [{"bucket": r["bucket"], "jobs": r["jobs"]} for r in _rows(age_buckets(df))],
                         **age_stats(df)},
        "deaths_per_hour": _rows(deaths_per_hour(df)),
        "classes": classes, "class_totals": class_totals,
        "redrive": {"planned": planned, "file": plan_path.name,
                    "command": f"jobctl redrive {m.queue} --plan {plan_path}"},
        "rules": rules.to_json(),
    }
    report["seconds"] = round(time.monotonic() - started, 3)
    _write_atomic(out / "report.json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    _write_atomic(out / "report.md", render_markdown(report, top=top).encode("utf-8"))
    return report


def summary_of(report: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """The short summary ``jobctl analyze`` prints (``--json``)."""
    out = Path(out_dir)
    return {
        "queue": report["export"]["queue"], "rows": report["rows"], "by_state": report["by_state"],
        "malformed": report["malformed"], "classes": report["classes"], "class_totals": report["class_totals"],
        "top_groups": report["groups"][:10], "groups_total": report["groups_total"],
        "fingerprints_total": report["fingerprints_total"], "redrive_planned": report["redrive"]["planned"],
        "seconds": report["seconds"],
        "files": {"report_json": str(out / "report.json"), "report_md": str(out / "report.md"),
                  "redrive_plan": str(out / "redrive-plan.jsonl")},
    }


def run_analysis(export_dir: str, out_dir: str | Path, *, master: str = "local[*]",
                 rules_path: str | None = None, conf: dict[str, str] | None = None, top: int = 50,
                 note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Load the rules, start (or reuse) a SparkSession, :func:`analyse`;
    returns :func:`summary_of` the report.

    Raises :class:`UsageError` (bad rules, no pyspark or Java),
    :class:`DataError` (unreadable export; Spark's own errors are turned
    into one line), :class:`~jobctl.errors.NotFound` (no manifest).
    """
    from .spark import spark_session

    rules = load_rules(rules_path)
    if _is_local(export_dir):  # fail before starting a JVM
        load_manifest(_local(export_dir), verify=False, complete=True)
    say = note or (lambda _text: None)
    say(f"starting Spark ({master}) ...")
    with spark_session(master, conf) as spark:
        try:
            report = analyse(spark, export_dir, out_dir, rules=rules, top=top, master=master)
        except JobctlError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J/Spark errors: one line
            raise DataError(f"analysis failed: {_first_line(exc)}") from None
    return summary_of(report, out_dir)


def main(argv: list[str] | None = None) -> int:
    """``spark-submit job.py EXPORT_DIR --out REPORT_DIR [--rules FILE] [--top N]``."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="jobctl-analyze", description="jobctl DLQ triage (PySpark)")
    p.add_argument("export_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--rules")
    p.add_argument("--top", type=int, default=50)
    args = p.parse_args(argv)
    try:
        from pyspark.sql import SparkSession

        rules = load_rules(args.rules)
        spark = SparkSession.builder.appName("jobctl-analyze").getOrCreate()
        report = analyse(spark, args.export_dir, args.out, rules=rules, top=args.top)
    except (JobctlError, UsageError) as exc:
        print(f"jobctl-analyze: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 1))
    print(orjson.dumps(summary_of(report, args.out), option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":  # spark-submit entry point
    raise SystemExit(main())
