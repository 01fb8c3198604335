"""Recovery commands: ``jobctl pause``, ``jobctl resume``, ``jobctl hold run``,
``jobctl migrate``, ``jobctl drain`` (``--to QUEUE`` or ``--export-to DIR``).

Pause and resume run through the operations core like every operation
(plan, ``--dry-run``, confirmation, fenced bounded script calls, ``--rate``,
Ctrl-C between calls, journal, ``--json``; :func:`jobctl.cli.ops_cmds.execute`).
The paused state and holds are jobctl's own keys
(:mod:`jobctl.layouts.reliable_list.pause`); layouts where a job cannot be
taken out of the workers' reach refuse with a one-line error.

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

import click

from ..durations import parse_duration
from ..errors import UsageError
from ..exitcodes import ExitCode
from ..model import State
from ..ops.request import OpRequest
from ..ops.spec import Operation, operator_name
from ..session import Session
from . import options, render
from .ops_cmds import _StopFlag, _common, _filter_option, execute, invocation

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
@click.argument("queue")
@_filter_option()
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
@_common
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
    briefly, then exits 11 with nothing changed).
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
    from jobctl.layouts.reliable_list.holds import add_hold

    with session.errors():
        record = add_hold(layout, filter_text, reason, operator_name())
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
    from jobctl.layouts.reliable_list.holds import CycleMarks, holds
    from ..ops.arrivals import Arrivals
    from ..ops.core import OperationCore

    core, argv = OperationCore(session), invocation()
    marks: dict[str, CycleMarks] = {}
    done = total = 0
    waiting: set[str] = set()
    ready = [ref.key for keys in layout.shards for ref in layout.ready_lists(keys)]
    with _StopFlag() as stopper, Arrivals(layout.client, ready) as arrivals:
        while cycles is None or done < cycles:
            started = time.monotonic()
            with session.errors():
                active = {h["id"]: h for h in holds(layout)}
            records = [active[r["id"]] for r in records if r["id"] in active]
            if not records:
                render.note(f"every hold on {layout.queue_name} is lifted: stopping")
                break
            for rec in records:
                if stopper.flag.is_set():
                    break  # Ctrl-C during the last record's apply: no further record starts
                moved = _cycle(core, layout, rec, marks.setdefault(rec["id"], CycleMarks()), waiting,
                               budget=budget, stop=stopper.flag.is_set, rate=rate, batch=batch, argv=argv)
                total += moved
                if moved and not as_json:
                    render.note(f"hold {rec['id']}: paused {moved:,} newly ready job(s)")
            done += 1
            if stopper.flag.is_set():
                render.note("stopped: the hold stays recorded (`jobctl hold run` resumes its cycles, "
                            "`jobctl resume` lifts it)")
                break
            if cycles is not None and done >= cycles:
                break
            time.sleep(max(0.0, MIN_GAP_S - (time.monotonic() - started)))
            arrivals.wait(interval_ms / 1000, stopper.flag.is_set)  # a ready list changed, or the interval
    if as_json:
        render.print_json({"holds": [r["id"] for r in records], "cycles": done, "paused": total})
    return int(ExitCode.OK)


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
@click.argument("queue")
@_filter_option()
@_common
@pass_session
def resume(session: Session, queue, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Put paused jobs back where a worker takes them next, in their order.

    Lifts the holds of an equivalent filter (compared in normalized form:
    `tenant=t2` lifts the hold of `tenant = 't2'`; every hold without
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
    from jobctl.layouts.reliable_list.holds import filter_key, hold_key, holds

    with session.errors():
        layout = session.layout(queue)
        left = [h for h in holds(layout) if hold_key(h) != filter_key(filter_text)]
    for h in left:
        shown = repr(h["filter"]) if h["filter"] else "every job"
        render.note(f"warning: hold {h['id']} ({shown}) stays recorded: its cycles keep pausing the jobs it "
                    f"matches (`jobctl resume {queue}" + (f" --filter {h['filter']!r}`" if h["filter"] else "`")
                    + " lifts it)")


@click.group()
def hold() -> None:
    """Holds recorded by `jobctl pause --hold`."""


@hold.command("run")
@click.argument("queue")
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
    lifted (what a hold guarantees: `jobctl pause --help`)."""
    from jobctl.layouts.reliable_list.holds import holds

    layout = _pausable(session, queue, "hold")
    session.require_writable("hold run")
    with session.errors():
        records = holds(layout)
    if not records:
        render.note(f"no hold on {queue}")
        return int(ExitCode.OK)
    return _hold_loop(session, layout, records, budget=budget, interval_ms=_interval(interval), cycles=cycles,
                      rate=rate, batch=batch, as_json=as_json)


