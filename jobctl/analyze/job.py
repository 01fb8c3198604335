"""The PySpark triage job of a DLQ export (``jobctl analyze``).

Reads the parts an export's manifest lists (Parquet, JSONL or CSV) with an
explicit schema (:func:`spark_schema`, from :mod:`jobctl.export.schema`) and
computes (:mod:`jobctl.analyze.aggregations`, re-exported here), with Spark's
built-in functions only (no Python UDF, so executors need nothing but Spark):

* complete rollups (:mod:`jobctl.analyze.rollups`): job type x error code
  (the headline), per tenant, and job type x error code x tenant x job
  version (:func:`group_counts`); each sums to the row count, and a table
  cut at its cap says how many rows and jobs it left out;
* error-message fingerprints with first/last seen and samples (:func:`fingerprints`);
* the attempt histogram (:func:`attempt_histogram`);
* age at death, ``lastAttemptAt - createdAt`` (:func:`age_buckets`, :func:`age_stats`);
* deaths per hour (:func:`deaths_per_hour`);
* the classification by rules (:func:`classify`, :mod:`jobctl.analyze.rules`)
  and the redrive plan (:func:`redrive_plan`).

The report runs these over one cached scan of the export, every table in
one Spark action (:mod:`jobctl.analyze.onepass`: grouping sets, then one
collect of bounded aggregates), plus the plan's write (and, when a table is
capped, its whole Parquet copy).  :func:`run_analysis` writes
``report.json``, ``report.md`` and ``redrive-plan.jsonl`` (each under a
temporary name, then renamed).

Run on a cluster with ``spark-submit`` (this file is the application)::

    spark-submit --master spark://host:7077 "$(python3 -c \\
        'import jobctl.analyze.job as j; print(j.__file__)')" EXPORT_DIR --out REPORT_DIR \\
        [--rules FILE]

jobctl must be installed where the driver runs; the export directory may be
any path the executors read (``hdfs://``, ``s3a://``, a shared mount).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from jobctl import __version__
from jobctl.analyze.aggregations import (AGE_BUCKETS, age_buckets, age_stats, attempt_histogram, class_counts,
                                        classify, deaths_per_hour, fingerprints, group_counts, redrive_plan)
from jobctl.analyze.onepass import collect_tables
from jobctl.analyze.rollups import whole_table
from jobctl.analyze.trend import spike
from jobctl.analyze.rules import CLASSES, RuleSet, load_rules
from jobctl.errors import DataError, JobctlError, UsageError
from jobctl.exitcodes import ExitCode
from jobctl.export.manifest import MANIFEST_NAME, MANIFEST_NAMES, Manifest, load_manifest
from jobctl.export.schema import COLUMNS

__all__ = ["spark_schema", "read_export", "group_counts", "fingerprints", "attempt_histogram",
           "age_buckets", "age_stats", "deaths_per_hour", "classify", "class_counts", "redrive_plan",
           "run_analysis", "AGE_BUCKETS", "REPORT_SCHEMA_VERSION", "SparkFailed", "main"]

class SparkFailed(JobctlError):
    """A Spark job failed, or the JVM did not start or exited (exit code 1)."""

    exit_code = ExitCode.FAILURE


#: Version of report.json's layout.
REPORT_SCHEMA_VERSION = 1
_MAX_GROUPS = 10_000
_MAX_FINGERPRINTS = 1_000
#: export columns no aggregate or rule reads (kept out of the cache)
_UNREAD = ("raw", "raw_base64", "payload_json", "extra_json", "problems", "trace_id", "correlation_id",
           "payload_ref")


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
    text = None
    for name in MANIFEST_NAMES:  # _manifest.json, else an older export's manifest.json
        try:
            text = spark.read.text(_join(export_dir, name), wholetext=True).first()[0]
            break
        except Exception as exc:  # noqa: BLE001 - Spark raises many kinds
            error = exc
    if text is None:
        raise DataError(f"{export_dir}: cannot read {MANIFEST_NAME}: {_first_line(error)}") from None
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


# -- the whole job -------------------------------------------------------------

def _first_line(exc: BaseException) -> str:
    """One line of ``exc``: for a Py4J error the Java exception's own line
    (``org.apache.spark.SparkException: Job aborted ...``), not "An error
    occurred while calling o71.collectToPython"."""
    lines = [ln.strip().lstrip(": ").strip() for ln in str(exc).strip().splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        return exc.__class__.__name__
    if lines[0].startswith("An error occurred while calling") and len(lines) > 1:
        return lines[1][:300]
    return lines[0][:300]


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_plan(path: Path, plan_df) -> int:
    """Write ``plan_df`` as JSON lines at ``path``; returns the line count.

    The executors write the rows (``DataFrame.write``, one file per
    partition, in ``.<name>.parts`` beside ``path``: on a cluster that
    directory must be one the executors and the driver share); the driver
    then joins the part files into ``path`` (a temporary name, then
    renamed), copying bytes: no row passes through the driver's memory.
    """
    parts = path.with_name(f".{path.name}.parts")
    shutil.rmtree(parts, ignore_errors=True)
    (plan_df.write.mode("overwrite").option("ignoreNullFields", False).option("compression", "none")
     .json(parts.resolve().as_uri()))
    tmp = path.with_name(f".{path.name}.tmp")
    n = 0
    with open(tmp, "wb") as out:
        for part in sorted(parts.glob("part-*")):
            with open(part, "rb") as f:
                while chunk := f.read(1 << 20):
                    out.write(chunk)
                    n += chunk.count(b"\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    shutil.rmtree(parts, ignore_errors=True)
    return n


def _master(spark, master: str | None) -> str | None:
    """The master's name, from the caller or the session's conf (no SparkContext: Spark Connect has none)."""
    if master:
        return master
    try:
        return spark.conf.get("spark.master", None)
    except Exception:  # noqa: BLE001 - a Connect server may not tell
        return None


def analyse(spark, export_dir: str, out_dir: str | Path, *, rules: RuleSet, top: int = 50,
            master: str | None = None, read=None) -> dict[str, Any]:
    """Run the triage on ``spark`` and write the three files; returns the
    report document (what ``report.json`` holds).  ``read(spark)``, when
    given, replaces :func:`read_export` (``(DataFrame, Manifest)``: e.g. a
    queue read straight from Redis, :func:`.redis_source.read_redis`).

    Raises :class:`DataError` (unreadable or incomplete export),
    :class:`~jobctl.errors.NotFound` (no manifest).
    """
    from .report import render_markdown
    from .report_html import render_html

    started = time.monotonic()
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # hours and dates in UTC, whoever started Spark
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exported, m = read(spark) if read is not None else read_export(spark, export_dir)
    snapshot = m.snapshot_ms
    # one scan of the export, classified once and cached (without the bulky raw and payload
    # columns no aggregate reads): every table below reads the cache
    df = classify(exported.drop(*_UNREAD), rules, snapshot).cache()
    tables, whole = collect_tables(df, {"by_type_code": _MAX_GROUPS, "by_tenant": _MAX_GROUPS,
                                        "groups": _MAX_GROUPS, "fingerprints": _MAX_FINGERPRINTS})
    for name, table in whole.items():  # a capped table is also written whole, as Parquet
        whole_table(table, tables[name], out, name)
    per_state = tables["per_state"]
    by_state = {r["state"]: r["jobs"] for r in per_state}
    # entries beyond the first of one id in one state (a dead list holding X twice): planned once
    duplicates = {r["state"]: r["jobs"] - r["ids"] for r in per_state if r["jobs"] > r["ids"]}
    by_type_code, by_tenant, groups, fps = (tables[n] for n in ("by_type_code", "by_tenant", "groups",
                                                                   "fingerprints"))
    hours, trend, classes = tables["hours"], tables["trend"], tables["classes"]
    descriptions = {r.name: r.description for r in rules.rules}
    for c in classes:
        c["description"] = descriptions.get(c["rule"], "no rule matched" if c["rule"] is None else "")
    class_totals = {c: 0 for c in CLASSES}
    for c in classes:
        class_totals[c["class"]] = class_totals.get(c["class"], 0) + c["jobs"]
    plan_path = out / "redrive-plan.jsonl"
    planned = _write_plan(plan_path, redrive_plan(df))
    report: dict[str, Any] = {
        "kind": "jobctl-analyze-report", "schema_version": REPORT_SCHEMA_VERSION, "jobctl_version": __version__,
        "generated_ms": time.time_ns() // 1_000_000,
        "export": {"directory": export_dir, "queue": m.queue, "layout": m.selector.get("layout"),
                   "states": m.selector.get("states"), "filter": m.selector.get("filter"), "format": m.format,
                   "snapshot_ms": snapshot, "server": m.source.get("server"), "rows": m.rows,
                   "parts": len(m.parts)},
        "spark": {"master": _master(spark, master), "version": spark.version},
        "rows": sum(by_state.values()), "by_state": by_state,
        "malformed": sum(r["malformed"] or 0 for r in per_state),
        "duplicate_entries": sum(duplicates.values()), "duplicate_entries_by_state": duplicates,
        "by_type_code": by_type_code, "by_tenant": by_tenant,
        "groups": groups["rows"], "groups_total": groups["total"], "groups_more_jobs": groups["more_jobs"],
        "groups_file": groups.get("file"),
        "fingerprints": fps["rows"], "fingerprints_total": fps["total"], "fingerprints_more_jobs": fps["more_jobs"],
        "fingerprints_file": fps.get("file"),
        "attempts": tables["attempts"],
        "attempts_exhausted": sum(r["exhausted"] or 0 for r in per_state),
        "age_at_death": {"buckets": [{"bucket": r["bucket"], "jobs": r["jobs"]} for r in tables["age"]],
                         **tables["age_stats"]},
        "deaths_per_hour": hours, "group_trend": trend, "spike": spike(hours, trend),
        "classes": classes, "class_totals": class_totals,
        "redrive": {"planned": planned, "file": plan_path.name,
                    "command": f"jobctl redrive {m.queue} --plan {plan_path}"},
        "rules": rules.to_json(),
    }
    df.unpersist()
    report["seconds"] = round(time.monotonic() - started, 3)
    _write_atomic(out / "report.json", orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    _write_atomic(out / "report.md", render_markdown(report, top=top).encode("utf-8"))
    _write_atomic(out / "report.html", render_html(report, top=top).encode("utf-8"))
    return report


def summary_of(report: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """The short summary ``jobctl analyze`` prints (``--json``)."""
    out = Path(out_dir)
    return {
        "queue": report["export"]["queue"], "rows": report["rows"], "by_state": report["by_state"],
        "malformed": report["malformed"], "duplicate_entries": report["duplicate_entries"],
        "classes": report["classes"], "class_totals": report["class_totals"],
        "top_type_code": report["by_type_code"]["rows"][:10], "type_code_total": report["by_type_code"]["total"],
        "tenants_total": report["by_tenant"]["total"], "groups_total": report["groups_total"],
        "fingerprints_total": report["fingerprints_total"], "redrive_planned": report["redrive"]["planned"],
        "seconds": report["seconds"],
        "spike": report.get("spike"),
        "files": {"report_json": str(out / "report.json"), "report_md": str(out / "report.md"),
                  "report_html": str(out / "report.html"),
                  "redrive_plan": str(out / "redrive-plan.jsonl")},
    }


def run_analysis(export_dir: str, out_dir: str | Path, *, master: str = "local[*]",
                 rules_path: str | None = None, conf: dict[str, str] | None = None, top: int = 50,
                 note: Callable[[str], None] | None = None, read=None) -> dict[str, Any]:
    """Load the rules, start (or reuse) a SparkSession, :func:`analyse`
    (``read``: as there, ``export_dir`` then only names the source);
    returns :func:`summary_of` the report.

    Raises :class:`UsageError` (bad rules, no pyspark or Java),
    :class:`DataError` (incomplete or unreadable export),
    :class:`~jobctl.errors.NotFound` (no manifest), :class:`SparkFailed`
    (any Spark or Py4J error, a JVM that exits or does not start: one line).
    """
    from .spark import spark_session

    rules = load_rules(rules_path)
    if read is None and _is_local(export_dir):  # fail before starting a JVM
        load_manifest(_local(export_dir), verify=False, complete=True)
    say = note or (lambda _text: None)
    say(f"starting Spark ({master}) ...")
    try:
        with spark_session(master, conf) as spark:
            report = analyse(spark, export_dir, out_dir, rules=rules, top=top, master=master, read=read)
    except JobctlError:
        raise
    except Exception as exc:  # noqa: BLE001 - Py4J/Spark errors, a JVM that did not start: one line
        raise SparkFailed(f"Spark failed: {_first_line(exc)}") from None
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
    except Exception as exc:  # noqa: BLE001 - Spark's errors: one line
        print(f"jobctl-analyze: error: Spark failed: {_first_line(exc)}", file=sys.stderr)
        return int(ExitCode.FAILURE)
    print(orjson.dumps(summary_of(report, args.out), option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":  # spark-submit entry point
    raise SystemExit(main())
