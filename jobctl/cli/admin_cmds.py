"""``jobctl check`` (invariants) and ``jobctl journal`` (the audit trail)."""

from __future__ import annotations

import time

import click

from ..exitcodes import ExitCode
from ..session import Session
from . import options, render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)


def _held_problems(layout) -> list:
    """The findings of the holds a killed operation left (:mod:`jobctl.ops.orphan_holds`)."""
    from ..layouts.reliable_list_check import Problem
    from ..ops.orphan_holds import find

    return [Problem("orphaned_hold", o.tag, "", o.describe(), "give back to the dead list, in order")
            for o in find(layout)]


def _check_queue(session: Session, q, repair: bool, yes: bool):
    """One queue's check report; with ``repair`` (confirmed unless ``yes``)
    its holds given back, its repairs applied and journaled."""
    from ..layouts.status_truth import catalogue_warnings
    from ..ops.journal import command_line, write_entry
    from ..ops.orphan_holds import give_back
    from ..ops.spec import operator_name
    from .ops_cmds import invocation

    layout = session.layout(q)
    for w in catalogue_warnings(layout):  # a wrong entry makes the check read the wrong keys
        render.note(f"warning: queue {q.name}: {w}")
    started = int(time.time() * 1000)
    held = _held_problems(layout)
    report = layout.check(repair=False)
    report.problems[:0] = held
    if not (repair and any(p.repair for p in report.problems)):
        return report
    if not yes and not click.confirm(f"{q.name}: repair {sum(1 for p in report.problems if p.repair)} "
                                     "problem(s)?", default=False, err=True):
        raise click.exceptions.Abort()
    back = give_back(layout, f"check-{started}")
    report = layout.check(repair=True)
    given = {o.tag for o in back}
    for p in held:
        p.repaired = p.shard in given
    report.problems[:0] = held
    fixed = [p for p in report.problems if p.repaired]
    write_entry(layout.client, layout.journal_key, {
        "id": f"check-{started}", "operation": "check --repair", "queue": q.name,
        "operator": operator_name(), "command": command_line(invocation(), session.target),
        "server": session.target.display, "planned": len(report.problems), "moved": len(fixed),
        "skipped": len(report.remaining), "failed": 0, "repairs": [p.to_json() for p in fixed[:200]],
        "started_ms": started, "ended_ms": int(time.time() * 1000)}, session.target)
    return report


@click.command()
@click.argument("queues", nargs=-1)
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
    reports = []
    with session.errors():
        for q in session.queues(queues):
            reports.append(_check_queue(session, q, repair, yes))
    if as_json:
        render.print_json({"ok": all(r.ok for r in reports), "queues": [r.to_json() for r in reports]})
    else:
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
    return int(ExitCode.OK if all(r.ok for r in reports) else ExitCode.INVARIANT)


@click.command()
@click.argument("queues", nargs=-1)
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
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("ended", "operation", "queue", "operator", "planned", "moved", "skipped", "filter", "id"):
        t.add_column(col, justify="right" if col in ("planned", "moved", "skipped") else "left", overflow="fold")
    for e in entries:
        t.add_row(render.fmt_ms(e.get("ended_ms")), str(e.get("operation")), str(e.get("queue")),
                  str(e.get("operator")), str(e.get("planned", "")), str(e.get("moved", "")),
                  str(e.get("skipped", "")), e.get("filter") or "", str(e.get("id")))
    render.console().print(t)
    return int(ExitCode.OK)


COMMANDS = [check, journal]
