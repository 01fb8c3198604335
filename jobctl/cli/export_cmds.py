"""``jobctl export`` (DLQ and other states to files) and ``jobctl analyze``
(the PySpark triage of an export).

``export`` reads Redis and writes files; it never writes to Redis, so it is
allowed in read-only mode.  ``analyze`` reads only the export directory.
pyarrow and pyspark are imported by the command bodies, never at start-up.
"""

from __future__ import annotations

import sys
import time

import click

from ..errors import UsageError
from ..exitcodes import ExitCode
from ..model import State
from ..session import Session
from .. import humanize
from . import options, render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)

_EXPORT_STATES = ["dead", "suppressed", "ready", "scheduled", "processing"]


def _progress_bar(total: int):
    """A rich progress bar on stderr when stderr is a terminal (else no-op):
    jobs scanned with rate, elapsed and ETA, and the jobs exported."""
    if total < 1000 or not sys.stderr.isatty():
        return None, lambda: None
    update, stop = render.progress(total, "scanned")
    return (lambda scanned, exported: update(min(scanned, total), f"· exported {exported:,}")), stop


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--state", "states", multiple=True, type=click.Choice(_EXPORT_STATES),
              help="State to export (repeatable).  [default: dead]")
@click.option("--filter", "filter_text", metavar="EXPR", type=options.FILTER,
              help="Only jobs matching this filter (docs/filter.md), evaluated at the snapshot time.")
