"""Recovery commands: ``jobctl pause``, ``jobctl resume``, ``jobctl hold run``,
``jobctl hold ls``; ``jobctl migrate``, ``jobctl drain``, ``jobctl replay`` and
``jobctl reshard`` are in :mod:`jobctl.cli.move_cmds` and listed here.

Pause and resume run through the operations core like every operation
(plan, ``--dry-run``, confirmation, fenced bounded script calls, ``--rate``,
Ctrl-C between calls, journal, ``--json``; :func:`jobctl.cli.ops_cmds.execute`).
The paused state and holds are jobctl's own keys, kept by the layout (its
hold hooks, :class:`~jobctl.layouts.facts.LayoutFacts`); layouts where a
job cannot be taken out of the workers' reach refuse with a one-line error.

Holds: ``jobctl pause QUEUE --filter EXPR --reason TEXT --hold`` pauses
what matches now, records a hold (filter, reason, who, since), then keeps
pausing newly ready matching jobs in the foreground, at most ``--budget``
jobs per cycle every ``--interval`` (each cycle through the operations
core, :meth:`jobctl.ops.core.OperationCore.hold_cycle`, under the queue's
lease), until the hold is lifted (``jobctl resume`` with an equivalent
filter, or without one) or Ctrl-C (the hold stays recorded: ``jobctl hold
run QUEUE`` takes over its cycles).
"""

from __future__ import annotations

import time
from typing import Any

import click

from ..durations import parse_duration
from ..errors import UsageError
from ..exitcodes import ExitCode
from ..model import State
from ..ops.request import OpRequest
from ..ops.spec import Operation, operator_name
from ..session import Session
from . import options, render
from .move_cmds import drain, migrate, replay, reshard  # listed with these commands (COMMANDS)
from .ops_cmds import StopFlag, common_options, filter_option, execute, invocation

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)

#: --interval of hold cycles: the default, and the longest accepted.  A cycle
#: also starts as soon as a ready list of the queue changes (jobctl.ops.arrivals),
#: at most once every MIN_GAP_S seconds.
DEFAULT_INTERVAL = "20ms"
MAX_INTERVAL = "1s"
MIN_GAP_S = 0.002


def _pausable(session: Session, queue: str, verb: str):
    """``queue``'s layout, refused by the operations core unless jobctl can
    hold its jobs (:func:`jobctl.ops.core.require_holdable`)."""
    from ..ops.core import require_holdable

    with session.errors():
        layout = session.layout(queue)
    require_holdable(layout, verb)
    return layout


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@filter_option()
@click.option("--reason", required=True, metavar="TEXT", help="Why (kept with who and when).")
@click.option("--state", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True,
              help="Which jobs to pause.")
@click.option("--hold", is_flag=True,
              help="Also keep pausing newly ready matching jobs until resumed (foreground loop; what it "
                   "guarantees: above).")
@click.option("--budget", type=options.Count(1, 100_000), default=1000, show_default=True,
              help="--hold: at most N jobs paused per cycle.")
@click.option("--interval", default=DEFAULT_INTERVAL, show_default=True, metavar="DURATION",
              help=f"--hold: pause between cycles (at most {MAX_INTERVAL}).")
@click.option("--cycles", type=options.Count(0), default=None, hidden=True,
              help="--hold: stop after N cycles (tests).")
