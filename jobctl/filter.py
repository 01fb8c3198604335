"""jobctl's one filter language (CLI ``--filter``, TUI ``/``, runbooks, export).

A filter is clauses ``FIELD OP VALUE`` joined by ``and``, ``or``, ``not`` and
parentheses, e.g.::

    error ~ "HTTP_5*" and tenant = t1 and attempts >= 3

The full reference is ``docs/filter.md``.  In short:

* precedence ``not`` > ``and`` > ``or``; keywords are case-insensitive;
* operators ``= != < <= > >=``, ``~`` (fnmatch glob, case-sensitive) and
  ``contains`` (substring; membership for JSON lists, key for JSON objects);
* fields are listed in :data:`FIELDS` (plus ``payload.<path>``);
* values: bare words, quoted strings, numbers, durations (``5m``, ``1h30m``)
  and ISO-8601 timestamps (``2026-11-21T10:00:00Z``, ``2026-11-21``; naive
  means UTC).  Each field has a kind and a value of the wrong kind is
  rejected when the filter is compiled;
* a missing value (``None``) matches only ``!=``.

Entry points: :func:`compile_filter` returns a :class:`Filter`;
:data:`MATCH_ALL` is the filter used when none was given; :func:`field_getter`
resolves a field name (with payload path) for columns and export.

Bad input raises :class:`FilterError` (a :class:`~jobctl.errors.UsageError`)
with a one-line message that names the column.  The Lark parser is built on
first use (not at import) so that ``jobctl --help`` stays fast.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import fnmatch
import math
import operator
import re
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

from .durations import DurationError, parse_duration
from .errors import UsageError
from .model import JobRecord, State

if TYPE_CHECKING:  # lark is imported lazily, on first compile
    from lark import Lark, Token, Tree

__all__ = [
    "FilterError",
    "FieldKind",
    "FieldSpec",
    "FIELDS",
    "Filter",
    "MATCH_ALL",
    "compile_filter",
    "field_getter",
]

#: ``(record, now_ms) -> bool``
Predicate = Callable[[JobRecord, int], bool]
#: ``(record, now_ms) -> value or None``
Getter = Callable[[JobRecord, int], Any]


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class FilterError(UsageError):
    """A filter that does not parse or does not type-check.

    ``str(err)`` is one line, e.g.
    ``filter: unexpected token 'and' at column 14 (expected a value)``.

    Attributes:
        column: 1-based column of the offending character (within its line).
        line: 1-based line (filters from runbooks may span lines).
        pos: 0-based character offset into the filter text.
    """

    def __init__(self, message: str, *, column: int = 1, line: int = 1, pos: int = 0) -> None:
        super().__init__(message)
        self.column = column
        self.line = line
        self.pos = pos


def _error(text: str, pos: int, what: str, hint: str | None = None) -> FilterError:
    """Build a :class:`FilterError` for ``what`` at 0-based offset ``pos``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"column {column}"
    message = f"filter: {what} at {where}"
    if hint:
        message += f" ({hint})"
    return FilterError(message, column=column, line=line, pos=pos)


def _show(value: str) -> str:
    """Quote a piece of filter text for an error message (one line, short)."""
    value = value.replace("\n", "\\n")
    if len(value) > 40:
        value = value[:37] + "..."
    return f"'{value}'"


# --------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------


class FieldKind(str, Enum):
    """What values a field holds, and therefore what a clause may compare it with."""

    TEXT = "text"            #: str; any value literal, compared as text
    NUMBER = "number"        #: int; number literals
    DURATION = "duration"    #: int ms; duration literals (``5m``)
    TIMESTAMP = "timestamp"  #: int epoch ms; ISO-8601 literals
    STATE = "state"          #: a :class:`~jobctl.model.State` value
    JSON = "json"            #: any JSON value from the payload; typed at match time

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class FieldSpec:
    """One filterable field.

    ``get(record, now_ms)`` returns the value (``None`` when unknown): ``str``
    for TEXT and STATE, ``int`` for NUMBER, ``int`` milliseconds for DURATION,
    ``int`` epoch milliseconds for TIMESTAMP, any JSON value for JSON.
    """

    name: str
    kind: FieldKind
    get: Getter
    help: str