@click.option("--out", "out_dir", required=True, metavar="DIR", type=options.OUT_DIR,
              help="Export directory (created; an interrupted export there is continued).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True)
@click.option("--part-rows", type=options.Count(1000, options.MAX_JOBS), default=500_000, show_default=True,
              help="Rows per part file.")
@click.option("--batch", type=options.Count(1, 10_000), default=1000, show_default=True,
              help="Jobs read per Redis round trip.")
@click.option("--partition-by", type=click.Choice(["day", "type"]),
              help="Parts in one directory per UTC day the job died (day=2026-11-28/) or per job type "
                   "(type=webhook.deliver/), which Spark, pandas, pyarrow and DuckDB read as a column.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_session
def export(session: Session, queue, states, filter_text, out_dir, fmt, part_rows, batch, partition_by,
           as_json) -> int:
    """Export every matching job of QUEUE to part files plus _manifest.json.

    \b
    Streams in constant memory: envelope fields become typed columns, with
    the raw value, state, shard, positions, timestamps and payload_sha1.
    A malformed envelope is exported with its raw bytes and flagged.
    Parquet parts carry an explicit schema Spark reads (timestamps in
    microseconds, UTC); JSONL and CSV hold ISO-8601 UTC text.
    Parts are written under a temporary name, then renamed; _manifest.json
    records the selector, counts per state, schema version, snapshot time,
    the server (no password) and a SHA-256 per part.  Interrupted?  Run the
    same command again: it continues.  Then:
      jobctl analyze DIR --out REPORT_DIR
      jobctl purge QUEUE --state dead --export-to DIR
    """
    from ..export.exporter import run_export
    from ..filter import MATCH_ALL, compile_filter

    flt = MATCH_ALL if filter_text is None else compile_filter(filter_text)
    wanted = [State(s) for s in (states or ("dead",))]
    with session.errors():
        layout = session.read_layout(queue)
        for s in wanted:
            layout.check_supported(s)
        total = sum(layout.depth(s) for s in wanted)
        progress, finish = _progress_bar(total) if not as_json else (None, lambda: None)
        started = time.monotonic()
        try:
            res = run_export(layout, out_dir, states=wanted, flt=flt, fmt=fmt, server=session.target.display,
                             part_rows=part_rows, batch=batch, progress=progress, note=render.note,
                             partition_by=partition_by)
        except KeyboardInterrupt:
            finish()
            render.note(f"interrupted: the parts written so far are kept; run the same command again "
                        f"to continue the export in {out_dir}")
            return int(ExitCode.INTERRUPTED)
        except OSError as exc:  # disk full, permissions changed under us: one line, exit 2
            from ..errors import UsageError

            raise UsageError(f"--out: cannot write the export in {out_dir}: {exc.strerror or exc}") from None
        finally:
            finish()
    m = res.manifest
    if as_json:
        render.print_json(res.to_json())
        return int(ExitCode.OK)
    if res.already_complete:
        render.note(f"{out_dir} already holds this export, complete: nothing to do")
    counts = ", ".join(f"{s}: {n:,}" for s, n in m.counts.items())
    malformed = f"; {m.malformed:,} malformed (flagged)" if m.malformed else ""
    click.echo(f"exported {m.rows:,} job(s) of {m.queue} ({counts}{malformed}) to {out_dir} in "
               f"{len(m.parts)} {m.format} part(s); scanned {sum(m.scanned.values()):,}"
               f"{humanize.took(sum(m.scanned.values()), (time.monotonic() - started) * 1000)}")
    return int(ExitCode.OK)


@click.command()
@click.argument("export_dir", required=False, metavar="EXPORT_DIR")
@click.option("--out", "out_dir", metavar="REPORT_DIR", type=options.OUT_DIR,
              help="Where report.json, report.md and redrive-plan.jsonl go (created).")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master: local[*], local[N], spark://host:7077, yarn, k8s://...")
@click.option("--rules", "rules_file", metavar="FILE", type=click.Path(dir_okay=False, exists=True),
              help="Classification rules (TOML); default: the shipped rule set (--default-rules prints it).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="Any Spark setting (repeatable), over jobctl's defaults, for every master: "
                   "e.g. spark.driver.memory=4g (default 2g), spark.executor.memory=8g.")
@click.option("--top", type=options.Count(1, 1_000_000), default=50, show_default=True,
              help="Rows per table in report.md.")
@click.option("--default-rules", "print_rules", is_flag=True, help="Print the default rules file and exit.")
@click.option("--from-redis", "from_queue", metavar="QUEUE",
              help="Read QUEUE's dead jobs straight from Redis (no export first): Spark's executors read "
                   "them window by window, one partition per shard.")
@click.option("--json", "as_json", is_flag=True, help="Print the report summary as JSON.")
@click.pass_context
def analyze(ctx, export_dir, out_dir, master, rules_file, confs, top, print_rules, from_queue, as_json) -> int:
    """Triage an export with PySpark: groups, fingerprints, classes, redrive plan.

    \b
    Counts by job type x error code x tenant x job version; error-message
    fingerprints (durations, sizes, numbers, ids, hex normalised away) with first and last
    seen and samples; the attempt histogram; age at death; a classification
    by rules (retryable, permanent, expired-deadline, bad-input,
    needs-idempotency).  Writes report.json,
    report.md and redrive-plan.jsonl (dead jobs judged safe to redrive,
    each with its rule and payload_sha1), then:
      jobctl redrive QUEUE --plan REPORT_DIR/redrive-plan.jsonl
    \b
    Runs on this machine by default (local[*], no UI, quiet logs); needs a
    Java runtime (17+) and pyspark (pip install 'jobctl[spark]').  On a
    cluster, pass --master, or submit the same job:
      spark-submit --master spark://host:7077 \\
        "$(python3 -c 'import jobctl.analyze.job as j; print(j.__file__)')" \\
        EXPORT_DIR --out REPORT_DIR
    --from-redis QUEUE reads the queue's dead jobs straight from Redis
    instead (no export first; the executors connect with this command's
    URL, one partition per shard tag): the same report, and a plan that
    redrive --plan applies with the same skip-if-changed rule.
    EXPORT_DIR may then be any path Spark reads (hdfs://, s3a://);
    REPORT_DIR is written by the driver, the plan's part files by the
    executors (in REPORT_DIR/.redrive-plan.jsonl.parts, joined by the
    driver): on a cluster REPORT_DIR must be shared with the executors.
    \b
    Spark settings: jobctl's defaults (driver memory 2g, the driver JVM
    exits on OutOfMemoryError, no UI, UTC; on local[...] loopback only and
    small shuffles), then each --conf KEY=VALUE, the same for every master.
    Exit status: 0 done; 2 bad option or rules; 5 no export in EXPORT_DIR
    (or no queue QUEUE); 3 Redis unreachable;
    6 the export is incomplete or does not match its manifest; 1 Spark
    failed (its error in one line on stderr; nothing hangs on a driver out
    of memory).
    """
    from ..analyze.rules import default_rules_text

    if print_rules:
        sys.stdout.write(default_rules_text())
        return int(ExitCode.OK)
    if bool(export_dir) == bool(from_queue):
        raise UsageError("give EXPORT_DIR or --from-redis QUEUE (one of them)")
    if not out_dir:
        raise UsageError("missing option --out REPORT_DIR")
    conf = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {item!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    from ..analyze.job import run_analysis

    read = _redis_read(ctx.obj, from_queue) if from_queue else None
    summary = run_analysis(export_dir or f"redis: {from_queue}", out_dir, master=master, rules_path=rules_file,
                           conf=conf, top=top, note=render.note, read=read)
    if as_json:
        render.print_json(summary)
        return int(ExitCode.OK)
    _print_summary(summary)
    return int(ExitCode.OK)


def _redis_read(session: Session, queue: str):
    """``read(spark)`` of ``queue``'s dead jobs straight from Redis (the
    catalogue entry and URL of ``session``), for :func:`run_analysis`."""
    with session.errors():
        q = session.queue(queue)
        session.read_layout(q).check_supported(State.DEAD)

    def read(spark):
        from ..analyze.redis_source import read_redis

        return read_redis(spark, session.target.url, q, session.target.display)

    return read


def _print_summary(summary: dict) -> None:
    con = render.console()
    from rich.table import Table

    con.print(f"[bold]{summary['queue']}[/]: {summary['rows']:,} job(s) analysed "
              f"({', '.join(f'{s}: {n:,}' for s, n in summary['by_state'].items()) or 'none'}); "
              f"{summary['malformed']:,} malformed")
    if (spike := summary.get("spike")) and spike.get("group_jobs"):
        render.note(f"busiest hour: {spike['jobs']:,} deaths; {spike['job_type']} x {spike['error_code']} made "
                    f"{spike['group_jobs']:,} of them (report.html charts it)")
    if summary.get("duplicate_entries"):
        render.note(f"warning: {summary['duplicate_entries']:,} duplicate entr(ies): an id held more than once "
                    "in one state; the redrive plan lists each job once (see `jobctl check`)")
    t = Table(header_style="bold", title="classification", title_justify="left")
    for col, just in (("class", "left"), ("rule", "left"), ("redrive", "left"), ("jobs", "right")):
        t.add_column(col, justify=just)
    for c in summary["classes"]:
        t.add_row(c["class"], c["rule"], "yes" if c["redrive"] else "no", f"{c['jobs']:,}")
    con.print(t)
    t = Table(header_style="bold", title=f"jobs by job type x error code (top {len(summary['top_type_code'])} "
              f"of {summary['type_code_total']:,}; per tenant and drill-down in the report)", title_justify="left")
    for col, just in (("job type", "left"), ("error", "left"), ("jobs", "right"), ("share", "right"),
                      ("tenants", "right")):
        t.add_column(col, justify=just)
    for g in summary["top_type_code"]:
        share = f"{100 * g['jobs'] / summary['rows']:.1f}%" if summary["rows"] else "-"
        t.add_row(g["job_type"] or "-", g["error_code"] or "-", f"{g['jobs']:,}", share, f"{g['tenants']:,}")
    con.print(t)
    con.print(f"redrive plan: {summary['redrive_planned']:,} job(s) -> {summary['files']['redrive_plan']}")
    con.print(f"report: {summary['files']['report_md']} and {summary['files']['report_json']}")


COMMANDS = [export, analyze]
