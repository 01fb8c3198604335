"""Parse a markdown runbook into a :class:`~jobctl.runbook.model.Runbook`.

The format (also in ``runbooks/README.md``)::

    ---
    alerts: RedisJobDeadLetterSpike
    params: rate=200 export_dir=jobctl-export-{queue}
    ---
    # Dead-letter queue spike

    ## Diagnosis

    ```jobctl step=triage guard="dead > 0"
    jobctl status {queue} --json
    jobctl attempts {queue} --state dead
    ```

* The optional front matter (between ``---`` lines at the very top) holds
  ``key: value`` lines: ``alerts`` (comma-separated alert names),
  ``params`` (``name=default`` words, shell-quoted) and ``title``.
* ``#`` is the title, ``##`` headings are sections; a step belongs to the
  last ``##`` heading above it.  Steps under ``## Rollback`` are manual.
* Only fenced blocks whose info string starts with ``jobctl`` are steps;
  other blocks (``sh``, ``text``, ``promql``) are for reading.  The rest of
  the info string holds shell-quoted attributes: ``step=NAME`` (default
  ``<section>-<n>``), ``guard=CONDITION``, ``expect=CONDITION``
  (:mod:`jobctl.runbook.condition`), ``ok=0,7`` (accepted exit codes) and
  the flag ``manual``.
* Each non-blank line of a step is one command, ``jobctl <subcommand> ...``
  (``#`` lines are comments; a trailing ``\\`` continues a line).  Global
  options (``--url``...) are not allowed: the runner passes its own.
  ``{name}`` placeholders are replaced word by word at run time.

Errors are :class:`RunbookError` (a :class:`~jobctl.errors.UsageError`)
naming the file and line.
"""

from __future__ import annotations

import re
import shlex

from ..errors import UsageError
from .condition import ConditionError, compile_condition
from .model import DENIED_COMMANDS, ROLLBACK_SECTION, Command, Runbook, Step

__all__ = ["RunbookError", "parse_runbook"]

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_STEP_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ATTRS = {"step", "guard", "expect", "ok", "manual"}


class RunbookError(UsageError):
    """A runbook that does not parse."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "step"


def _front_matter(lines: list[str], source: str) -> tuple[dict[str, str], int]:
    if not lines or lines[0].strip() != "---":
        return {}, 0
    meta: dict[str, str] = {}
    for n, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, n + 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise RunbookError(f"{source}:{n + 1}: front matter line is not 'key: value'")
        meta[key.strip().lower()] = value.strip()
    raise RunbookError(f"{source}:1: front matter not closed by '---'")


def _params(text: str, source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise RunbookError(f"{source}: params: {exc}") from None
    for w in words:
        name, sep, value = w.partition("=")
        if not sep or not _PARAM_NAME.match(name):
            raise RunbookError(f"{source}: params: {w!r} is not name=value")
        out[name] = value
    return out


def _attributes(info: str, source: str, line: int) -> dict[str, str]:
    try:
        words = shlex.split(info)
    except ValueError as exc:
        raise RunbookError(f"{source}:{line}: step attributes: {exc}") from None
    attrs: dict[str, str] = {}
    for w in words[1:]:
        key, sep, value = w.partition("=")
        if key not in _ATTRS:
            raise RunbookError(f"{source}:{line}: unknown step attribute {key!r} "
                               f"(known: {', '.join(sorted(_ATTRS))})")
        attrs[key] = value if sep else "yes"
    return attrs


def _command(text: str, source: str, line: int) -> Command:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise RunbookError(f"{source}:{line}: {exc}") from None
    if not words or words[0] != "jobctl":
        raise RunbookError(f"{source}:{line}: a step line must be a jobctl command, got {text!r}")
    tokens = tuple(words[1:])
    if not tokens or tokens[0].startswith("-"):
        raise RunbookError(f"{source}:{line}: a step command starts with its subcommand "
                           "(global options such as --url come from the runner)")
    if tokens[0] in DENIED_COMMANDS:
        raise RunbookError(f"{source}:{line}: 'jobctl {tokens[0]}' cannot run inside a runbook step")
    if "--watch" in tokens or any(t.startswith("--watch=") for t in tokens):
        raise RunbookError(f"{source}:{line}: --watch never ends; a step must")
    return Command(text=text, tokens=tokens, line=line)


def _ok_codes(value: str, source: str, line: int) -> frozenset[int]:
    try:
        codes = frozenset(int(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise RunbookError(f"{source}:{line}: ok={value!r}: expected exit codes like 0,7") from None
    if not codes:
        raise RunbookError(f"{source}:{line}: ok= lists no exit code")
    return codes


def parse_runbook(name: str, text: str, source: str | None = None) -> Runbook:
    """Parse the markdown ``text`` of runbook ``name``; raises :class:`RunbookError`."""
    source = source or f"{name}.md"
    lines = text.splitlines()
    meta, start = _front_matter(lines, source)
    title = meta.get("title", "")
    sections: list[str] = []
    section = ""
    steps: list[Step] = []
    counters: dict[str, int] = {}
    i = start
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m is None:
            if line.startswith("# ") and not title:
                title = line[2:].strip()
            elif line.startswith("## "):
                section = line[3:].strip()
                sections.append(section)
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        opened = i + 1
        body: list[tuple[int, str]] = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and set(close) == {fence[0]}:
                break
            body.append((i + 1, lines[i]))
            i += 1
        else:
            raise RunbookError(f"{source}:{opened}: code block not closed")
        i += 1
        if info.split(" ", 1)[0] != "jobctl":
            continue
        steps.append(_step(info, body, section, opened, source, counters))
    names = [s.name for s in steps]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RunbookError(f"{source}: step names used twice: {', '.join(dupes)}")
    alerts = tuple(a.strip() for a in meta.get("alerts", "").split(",") if a.strip())
    return Runbook(name=name, title=title or name, text=text, source=source,
                   params=_params(meta.get("params", ""), source), alerts=alerts,
                   sections=tuple(sections), steps=tuple(steps))


def _step(info: str, body: list[tuple[int, str]], section: str, line: int, source: str,
          counters: dict[str, int]) -> Step:
    attrs = _attributes(info, source, line)
    commands: list[Command] = []
    pending = ""
    pending_line = 0
    for n, raw in body:
        text = raw.strip()
        if not pending and (not text or text.startswith("#")):
            continue
        if not pending:
            pending_line = n
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        commands.append(_command(pending + text, source, pending_line))
        pending = ""
    if pending:
        commands.append(_command(pending, source, pending_line))
    if not commands:
        raise RunbookError(f"{source}:{line}: jobctl block without a command")
    slug = _slug(section)
    if "step" in attrs:
        name = attrs["step"]
        if not _STEP_NAME.match(name):
            raise RunbookError(f"{source}:{line}: step name {name!r}: use lower case, digits, - and _")
    else:
        counters[slug] = counters.get(slug, 0) + 1
        name = f"{slug}-{counters[slug]}"
    try:
        guard = compile_condition(attrs["guard"]) if "guard" in attrs else None
        expect = compile_condition(attrs["expect"]) if "expect" in attrs else None
    except ConditionError as exc:
        raise RunbookError(f"{source}:{line}: {exc}") from None
    ok = _ok_codes(attrs["ok"], source, line) if "ok" in attrs else frozenset({0})
    manual = "manual" in attrs or section.strip().lower() == ROLLBACK_SECTION
    return Step(name=name, section=section, commands=tuple(commands), line=line, guard=guard,
                expect=expect, ok_codes=ok, manual=manual)