@hold.command("ls")
@click.argument("queue")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_session
def hold_ls(session: Session, queue, as_json) -> int:
    """List the holds of QUEUE (filter, reason, who, since)."""
    from jobctl.layouts.reliable_list.pause import holds

    layout = _pausable(session, queue, "hold")
    with session.errors():
        records = holds(layout)
    if as_json:
        render.print_json(records)
    else:
        for h in records:
            click.echo(f"{h['id']}\t{h['filter'] or '(every job)'}\t{h['by']}\t{h['reason']}")
    return int(ExitCode.OK)


def _migrate_request(src: str, dst: str, state: str, filter_text, limit, dry_run) -> OpRequest:
    return OpRequest(Operation.MIGRATE, src, source=State(state), target=State(state), filter_text=filter_text,
                     limit=limit, dry_run=dry_run, destination=dst)


@click.command()
@click.argument("src")
@click.argument("dst", required=False)
@_filter_option()
@click.option("--state", type=click.Choice(["ready", "scheduled", "dead", "paused"]), default=None,
              help="Which jobs (default ready; a move between queues takes ready or scheduled).")
@click.option("--transform", "transform_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Rewrite the matching envelopes of SRC in place with this TOML transformation (no DST).")
@click.option("--rollback", metavar="OPERATION",
              help="Put back the envelopes the --transform operation OPERATION replaced (no DST).")
