"""The filter compiler: Lark tree -> predicate closures, with compile-time
type checks (a value of the wrong kind for its field is rejected)."""

from __future__ import annotations

import difflib
import operator
from typing import TYPE_CHECKING, Any, Callable

from ..durations import DurationError, parse_duration
from ..model import JobRecord
from ..vocabulary import ALIASES, canonical, glob_matcher
from .errors import FilterError, error_at, show_text
from .fields import FIELDS, STATE_NAMES, FieldKind, FieldSpec, Getter, Predicate, path_getter
from .grammar import Lit, parse_number, parse_timestamp, unescape

if TYPE_CHECKING:
    from lark import Token, Tree

__all__ = ["Compiler"]

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
    """The glob semantics shared with the analyze rules (:func:`jobctl.vocabulary.glob_matcher`)."""
    return glob_matcher(pattern)


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


def _quoted(text: str) -> str:
    """``text`` as one double-quoted JSON string."""
    import json

    return json.dumps(text, ensure_ascii=False)


def _number(num: int | float) -> str:
    """A number in one spelling: ``5.0`` -> ``5``; floats by ``repr``."""
    if isinstance(num, float) and num.is_integer() and abs(num) < 2 ** 53:
        return str(int(num))
    return repr(num)


def _canon_field(name: str, path: tuple[str | int, ...]) -> str:
    """A field with its payload path in one spelling: ``payload.a["b c"][0]``."""
    import re

    out = name
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif re.fullmatch(r"[A-Za-z0-9_\-]+", step):
            out += f".{step}"
        else:
            out += f"[{_quoted(step)}]"
    return out


