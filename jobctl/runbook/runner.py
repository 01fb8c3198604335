"""Run a runbook's steps in order: guards, dry runs, expectations, journal.

How a step runs (:class:`Runner`):

1. ``guard``: read the queue's status (``status --json`` of ``--queue``)
   before each command of the step; while the guard does not hold, the
   rest of the step is skipped (this is the "run only while" fence).
2. A mutating command (an operation, or ``check --repair``) runs for real
   only when confirmed: ``--yes``, or the operator answers yes at the
   prompt.  Otherwise it runs as a dry run (``--dry-run`` added; ``check
   --repair`` becomes plain ``check``).  In read-only mode it is always a
   dry run.  Confirmed commands get ``--yes`` (they would refuse without a
   terminal).
3. ``{queue}`` and ``{param}`` placeholders are substituted word by word.
4. Each command runs as the CLI in a **child process**
   (:func:`.child.run_subprocess`: ``python -c 'jobctl.cli.main.main()' ...``),
   with the runner's global options (``--profile``, ``--config``,
   ``--read-only``, ``--timeout``) in front, so its output, exit code and
   journal entries are exactly those of the same command typed by hand; an
   operation runs through the operations core
   (:class:`jobctl.ops.core.OperationCore`) like any CLI operation.  A
   ``--url`` is handed over in the child's environment
   (``$JOBCTL_REDIS_URL``), so its password never appears in a command
   line.  This package never imports :mod:`jobctl.cli`.
5. A command whose exit code is not in the step's ``ok`` codes stops the
   run with that code.  ``expect``: checked after the step's commands, on
   the status and on the last command's JSON output (``out.*``); when it
   does not hold the run stops with exit code 7 (invariant), except when an
   earlier mutating step ran as a dry run (nothing was changed, so the
   verification is reported, not enforced).
6. Every step, run or skipped, is journaled (:func:`jobctl.ops.journal.write_entry`,
   operation ``runbook-step``) to the local journal and, except in
   read-only mode, to the queue's journal stream.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import UsageError
from ..exitcodes import ExitCode
from ..ops.journal import command_line, write_entry
from ..ops.spec import operator_name
from .child import child_env, global_args, run_subprocess
from .condition import condition_values
from .model import Command, Runbook, Step, substitute

__all__ = ["CommandOutcome", "StepOutcome", "RunReport", "Runner", "global_args", "child_env", "run_subprocess",
           "resolve_params"]

Executor = Callable[[list[str], bool], tuple[int, bytes | None]]


@dataclass
class CommandOutcome:
    """One command as run: ``argv`` (without global options), exit ``code``,
    and whether it was turned into a dry run."""

    argv: list[str]
    code: int
    dry_run: bool = False


@dataclass
class StepOutcome:
    """What happened to one step.

    ``result``: ``ok``, ``dry-run`` (a mutating step run as a dry run),
    ``skipped`` (guard false before the first command), ``partial`` (guard
    turned false mid-step), ``failed`` (exit code not accepted), ``not-met``
    (expectation false), ``interrupted``.
    """

    step: Step
    result: str
    detail: str = ""
    commands: list[CommandOutcome] = field(default_factory=list)
    guard_values: str | None = None
    expect_met: bool | None = None
    expect_values: str | None = None
    started_ms: int = 0
    ended_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step.name, "section": self.step.section, "result": self.result,
                "detail": self.detail, "commands": [{"argv": c.argv, "exit": c.code, "dry_run": c.dry_run}
                                                    for c in self.commands],
                "guard": self.step.guard.text if self.step.guard else None, "guard_values": self.guard_values,
                "expect": self.step.expect.text if self.step.expect else None, "expect_met": self.expect_met,
                "expect_values": self.expect_values, "started_ms": self.started_ms, "ended_ms": self.ended_ms}


@dataclass
class RunReport:
    """The outcome of one run; ``exit_code`` 0 when every step passed."""

    runbook: str
    queue: str | None
    run_id: str
    steps: list[StepOutcome] = field(default_factory=list)
    exit_code: int = 0
    message: str = ""
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_json(self) -> dict[str, Any]:
        return {"runbook": self.runbook, "queue": self.queue, "run_id": self.run_id, "ok": self.ok,
                "exit_code": self.exit_code, "message": self.message, "dry_run": self.dry_run,
                "steps": [s.to_json() for s in self.steps]}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_run_id(name: str) -> str:
    """``runbook-dlq-spike-20261121T101500Z-1a2b3c4d``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"runbook-{name}-{stamp}-{uuid.uuid4().hex[:8]}"