@common_options
@pass_session
def pause(session: Session, queue, filter_text, reason, state, hold, budget, interval, cycles, limit, rate, batch,
          dry_run, yes, as_json) -> int:
    """Take matching ready (or scheduled) jobs out of the workers' reach.

    They move, in order, to jobctl's paused state of the queue, with who,
    when and why; `jobctl resume` puts them back where a worker takes them
    next, in their original order.  Seen in status (paused, held_filters),
    `ls --state paused`, inspect, the exporter and `jobctl check`.

    --hold: once the matching jobs are paused, a hold is recorded and its
    cycles pause the matching jobs that become ready, every --interval,
    until `jobctl resume` with an equivalent filter (or none) lifts it.
    What a hold guarantees: a matching job that stays in the ready list
    longer than one cycle (the interval plus one cycle's reads, a few
    milliseconds) is paused before a worker takes it.  It cannot
    guarantee more: producers and workers do not read jobctl's keys, so a
    worker waiting on an empty list (BLMOVE) takes a new job the instant
    it is pushed, before any cycle sees it.  Pause, resume and hold cycles
    of a queue take its lease: they never interleave (a second one waits
    briefly, then exits 11 with nothing changed).  While it cycles it says
    so on stderr: a line for each cycle that paused jobs, else one every 10
    s; Ctrl-C stops it after the current cycle, leaving the hold recorded
    (`jobctl hold run` resumes its cycles), and exits 130.
    """
    if hold and state != "ready":
        raise UsageError("--hold holds newly ready jobs: it takes --state ready")
    interval_ms = _interval(interval)
    if hold and limit is not None:
        raise UsageError("--hold pauses every matching job: use --budget, not --limit")
    req = OpRequest(Operation.PAUSE, queue, source=State(state), target=State.PAUSED, filter_text=filter_text,
                    limit=limit, reason=reason, dry_run=dry_run)
    if hold:  # the core's refusals before the hold is recorded (the pause checks them again)
        from ..filter import compile_filter
        from ..ops.core import check_layout, check_request

        check_request(req, session)
        with session.errors():
            layout = session.layout(queue)
        check_layout(req, layout)
        if filter_text:
            compile_filter(filter_text)  # a bad filter fails before the hold is recorded
    # the matching jobs first, then the hold (a resume meanwhile lifts no
    # hold of this pause: the hold begins after it, and says so)
    code = execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)
    if not hold or dry_run or code not in (ExitCode.OK, ExitCode.PARTIAL):
        return code
    with session.errors():
        record = layout.record_hold(filter_text, reason, operator_name())
    render.note(f"hold {record['id']} recorded on {queue}"
                + (f" for {filter_text!r}" if filter_text else " for every job")
                + f": newly ready matching jobs are paused every {interval}")
    return _hold_loop(session, layout, [record], budget=budget, interval_ms=interval_ms, cycles=cycles,
                      rate=rate, batch=batch, as_json=as_json)


def _interval(text: str) -> int:
    """``--interval`` in ms; raises :class:`UsageError` (exit 2) past :data:`MAX_INTERVAL`."""
    try:
        ms = parse_duration(text)
    except UsageError as exc:
        raise UsageError(f"--interval: {exc}") from None
    if ms > parse_duration(MAX_INTERVAL):
        raise UsageError(f"--interval: at most {MAX_INTERVAL} (matching jobs a worker takes between two "
                         "cycles are not held)")
    return ms


