"""Conditions of runbook steps: the ``guard`` and ``expect`` attributes.

A condition compares the queue's status (the ``jobctl status --json``
fields, README "The status --json contract") with numbers and durations::

    stuck > 0
    oldest_ready_age < 5m and dead > 0
    not (scheduled_overdue > 0 or stuck > 0)
    out.planned == 0          # a field of the step's last command's JSON output

Grammar: comparisons ``A OP B`` (``OP``: ``== = != < <= > >=``) joined by
``and``, ``or``, ``not`` and parentheses (``not`` > ``and`` > ``or``).  An
operand is a field name, a number (``3``, ``2.5``), a duration (``500ms``,
``30s``, ``5m``, ``1h30m``: :func:`jobctl.durations.parse_duration`, in
milliseconds), or ``true``, ``false``, ``null``.

Names: every numeric field of the status document (:data:`STATUS_FIELDS`),
the short aliases of :data:`ALIASES` (``oldest_ready_age`` is
``oldest_ready_age_ms``), and ``out.<path>``: a field of the JSON object the
step's last command printed (``out.plan.planned``).  Ages are milliseconds;
an age that is ``null`` because nothing waits (nothing ready, nothing
overdue) reads as 0.  Any other ``null`` compares false except with ``!=``
(and ``== null``).

Errors are :class:`ConditionError` (a :class:`~jobctl.errors.UsageError`)
with the column.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..durations import format_duration, parse_duration
from ..errors import UsageError

__all__ = ["ConditionError", "Condition", "compile_condition", "STATUS_FIELDS", "ALIASES",
           "condition_values"]

#: Numeric fields of one queue's ``status --json`` entry (jobctl.model.QueueStatus).
STATUS_FIELDS: tuple[str, ...] = (
    "shards", "ready", "scheduled", "scheduled_overdue", "scheduled_overdue_max_age_ms", "next_due_ms",
    "processing", "stuck", "next_deadline_ms", "dead", "suppressed", "oldest_ready_since_ms",
    "oldest_ready_age_ms", "now_ms", "paused",
)

#: Short names accepted for status fields.
ALIASES: dict[str, str] = {
    "oldest_ready_age": "oldest_ready_age_ms",
    "overdue": "scheduled_overdue",
    "overdue_age": "scheduled_overdue_max_age_ms",
    "scheduled_overdue_max_age": "scheduled_overdue_max_age_ms",
}

#: Ages that are ``null`` when nothing waits: read as 0.
_ZERO_WHEN_NULL = frozenset({"oldest_ready_age_ms", "scheduled_overdue_max_age_ms"})

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<op>==|!=|<=|>=|=|<|>)
  | (?P<dur>(?:\d+(?:\.\d+)?(?:ms|w|d|h|m|s))+)(?![A-Za-z0-9_.])
  | (?P<num>-?\d+(?:\.\d+)?)(?![A-Za-z0-9_])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
""", re.VERBOSE)

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}

_MISSING = object()


