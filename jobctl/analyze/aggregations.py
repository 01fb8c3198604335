"""The aggregations of the triage job (:mod:`jobctl.analyze.job`), each a
DataFrame (or a dict) built from Spark's built-in functions only: group
counts, message fingerprints, attempts, age at death, deaths per hour, the
classification by rules and the redrive plan."""

from __future__ import annotations

from typing import Any

from jobctl.analyze.rules import CLASSES, UNCLASSIFIED, RuleSet, rule_index_column

__all__ = ["group_counts", "fingerprints", "attempt_histogram", "age_bucket_column", "age_buckets", "age_stats",
           "age_stats_frame", "age_stats_of", "deaths_per_hour",
           "classify", "class_counts", "redrive_plan", "AGE_BUCKETS"]

#: Age-at-death buckets: (label, upper bound in ms, exclusive; None: no bound).
AGE_BUCKETS: tuple[tuple[str, int | None], ...] = (
    ("< 1m", 60_000), ("1m-5m", 300_000), ("5m-15m", 900_000), ("15m-1h", 3_600_000),
    ("1h-6h", 21_600_000), ("6h-24h", 86_400_000), ("1d-7d", 604_800_000), (">= 7d", None),
)


def _ms(col):
    from pyspark.sql import functions as F

    return F.unix_millis(col)


def group_counts(df):
    """DataFrame ``job_type, error_code, tenant, job_version, jobs,
    first_death_ms, last_death_ms``: one row per group, most jobs first
    (:mod:`jobctl.analyze.rollups`)."""
    from jobctl.analyze.rollups import fine_groups, order_groups

    return order_groups(fine_groups(df))


def fingerprints(df):
    """DataFrame ``fingerprint, pattern, jobs, error_codes, job_types,
    first_seen_ms, last_seen_ms, first_id, first_message, last_id,
    last_message``, most jobs first.

    Messages are grouped first, so the regex normalisation runs once per
    distinct message; first/last are by ``last_attempt_at`` (ties: the
    smaller/larger job id), over jobs that have one.
    """
    from pyspark.sql import functions as F

    from jobctl.analyze.fingerprint import fingerprint_column, normalise_column

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


def age_bucket_column():
    """Spark column: the :data:`AGE_BUCKETS` index of the age at death
    (``lastAttemptAt - createdAt``); ``len(AGE_BUCKETS)`` when unknown."""
    from pyspark.sql import functions as F

    age = _age_ms()
    idx = None
    for i, (_, upper) in enumerate(AGE_BUCKETS):
        if upper is None:
            idx = idx.otherwise(F.lit(i))
            break
        cond = age < F.lit(upper)
        idx = F.when(cond, F.lit(i)) if idx is None else idx.when(cond, F.lit(i))
    return F.when(age.isNull(), F.lit(len(AGE_BUCKETS))).otherwise(idx)


def age_buckets(df):
    """DataFrame ``bucket_index, bucket, jobs``: age at death
    (``lastAttemptAt - createdAt``) in :data:`AGE_BUCKETS`; index
    ``len(AGE_BUCKETS)`` is ``unknown``.  Only non-empty buckets."""
    from pyspark.sql import functions as F

    labels = F.array(*[F.lit(label) for label, _ in AGE_BUCKETS], F.lit("unknown"))
    return (df.select(age_bucket_column().alias("bucket_index"))
            .groupBy("bucket_index").agg(F.count(F.lit(1)).alias("jobs"))
            .select("bucket_index", F.element_at(labels, F.col("bucket_index") + 1).alias("bucket"), "jobs")
            .orderBy("bucket_index"))


def age_stats_frame(df):
    """One-row DataFrame ``known, min_ms, max_ms, avg_ms, pct`` (``pct``: the
    approximate 50th, 90th, 99th percentiles) of the age at death."""
    from pyspark.sql import functions as F

    return df.select(_age_ms().alias("age")).where(F.col("age").isNotNull()).agg(
        F.count(F.lit(1)).alias("known"), F.min("age").alias("min_ms"), F.max("age").alias("max_ms"),
        F.avg("age").alias("avg_ms"),
        F.percentile_approx("age", [0.5, 0.9, 0.99], 10_000).alias("pct"))


def age_stats_of(row: dict[str, Any]) -> dict[str, Any]:
    """The :func:`age_stats` dict of an :func:`age_stats_frame` row (as a dict)."""
    pct = row["pct"] or [None, None, None]
    return {"known": row["known"], "min_ms": row["min_ms"], "max_ms": row["max_ms"],
            "avg_ms": None if row["avg_ms"] is None else round(row["avg_ms"]),
            "p50_ms": pct[0], "p90_ms": pct[1], "p99_ms": pct[2]}


def age_stats(df) -> dict[str, Any]:
    """``{"known", "min_ms", "max_ms", "avg_ms", "p50_ms", "p90_ms", "p99_ms"}``
    of the age at death; percentiles are ``percentile_approx`` (accuracy
    10,000: within 0.01 % of the rank), the rest exact."""
    return age_stats_of(age_stats_frame(df).first().asDict())


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
    class, shard, job_type, error_code, tenant``.  One row per (queue, id):
    a job the dead list holds twice is planned once.  Sorted by id within
    each partition (no global sort)."""
    from pyspark.sql import functions as F

    return (classified.where((F.col("state") == "dead") & ~F.coalesce(F.col("malformed"), F.lit(True))
                             & F.col("redrive"))
            .select("queue", F.col("job_id").alias("id"), "payload_sha1", "rule", "class", "shard", "job_type",
                    F.col("last_error_code").alias("error_code"), F.col("tenant_id").alias("tenant"))
            .dropDuplicates(["queue", "id"])
            .sortWithinPartitions("id"))
