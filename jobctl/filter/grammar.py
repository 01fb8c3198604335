"""The filter language's grammar (Lark, LALR, contextual lexer, built on
first use so that ``jobctl --help`` stays fast), its parse errors, and the
value literals (strings, numbers, ISO-8601 timestamps)."""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .errors import FilterError, error_at, show_text

if TYPE_CHECKING:  # lark is imported lazily, on first compile
    from lark import Lark, Tree

__all__ = ["lark_parser", "parse_text", "Lit", "unescape", "parse_number", "parse_timestamp"]

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


#: The runbook conditions' dialect (:mod:`jobctl.runbook.condition`): the
#: same grammar, ``==`` also spelled for ``=``.
_CONDITION_GRAMMAR = _GRAMMAR.replace("OP: /<=|>=|!=|=|", "OP: /<=|>=|!=|==|=|")


@lru_cache(maxsize=2)
def lark_parser(dialect: str = "filter") -> Lark:
    """The Lark LALR parser of ``dialect`` (``filter`` or ``condition``),
    built on first use and cached: in the process, and across processes in
    the user's cache directory (:func:`_cache_file`)."""
    from lark import Lark

    return Lark(_CONDITION_GRAMMAR if dialect == "condition" else _GRAMMAR, parser="lalr",
                lexer="contextual", start=["start", "field_only"], maybe_placeholders=False,
                cache=_cache_file(dialect))


def _cache_file(dialect: str) -> str | bool:
    """Where Lark keeps the analysed grammar of ``dialect`` between runs:
    ``<user cache dir>/jobctl/filter-<dialect>.lark`` (platformdirs; private
    to the user, unlike Lark's default in the shared temporary directory).
    Lark stores the SHA-256 of the grammar, its options and Lark's version
    in the file and rebuilds on any difference.  Building the parser costs
    ~50 ms, loading it ~5 ms: a filtered command's start-up.  ``False`` (no
    cache) when the directory cannot be made."""
    from pathlib import Path

    from platformdirs import user_cache_dir

    try:
        directory = Path(user_cache_dir("jobctl"))
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return str(directory / f"filter-{dialect}.lark")


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


def parse_text(text: str, start: str, dialect: str = "filter") -> Tree:
    """Parse with Lark (``dialect``: see :func:`lark_parser`); translate every
    Lark exception into a FilterError.

    The FilterError is raised outside the ``except`` block so that no Lark
    exception hangs off it as ``__context__``.
    """
    from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    err: FilterError | None = None
    try:
        return lark_parser(dialect).parse(text, start=start)
    except UnexpectedCharacters as e:
        pos = e.pos_in_stream
        char = text[pos] if 0 <= pos < len(text) else ""
        if char in ("'", '"'):
            err = error_at(text, pos, "unterminated string",
                         f"close it with {char}; a newline needs \\n")
        else:
            hint = _expected(_accepted(e, e.allowed))
            if hint and "a value" in hint:
                hint += "; quote values with spaces or ( ) ' \" = ! < > ~"
            err = error_at(text, pos, f"unexpected character {show_text(char)}", hint)
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            err = error_at(text, len(text), "unexpected end of filter",
                         _expected(_accepted(e, e.expected)))
        else:
            err = error_at(text, tok.start_pos or 0, f"unexpected token {show_text(str(tok))}",
                         _expected(_accepted(e, e.expected)))
    except UnexpectedInput as e:  # pragma: no cover - other LALR failures
        err = error_at(text, getattr(e, "pos_in_stream", 0) or 0, "cannot parse filter")
    except LarkError:  # pragma: no cover - defensive
        err = error_at(text, 0, "cannot parse filter")
    except RecursionError:
        err = error_at(text, 0, "filter is nested too deeply")
    raise err


# --------------------------------------------------------------------------
# Literals
# --------------------------------------------------------------------------

_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)


@dataclass(frozen=True)
class Lit:
    """A value literal: ``kind`` is the token type (STRING, NUMBER, DURATION,
    TIMESTAMP, WORD), ``text`` its meaning as text (unescaped for strings),
    ``raw`` as typed and ``pos`` its 0-based offset."""

    kind: str
    text: str
    raw: str
    pos: int


def unescape(src: str, raw: str, pos: int) -> str:
    """Decode a quoted STRING token (quotes included) at offset ``pos``."""
    body = raw[1:-1]

    def repl(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _ESCAPES:
            return _ESCAPES[esc]
        if len(esc) == 5 and esc[0] == "u":
            return chr(int(esc[1:], 16))
        raise error_at(src, pos + 1 + m.start(), f"unknown escape {show_text(m.group(0))}",
                     "use \\\\ \\\" \\' \\n \\t \\r or \\uXXXX")

    return _ESCAPE_RE.sub(repl, body)


def parse_timestamp(text: str) -> int | None:
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


def parse_number(text: str) -> int | float | None:
    """``"3"`` -> 3, ``"2.5"``/``"1e3"`` -> float; ``None`` if not a finite number."""
    s = text.strip()
    if _INT_RE.fullmatch(s):
        return int(s)
    if _FLOAT_RE.fullmatch(s):
        f = float(s)
        return f if math.isfinite(f) else None
    return None