def _dead_for(r: JobRecord, now_ms: int) -> int | None:
    since = r.meta.get("dead_since_ms") if r.meta else None
    if isinstance(since, bool) or not isinstance(since, int):
        since = None
        if _state_value(r) == State.DEAD.value:
            since = r.envelope.last_attempt_ms
    return None if since is None else now_ms - since


def _overdue_for(r: JobRecord, now_ms: int) -> int | None:
    """Scheduled jobs only: now - due time (the zset score) once due; else missing."""
    if _state_value(r) != State.SCHEDULED.value or r.score is None or r.score > now_ms:
        return None
    return now_ms - r.score


def _age(r: JobRecord, now_ms: int) -> int | None:
    created = r.envelope.created_ms
    return None if created is None else now_ms - created


def _state_value(r: JobRecord) -> str | None:
    """The state as text; ``None`` for an orphan payload that no state holds."""
    state = r.state
    if state is None:
        return None
    return state.value if isinstance(state, State) else str(state)


def _spec(name: str, kind: FieldKind, get: Getter, help: str) -> tuple[str, FieldSpec]:
    return name, FieldSpec(name, kind, get, help)


#: Every field the language knows, in display order.  ``payload`` stands for
#: ``payload`` itself and ``payload.<path>`` (see :func:`field_getter`).
FIELDS: dict[str, FieldSpec] = dict([
    _spec("id", FieldKind.TEXT, lambda r, n: r.job_id, "job id"),
    _spec("type", FieldKind.TEXT, lambda r, n: r.envelope.job_type, "jobType"),
    _spec("version", FieldKind.NUMBER, lambda r, n: r.envelope.job_version, "jobVersion"),
    _spec("tenant", FieldKind.TEXT, lambda r, n: r.envelope.tenant_id, "tenantId"),
    _spec("error", FieldKind.TEXT, lambda r, n: r.envelope.last_error_code,
          "last error code (lastErrorCode)"),
    _spec("message", FieldKind.TEXT, lambda r, n: r.envelope.last_error_message,
          "last error message (lastErrorMessage)"),
    _spec("attempts", FieldKind.NUMBER, lambda r, n: r.envelope.attempt,
          "attempts made so far (attempt)"),
    _spec("max_attempts", FieldKind.NUMBER, lambda r, n: r.envelope.max_attempts,
          "maxAttempts"),
    _spec("age", FieldKind.DURATION, _age, "now - createdAtEpochMs"),
    _spec("dead_for", FieldKind.DURATION, _dead_for,
          "now - when the job became dead (meta dead_since_ms, else "
          "lastAttemptAtEpochMs for dead jobs)"),
    _spec("overdue_for", FieldKind.DURATION, _overdue_for,
          "scheduled jobs: now - due time (zset score) once due; missing before"),
    _spec("created", FieldKind.TIMESTAMP, lambda r, n: r.envelope.created_ms,
          "createdAtEpochMs"),
    _spec("state", FieldKind.STATE, lambda r, n: _state_value(r),
          "ready, scheduled, processing, dead, suppressed or history "
          "(missing for an orphan payload)"),
    _spec("idempotency_key", FieldKind.TEXT, lambda r, n: r.envelope.idempotency_key,
          "idempotencyKey"),
    _spec("trace", FieldKind.TEXT, lambda r, n: r.envelope.trace_id, "traceId"),
    _spec("correlation", FieldKind.TEXT, lambda r, n: r.envelope.correlation_id,
          "correlationId"),
    _spec("payload", FieldKind.JSON, lambda r, n: r.envelope.payload,
          "the envelope payload; payload.a.b[0] walks into it"),
])

#: Fields that can be evaluated without loading the envelope.
_NO_PAYLOAD_FIELDS = frozenset({"id", "state"})

_STATES = [s.value for s in State]


