"""Mutating commands: requeue, redrive, promote, suppress, unsuppress, purge.

Each one plans first (read-only), prints the plan, asks for confirmation
(``--yes`` is required without a terminal), then applies it in bounded,
fenced batches, journals it and prints the result.  ``--dry-run`` stops after
the plan and changes nothing; it is allowed in read-only mode.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable

import click

from ..durations import parse_duration
from ..errors import UsageError
from ..exitcodes import ExitCode
from ..model import State
from ..ops.spec import Operation, OpSpec
from ..session import Session
from . import options, render

__all__ = ["COMMANDS", "execute", "invocation"]

pass_session = click.make_pass_decorator(Session)


def _filter_option(required: bool = False):
    return click.option("--filter", "filter_text", metavar="EXPR", required=required,
                        help="Filter expression, e.g. 'error ~ \"HTTP_5*\" and tenant = t1' (docs/filter.md).")


def _common(fn: Callable) -> Callable:
    for opt in reversed([
        click.option("--limit", type=options.JOB_LIMIT, help="Touch at most N jobs."),
        click.option("--rate", type=options.RATE, metavar="N", help="At most N jobs per second."),
        click.option("--batch", type=click.IntRange(1, 5000), default=None,
                     help="Jobs per script call (default: the layout's; 128 for reliable-list)."),
        click.option("--dry-run", is_flag=True, help="Print the plan; change nothing."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (required without a TTY)."),
        click.option("--json", "as_json", is_flag=True, help="Print the plan and result as JSON."),
    ]):
        fn = opt(fn)
    return fn


def _duration(value: str | None, what: str) -> int:
    if value is None:
        return 0
    try:
        return parse_duration(value)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None


def _compile(filter_text: str | None):
    from ..filter import MATCH_ALL, compile_filter

    return MATCH_ALL if filter_text is None else compile_filter(filter_text)


class _StopFlag:
    """First Ctrl-C: stop after the current batch.  Second: interrupt now."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        self._old = None

    def __enter__(self) -> "_StopFlag":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.flag.is_set():
            raise KeyboardInterrupt
        self.flag.set()
        render.note("stopping after the current batch (Ctrl-C again to abort now)")

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def invocation() -> list[str]:
    """The running command as the operator typed it, from click's parsed
    parameters (``jobctl --url URL redrive email --filter ... --yes``): what
    the journal records.  ``sys.argv`` is not it when jobctl runs in-process
    (``jobctl.cli.main.main(argv)``, the TUI).  Only parameters given on the
    command line are listed; values are not redacted here
    (:func:`jobctl.ops.journal.command_line` does that)."""
    from click.core import ParameterSource

    chain = []
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        chain.append(ctx)
        ctx = ctx.parent
    out: list[str] = []
    for ctx in reversed(chain):
        out.append(ctx.info_name or "jobctl")
        for param in ctx.command.params:
            if param.name is None or ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE:
                continue
            value = ctx.params.get(param.name)
            values = list(value) if isinstance(value, (tuple, list)) else [value]
            if isinstance(param, click.Argument):
                out.extend(str(v) for v in values)
            elif isinstance(param, click.Option):
                name = max(param.opts, key=len)
                if param.is_flag:
                    out.append(name if value else (param.secondary_opts or [name])[0])
                else:
                    for v in values:
                        out += [name, str(v)]
    return out