def resolve_params(book: Runbook, queue: str | None, given: dict[str, str]) -> dict[str, str]:
    """Placeholder values: ``queue``, the runbook's defaults, then ``given``.

    Defaults may use ``{queue}``.  Raises :class:`UsageError` for an unknown
    ``given`` name or a placeholder without a value.
    """
    unknown = sorted(set(given) - set(book.params) - {"queue"})
    if unknown:
        known = ", ".join(sorted(book.params)) or "none"
        raise UsageError(f"runbook {book.name} has no parameter {unknown[0]!r} (parameters: {known})")
    values: dict[str, str] = {}
    if queue is not None:
        values["queue"] = queue
    for name, default in book.params.items():
        if name in given:
            continue
        try:
            values[name] = substitute(default, values)
        except KeyError as exc:
            if exc.args[0] == "queue":
                raise UsageError(f"runbook {book.name} needs --queue (parameter {name} uses {{queue}})") from None
            raise UsageError(f"runbook {book.name}: parameter {name} uses {{{exc.args[0]}}}, "
                             "which is no parameter") from None
    values.update(given)
    missing = sorted(n for n in book.placeholders if n not in values)
    if missing:
        if "queue" in missing:
            raise UsageError(f"runbook {book.name} needs --queue (its commands use {{queue}})")
        raise UsageError(f"runbook {book.name} needs --set {missing[0]}=VALUE")
    return values


