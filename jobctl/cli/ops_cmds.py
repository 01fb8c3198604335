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

from ..errors import UsageError
from ..model import State
from ..ops import interrupt
from ..ops.request import OpRequest
from ..ops.spec import Operation
from ..session import Session
from . import options, render

__all__ = ["COMMANDS", "execute", "invocation", "filter_option", "common_options", "StopFlag"]

pass_session = click.make_pass_decorator(Session)


def filter_option(required: bool = False):
    return click.option("--filter", "filter_text", metavar="EXPR", type=options.FILTER, required=required,
                        help="Filter expression, e.g. 'error ~ \"HTTP_5*\" and tenant = tenant_1' (docs/filter.md).")


def _queue_command(fn: Callable) -> click.Command:
    """A click command on one ``QUEUE`` (every operation)."""
    return click.command()(click.argument("queue", shell_complete=options.complete_queue)(fn))


def _ids_option(state: str):
    return click.option("--ids", multiple=True, metavar="ID", help=f"These {state} job ids (repeatable).")


_priority_option = click.option("--priority", type=options.PRIORITY,
                                help="Ready list pN of a priority queue (default: lowest).")


def common_options(fn: Callable) -> Callable:
    for opt in reversed([
        click.option("--limit", type=options.JOB_LIMIT, help="Touch at most N jobs."),
        click.option("--rate", type=options.RATE, metavar="N", help="At most N jobs per second."),
        click.option("--batch", type=options.Count(1, 5000), default=None,
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
    from ..durations import parse_duration

    try:
        return parse_duration(value)
    except UsageError as exc:
        raise UsageError(f"{what}: {exc}") from None


class StopFlag:
    """First Ctrl-C: stop after the current batch.  Second: the same while an
    operation applies (:func:`jobctl.ops.interrupt.defer`: raised inside a
    read, it would lose the count of the calls in flight), else interrupt
    now.  Third: interrupt now."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        self._old = None

    def __enter__(self) -> "StopFlag":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.flag.is_set():
            if interrupt.defer():
                render.note("already stopping: counting the calls in flight "
                            "(Ctrl-C once more to abort now, without counting them)")
                return
            raise KeyboardInterrupt
        self.flag.set()
        if interrupt.active():
            render.note("stopping after the calls in flight (Ctrl-C twice more to abort now, without counting them)")
        else:
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
        from ..ops.core import breakdown_rows

        for row in breakdown_rows(plan, 20):
            t.add_row(*row)
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


def _confirm(yes: bool, session: Session):
    """The CLI's answer to the core's confirmation: ``--yes``, else a prompt
    on a terminal naming the queue, the server (no password) and its
    environment; the planned count typed when the core asks for it, else y/N."""
    def confirm(prepared) -> bool:
        plan = prepared.plan
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to {plan.spec.operation.value} {plan.planned:,} job(s) without --yes "
                             "(stdin is not a terminal)")
        from ..humanize import target_words

        target = session.target
        where = target_words(plan.spec.queue, target.display, target.environment)
        if prepared.typed_count:
            typed = click.prompt(f"{where}: {plan.describe()}. Type {plan.planned:,} to proceed", default="",
                                 show_default=False, err=True)
            ok = typed.replace(",", "").replace("_", "").strip() == str(plan.planned)
        else:
            ok = click.confirm(f"{where}: {plan.describe()}. Proceed?", default=False, err=True)
        if not ok:
            raise click.exceptions.Abort()
        return True

    return confirm


def execute(session: Session, req: OpRequest, *, yes: bool, as_json: bool, rate: float | None,
            batch: int | None) -> int:
    """Run ``req`` through :class:`jobctl.ops.core.OperationCore` (plan,
    confirm, apply, journal) and report it; returns the exit code."""
    from ..ops.core import OperationCore

    core = OperationCore(session)
    progress = {"cb": None, "finish": lambda: None}
    stopper = StopFlag()
    ask = _confirm(yes, session)

    def confirm(prepared) -> bool:
        ok = ask(prepared)
        stopper.__enter__()  # Ctrl-C while applying: stop after the current batch
        return ok

    def run_progress(done: int, total: int) -> None:
        if progress["cb"] is None:
            progress["cb"], progress["finish"] = _progress(total, enabled=not as_json)
            progress["cb"] = progress["cb"] or (lambda *_: None)
        progress["cb"](done, total)

    try:
        out = core.run(req, confirm=confirm, show=lambda p: _print_plan(p.plan, as_json), note=render.note,
                       stop=stopper.flag.is_set, progress=run_progress, rate=rate, batch=batch, argv=invocation())
    finally:
        progress["finish"]()
        stopper.__exit__(None, None, None)
    for p in out.problems:
        render.note(f"warning: {p}")
    for h in out.lifted:  # resume: the holds the core lifted
        render.note(f"hold {h['id']} lifted ({h['filter'] or 'every job'})")
    res = out.result
    if as_json:
        render.print_json(out.to_json())
    elif out.status == "nothing":
        render.note("nothing to do: no job matches")
    elif out.status == "applied":
        click.echo(f"{out.summary()}{_took(res)}"
                   f"{' (interrupted: run the same command again to finish)' if res.interrupted else ''}"
                   f"  [{res.operation_id}]")
    return int(out.exit_code)


def _took(res) -> str:
    """`` in 4.21 s (512 jobs/s)``: how long the apply took, and its rate."""
    from ..humanize import took

    return took(res.moved, res.ended_ms - res.started_ms) if res.started_ms else ""


def _progress(total: int, enabled: bool):
    """A rich progress bar on stderr for long runs on a terminal."""
    if not enabled or total < 1000 or not sys.stderr.isatty():
        return None, lambda: None
    update, stop = render.progress(total)
    return (lambda done, _total: update(done)), stop


@_queue_command
@click.option("--stuck", is_flag=True, help="Processing jobs past their visibility deadline.")
@_ids_option("processing")
@_priority_option
@click.option("--visibility-timeout", "visibility", type=options.DELAY, metavar="DURATION",
              help="The workers' visibility timeout, for layouts that store no deadline and whose "
                   "catalogue entry sets none (else --stuck refuses).")
@filter_option()
@common_options
@pass_session
def requeue(session: Session, queue, stuck, ids, priority, visibility, filter_text, limit, rate, batch, dry_run,
            yes, as_json) -> int:
    """Put processing jobs back on the ready list (what the workers' reaper does).

    A job moves only if its visibility deadline is still the one the plan saw:
    a worker that acked, failed or renewed it in the meantime is left alone.
    With --stuck on a layout that stores no deadline (stream-group, hash-job,
    json-list), the visibility timeout must be known: from the catalogue's
    visibility_timeout_ms or --visibility-timeout.
    """
    req = OpRequest(Operation.REQUEUE, queue, filter_text=filter_text, ids=tuple(ids), stuck_only=stuck,
                    limit=limit, priority=priority, dry_run=dry_run,
                    visibility_timeout_ms=None if visibility is None else _duration(visibility, "--visibility-timeout"))
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@_queue_command
@filter_option()
@_ids_option("dead")
@click.option("--to", "to", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True)
@click.option("--delay", type=options.DELAY, metavar="DURATION",
              help="With --to scheduled: due this long after the redrive.")
@click.option("--reset-attempts", is_flag=True, help="Set the envelope's attempt to 0 (default: kept).")
@_priority_option
@click.option("--plan", "plan_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="redrive-plan.jsonl of `jobctl analyze`: only those jobs, each only if still dead and unchanged.")
@common_options
@pass_session
def redrive(session: Session, queue, filter_text, ids, to, delay, reset_attempts, priority, plan_file, limit, rate,
            batch, dry_run, yes, as_json) -> int:
    """Move dead jobs back to ready (or scheduled), keeping their ids.

    Each redrive is recorded (operation id, time, count; `jobctl inspect`
    shows it, the journal has the operation): from a dead list in jobctl's
    redrive record, kept 7 days, the envelope moving untouched; elsewhere,
    and with --reset-attempts, in the envelope (redrivenAtEpochMs,
    redriveOperation, redriveCount).  The attempt counter is kept unless
    --reset-attempts, so a job that fails again goes back to the DLQ at once
    instead of starting a new retry storm.  Malformed envelopes are never
    redriven.
    """
    req = OpRequest(Operation.REDRIVE, queue, target=State(to), filter_text=filter_text, ids=tuple(ids),
                    limit=limit, delay_ms=_duration(delay, "--delay"), reset_attempts=reset_attempts,
                    priority=priority, plan_file=plan_file, dry_run=dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@_queue_command
@filter_option()
@_ids_option("scheduled")
@_priority_option
@common_options
@pass_session
def promote(session: Session, queue, filter_text, ids, priority, limit, rate, batch, dry_run, yes,
            as_json) -> int:
    """Move scheduled jobs to ready now."""
    req = OpRequest(Operation.PROMOTE, queue, filter_text=filter_text, ids=tuple(ids), limit=limit,
                    priority=priority, dry_run=dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@_queue_command
@filter_option()
@_ids_option("dead")
@click.option("--reason", required=True, metavar="TEXT", help="Why (kept with who and when).")
@common_options
@pass_session
def suppress(session: Session, queue, filter_text, ids, reason, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move dead jobs to suppressed: kept for audit, excluded from redrive and DLQ alerts.

    Takes --filter or --ids (never every dead job at once)."""
    req = OpRequest(Operation.SUPPRESS, queue, filter_text=filter_text, ids=tuple(ids), limit=limit, reason=reason,
                    dry_run=dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@_queue_command
@filter_option()
@common_options
@pass_session
def unsuppress(session: Session, queue, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move suppressed jobs back to the dead-letter queue."""
    req = OpRequest(Operation.UNSUPPRESS, queue, filter_text=filter_text, limit=limit, dry_run=dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@_queue_command
@click.option("--state", type=click.Choice(["dead", "suppressed", "ready", "scheduled"]), required=True,
              help="ready and scheduled: layouts whose members are the jobs (delay-zset).")
@click.option("--older-than", type=options.DELAY, metavar="DURATION", help="Only jobs dead for at least this long.")
@filter_option()
@click.option("--no-export", is_flag=True, help="Purge without exporting first.")
@click.option("--export-to", metavar="DIR", type=options.OUT_DIR,
              help="Export the matching jobs to DIR first (or use the export there), then purge exactly those.")
@click.option("--export-format", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True, help="Format of the --export-to export.")
@common_options
@pass_session
def purge(session: Session, queue, state, older_than, filter_text, no_export, export_to, export_format, limit, rate,
          batch, dry_run, yes, as_json) -> int:
    """Delete dead or suppressed jobs: the index entry and the payload together.

    With --export-to DIR the matching jobs are first exported there (as
    `jobctl export` does; an export already in DIR is used), then exactly the
    exported ids are purged, each only if unchanged since the export.
    """
    req = OpRequest(Operation.PURGE, queue, source=State(state), filter_text=filter_text, limit=limit,
                    older_than_ms=_duration(older_than, "--older-than") or None, export_to=export_to,
                    export_format=export_format, no_export=no_export, dry_run=dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


COMMANDS = [requeue, redrive, promote, suppress, unsuppress, purge]