def _print_plan(plan, as_json: bool) -> None:
    if as_json:
        return
    con = render.console()
    from rich.table import Table

    con.print(f"[bold]{plan.describe()}[/]")
    con.print(f"scanned {plan.scanned:,} job(s); matched {plan.planned:,}"
              + (" (stopped at --limit)" if plan.truncated else "")
              + (f"; filter: {plan.spec.filter.text}" if plan.spec.filter.text else ""))
    if plan.breakdown:
        t = Table(header_style="bold")
        t.add_column("job type")
        t.add_column("error")
        t.add_column("jobs", justify="right")
        for (jt, err), n in plan.breakdown.most_common(20):
            t.add_row(jt, err, f"{n:,}")
        if len(plan.breakdown) > 20:
            t.add_row("…", f"{len(plan.breakdown) - 20} more groups", "")
        con.print(t)
    if plan.planned:
        con.print("sample ids: " + ", ".join(plan.sample_ids()))
    if plan.malformed:
        render.note(f"warning: {len(plan.malformed):,} job(s) with malformed envelopes excluded "
                    f"(e.g. {', '.join(plan.malformed[:5])})")
    if plan.dangling:
        render.note(f"warning: {len(plan.dangling):,} dangling id(s) without payload excluded "
                    f"(e.g. {', '.join(plan.dangling[:5])}); see `jobctl check`")
    if plan.fence_skipped:
        from collections import Counter

        why = ", ".join(f"{k}: {v:,}" for k, v in Counter(plan.fence_skipped.values()).items())
        render.note(f"{len(plan.fence_skipped):,} fenced job(s) skipped ({why}), "
                    f"e.g. {', '.join(list(plan.fence_skipped)[:5])}")


def _confirm(plan, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {plan.spec.operation.value} {plan.planned:,} job(s) without --yes "
                         "(stdin is not a terminal)")
    if not click.confirm(f"{plan.describe()}. Proceed?", default=False, err=True):
        raise click.exceptions.Abort()


def execute(session: Session, spec: OpSpec, *, dry_run: bool, yes: bool, as_json: bool,
            rate: float | None, batch: int) -> int:
    """Plan, confirm, apply, journal and report ``spec``; returns the exit code."""
    from ..ops.engine import run_plan

    if not dry_run:
        session.require_writable(spec.operation.value)
    with session.errors():
        layout = session.layout(spec.queue)
        plan = layout.plan(spec)
    if spec.fence is not None:  # whatever the layout: never an id outside the fence
        plan.jobs = [j for j in plan.jobs if j.job_id in spec.fence]
    _print_plan(plan, as_json)
    if dry_run:
        res = run_plan(layout, plan, dry_run=True, journal=False)
        if as_json:
            render.print_json({**res.to_json(), "plan": plan.to_json()})
        return int(ExitCode.OK)
    if plan.planned == 0:
        if as_json:
            render.print_json({**run_plan(layout, plan, dry_run=False, journal=False).to_json(),
                               "plan": plan.to_json()})
        else:
            render.note("nothing to do: no job matches")
        return int(ExitCode.PARTIAL if plan.fence_skipped else ExitCode.OK)
    _confirm(plan, yes)
    progress_cb, finish = _progress(plan.planned, enabled=not as_json)
    with _StopFlag() as stop:
        try:
            res = run_plan(layout, plan, rate=rate, batch=batch, stop=stop.flag.is_set,
                           progress=progress_cb, target=session.target, argv=invocation())
        finally:
            finish()
    for p in res.journal_problems:
        render.note(f"warning: {p}")
    if as_json:
        render.print_json({**res.to_json(), "plan": plan.to_json()})
    else:
        reasons = ", ".join(f"{k}: {v:,}" for k, v in res.skipped_reasons.items())
        click.echo(f"{res.operation} {res.queue}: planned {res.planned:,}, moved {res.moved:,}, "
                   f"skipped {res.skipped:,}{f' ({reasons})' if reasons else ''}, failed {res.failed:,}"
                   f"{' (interrupted: run the same command again to finish)' if res.interrupted else ''}"
                   f"  [{res.operation_id}]")
    if res.interrupted:
        return int(ExitCode.INTERRUPTED)
    return int(ExitCode.PARTIAL if (res.skipped or res.failed) else ExitCode.OK)


def _progress(total: int, enabled: bool):
    """A rich progress bar on stderr for long runs on a terminal."""
    if not enabled or total < 1000 or not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    prog = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=render.console(stderr=True), transient=False)
    task = prog.add_task("jobs", total=total)
    prog.start()
    return (lambda done, _total: prog.update(task, completed=done)), prog.stop