class Runner:
    """Runs the steps of ``book`` against ``session`` (see the module docstring).

    ``yes``: confirm every mutating step.  ``confirm(step)``: asked per
    mutating step when not ``yes`` (``None``: not interactive, so dry run).
    ``select``: step names to run (manual ones included); default every
    non-manual step.  ``skip``: step names to leave out.  ``execute(argv,
    capture)``: how a command runs (default :func:`run_subprocess` with the
    session's global options and :func:`child_env`).  ``say(text)``: progress lines (stderr).
    """

    def __init__(self, session, book: Runbook, *, queue: str | None = None,
                 params: dict[str, str] | None = None, yes: bool = False,
                 confirm: Callable[[Step], bool] | None = None, select: tuple[str, ...] = (),
                 skip: tuple[str, ...] = (), execute: Executor | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.session = session
        self.book = book
        self.queue = queue
        self.values = resolve_params(book, queue, dict(params or {}))
        self.yes = yes
        self.confirm = confirm
        for name in (*select, *skip):
            book.step(name)  # NotFound for an unknown step
        self.steps = [s for s in book.steps
                      if (s.name in select if select else not s.manual) and s.name not in skip]
        needs_status = [s.name for s in self.steps
                        if any(not n.startswith("out.") for c in (s.guard, s.expect) if c for n in c.names)]
        if needs_status and queue is None:
            raise UsageError(f"runbook {book.name} needs --queue (step {needs_status[0]} reads the queue's status)")
        prefix = global_args(session)
        env = child_env(session)
        self.execute = execute or (lambda argv, capture: run_subprocess(prefix + argv, capture, env=env))
        self.say = say or (lambda text: print(text, file=sys.stderr, flush=True))
        self.run_id = new_run_id(book.name)
        self.dry_ran = False

    # -- helpers ---------------------------------------------------------------
    def _status(self) -> dict[str, Any] | None:
        if self.queue is None:
            return None
        with self.session.errors():
            return self.session.layout(self.queue).status_report().to_json()

    def _apply(self, step: Step) -> bool:
        """Whether the mutating ``step`` runs for real."""
        if self.session.read_only:
            self.say(f"   read-only mode: step {step.name} runs as a dry run")
            return False
        if self.yes:
            return True
        if self.confirm is not None:
            return bool(self.confirm(step))
        self.say(f"   no --yes and no terminal to ask: step {step.name} runs as a dry run")
        return False

    @staticmethod
    def _transform(cmd: Command, argv: list[str], apply: bool) -> tuple[list[str], bool]:
        """(argv to run, whether it became a dry run)."""
        if not cmd.mutating:
            return argv, False
        if apply:
            return (argv if ("--yes" in argv or "-y" in argv) else argv + ["--yes"]), False
        rest = [a for a in argv if a not in ("--yes", "-y")]
        if cmd.subcommand == "check":
            return [a for a in rest if a != "--repair"], True
        return rest + ["--dry-run"], True

    def _journal(self, out: StepOutcome) -> None:
        step = out.step
        target = self.session.target
        client = None
        key = None
        if self.queue is not None and not self.session.read_only:
            try:
                layout = self.session.layout(self.queue)
                client, key = layout.client, layout.journal_key
            except Exception:  # noqa: BLE001 - journal what we can (the local file)
                client = None
        entry = {
            "id": f"{self.run_id}-{self.book.steps.index(step) + 1:02d}", "operation": "runbook-step",
            "queue": self.queue, "runbook": self.book.name, "run_id": self.run_id, "step": step.name,
            "section": step.section, "result": out.result, "detail": out.detail,
            "operator": operator_name(), "server": target.display,
            "command": "; ".join(command_line(["jobctl", *c.argv], target) for c in out.commands),
            "exit_codes": [c.code for c in out.commands], "dry_run": any(c.dry_run for c in out.commands),
            "guard": step.guard.text if step.guard else None, "guard_values": out.guard_values,
            "expect": step.expect.text if step.expect else None, "expect_met": out.expect_met,
            "expect_values": out.expect_values, "started_ms": out.started_ms, "ended_ms": out.ended_ms,
        }
        for p in write_entry(client, key, entry, target):
            self.say(f"   warning: {p}")

    # -- running -------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run the selected steps; never raises for a failing step (see
        :attr:`RunReport.exit_code`), only for a bad runbook or connection."""
        report = RunReport(self.book.name, self.queue, self.run_id)
        total = len(self.steps)
        for n, step in enumerate(self.steps, start=1):
            kind = "mutating" if step.mutating else "read-only"
            self.say(f"── step {n}/{total}: {step.name} ({step.section or 'no section'}; {kind}) ──")
            out = self._run_step(step)
            report.steps.append(out)
            self._journal(out)
            self.say(f"   -> {out.result}{': ' + out.detail if out.detail else ''}")
            if out.result == "interrupted":
                report.exit_code, report.message = int(ExitCode.INTERRUPTED), f"interrupted at step {step.name}"
                break
            if out.result == "failed":
                code = out.commands[-1].code if out.commands else int(ExitCode.FAILURE)
                report.exit_code = code or int(ExitCode.FAILURE)
                report.message = f"step {step.name} failed: {out.detail}"
                break
            if out.result == "not-met":
                report.exit_code = int(ExitCode.INVARIANT)
                report.message = f"step {step.name}: expected {step.expect.text} ({out.expect_values})"
                break
        report.dry_run = self.dry_ran
        return report

    def _run_step(self, step: Step) -> StepOutcome:
        out = StepOutcome(step=step, result="ok", started_ms=_now_ms())
        apply = self._apply(step) if step.mutating else False
        captured: bytes | None = None
        try:
            for i, cmd in enumerate(step.commands):
                if step.guard is not None:
                    values = condition_values(self._status())
                    held = step.guard.evaluate(values)
                    out.guard_values = step.guard.explain(values)
                    if not held:
                        out.result = "skipped" if i == 0 else "partial"
                        out.detail = f"guard {step.guard.text} does not hold ({out.guard_values})"
                        return out
                argv, dry = self._transform(cmd, cmd.argv(self.values), apply)
                self.dry_ran |= dry
                self.say("   $ jobctl " + " ".join(_quote(a) for a in argv))
                last = i == len(step.commands) - 1
                code, captured_now = self.execute(argv, bool(last and step.expect and step.expect.uses_output))
                if last:
                    captured = captured_now
                out.commands.append(CommandOutcome(argv, code, dry))
                if code == int(ExitCode.INTERRUPTED):
                    out.result, out.detail = "interrupted", f"jobctl {cmd.subcommand} was interrupted"
                    return out
                accepted = step.ok_codes | ({int(ExitCode.INVARIANT)} if dry and cmd.subcommand == "check"
                                            else set())
                if code not in accepted:
                    out.result = "failed"
                    out.detail = f"jobctl {cmd.subcommand} exited {code} (accepted: " \
                                 f"{', '.join(str(c) for c in sorted(step.ok_codes))})"
                    return out
                if dry:
                    out.result = "dry-run"
            if step.expect is not None:
                output = None
                if captured:
                    try:
                        output = orjson.loads(captured)
                    except orjson.JSONDecodeError:
                        output = None
                status = self._status() if any(not n.startswith("out.") for n in step.expect.names) else None
                values = condition_values(status, output)
                out.expect_met = step.expect.evaluate(values)
                out.expect_values = step.expect.explain(values)
                if not out.expect_met:
                    if self.dry_ran:
                        out.detail = (f"expected {step.expect.text}, not met ({out.expect_values}); "
                                      "not enforced: earlier steps ran as dry runs")
                    else:
                        out.result = "not-met"
                        out.detail = f"expected {step.expect.text}, not met ({out.expect_values})"
                else:
                    out.detail = f"{step.expect.text} holds ({out.expect_values})"
            return out
        except KeyboardInterrupt:
            out.result, out.detail = "interrupted", "Ctrl-C"
            return out
        finally:
            out.ended_ms = _now_ms()


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)

