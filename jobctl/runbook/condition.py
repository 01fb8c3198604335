"""Conditions of runbook steps: the ``guard`` and ``expect`` attributes.

A condition compares the queue's status (the ``jobctl status --json``
fields, README "The status --json contract") with numbers and durations::

    stuck > 0
    oldest_ready_age < 5m and dead > 0
    not (scheduled_overdue > 0 or stuck > 0)
    out.planned == 0          # a field of the step's last command's JSON output

Grammar: the filter language's (:mod:`jobctl.filter.grammar`, one grammar
for both; conditions also spell ``=`` as ``==``): clauses ``FIELD OP
VALUE`` (``OP``: ``= == != < <= > >=``) joined by
``and``, ``or``, ``not`` and parentheses (``not`` > ``and`` > ``or``).  A
value is a number (``3``, ``2.5``), a duration (``500ms``, ``30s``, ``5m``,
``1h30m``: :func:`jobctl.durations.parse_duration`, in milliseconds), a
quoted string, or ``true``, ``false``, ``null``.

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
    "oldest_ready_age_ms", "now_ms", "history", "dead_dangling", "dead_duplicates", "dead_expiring", "dead_cap",
    "paused", "migrating",
)

#: Short names accepted for status fields.
ALIASES: dict[str, str] = {
    "oldest_ready_age": "oldest_ready_age_ms",
    "overdue": "scheduled_overdue",
    "overdue_age": "scheduled_overdue_max_age_ms",
    "scheduled_overdue_max_age": "scheduled_overdue_max_age_ms",
}

#: Ages that are ``null`` when nothing waits: read as 0.
_ZERO_WHEN_NULL = frozenset({"oldest_ready_age_ms", "scheduled_overdue_max_age_ms", "history", "dead_dangling",
                             "dead_duplicates", "dead_expiring", "dead_cap"})

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}
_WORDS = {"true": True, "false": False, "null": None}

_MISSING = object()


class ConditionError(UsageError):
    """A condition that does not parse or names an unknown field."""


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


class Compiler:
    """The filter language's parse tree -> an evaluator over status values."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: list[str] = []

    def fail(self, what: str, pos: int) -> ConditionError:
        return ConditionError(f"condition {self.text!r}: {what} at column {pos + 1}")

    def expr(self, node) -> Evaluator:
        data = node.data
        if data in ("or_", "and_"):
            left, right = self.expr(node.children[0]), self.expr(node.children[2])
            if data == "or_":
                return lambda v: left(v) or right(v)
            return lambda v: left(v) and right(v)
        if data == "not_":
            inner = self.expr(node.children[1])
            return lambda v: not inner(v)
        if data == "group":
            return self.expr(node.children[1])
        return self.comparison(node)

    def name(self, field) -> str:
        first = field.children[0]
        parts, end = [str(first)], first.end_pos
        for step in field.children[1:]:
            toks = step.children
            if step.data != "key_step":
                raise self.fail("a [...] step in a field name", toks[0].start_pos or 0)
            if toks[0].start_pos != end or toks[1].start_pos != toks[0].end_pos:
                raise self.fail("a space inside a field name", end or 0)
            parts.append(str(toks[1]))
            end = toks[1].end_pos
        name = ".".join(parts)
        return _resolve(name, self.text, first.start_pos or 0)

    def value(self, tok) -> Any:
        kind, raw = tok.type, str(tok)
        if kind == "NUMBER":
            return float(raw) if any(c in raw for c in ".eE") else int(raw)
        if kind == "DURATION":
            return parse_duration(raw)
        if kind == "WORD" and raw.lower() in _WORDS:
            return _WORDS[raw.lower()]
        if kind == "STRING":
            from ..filter.grammar import unescape

            return unescape(self.text, raw, tok.start_pos or 0)
        raise self.fail(f"expected a number, a duration, true, false or null, got {raw!r}", tok.start_pos or 0)

    def comparison(self, node) -> Evaluator:
        field, op_node, value_node = node.children
        name = self.name(field)
        op_tok = op_node.children[0]
        op = str(op_tok)
        if op not in _OPS:
            raise self.fail(f"operator {op!r} does not apply to conditions (use = == != < <= > >=)",
                            op_tok.start_pos or 0)
        value = self.value(value_node.children[0])
        self.names.append(name)
        fn = _OPS[op]
        eq = op in ("==", "=", "!=")

        def ev(values: Mapping[str, Any]) -> bool:
            a = values.get(name, _MISSING)
            if a is _MISSING:
                return op == "!="
            if a is None or value is None:
                return fn(a, value) if eq else False
            if isinstance(a, bool) != isinstance(value, bool) and not eq:
                return False
            try:
                return bool(fn(a, value))
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
    """Parse ``text`` with the filter language's parser; raises
    :class:`ConditionError` (one line, with the column)."""
    from ..filter import FilterError
    from ..filter.grammar import parse_text

    if not text.strip():
        raise ConditionError("empty condition")
    try:
        tree = parse_text(text, "start", dialect="condition")
    except FilterError as exc:
        what = str(exc).removeprefix("filter: ").replace("end of filter", "end of condition")
        raise ConditionError(f"condition {text!r}: {what}") from None
    comp = Compiler(text)
    ev = comp.expr(tree)
    return Condition(text, tuple(comp.names), ev)


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