@_common
@pass_session
def migrate(session: Session, src, dst, filter_text, state, transform_file, rollback, limit, rate, batch, dry_run,
            yes, as_json) -> int:
    """Move matching jobs of SRC to DST, or rewrite SRC's envelopes (--transform).

    SRC DST (two reliable-list queues): the queues live in different hash
    slots, so each job moves by copy-then-delete with a crash journal in
    jobctl's own keys (queue:{src}:jobctl:migrating): a rerun after a crash
    or kill -9 finishes the jobs it left, and no job stays in both queues.
    Jobs keep their ids, payloads and order; ready jobs are pushed at DST's
    producers' end.

    SRC --transform FILE: set, rename and delete envelope fields, bump
    jobVersion (the file's format: docs/recovery.md, "Envelope
    transformations"), in place, each job only while its payload is the one
    the plan saw; the old envelope is kept (queue:{t}:jobctl:envelopes-before)
    for --rollback.  Transformations stack: roll them back newest first (a
    rollback under a newer live transformation exits 2, naming it).
    --dry-run prints a before/after diff of sample envelopes.
    """
    if transform_file or rollback:
        if dst:
            raise UsageError("--transform and --rollback rewrite SRC in place: no DST")
        if transform_file and rollback:
            raise UsageError("--transform and --rollback exclude each other")
        from ..ops.transform import Rollback, load_transform

        transform = load_transform(transform_file) if transform_file else Rollback(rollback)
        st = State(state or ("dead" if rollback else "ready"))
        req = OpRequest(Operation.TRANSFORM, src, source=st, target=st, filter_text=filter_text, limit=limit,
                        dry_run=dry_run, transform=transform)
        if dry_run and not as_json and transform_file:
            _print_samples(session, req)
        return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)
    if not dst:
        raise UsageError("migrate needs DST (or --transform FILE)")
    if state not in (None, "ready", "scheduled"):
        raise UsageError("a move between queues takes --state ready or scheduled")
    req = _migrate_request(src, dst, state or "ready", filter_text, limit, dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


def _print_samples(session: Session, req: OpRequest, n: int = 3) -> None:
    """The before/after diff of the first ``n`` planned envelopes."""
    from ..ops.core import OperationCore

    for line in OperationCore(session).prepare(req).samples:
        click.echo(line)


@click.command()
@click.argument("queue")
@click.option("--to", "to", metavar="QUEUE", default=None, help="The reliable-list queue to move the jobs to.")
@click.option("--export-to", metavar="DIR", type=options.OUT_DIR, default=None,
              help="Export the jobs to DIR first (as `jobctl export` does; an export already in DIR is used), "
                   "then remove exactly the exported jobs.")
@click.option("--export-format", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True, help="Format of the --export-to export.")
@click.option("--state", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True,
              help="Which state to empty.")
@_common
@pass_session
def drain(session: Session, queue, to, export_to, export_format, state, limit, rate, batch, dry_run, yes,
          as_json) -> int:
    """Empty QUEUE's ready (or scheduled) state into another queue (--to) or
    into an export (--export-to), to retire a queue or move work away from
    a broken consumer.  Jobs that arrive meanwhile stay: run it again.

    --to QUEUE: `jobctl migrate QUEUE TO` without a filter.

    --export-to DIR: the jobs are first exported to DIR (the files and
    manifest.json `jobctl export` writes; an interrupted export is
    finished, a complete one is used as it is), then exactly the exported
    jobs whose payload (and due time) is unchanged leave the queue, index
    entry and payload, in bounded fenced calls.  After Ctrl-C or kill -9 the
    same command finishes: nothing is exported twice, nothing removed that
    the export does not hold.  A new DIR drains the jobs that arrived since.
    """
    if (to is None) == (export_to is None):
        raise UsageError("drain needs exactly one of --to QUEUE and --export-to DIR")
    if to is not None:
        req = _migrate_request(queue, to, state, None, limit, dry_run)
    else:
        req = OpRequest(Operation.DRAIN, queue, source=State(state), limit=limit, dry_run=dry_run,
                        export_to=export_to, export_format=export_format)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@click.option("--from", "from_", metavar="TIME|ID", required=True,
              help="First entry: an entry id, epoch ms, ISO-8601 time or a duration ago (2h).")
@click.option("--to", "to", metavar="TIME|ID", default=None, help="Last entry (default: the newest acknowledged).")
@_filter_option()
@_common
@pass_session
def replay(session: Session, queue, from_, to, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Re-add acknowledged stream entries as new entries (stream-group layout).

    Each replayed entry keeps its fields and gets replayOf = the original
    entry id.  Each original is replayed once, whatever the runs (one after
    the other or at the same time): jobctl records it
    (queue:{t}:jobctl:replay-record) in the same atomic step.  An entry that
    carries replayOf is a replay and is never replayed.  Entries still
    pending or not yet delivered are not history and are left alone.
    """
    from ..ops.stream_bounds import replay_range

    start, end = replay_range(from_, to)
    req = OpRequest(Operation.REPLAY, queue, source=State.HISTORY, target=State.READY, filter_text=filter_text,
                    limit=limit, dry_run=dry_run, replay_range=(start, end))
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue")
@click.option("--shards", type=options.Count(1, 1024), required=True, help="The new number of shards.")
@click.option("--state", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True,
              help="Which jobs to move to their new shard (run once per state).")
@_common
@pass_session
def reshard(session: Session, queue, shards, state, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move each job of a sharded reliable-list queue to the shard its id
    hashes to with --shards N shards (seed 000 section 20), by the rule its
    producers use (shard_rule in the catalogue), copy-then-delete with the
    crash journal of `jobctl migrate`.  Jobs already in their shard stay.
    Switch the producers and workers to N shards, then run it for ready and
    scheduled, then set shards = N in the catalogue."""
    from ..layouts.sharding import reshard_destination

    with session.errors():
        layout = session.layout(queue)
    req = OpRequest(Operation.MIGRATE, queue, source=State(state), target=State(state), limit=limit,
                    dry_run=dry_run, destination=reshard_destination(layout, shards))
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


COMMANDS = [pause, resume, hold, migrate, drain, replay, reshard]
