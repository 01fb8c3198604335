"""What a parsed runbook holds: :class:`Runbook`, :class:`Step`, :class:`Command`.

The markdown format is described in :mod:`jobctl.runbook.parse` (and in
``runbooks/README.md``).  A step is one fenced ``jobctl`` block; each line of
the block is one jobctl command, run in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .condition import Condition

__all__ = ["Command", "Step", "Runbook", "MUTATING_COMMANDS", "DENIED_COMMANDS", "ROLLBACK_SECTION",
           "PLACEHOLDER_RE", "placeholders", "substitute"]

def _operation_commands() -> frozenset[str]:
    """The CLI subcommand of every operation of the catalogue
    (:data:`jobctl.ops.catalog.OPERATIONS`; a transformation is ``migrate
    --transform``, a reshard a migrate): a new operation is mutating here
    without being listed again."""
    from ..ops.catalog import OPERATIONS
    from ..ops.spec import Operation

    names = {i.operation.value for i in OPERATIONS.values()} - {Operation.TRANSFORM.value}
    return frozenset(names | {"migrate", "reshard"})


#: Commands that change queues unless given ``--dry-run`` (every operation,
#: replay and reshard included); ``check`` changes them only with ``--repair``.
MUTATING_COMMANDS = _operation_commands()

#: Commands a runbook step may not run: interactive, long-running or recursive.
DENIED_COMMANDS = frozenset({"runbook", "demo", "metrics", "tui"})

#: Steps under a heading with this name are run only when selected with ``--step``.
ROLLBACK_SECTION = "rollback"

#: ``{name}``; ``{{`` and ``}}`` are literal braces.
PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(text: str) -> set[str]:
    """The placeholder names ``text`` uses."""
    return {m.group(1) for m in PLACEHOLDER_RE.finditer(text) if m.group(1)}


def substitute(text: str, values: dict[str, str]) -> str:
    """``text`` with every ``{name}`` replaced; raises KeyError for an unknown name."""
    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return values[m.group(1)]

    return PLACEHOLDER_RE.sub(repl, text)


@dataclass(frozen=True)
class Command:
    """One command line of a step: ``jobctl <subcommand> ...``.

    ``tokens`` are the shell words after ``jobctl`` (placeholders still in
    them: they are substituted word by word, so a value never splits or
    needs quoting).  ``line`` is the 1-based line in the runbook file.
    """

    text: str
    tokens: tuple[str, ...]
    line: int

    @property
    def subcommand(self) -> str:
        return self.tokens[0]

    @property
    def mutating(self) -> bool:
        """True when the command changes a queue as written (no ``--dry-run``)."""
        if "--dry-run" in self.tokens:
            return False
        if self.subcommand in MUTATING_COMMANDS:
            return True
        return self.subcommand == "check" and "--repair" in self.tokens

    def argv(self, values: dict[str, str]) -> list[str]:
        """The tokens with placeholders substituted (KeyError: unknown name)."""
        return [substitute(t, values) for t in self.tokens]


@dataclass(frozen=True)
class Step:
    """One fenced ``jobctl`` block.

    ``guard``: the step (and each further command of it) runs only while the
    condition holds on the queue's status; otherwise it is skipped.
    ``expect``: after the commands, the condition must hold (on the status,
    and ``out.*`` on the last command's JSON output), else the run fails.
    ``ok_codes``: exit codes that count as success.  ``manual``: run only when
    selected with ``--step`` (every step of the Rollback section is).
    """

    name: str
    section: str
    commands: tuple[Command, ...]
    line: int
    guard: Condition | None = None
    expect: Condition | None = None
    ok_codes: frozenset[int] = frozenset({0})
    manual: bool = False

    @property
    def mutating(self) -> bool:
        return any(c.mutating for c in self.commands)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "section": self.section, "line": self.line, "mutating": self.mutating,
                "manual": self.manual, "guard": self.guard.text if self.guard else None,
                "expect": self.expect.text if self.expect else None, "ok": sorted(self.ok_codes),
                "commands": [c.text for c in self.commands]}


@dataclass(frozen=True)
class Runbook:
    """A parsed runbook.  ``name`` is the file name without ``.md``;
    ``title`` the first ``#`` heading; ``params`` the defaults of the
    front matter's ``params:`` line; ``alerts`` the alert names it answers;
    ``sections`` the ``##`` headings in order."""

    name: str
    title: str
    text: str
    source: str
    params: dict[str, str] = field(default_factory=dict)
    alerts: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        from ..errors import NotFound

        raise NotFound(f"runbook {self.name} has no step {name!r} (steps: {', '.join(s.name for s in self.steps)})")

    @property
    def placeholders(self) -> set[str]:
        """Every placeholder its commands use (``queue`` included)."""
        names: set[str] = set()
        for s in self.steps:
            for c in s.commands:
                for t in c.tokens:
                    names |= placeholders(t)
        for v in self.params.values():
            names |= placeholders(v)
        return names

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "source": self.source, "params": self.params,
                "alerts": list(self.alerts), "sections": list(self.sections),
                "steps": [s.to_json() for s in self.steps]}
