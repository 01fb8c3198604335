"""``jobctl check`` (invariants) and ``jobctl journal`` (the audit trail)."""

from __future__ import annotations

import time

import click

from ..exitcodes import ExitCode
from ..session import Session
from ..thresholds import OUTCOME_STYLES
from . import options, render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)


def _held_problems(layout) -> list:
    """The findings of the holds a killed operation left (:mod:`jobctl.ops.orphan_holds`)."""
    from jobctl.layouts.reliable_list.check import Problem
    from ..ops.orphan_holds import find

    return [Problem("orphaned_hold", o.tag, "", o.describe(), "give back to the dead list, in order")
            for o in find(layout)]


def _check_queue(session: Session, q, repair: bool, yes: bool):
    """One queue's check report; with ``repair`` (confirmed unless ``yes``)
    exactly the confirmed findings repaired (holds given back, each other
    finding re-verified by its repair script; one that is new or changed
    since is reported, not repaired) and journaled
    (:func:`jobctl.ops.journal.repair_entry`)."""
    from ..layouts.status_truth import catalogue_warnings

    layout = session.layout(q)
    for w in catalogue_warnings(layout):  # a wrong entry makes the check read the wrong keys
        render.note(f"warning: queue {q.name}: {w}")
    started = int(time.time() * 1000)
    held = _held_problems(layout)
    report = layout.check(repair=False)
    report.problems[:0] = held
    wanted = [p for p in report.problems if p.repair]
    if not (repair and wanted):
        return report
    if not yes:
        from ..humanize import target_words

        where = target_words(q.name, session.target.display, session.target.environment)
        if not click.confirm(f"{where}: repair {len(wanted):,} problem(s)?", default=False, err=True):
            raise click.exceptions.Abort()
    return _repair(session, layout, wanted, started)


def _repair(session: Session, layout, wanted: list, started: int):
    """Repair exactly the confirmed findings ``wanted`` of ``layout``;
    returns the check report after it (the confirmed findings first, with
    ``repaired`` set); journals the repair."""
    from jobctl.layouts.reliable_list.check import repairing_only
    from ..ops.journal import repair_entry, write_entry
    from ..ops.orphan_holds import give_back
    from .ops_cmds import invocation

    op_id = f"check-{started}"
    holds = {p.shard for p in wanted if p.kind == "orphaned_hold"}
    given = {o.tag for o in give_back(layout, op_id, tags=holds)} if holds else set()
    with repairing_only(wanted):
        report = layout.check(repair=True)
    now = {p.key: p for p in report.problems}
    kept = []  # the confirmed findings that still held (a repair re-verified them), repaired or not
    for p in wanted:
        if p.kind == "orphaned_hold" or p.key in now:
            p.repaired = p.shard in given if p.kind == "orphaned_hold" else now[p.key].repaired
            kept.append(p)
    keys = {p.key for p in wanted}
    report.problems = kept + [p for p in report.problems if p.key not in keys]
    fixed = [p for p in wanted if p.repaired]
    entry = repair_entry(op_id, layout.queue_name, layout.name, confirmed=wanted, repaired=fixed,
                         remaining=len(report.remaining), started_ms=started, ended_ms=int(time.time() * 1000),
                         argv=invocation(), target=session.target)
    for problem in write_entry(layout.client, layout.journal_key, entry, session.target):
        render.note(f"warning: {problem}")
    return report


def _print_reports(reports: list, as_json: bool, error: str | None = None) -> None:
    """The check reports (text, or one JSON document with ``error`` when a
    later queue failed)."""
    if as_json:
        doc = {"ok": error is None and all(r.ok for r in reports), "queues": [r.to_json() for r in reports]}
        render.print_json({**doc, "error": error} if error else doc)
        return
    for r in reports:
        if r.ok and not r.problems:
            transient = getattr(r, "transient", 0)
            click.echo(f"{r.queue}: ok ({r.checked_ids:,} ids, {r.payload_keys:,} payload keys"
                       + (f"; {transient:,} finding(s) of jobs that moved while read, not problems"
                          if transient else "") + ")")
            continue
        counts = ", ".join(f"{k}: {v}" for k, v in r.counts().items())
        fixed = sum(p.repaired for p in r.problems)
        click.echo(f"{r.queue}: {len(r.problems)} problem(s) ({counts}){f'; repaired {fixed}' if fixed else ''}")
        for p in r.problems[:50]:
            click.echo(f"  {'fixed' if p.repaired else p.kind:<17} {p.shard}  {render.shown(p.job_id)}  "
                       f"{render.shown(p.detail)}")
        if len(r.problems) > 50:
            click.echo(f"  ... {len(r.problems) - 50} more (use --json)")