class ConditionError(UsageError):
    """A condition that does not parse or names an unknown field."""


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConditionError(f"condition {text!r}: unexpected {text[pos]!r} at column {pos + 1}")
        kind = m.lastgroup or ""
        if kind != "ws":
            word = m.group(0)
            if kind == "name" and word.lower() in ("and", "or", "not", "true", "false", "null"):
                kind = word.lower()
            out.append(_Tok(kind, word, pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


def _resolve(name: str, text: str, pos: int) -> str:
    if name.startswith("out."):
        return name
    name = ALIASES.get(name, name)
    if name not in STATUS_FIELDS:
        known = ", ".join(list(STATUS_FIELDS) + list(ALIASES))
        raise ConditionError(f"condition {text!r}: unknown field {name!r} at column {pos + 1} "
                             f"(fields: {known}, out.<path>)")
    return name


Evaluator = Callable[[Mapping[str, Any]], bool]
Operand = Callable[[Mapping[str, Any]], Any]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.names: list[str] = []

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, *kinds: str) -> _Tok:
        tok = self.toks[self.i]
        if tok.kind not in kinds:
            want = " or ".join(kinds)
            got = repr(tok.text) if tok.text else "the end"
            raise ConditionError(f"condition {self.text!r}: expected {want} at column {tok.pos + 1}, got {got}")
        self.i += 1
        return tok

    def parse(self) -> Evaluator:
        ev = self.or_()
        self.take("end")
        return ev

    def or_(self) -> Evaluator:
        parts = [self.and_()]
        while self.peek().kind == "or":
            self.i += 1
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else (lambda v, ps=tuple(parts): any(p(v) for p in ps))

    def and_(self) -> Evaluator:
        parts = [self.not_()]
        while self.peek().kind == "and":
            self.i += 1
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else (lambda v, ps=tuple(parts): all(p(v) for p in ps))

    def not_(self) -> Evaluator:
        if self.peek().kind == "not":
            self.i += 1
            inner = self.not_()
            return lambda v: not inner(v)
        if self.peek().kind == "lp":
            self.i += 1
            inner = self.or_()
            self.take("rp")
            return inner
        return self.comparison()

    def operand(self) -> Operand:
        tok = self.take("name", "num", "dur", "true", "false", "null")
        if tok.kind == "name":
            name = _resolve(tok.text, self.text, tok.pos)
            self.names.append(name)
            return lambda v: v.get(name, _MISSING)
        if tok.kind == "num":
            value: Any = float(tok.text) if "." in tok.text else int(tok.text)
        elif tok.kind == "dur":
            value = parse_duration(tok.text)
        else:
            value = {"true": True, "false": False, "null": None}[tok.kind]
        return lambda v, value=value: value

    def comparison(self) -> Evaluator:
        left = self.operand()
        op = self.take("op").text
        right = self.operand()
        fn = _OPS[op]
        eq = op in ("==", "=", "!=")

        def ev(values: Mapping[str, Any]) -> bool:
            a, b = left(values), right(values)
            if a is _MISSING or b is _MISSING:
                return op == "!="
            if a is None or b is None:
                return fn(a, b) if eq else False
            if isinstance(a, bool) != isinstance(b, bool) and not eq:
                return False
            try:
                return bool(fn(a, b))
            except TypeError:
                return op == "!="

        return ev


@dataclass(frozen=True)
class Condition:
    """A compiled condition.  ``text`` as written; ``names`` the fields it
    reads (status fields by their full name, or ``out.<path>``)."""

    text: str
    names: tuple[str, ...]
    _ev: Evaluator

    @property
    def uses_output(self) -> bool:
        """True when the condition reads the step's command output (``out.``)."""
        return any(n.startswith("out.") for n in self.names)

    def evaluate(self, values: Mapping[str, Any]) -> bool:
        """True when the condition holds for ``values`` (see :func:`condition_values`)."""
        return bool(self._ev(values))

    def explain(self, values: Mapping[str, Any]) -> str:
        """``"stuck=3, dead=0"``: the values the condition read."""
        parts = []
        for n in dict.fromkeys(self.names):
            v = values.get(n, _MISSING)
            if v is _MISSING or v is None:
                shown = "missing" if v is _MISSING else "null"
            elif n.endswith("age_ms") and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                shown = format_duration(v)
            else:
                shown = str(v)
            parts.append(f"{n}={shown}")
        return ", ".join(parts)


def compile_condition(text: str) -> Condition:
    """Parse ``text``; raises :class:`ConditionError`."""
    if not text.strip():
        raise ConditionError("empty condition")
    p = _Parser(text)
    ev = p.parse()
    return Condition(text, tuple(p.names), ev)


def condition_values(status: Mapping[str, Any] | None, output: Any = None) -> dict[str, Any]:
    """The names a condition may read: ``status`` (one queue's ``status
    --json`` entry) with null waiting ages read as 0, plus ``out.<path>`` for
    every scalar inside ``output`` (a JSON object; nested objects by dotted
    path)."""
    values: dict[str, Any] = {}
    for name in STATUS_FIELDS:
        if status is not None and name in status:
            v = status[name]
            values[name] = 0 if v is None and name in _ZERO_WHEN_NULL else v
    if isinstance(output, Mapping):
        _flatten("out", output, values, depth=0)
    return values


def _flatten(prefix: str, doc: Mapping[str, Any], into: dict[str, Any], depth: int) -> None:
    for key, value in doc.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping) and depth < 4:
            _flatten(name, value, into, depth + 1)
        elif value is None or isinstance(value, (bool, int, float, str)):
            into[name] = value