def _hold_loop(session: Session, layout, records: list[dict], *, budget: int, interval_ms: int,
               cycles: int | None, rate, batch, as_json: bool) -> int:
    """Run hold cycles for ``records`` until every one is lifted, Ctrl-C, or
    ``cycles`` cycles (:meth:`~jobctl.ops.core.OperationCore.hold_cycle`,
    under the queue's lease: while another operation keeps it, the cycles
    wait, said once).  A cycle starts when a ready list of the queue
    changes (:class:`~jobctl.ops.arrivals.Arrivals`), at most every
    :data:`MIN_GAP_S`, and at least every ``interval_ms``.  One journal
    entry per cycle that moved jobs."""
    from ..ops.arrivals import Arrivals
    from ..ops.core import OperationCore

    core, argv = OperationCore(session), invocation()
    marks: dict[str, Any] = {}
    done = total = 0
    waiting: set[str] = set()
    report = _CycleReport(layout.queue_name, quiet=as_json)
    with StopFlag() as stopper, Arrivals(layout.client, layout.arrival_keys()) as arrivals:
        while cycles is None or done < cycles:
            started = time.monotonic()
            with session.errors():
                active = {h["id"]: h for h in layout.hold_records()}
            records = [active[r["id"]] for r in records if r["id"] in active]
            if not records:
                render.note(f"every hold on {layout.queue_name} is lifted: stopping")
                break
            for rec in records:
                if stopper.flag.is_set():
                    break  # Ctrl-C during the last record's apply: no further record starts
                moved = _cycle(core, layout, rec, marks.setdefault(rec["id"], layout.new_cycle_marks()), waiting,
                               budget=budget, stop=stopper.flag.is_set, rate=rate, batch=batch, argv=argv)
                total += moved
                report.paused(rec["id"], moved)
            done += 1
            report.cycle(done, total)
            if stopper.flag.is_set():
                report.stopped(done, total)
                render.note("stopped: the hold stays recorded (`jobctl hold run` resumes its cycles, "
                            "`jobctl resume` lifts it)")
                break
            if cycles is not None and done >= cycles:
                break
            time.sleep(max(0.0, MIN_GAP_S - (time.monotonic() - started)))
            arrivals.wait(interval_ms / 1000, stopper.flag.is_set)  # a ready list changed, or the interval
    if as_json:
        render.print_json({"holds": [r["id"] for r in records], "cycles": done, "paused": total})
    return int(ExitCode.INTERRUPTED if stopper.flag.is_set() else ExitCode.OK)