@click.command()
@click.argument("queues", nargs=-1, shell_complete=options.complete_queue)
@click.option("--repair", is_flag=True, help="Fix what is unambiguous (journaled); report the rest.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before repairing (required without a TTY).")
@click.option("--json", "as_json", is_flag=True)
@pass_session
def check(session: Session, queues: tuple[str, ...], repair: bool, yes: bool, as_json: bool) -> int:
    """Audit the invariants of QUEUES (default: all); exit 7 if one is broken.

    Every job id in exactly one state, no id twice in a list, no dangling id
    (index entry without payload), no orphan payload, every processing id
    with a visibility deadline and every deadline with a processing id.
    Reads every key in bounded windows: linear in the queue's size.
    """
    import sys

    from ..errors import UsageError

    if repair:
        session.require_writable("check --repair")
        if not yes and not sys.stdin.isatty():
            raise UsageError("refusing to repair without --yes (stdin is not a terminal)")
    from ..errors import JobctlError

    reports: list = []
    name = None
    try:
        with session.errors():
            for q in session.queues(queues):
                name = q.name
                reports.append(_check_queue(session, q, repair, yes))
    except JobctlError as exc:  # a later queue failed: every repair already made is reported first
        if not reports:
            raise
        message = f"queue {name}: {exc}"
        _print_reports(reports, as_json, error=message)
        raise JobctlError(message, exit_code=exc.exit_code) from None
    _print_reports(reports, as_json)
    return int(ExitCode.OK if all(r.ok for r in reports) else ExitCode.INVARIANT)


@click.command()
@click.argument("queues", nargs=-1, shell_complete=options.complete_queue)
@click.option("--limit", type=options.Count(1, 10_000), default=20, show_default=True)
@click.option("--local", is_flag=True, help="Read the local JSONL journal instead of the servers' streams.")
@click.option("--json", "as_json", is_flag=True)
@pass_session
def journal(session: Session, queues: tuple[str, ...], limit: int, local: bool, as_json: bool) -> int:
    """The audit journal of QUEUES (default: all), newest first."""
    from ..ops.journal import read_entries, read_local

    if local:
        entries = read_local(limit)
        if queues:
            entries = [e for e in entries if e.get("queue") in queues]
    else:
        with session.errors():
            keys = [session.layout(q).journal_key for q in session.queues(queues)]
            entries = read_entries(session.client, keys, limit)
    if as_json:
        render.print_json({"entries": entries})
        return int(ExitCode.OK)
    render.console().print(_journal_table(entries, server=local))
    return int(ExitCode.OK)


#: Result words of :func:`jobctl.humanize.outcome`, coloured as in the TUI.
_OUTCOME_STYLE = OUTCOME_STYLES


def _journal_table(entries: list[dict], *, server: bool):
    """The ``journal`` table: result, counts with separators, and the
    server of each entry when they may differ (``--local``)."""
    from rich.markup import escape
    from rich.table import Table

    from .. import humanize

    counts = ("planned", "done", "skipped", "failed")
    cols = ("ended", "result", "operation", "queue", *(("server",) if server else ()), "operator", *counts,
            "filter", "id")
    t = Table(header_style="bold")
    for col in cols:  # the id is what `jobctl migrate --rollback` and searches take: never folded
        t.add_column(col, justify="right" if col in counts else "left", overflow="fold", no_wrap=col == "id")
    for e in entries:
        word = humanize.outcome(e)
        n = {c: humanize.count(e.get("moved" if c == "done" else c)) for c in counts}
        t.add_row(render.fmt_ms(e.get("ended_ms")), f"[{_OUTCOME_STYLE[word]}]{word}[/]", str(e.get("operation")),
                  escape(str(e.get("queue"))), *((escape(str(e.get("server") or "-")),) if server else ()),
                  escape(str(e.get("operator"))), *n.values(), escape(e.get("filter") or ""), str(e.get("id")))
    return t


COMMANDS = [check, journal]