def _walk(value: Any, path: tuple[str | int, ...]) -> Any:
    """Follow ``path`` (str keys, int list indexes) into JSON; ``None`` if absent."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list):
                return None
            try:
                value = value[step]
            except IndexError:
                return None
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(step)
    return value


def _path_getter(path: tuple[str | int, ...]) -> Getter:
    def get(r: JobRecord, now_ms: int) -> Any:
        return _walk(r.envelope.payload, path)
    return get


# --------------------------------------------------------------------------
# Grammar (Lark, LALR, contextual lexer), built lazily
# --------------------------------------------------------------------------

# Characters a bare word may contain: anything but space, quotes, parentheses
# and operator characters.  Keywords end where a bare word would end.
_WCH = r"""[^\s()'"=!<>~]"""
_END = rf"(?!{_WCH})"
_KW = r"(?i:and|or|not|contains)"

_GRAMMAR = r"""
?start: or_expr

?or_expr: and_expr
        | or_expr OR and_expr          -> or_
?and_expr: not_expr
         | and_expr AND not_expr       -> and_
?not_expr: atom
         | NOT not_expr                -> not_
?atom: clause
     | LPAR or_expr RPAR               -> group

clause: field op value

field_only: field
field: FIELD step*
step: DOT KEY                          -> key_step
    | LSQB INDEX RSQB                  -> index_step
    | LSQB STRING RSQB                 -> quoted_step

op: OP | CONTAINS
value: STRING | NUMBER | DURATION | TIMESTAMP | WORD

AND: /and@END/i
OR: /or@END/i
NOT: /not@END/i
CONTAINS: /contains@END/i
OP: /<=|>=|!=|=|<|>|~/
LPAR: "("
RPAR: ")"
DOT: "."
LSQB: "["
RSQB: "]"
FIELD: /(?!@KW@END)[A-Za-z_][A-Za-z0-9_]*/
KEY: /[A-Za-z0-9_\-]+/
INDEX: /-?\d+/
STRING.2: /"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/
TIMESTAMP.2: /\d{4}-\d{2}-\d{2}(?:[Tt]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?)?@END/
DURATION.2: /(?:\d+(?:\.\d+)?(?:ms|[wdhms]))+@END/
NUMBER.2: /[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?@END/
WORD.1: /(?!@KW@END)@WCH+/

%import common.WS
%ignore WS
""".replace("@END", _END).replace("@KW", _KW).replace("@WCH", _WCH)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The Lark LALR parser, built on first use and cached."""
    from lark import Lark

    return Lark(_GRAMMAR, parser="lalr", lexer="contextual",
                start=["start", "field_only"], maybe_placeholders=False)


# How a terminal the parser wanted is described in "expected ..." hints.
_EXPECT_GROUPS: list[tuple[frozenset[str], str]] = [
    (frozenset({"STRING", "NUMBER", "DURATION", "TIMESTAMP", "WORD"}), "a value"),
    (frozenset({"OP", "CONTAINS"}), "an operator: = != < <= > >= ~ or contains"),
    (frozenset({"FIELD", "NOT", "LPAR"}), "a field, 'not' or '('"),
    (frozenset({"KEY"}), "a key name"),
    (frozenset({"INDEX"}), "a list index or quoted key"),
    (frozenset({"RSQB"}), "']'"),
    (frozenset({"AND", "OR"}), "'and', 'or'"),
    (frozenset({"RPAR"}), "')'"),
    (frozenset({"$END"}), "end of filter"),
]


def _accepted(e: Any, fallback: Any) -> set[str]:
    """Terminal names the parser would have accepted where it stopped."""
    ip = getattr(e, "interactive_parser", None)
    if ip is not None:
        try:
            return set(ip.accepts())
        except Exception:  # lark internals; fall back to what the error says
            pass
    return set(fallback or ())


def _expected(names: set[str] | frozenset[str] | None) -> str | None:
    if not names:
        return None
    if "INDEX" in names:  # inside [...]: a quoted key is not "a value"
        names = set(names) - {"STRING"}
    parts = [label for group, label in _EXPECT_GROUPS if names & group]
    if not parts:
        return None
    if len(parts) == 1:
        return "expected " + parts[0]
    return "expected " + ", ".join(parts[:-1]) + " or " + parts[-1]


def _parse(text: str, start: str) -> Tree:
    """Parse with Lark; translate every Lark exception into a FilterError.

    The FilterError is raised outside the ``except`` block so that no Lark
    exception hangs off it as ``__context__``.
    """
    from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    err: FilterError | None = None
    try:
        return _parser().parse(text, start=start)
    except UnexpectedCharacters as e:
        pos = e.pos_in_stream
        char = text[pos] if 0 <= pos < len(text) else ""
        if char in ("'", '"'):
            err = _error(text, pos, "unterminated string",
                         f"close it with {char}; a newline needs \\n")
        else:
            hint = _expected(_accepted(e, e.allowed))
            if hint and "a value" in hint:
                hint += "; quote values with spaces or ( ) ' \" = ! < > ~"
            err = _error(text, pos, f"unexpected character {_show(char)}", hint)
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            err = _error(text, len(text), "unexpected end of filter",
                         _expected(_accepted(e, e.expected)))
        else:
            err = _error(text, tok.start_pos or 0, f"unexpected token {_show(str(tok))}",
                         _expected(_accepted(e, e.expected)))
    except UnexpectedInput as e:  # pragma: no cover - other LALR failures
        err = _error(text, getattr(e, "pos_in_stream", 0) or 0, "cannot parse filter")
    except LarkError:  # pragma: no cover - defensive
        err = _error(text, 0, "cannot parse filter")
    except RecursionError:
        err = _error(text, 0, "filter is nested too deeply")
    raise err


# --------------------------------------------------------------------------
# Literals
# --------------------------------------------------------------------------

_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


@dataclass(frozen=True)
class _Lit:
    """A value literal: ``kind`` is the token type (STRING, NUMBER, DURATION,
    TIMESTAMP, WORD), ``text`` its meaning as text (unescaped for strings),
    ``raw`` as typed and ``pos`` its 0-based offset."""

    kind: str
    text: str
    raw: str
    pos: int


def _unescape(src: str, raw: str, pos: int) -> str:
    """Decode a quoted STRING token (quotes included) at offset ``pos``."""
    body = raw[1:-1]

    def repl(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _ESCAPES:
            return _ESCAPES[esc]
        if len(esc) == 5 and esc[0] == "u":
            return chr(int(esc[1:], 16))
        raise _error(src, pos + 1 + m.start(), f"unknown escape {_show(m.group(0))}",
                     "use \\\\ \\\" \\' \\n \\t \\r or \\uXXXX")

    return _ESCAPE_RE.sub(repl, body)


def _parse_timestamp(text: str) -> int | None:
    """ISO-8601 text -> epoch ms; naive means UTC; ``None`` if invalid."""
    try:
        dt = _dt.datetime.fromisoformat(text.strip().upper())  # 't'/'z' too
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_UTC)
    return (dt - _EPOCH) // _dt.timedelta(milliseconds=1)


_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _parse_number(text: str) -> int | float | None:
    """``"3"`` -> 3, ``"2.5"``/``"1e3"`` -> float; ``None`` if not a finite number."""
    s = text.strip()
    if _INT_RE.fullmatch(s):
        return int(s)
    if _FLOAT_RE.fullmatch(s):
        f = float(s)
        return f if math.isfinite(f) else None
    return None


# --------------------------------------------------------------------------
# The compiled filter
# --------------------------------------------------------------------------


class Filter:
    """A compiled filter.  Immutable; safe to share between threads.

    Attributes (read-only):
        text: the filter as typed (``""`` for :data:`MATCH_ALL`).
        fields: top-level field names used (``frozenset[str]``; a payload
            path counts as ``"payload"``).
        needs_payload: ``False`` only when the filter uses nothing but ``id``
            and ``state``, i.e. it can be evaluated without loading the
            envelope.
    """

    __slots__ = ("_text", "_fields", "_pred")

    def __init__(self, text: str, pred: Predicate, fields: frozenset[str]) -> None:
        self._text = text
        self._pred = pred
        self._fields = fields

    @property
    def text(self) -> str:
        return self._text

    @property
    def fields(self) -> frozenset[str]:
        return self._fields

    @property
    def needs_payload(self) -> bool:
        return not self._fields <= _NO_PAYLOAD_FIELDS

    @property
    def is_match_all(self) -> bool:
        """True for :data:`MATCH_ALL` (no filter given)."""
        return self is MATCH_ALL

    def matches(self, record: JobRecord, now_ms: int) -> bool:
        """Whether ``record`` passes the filter.

        Args:
            record: the job, in one state.
            now_ms: the current time, epoch milliseconds (for ``age`` and
                ``dead_for``); pass one value for a whole scan.

        Never raises for odd record contents: a missing or mistyped value
        just fails to match (and matches ``!=``).
        """
        return bool(self._pred(record, now_ms))

    def __repr__(self) -> str:
        return f"Filter({self._text!r})"


#: The filter used when no ``--filter`` was given: matches every record.
MATCH_ALL = Filter("", lambda record, now_ms: True, frozenset())


def compile_filter(text: str) -> Filter:
    """Parse and type-check a filter expression.

    Args:
        text: the filter, e.g. ``'error ~ "HTTP_5*" and tenant = t1'``.

    Returns:
        A :class:`Filter`; call ``.matches(record, now_ms)``.

    Raises:
        FilterError: (a :class:`~jobctl.errors.UsageError`, exit code 2) with
            a one-line message naming the column, for a syntax error, an
            unknown field (with a "did you mean" suggestion), an operator
            that does not apply to the field, or a value of the wrong kind
            (e.g. ``age > 2026-01-01``: "field age takes a duration").  An
            empty filter is an error too (use :data:`MATCH_ALL`).
    """
    if not isinstance(text, str):
        raise TypeError(f"filter text must be str, not {type(text).__name__}")
    if not text.strip():
        raise _error(text, 0, "empty filter", "leave --filter out to match everything")
    tree = _parse(text, "start")
    comp = _Compiler(text)
    try:
        pred = comp.expr(tree)
    except RecursionError:
        pred = None
    if pred is None:
        raise _error(text, 0, "filter is nested too deeply")
    return Filter(text, pred, frozenset(comp.fields))


def field_getter(name: str) -> Getter:
    """Resolve a field name, including a payload path, to a value getter.

    ``field_getter("tenant")`` or ``field_getter("payload.items[0].sku")``
    returns ``get(record, now_ms) -> value | None`` (values as described in
    :class:`FieldSpec`).  For export and TUI columns.

    Raises:
        FilterError: unknown field or bad path syntax.
    """
    if not isinstance(name, str) or not name.strip():
        raise _error(name if isinstance(name, str) else "", 0, "empty field name")
    tree = _parse(name, "field_only")
    _, _, get = _Compiler(name).field(tree.children[0])
    return get


# --------------------------------------------------------------------------
# Compiler: Lark tree -> predicate closures, with compile-time type checks
# --------------------------------------------------------------------------

_ORDER_OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt,
              "<=": operator.le, ">": operator.gt, ">=": operator.ge}

_KIND_OPS: dict[FieldKind, tuple[str, ...]] = {
    FieldKind.TEXT: ("=", "!=", "<", "<=", ">", ">=", "~", "contains"),
    FieldKind.NUMBER: ("=", "!=", "<", "<=", ">", ">="),
    FieldKind.DURATION: ("=", "!=", "<", "<=", ">", ">="),
    FieldKind.TIMESTAMP: ("=", "!=", "<", "<=", ">", ">="),
    FieldKind.STATE: ("=", "!=", "~"),
    FieldKind.JSON: ("=", "!=", "<", "<=", ">", ">=", "~", "contains"),
}

_LIT_NAMES = {"STRING": "string", "WORD": "word", "NUMBER": "number",
              "DURATION": "duration", "TIMESTAMP": "timestamp"}


def _compare(get: Getter, op: str, operand: Any) -> Predicate:
    """Clause for typed scalar fields: None matches only ``!=``."""
    fn = _ORDER_OPS[op]
    if op == "!=":
        def pred(r: JobRecord, now_ms: int) -> bool:
            v = get(r, now_ms)
            return v is None or v != operand
    else:
        def pred(r: JobRecord, now_ms: int) -> bool:
            v = get(r, now_ms)
            return v is not None and fn(v, operand)
    return pred


def _glob(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(fnmatch.translate(pattern), re.S)
    return lambda s: rx.match(s) is not None


def _json_text(v: Any) -> str | None:
    """Text a JSON scalar is globbed as: strings as is, numbers and booleans
    in their JSON spelling; containers and null have none."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return None


class _JsonOperand:
    """A literal seen from a JSON value: as text, as a number (numbers,
    durations in ms, timestamps in epoch ms) and as a boolean (bare
    ``true``/``false``)."""

    def __init__(self, text: str, num: int | float | None, flag: bool | None) -> None:
        self.text = text
        self.num = num
        self.flag = flag

    def cmp(self, v: Any, op: str) -> bool:
        """Compare JSON value ``v`` (not None) with this literal."""
        if isinstance(v, bool):
            other: Any = self.flag
            if other is None or op not in ("=", "!="):
                return op == "!="
        elif isinstance(v, (int, float)):
            other = self.num
        elif isinstance(v, str):
            other = self.text
        else:  # list / dict: never equal to a scalar
            return op == "!="
        if other is None:
            return op == "!="
        return _ORDER_OPS[op](v, other)


class _Compiler:
    def __init__(self, text: str) -> None:
        self.text = text
        self.fields: set[str] = set()

    # -- boolean structure -------------------------------------------------

    def expr(self, node: Tree) -> Predicate:
        data = node.data
        if data in ("or_", "and_"):
            # Flatten left-recursive chains iteratively: a or b or c ...
            parts: list[Tree] = []
            while getattr(node, "data", None) == data:
                parts.append(node.children[2])
                node = node.children[0]
            parts.append(node)
            preds = [self.expr(p) for p in reversed(parts)]
            if data == "or_":
                return lambda r, n: any(p(r, n) for p in preds)
            return lambda r, n: all(p(r, n) for p in preds)
        if data == "not_":
            inner = self.expr(node.children[1])
            return lambda r, n: not inner(r, n)
        if data == "group":
            return self.expr(node.children[1])
        if data == "clause":
            return self.clause(node)
        raise AssertionError(f"unexpected node {data}")  # pragma: no cover

    # -- fields --------------------------------------------------------------

    def field(self, node: Tree) -> tuple[FieldSpec, tuple[str | int, ...], Getter]:
        """Resolve a ``field`` node to (spec, payload path, getter)."""
        name_tok: Token = node.children[0]
        name = str(name_tok)
        spec = FIELDS.get(name)
        if spec is None:
            close = difflib.get_close_matches(name.lower(), list(FIELDS), n=1, cutoff=0.6)
            hint = (f"did you mean {_show(close[0])}?" if close
                    else "fields: " + ", ".join(FIELDS) + ", payload.<path>")
            raise _error(self.text, name_tok.start_pos or 0, f"unknown field {_show(name)}", hint)
        steps = node.children[1:]
        if steps and spec.kind is not FieldKind.JSON:
            first = steps[0].children[0]
            raise _error(self.text, first.start_pos or 0,
                         f"field {name} has no sub-fields", "only payload.<path> does")
        path: list[str | int] = []
        end = name_tok.end_pos
        for step in steps:
            toks = step.children
            if toks[0].start_pos != end:
                raise _error(self.text, end or 0, "space inside a field path",
                             "write payload.a.b[0] without spaces")
            for a, b in zip(toks, toks[1:]):
                if a.end_pos != b.start_pos:
                    raise _error(self.text, a.end_pos or 0, "space inside a field path",
                                 "write payload.a.b[0] without spaces")
            end = toks[-1].end_pos
            if step.data == "key_step":
                path.append(str(toks[1]))
            elif step.data == "index_step":
                path.append(int(str(toks[1])))
            else:
                path.append(_unescape(self.text, str(toks[1]), toks[1].start_pos or 0))
        self.fields.add(name)
        get = _path_getter(tuple(path)) if path else spec.get
        return spec, tuple(path), get

    # -- clauses -------------------------------------------------------------

    def clause(self, node: Tree) -> Predicate:
        field_node, op_node, value_node = node.children
        spec, path, get = self.field(field_node)
        op_tok: Token = op_node.children[0]
        op = str(op_tok).lower()
        tok: Token = value_node.children[0]
        raw = str(tok)
        pos = tok.start_pos or 0
        text = _unescape(self.text, raw, pos) if tok.type == "STRING" else raw
        lit = _Lit(tok.type, text, raw, pos)
        shown_field = "payload" + "".join(
            f"[{s}]" if isinstance(s, int) else f".{s}" for s in path) if path else spec.name

        if op not in _KIND_OPS[spec.kind]:
            allowed = " ".join(_KIND_OPS[spec.kind])
            raise _error(self.text, op_tok.start_pos or 0,
                         f"operator {op} does not apply to {shown_field} (a {spec.kind} field)",
                         f"use {allowed}")

        kind = spec.kind
        if kind is FieldKind.TEXT:
            return self._text_clause(get, op, lit.text)
        if kind is FieldKind.STATE:
            return self._state_clause(get, op, lit)
        if kind is FieldKind.JSON:
            return self._json_clause(get, op, lit)
        return _compare(get, op, self._typed(spec, lit))

    def _typed(self, spec: FieldSpec, lit: _Lit) -> int | float:
        """The literal as a NUMBER / DURATION / TIMESTAMP field needs it."""
        kind = spec.kind
        quoted = lit.kind == "STRING"
        if kind is FieldKind.NUMBER:
            if lit.kind == "NUMBER" or quoted:
                num = _parse_number(lit.text)
                if num is not None:
                    return num
            if not quoted:
                self._mismatch(spec, lit, "a number", "e.g. attempts >= 3")
            raise _error(self.text, lit.pos, f"invalid number {_show(lit.text)}")
        if kind is FieldKind.DURATION:
            if lit.kind == "DURATION" or quoted:
                return self._duration(lit)
            self._mismatch(spec, lit, "a duration", "e.g. 30s, 5m, 2h, 7d, 500ms, 1h30m")
        # TIMESTAMP
        if lit.kind == "TIMESTAMP" or quoted:
            ms = _parse_timestamp(lit.text)
            if ms is not None:
                return ms
            raise _error(self.text, lit.pos, f"invalid timestamp {_show(lit.text)}",
                         "e.g. 2026-11-21T10:00:00Z or 2026-11-21")
        hint = "e.g. 2026-11-21T10:00:00Z or 2026-11-21"
        if lit.kind == "DURATION":
            hint += f"; for relative times use age, e.g. age > {lit.raw}"
        self._mismatch(spec, lit, "a timestamp", hint)
        raise AssertionError("unreachable")  # pragma: no cover

    def _duration(self, lit: _Lit) -> int:
        err: FilterError | None = None
        try:
            return parse_duration(lit.text, bare_seconds=False)
        except DurationError as e:
            err = _error(self.text, lit.pos, e.problem, e.hint)
        raise err

    def _mismatch(self, spec: FieldSpec, lit: _Lit, wants: str, hint: str) -> None:
        got = _LIT_NAMES.get(lit.kind, "value")
        article = "an" if got[0] in "aeiou" else "a"
        raise _error(self.text, lit.pos,
                     f"field {spec.name} takes {wants}, not {article} {got} ({_show(lit.raw)})",
                     hint)

    def _text_clause(self, get: Getter, op: str, operand: str) -> Predicate:
        if op == "~":
            match = _glob(operand)

            def glob_pred(r: JobRecord, n: int) -> bool:
                v = get(r, n)
                return isinstance(v, str) and match(v)
            return glob_pred
        if op == "contains":
            def contains_pred(r: JobRecord, n: int) -> bool:
                v = get(r, n)
                return isinstance(v, str) and operand in v
            return contains_pred
        return _compare(get, op, operand)

    def _state_clause(self, get: Getter, op: str, lit: _Lit) -> Predicate:
        if op == "~":
            return self._text_clause(get, op, lit.text)
        state = lit.text.lower()
        if state not in _STATES:
            close = difflib.get_close_matches(state, _STATES, n=1, cutoff=0.6)
            hint = (f"did you mean {_show(close[0])}? " if close else "") + \
                "states: " + ", ".join(_STATES)
            raise _error(self.text, lit.pos, f"unknown state {_show(lit.text)}", hint)
        return _compare(get, op, state)

    def _json_clause(self, get: Getter, op: str, lit: _Lit) -> Predicate:
        num: int | float | None = None
        if lit.kind == "NUMBER":
            num = _parse_number(lit.raw)
        elif lit.kind == "DURATION":
            num = self._duration(lit)
        elif lit.kind == "TIMESTAMP":
            num = _parse_timestamp(lit.raw)
            if num is None:
                raise _error(self.text, lit.pos, f"invalid timestamp {_show(lit.raw)}",
                             "e.g. 2026-11-21T10:00:00Z or 2026-11-21")
        flag = {"true": True, "false": False}.get(lit.raw) if lit.kind == "WORD" else None
        operand = _JsonOperand(lit.text, num, flag)

        if op == "~":
            match = _glob(lit.text)

            def glob_pred(r: JobRecord, n: int) -> bool:
                s = _json_text(get(r, n))
                return s is not None and match(s)
            return glob_pred

        if op == "contains":
            def contains_pred(r: JobRecord, n: int) -> bool:
                v = get(r, n)
                if isinstance(v, str):
                    return operand.text in v
                if isinstance(v, list):
                    return any(e is not None and operand.cmp(e, "=") for e in v)
                if isinstance(v, dict):
                    return operand.text in v
                return False
            return contains_pred

        def cmp_pred(r: JobRecord, n: int) -> bool:
            v = get(r, n)
            if v is None:
                return op == "!="
            return operand.cmp(v, op)
        return cmp_pred