def _visibility_known(session: Session, queue: str, visibility: str | None, stuck: bool) -> None:
    """Use ``--visibility-timeout`` for ``queue``; refuse ``--stuck`` on a
    defaulted one (a guess would requeue jobs live workers still hold)."""
    from dataclasses import replace

    from ..config import defaulted_visibility

    with session.errors():
        q = session.queue(queue)
    if visibility is not None:
        ms = _duration(visibility, "--visibility-timeout")
        if ms < 1:
            raise UsageError("--visibility-timeout must be at least 1ms")
        if q.name in session.config.queues:
            session.config.queues[q.name] = replace(q, visibility_timeout_ms=ms)
        return
    default = defaulted_visibility(q)
    if default is not None:
        if stuck:
            raise UsageError(f"requeue --stuck on queue {q.name}: its visibility timeout is not configured (the "
                             f"{q.layout} default {default:,} ms is a guess; a longer worker timeout would "
                             "requeue live jobs): set visibility_timeout_ms or pass --visibility-timeout")
        render.note(f"warning: queue {q.name}: visibility_timeout_ms is not configured; deadlines shown use the "
                    f"{q.layout} default of {default:,} ms")


@click.command()
@click.argument("queue")
@click.option("--stuck", is_flag=True, help="Processing jobs past their visibility deadline.")
@click.option("--ids", multiple=True, metavar="ID", help="These processing job ids (repeatable).")
@click.option("--priority", type=options.PRIORITY, help="Ready list pN of a priority queue (default: lowest).")
@click.option("--visibility-timeout", "visibility", type=options.DELAY, metavar="DURATION",
              help="The workers' visibility timeout, for layouts that store no deadline and whose "
                   "catalogue entry sets none (else --stuck refuses).")
@_filter_option()
@_common
@pass_session
def requeue(session: Session, queue, stuck, ids, priority, visibility, filter_text, limit, rate, batch, dry_run,
            yes, as_json) -> int:
    """Put processing jobs back on the ready list (the reaper of seed 000 s.8).

    A job moves only if its visibility deadline is still the one the plan saw:
    a worker that acked, failed or renewed it in the meantime is left alone.
    With --stuck on a layout that stores no deadline (stream-group, hash-job,
    json-list), the visibility timeout must be known: from the catalogue's
    visibility_timeout_ms or --visibility-timeout.
    """
    if not stuck and not ids:
        raise UsageError("requeue needs --stuck or --ids")
    _visibility_known(session, queue, visibility, stuck)
    spec = OpSpec(Operation.REQUEUE, queue, State.PROCESSING, State.READY, filter=_compile(filter_text),
                  ids=tuple(ids), stuck_only=stuck, limit=limit, priority=priority)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@_filter_option()
@click.option("--ids", multiple=True, metavar="ID", help="These dead job ids (repeatable).")
@click.option("--to", "to", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True)
@click.option("--delay", type=options.DELAY, metavar="DURATION",
              help="With --to scheduled: due this long after the redrive.")