class _CycleReport:
    """What ``pause --hold`` / ``hold run`` says on stderr while it cycles
    (nothing with ``--json``): a line for each cycle that paused jobs, else
    one every :data:`HEARTBEAT_S` seconds so a quiet hold still shows it is
    alive, and the totals when Ctrl-C stops it."""

    #: Seconds between two lines of cycles that paused nothing.
    HEARTBEAT_S = 10.0

    def __init__(self, queue: str, *, quiet: bool) -> None:
        self.queue, self.quiet = queue, quiet
        self.moved = 0  # paused by the current cycle
        self.last_line = time.monotonic()

    def paused(self, hold_id: str, moved: int) -> None:
        self.moved += moved
        if moved and not self.quiet:
            render.note(f"hold {hold_id}: paused {moved:,} newly ready job(s)")

    def cycle(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.quiet and (self.moved or now - self.last_line >= self.HEARTBEAT_S):
            from ..humanize import clock

            render.note(f"cycle {done:,} at {clock(int(time.time() * 1000))}: {self._totals(done, total)}")
            self.last_line = now
        self.moved = 0

    def stopped(self, done: int, total: int) -> None:
        if not self.quiet:
            render.note(f"interrupted after {self._totals(done, total)}")

    def _totals(self, done: int, total: int) -> str:
        return f"{done:,} cycle(s) on {self.queue}, {total:,} job(s) paused in all"


def _cycle(core, layout, rec: dict, marks, waiting: set[str], **kw) -> int:
    """One hold cycle of ``rec``; the jobs it paused.  While another
    operation keeps the queue's lease (:class:`~jobctl.errors.Busy`) the
    cycle pauses nothing, and the first such cycle of a run of them says so."""
    from ..errors import Busy

    try:
        res = core.hold_cycle(layout, rec, marks, **kw)
    except Busy as exc:
        if rec["id"] not in waiting:
            render.note(f"warning: hold {rec['id']}: {exc}; its cycles wait for it (matching jobs a worker "
                        "takes meanwhile are not held)")
            waiting.add(rec["id"])
        return 0
    waiting.discard(rec["id"])
    return res.moved if res is not None else 0



@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@filter_option()
@common_options
@pass_session
def resume(session: Session, queue, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Put paused jobs back where a worker takes them next, in their order.

    Lifts the holds of an equivalent filter (compared in normalized form:
    `tenant=tenant_2` lifts the hold of `tenant = 'tenant_2'`; every hold without
    --filter) once confirmed, before any job moves, under the queue's lease
    (no hold cycle runs meanwhile), and also puts back the jobs their
    cycles paused since the plan (the operations core: jobctl.ops.core).
    A hold of another filter stays, with a warning.  Jobs paused from
    scheduled go back to scheduled with their due time.
    """
    req = OpRequest(Operation.RESUME, queue, source=State.PAUSED, target=State.READY, filter_text=filter_text,
                    limit=limit, dry_run=dry_run)
    code = execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)
    if filter_text:
        _warn_holds_left(session, queue, filter_text)
    return code


def _warn_holds_left(session: Session, queue: str, filter_text: str) -> None:
    """One warning line per hold of ``queue`` a resume of ``filter_text``
    leaves recorded (another filter): its cycles pause its jobs again."""
    with session.errors():
        left = session.layout(queue).holds_left(filter_text)
    for h in left:
        shown = repr(h["filter"]) if h["filter"] else "every job"
        render.note(f"warning: hold {h['id']} ({shown}) stays recorded: its cycles keep pausing the jobs it "
                    f"matches (`jobctl resume {queue}" + (f" --filter {h['filter']!r}`" if h["filter"] else "`")
                    + " lifts it)")


@click.group()
def hold() -> None:
    """Holds recorded by `jobctl pause --hold`."""


@hold.command("run")
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--budget", type=options.Count(1, 100_000), default=1000, show_default=True,
              help="At most N jobs paused per hold per cycle.")
@click.option("--interval", default=DEFAULT_INTERVAL, show_default=True, metavar="DURATION",
              help=f"Pause between cycles (at most {MAX_INTERVAL}).")
@click.option("--cycles", type=options.Count(0), default=None, hidden=True, help="Stop after N cycles (tests).")
@click.option("--rate", type=click.FloatRange(0.1), metavar="N", help="At most N jobs per second.")
@click.option("--batch", type=options.Count(1, 5000), default=None, help="Jobs per script call.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@pass_session
def hold_run(session: Session, queue, budget, interval, cycles, rate, batch, as_json) -> int:
    """Run the cycles of every hold of QUEUE in the foreground until they are
    lifted (what a hold guarantees: `jobctl pause --help`); Ctrl-C stops
    them and exits 130, the holds staying recorded."""
    layout = _pausable(session, queue, "hold")
    session.require_writable("hold run")
    with session.errors():
        records = layout.hold_records()
    if not records:
        render.note(f"no hold on {queue}")
        return int(ExitCode.OK)
    return _hold_loop(session, layout, records, budget=budget, interval_ms=_interval(interval), cycles=cycles,
                      rate=rate, batch=batch, as_json=as_json)


@hold.command("ls")
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_session
def hold_ls(session: Session, queue, as_json) -> int:
    """List the holds of QUEUE: id, filter, who, since when (and how long
    ago), reason."""
    layout = _pausable(session, queue, "hold")
    with session.errors():
        records = layout.hold_records()
    if as_json:
        render.print_json(records)
    elif not records:
        render.note(f"no hold on {queue}")
    else:
        render.console().print(_holds_table(queue, records, int(time.time() * 1000)))
    return int(ExitCode.OK)


def _holds_table(queue: str, records: list[dict], now: int):
    """The ``hold ls`` table: one row per hold, its age beside its start;
    filter, operator and reason shown as typed (``[...]`` is not markup)."""
    from rich.markup import escape
    from rich.table import Table

    from .. import humanize

    t = Table(title=f"holds on {queue}: {len(records):,}", title_justify="left", header_style="bold")
    for col in ("id", "filter", "by", "since", "age", "reason"):
        t.add_column(col, overflow="fold", justify="right" if col == "age" else "left")
    for h in records:
        since = h.get("since_ms")
        t.add_row(escape(str(h["id"])), escape(h.get("filter") or "(every job)"), escape(str(h.get("by") or "-")),
                  humanize.stamp(since), humanize.duration(now - since) if isinstance(since, int) else "-",
                  escape(str(h.get("reason") or "")))
    return t


COMMANDS = [pause, resume, hold, migrate, drain, replay, reshard]