class Compiler:
    def __init__(self, text: str) -> None:
        self.text = text
        self.fields: set[str] = set()
        #: id(clause node) -> its canonical text (filled by :meth:`clause`)
        self.canon: dict[int, str] = {}

    # -- the normalized form ------------------------------------------------

    def normalized(self, node: Tree) -> str:
        """The canonical text of a compiled tree (call after :meth:`expr`):
        aliases resolved, values in one spelling (text JSON-quoted, numbers,
        durations and timestamps as numbers, states lower case), ``and`` /
        ``or`` chains flattened (groups included) and their operands sorted,
        one space around each operator.  Equivalent spellings of one filter
        (``tenant=t2``, ``tenant = 't2'``, ``(tenant_id = "t2")``) give the
        same text.  Iterative over chains, recursive over nesting (the depth
        :meth:`expr` accepted)."""
        data = node.data
        if data == "group":
            return self.normalized(node.children[1])
        if data == "clause":
            return self.canon[id(node)]
        if data == "not_":
            inner = node.children[1]
            while inner.data == "group":
                inner = inner.children[1]
            text = self.normalized(inner)
            return f"not {text}" if inner.data in ("clause", "not_") else f"not ({text})"
        parts: list[str] = []
        todo = [node]
        while todo:  # flatten the chain through groups: a and (b and c) == a and b and c
            n = todo.pop()
            while n.data == "group":
                n = n.children[1]
            if n.data == data:
                todo += [n.children[0], n.children[2]]
            elif data == "and_" and n.data == "or_":
                parts.append(f"({self.normalized(n)})")
            else:
                parts.append(self.normalized(n))
        return (" and " if data == "and_" else " or ").join(sorted(set(parts)))

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
        name = canonical(str(name_tok))  # error_code, tenant_id ...: jobctl.vocabulary
        spec = FIELDS.get(name)
        if spec is None:
            close = difflib.get_close_matches(name.lower(), [*FIELDS, *ALIASES], n=1, cutoff=0.6)
            hint = (f"did you mean {show_text(close[0])}?" if close
                    else "fields: " + ", ".join(FIELDS) + ", payload.<path>")
            raise error_at(self.text, name_tok.start_pos or 0, f"unknown field {show_text(name)}", hint)
        steps = node.children[1:]
        if steps and spec.kind is not FieldKind.JSON:
            first = steps[0].children[0]
            raise error_at(self.text, first.start_pos or 0,
                         f"field {name} has no sub-fields", "only payload.<path> does")
        path: list[str | int] = []
        end = name_tok.end_pos
        for step in steps:
            toks = step.children
            if toks[0].start_pos != end:
                raise error_at(self.text, end or 0, "space inside a field path",
                             "write payload.a.b[0] without spaces")
            for a, b in zip(toks, toks[1:]):
                if a.end_pos != b.start_pos:
                    raise error_at(self.text, a.end_pos or 0, "space inside a field path",
                                 "write payload.a.b[0] without spaces")
            end = toks[-1].end_pos
            if step.data == "key_step":
                path.append(str(toks[1]))
            elif step.data == "index_step":
                path.append(int(str(toks[1])))
            else:
                path.append(unescape(self.text, str(toks[1]), toks[1].start_pos or 0))
        self.fields.add(name)
        get = path_getter(tuple(path)) if path else spec.get
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
        text = unescape(self.text, raw, pos) if tok.type == "STRING" else raw
        lit = Lit(tok.type, text, raw, pos)
        shown_field = "payload" + "".join(
            f"[{s}]" if isinstance(s, int) else f".{s}" for s in path) if path else spec.name
        self.canon[id(node)] = f"{_canon_field(spec.name, path)} {op} {self._canon_value(spec, op, lit)}"

        if op not in _KIND_OPS[spec.kind]:
            allowed = " ".join(_KIND_OPS[spec.kind])
            raise error_at(self.text, op_tok.start_pos or 0,
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

    def _canon_value(self, spec: FieldSpec, op: str, lit: Lit) -> str:
        """One spelling of a clause's value (the normalized form; the
        clause's kind checks raise first, as :meth:`clause` does)."""
        kind = spec.kind
        if kind is FieldKind.TEXT or (kind is FieldKind.STATE and op == "~"):
            return _quoted(lit.text)
        if kind is FieldKind.STATE:
            return _quoted(lit.text.lower())
        if kind is FieldKind.JSON:
            if op == "~" or lit.kind == "STRING":
                return _quoted(lit.text)
            if lit.kind == "WORD":
                return lit.raw if lit.raw in ("true", "false") else _quoted(lit.text)
            num = (parse_number(lit.raw) if lit.kind == "NUMBER" else self._duration(lit)
                   if lit.kind == "DURATION" else parse_timestamp(lit.raw))
            return _number(num) if num is not None else _quoted(lit.text)
        try:
            return _number(self._typed(spec, lit))
        except FilterError:
            return _quoted(lit.text)  # the clause raises it

    def _typed(self, spec: FieldSpec, lit: Lit) -> int | float:
        """The literal as a NUMBER / DURATION / TIMESTAMP field needs it."""
        kind = spec.kind
        quoted = lit.kind == "STRING"
        if kind is FieldKind.NUMBER:
            if lit.kind == "NUMBER" or quoted:
                num = parse_number(lit.text)
                if num is not None:
                    return num
            if not quoted:
                self._mismatch(spec, lit, "a number", "e.g. attempts >= 3")
            raise error_at(self.text, lit.pos, f"invalid number {show_text(lit.text)}")
        if kind is FieldKind.DURATION:
            if lit.kind == "DURATION" or quoted:
                return self._duration(lit)
            self._mismatch(spec, lit, "a duration", "e.g. 30s, 5m, 2h, 7d, 500ms, 1h30m")
        # TIMESTAMP
        if lit.kind == "TIMESTAMP" or quoted:
            ms = parse_timestamp(lit.text)
            if ms is not None:
                return ms
            raise error_at(self.text, lit.pos, f"invalid timestamp {show_text(lit.text)}",
                         "e.g. 2026-11-21T10:00:00Z or 2026-11-21")
        hint = "e.g. 2026-11-21T10:00:00Z or 2026-11-21"
        if lit.kind == "DURATION":
            hint += f"; for relative times use age, e.g. age > {lit.raw}"
        self._mismatch(spec, lit, "a timestamp", hint)
        raise AssertionError("unreachable")  # pragma: no cover

    def _duration(self, lit: Lit) -> int:
        err: FilterError | None = None
        try:
            return parse_duration(lit.text, bare_seconds=False)
        except DurationError as e:
            err = error_at(self.text, lit.pos, e.problem, e.hint)
        raise err

    def _mismatch(self, spec: FieldSpec, lit: Lit, wants: str, hint: str) -> None:
        got = _LIT_NAMES.get(lit.kind, "value")
        article = "an" if got[0] in "aeiou" else "a"
        raise error_at(self.text, lit.pos,
                     f"field {spec.name} takes {wants}, not {article} {got} ({show_text(lit.raw)})",
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

    def _state_clause(self, get: Getter, op: str, lit: Lit) -> Predicate:
        if op == "~":
            return self._text_clause(get, op, lit.text)
        state = lit.text.lower()
        if state not in STATE_NAMES:
            close = difflib.get_close_matches(state, STATE_NAMES, n=1, cutoff=0.6)
            hint = (f"did you mean {show_text(close[0])}? " if close else "") + \
                "states: " + ", ".join(STATE_NAMES)
            raise error_at(self.text, lit.pos, f"unknown state {show_text(lit.text)}", hint)
        return _compare(get, op, state)

    def _json_clause(self, get: Getter, op: str, lit: Lit) -> Predicate:
        num: int | float | None = None
        if lit.kind == "NUMBER":
            num = parse_number(lit.raw)
        elif lit.kind == "DURATION":
            num = self._duration(lit)
        elif lit.kind == "TIMESTAMP":
            num = parse_timestamp(lit.raw)
            if num is None:
                raise error_at(self.text, lit.pos, f"invalid timestamp {show_text(lit.raw)}",
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
