"""``jobctl runbook list | show NAME | run NAME``: executable incident runbooks.

The runbooks are ``runbooks/*.md`` (format: ``runbooks/README.md``); the
runner is :mod:`jobctl.runbook.runner`.  ``run`` shows each step's commands
and output as it goes (progress on stderr, the commands' own output on
stdout), journals every step and exits with the first failing step's code,
7 when a verification does not hold, 0 otherwise.
"""

from __future__ import annotations

import sys

import click

from ..errors import JobctlError, UsageError
from ..exitcodes import ExitCode
from ..session import Session
from . import render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)

_DIR_KEY = "jobctl.runbook_dir"


def _library(ctx: click.Context):
    from ..runbook.library import Library

    return Library(ctx.meta.get(_DIR_KEY))


@click.group()
@click.option("--dir", "directory", metavar="DIR", type=click.Path(file_okay=False),
              help="Also load runbooks from DIR (overrides shipped ones of the same name; else $JOBCTL_RUNBOOKS).")
@click.pass_context
def runbook(ctx: click.Context, directory: str | None) -> None:
    """Executable incident runbooks: list, show and run them step by step."""
    ctx.meta[_DIR_KEY] = directory


@runbook.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> int:
    """The runbooks available, with their steps and the alerts they answer."""
    books = _library(ctx).all()
    if as_json:
        render.print_json({"runbooks": [{"name": b.name, "title": b.title, "source": b.source,
                                         "steps": len(b.steps), "alerts": list(b.alerts),
                                         "params": b.params} for b in books]})
        return int(ExitCode.OK)
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("runbook", "title", "steps", "alerts"):
        t.add_column(col, justify="right" if col == "steps" else "left")
    for b in books:
        t.add_row(b.name, b.title, str(len(b.steps)), ", ".join(b.alerts))
    render.console().print(t)
    return int(ExitCode.OK)


@runbook.command()
@click.argument("name")
@click.option("--steps", is_flag=True, help="List the executable steps instead of the text.")
@click.option("--json", "as_json", is_flag=True, help="The parsed runbook as JSON.")
@click.pass_context
def show(ctx: click.Context, name: str, steps: bool, as_json: bool) -> int:
    """Print runbook NAME (markdown), or its steps."""
    book = _library(ctx).load(name)
    if as_json:
        render.print_json(book.to_json())
        return int(ExitCode.OK)
    if not steps:
        click.echo(book.text, nl=not book.text.endswith("\n"))
        return int(ExitCode.OK)
    from rich.table import Table

    t = Table(header_style="bold", title=f"{book.name}: {book.title}")
    for col in ("step", "section", "kind", "guard", "expect", "commands"):
        t.add_column(col, overflow="fold")
    for s in book.steps:
        kind = ("manual, " if s.manual else "") + ("mutating" if s.mutating else "read-only")
        t.add_row(s.name, s.section, kind, s.guard.text if s.guard else "", s.expect.text if s.expect else "",
                  "\n".join(c.text for c in s.commands))
    render.console().print(t)
    if book.params:
        render.note("parameters (--set NAME=VALUE): " + ", ".join(f"{k}={v}" for k, v in book.params.items()))
    return int(ExitCode.OK)


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name:
            raise UsageError(f"--set {v!r}: expected NAME=VALUE")
        out[name] = value
    return out


@runbook.command()
@click.argument("name")
@click.option("--queue", "-q", metavar="QUEUE", help="The queue: {queue} in commands; guards read its status.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="A runbook parameter (repeatable).")
@click.option("--step", "select", multiple=True, metavar="STEP",
              help="Run only these steps, in runbook order (manual and rollback steps too; repeatable).")
@click.option("--skip", multiple=True, metavar="STEP", help="Leave this step out (repeatable).")
@click.option("--yes", "-y", is_flag=True, help="Apply mutating steps without asking (else: ask, or dry run "
                                                 "without a terminal).")
@click.pass_context
def run(ctx: click.Context, name: str, queue: str | None, sets: tuple[str, ...], select: tuple[str, ...],
        skip: tuple[str, ...], yes: bool) -> int:
    """Run runbook NAME's steps in order, showing each command and its output.

    Mutating steps are dry runs unless confirmed (--yes, or yes at the
    prompt); guards skip steps whose condition does not hold on the queue's
    status; expectations verify the result.  Every step is journaled
    (operation runbook-step).
    """
    from ..runbook.runner import Runner

    session: Session = ctx.find_object(Session)
    book = _library(ctx).load(name)
    if yes:  # --yes asks to apply: refused under --read-only like every mutating command (exit 9)
        session.require_writable(f"runbook run {book.name} --yes")
    confirm = None
    if not yes and sys.stdin.isatty():
        def confirm(step) -> bool:
            cmds = "; ".join(c.text for c in step.commands if c.mutating)
            return click.confirm(f"apply step {step.name} ({cmds})? (no: dry run)", default=False, err=True)
    runner = Runner(session, book, queue=queue, params=_parse_sets(sets), yes=yes, confirm=confirm,
                    select=select, skip=skip, say=lambda text: click.echo(text, err=True))
    if queue is not None:
        with session.errors():
            session.queue(queue)  # unknown queue: exit 5 before any step
    report = runner.run()
    _summary(report)
    if report.exit_code:
        try:
            code = ExitCode(report.exit_code)
        except ValueError:
            code = ExitCode.FAILURE
        raise JobctlError(f"runbook {book.name}: {report.message}", exit_code=code)
    return int(ExitCode.OK)


def _summary(report) -> None:
    from rich.table import Table

    t = Table(header_style="bold", title=f"runbook {report.runbook}"
              + (f" on {report.queue}" if report.queue else "") + f"  [{report.run_id}]")
    for col in ("step", "result", "detail"):
        t.add_column(col, overflow="fold")
    for s in report.steps:
        t.add_row(s.step.name, s.result, s.detail)
    con = render.console(stderr=True)
    con.print(t)
    if report.dry_run and report.ok:
        render.note("mutating steps ran as dry runs: nothing was changed (pass --yes to apply)")


COMMANDS = [runbook]