@click.option("--reset-attempts", is_flag=True, help="Set the envelope's attempt to 0 (default: kept).")
@click.option("--priority", type=options.PRIORITY, help="Ready list pN of a priority queue (default: lowest).")
@click.option("--plan", "plan_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="redrive-plan.jsonl of `jobctl analyze`: only those jobs, each only if still dead and unchanged.")
@_common
@pass_session
def redrive(session: Session, queue, filter_text, ids, to, delay, reset_attempts, priority, plan_file, limit, rate,
            batch, dry_run, yes, as_json) -> int:
    """Move dead jobs back to ready (or scheduled), keeping their ids.

    The envelope records the redrive: redrivenAtEpochMs, redriveOperation
    (the operation id, also in the journal) and redriveCount.  The attempt
    counter is kept unless --reset-attempts, so a job that fails again goes
    back to the DLQ at once instead of starting a new retry storm.
    Malformed envelopes are never redriven.
    """
    if delay and to != "scheduled":
        raise UsageError("--delay needs --to scheduled")
    if plan_file and ids:
        raise UsageError("--plan and --ids exclude each other")
    from ..export.fence import read_redrive_plan

    spec = OpSpec(Operation.REDRIVE, queue, State.DEAD, State(to), filter=_compile(filter_text),
                  ids=tuple(ids), limit=limit, delay_ms=_duration(delay, "--delay"),
                  reset_attempts=reset_attempts, priority=priority,
                  fence=read_redrive_plan(plan_file, queue) if plan_file else None)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@_filter_option()
@click.option("--ids", multiple=True, metavar="ID", help="These scheduled job ids (repeatable).")
@click.option("--priority", type=options.PRIORITY, help="Ready list pN of a priority queue (default: lowest).")
@_common
@pass_session
def promote(session: Session, queue, filter_text, ids, priority, limit, rate, batch, dry_run, yes,
            as_json) -> int:
    """Move scheduled jobs to ready now."""
    spec = OpSpec(Operation.PROMOTE, queue, State.SCHEDULED, State.READY, filter=_compile(filter_text),
                  ids=tuple(ids), limit=limit, priority=priority)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@_filter_option(required=True)
@click.option("--reason", required=True, metavar="TEXT", help="Why (kept with who and when).")
@_common
@pass_session
def suppress(session: Session, queue, filter_text, reason, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move dead jobs to suppressed: kept for audit, excluded from redrive and DLQ alerts."""
    if not reason.strip():
        raise UsageError("--reason must not be empty")
    spec = OpSpec(Operation.SUPPRESS, queue, State.DEAD, State.SUPPRESSED, filter=_compile(filter_text),
                  limit=limit, reason=reason)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@_filter_option()
@_common
@pass_session
def unsuppress(session: Session, queue, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move suppressed jobs back to the dead-letter queue."""
    spec = OpSpec(Operation.UNSUPPRESS, queue, State.SUPPRESSED, State.DEAD, filter=_compile(filter_text),
                  limit=limit)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@click.option("--state", type=click.Choice(["dead", "suppressed", "ready", "scheduled"]), required=True,
              help="ready and scheduled: layouts whose members are the jobs (delay-zset).")
@click.option("--older-than", type=options.DELAY, metavar="DURATION", help="Only jobs dead for at least this long.")
@_filter_option()
@click.option("--no-export", is_flag=True, help="Purge without exporting first.")
@click.option("--export-to", metavar="DIR", type=options.OUT_DIR,
              help="Export the matching jobs to DIR first (or use the export there), then purge exactly those.")
@click.option("--export-format", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True, help="Format of the --export-to export.")
@_common
@pass_session
def purge(session: Session, queue, state, older_than, filter_text, no_export, export_to, export_format, limit, rate,
          batch, dry_run, yes, as_json) -> int:
    """Delete dead or suppressed jobs: the index entry and the payload together.

    With --export-to DIR the matching jobs are first exported there (as
    `jobctl export` does; an export already in DIR is used), then exactly the
    exported ids are purged, each only if unchanged since the export.
    """
    if no_export and export_to:
        raise UsageError("--no-export and --export-to exclude each other")
    if export_to and limit is not None:
        raise UsageError("--limit cannot be combined with --export-to: the export holds every matching job, "
                         "and the purge removes exactly what it holds")
    if not no_export and not export_to and not dry_run:
        raise UsageError("purge deletes jobs for good: pass --export-to DIR to export them first, "
                         "or --no-export to confirm you do not need an export")
    text = filter_text
    if older_than:
        ms = _duration(older_than, "--older-than")
        clause = f"dead_for >= {ms}ms"
        text = clause if not text else f"({text}) and {clause}"
    fence = None
    if export_to:  # export, then purge exactly the exported ids (jobctl.export.fence)
        from ..export.fence import export_fence

        if not dry_run:
            session.require_writable("purge")
        fence = export_fence(session, queue, State(state), text, export_to, fmt=export_format, dry_run=dry_run,
                             note=render.note)
    spec = OpSpec(Operation.PURGE, queue, State(state), None, filter=_compile(text), limit=limit, fence=fence)
    return execute(session, spec, dry_run=dry_run, yes=yes, as_json=as_json, rate=rate, batch=batch)


COMMANDS = [requeue, redrive, promote, suppress, unsuppress, purge]
