"""One field vocabulary for the filter language, the export columns and the
analyze rules, and one glob semantics for the filter's ``~`` and the rules.

Each :class:`Term` names one envelope or job fact the three speak about:
its filter field (the canonical name), its export column
(:data:`jobctl.export.schema.COLUMNS`, never renamed), its rules key
(:mod:`jobctl.analyze.rules`; ``None`` where rules have no glob on it) and
the aliases every one of them accepts.  So ``error``, ``error_code`` and
``last_error_code`` mean the same thing in a filter and in a rules file;
``tenant`` and ``tenant_id`` likewise (see :data:`TERMS`, docs/filter.md).

Globs (:func:`glob_regex`, :func:`glob_matcher`): fnmatch's syntax, the
same for the filter and the rules (Spark): ``*`` any run of characters
(newlines included), ``?`` one character, ``[abc]``/``[a-z]`` one of a set,
``[!abc]`` one not in it (a reversed range such as ``[z-a]`` is empty, as in
fnmatch: a set of nothing else matches no character, ``[!z-a]`` any); a
``[`` without its ``]`` is a literal; matching
is case-sensitive and covers the whole value.  Source: Python's
:mod:`fnmatch`, whose translation the regex keeps, written so that Java's
regex engine (Spark's ``rlike``) reads it the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Term", "TERMS", "ALIASES", "canonical", "term", "glob_regex", "glob_matcher"]


@dataclass(frozen=True)
class Term:
    """One fact: ``name`` (the filter field), ``column`` (export column),
    ``rule_key`` (the analyze rules' glob key, ``None``: none), ``aliases``
    (other accepted spellings) and ``envelope`` (the envelope key, seed 000
    sections 5 and 10; ``None``: not an envelope field)."""

    name: str
    column: str | None
    rule_key: str | None = None
    aliases: tuple[str, ...] = ()
    envelope: str | None = None

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every accepted name: the field, the column, the rules key, the aliases."""
        names = (self.name, self.column, self.rule_key, *self.aliases)
        return tuple(dict.fromkeys(n for n in names if n))


#: The shared vocabulary, in the filter's display order.
TERMS: tuple[Term, ...] = (
    Term("id", "job_id", envelope="jobId"),
    Term("type", "job_type", "job_type", envelope="jobType"),
    Term("version", "job_version", aliases=("job_version",), envelope="jobVersion"),
    Term("tenant", "tenant_id", "tenant", envelope="tenantId"),
    Term("error", "last_error_code", "error_code", envelope="lastErrorCode"),
    Term("message", "last_error_message", "error_message", envelope="lastErrorMessage"),
    Term("attempts", "attempt", envelope="attempt"),
    Term("max_attempts", "max_attempts", envelope="maxAttempts"),
    Term("created", "created_at", envelope="createdAtEpochMs"),
    Term("state", "state", "state"),
    Term("idempotency_key", "idempotency_key", envelope="idempotencyKey"),
    Term("trace", "trace_id", envelope="traceId"),
    Term("correlation", "correlation_id", envelope="correlationId"),
)

_BY_NAME: dict[str, Term] = {t.name: t for t in TERMS}

#: Every other accepted spelling -> the canonical filter field name.
ALIASES: dict[str, str] = {s: t.name for t in TERMS for s in t.spellings if s != t.name}


def canonical(name: str) -> str:
    """The canonical field name of ``name`` (``error_code`` -> ``error``);
    ``name`` itself when it is no alias."""
    return ALIASES.get(name, name)


def term(name: str) -> Term | None:
    """The :class:`Term` of any spelling of a field, else ``None``."""
    return _BY_NAME.get(canonical(name))


def _set_chunks(body: str) -> list[str]:
    """The body of a ``[...]`` set split at its range hyphens, with every
    reversed range (``z-a``: empty) removed, as :func:`fnmatch.translate`
    does; ``"-".join(chunks)`` is the set's regex body (before escaping):
    ``"a-c"`` -> ``["a", "c"]``, ``"z-a"`` -> ``[""]``, ``"a-cz-b"`` ->
    ``["a", "c"]``."""
    chunks: list[str] = []
    i, k = 0, 1
    while True:
        k = body.find("-", k)
        if k < 0:
            break
        chunks.append(body[i:k])
        i, k = k + 1, k + 3
    if body[i:]:
        chunks.append(body[i:])
    elif chunks:
        chunks[-1] += "-"  # a trailing hyphen is a literal
    for k in range(len(chunks) - 1, 0, -1):  # a reversed range matches nothing: drop it
        if chunks[k - 1] and chunks[k] and chunks[k - 1][-1] > chunks[k][0]:
            chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
            del chunks[k]
    return chunks


def _glob_set(body: str, negate: bool) -> str:
    """The regex of one ``[...]`` set (``body`` without its ``!``): a set
    left empty by reversed ranges (``[z-a]``) matches no character, its
    negation (``[!z-a]``) any character."""
    # escape what either engine reads as special inside a set ([, ], \, ^, & for Java's &&; - in a chunk)
    chunks = ["".join("\\" + ch if ch in "[]\\^&-" else ch for ch in c) for c in _set_chunks(body)]
    stuff = "-".join(chunks)
    if not stuff:
        return "." if negate else "(?!)"
    return f"[{'^' if negate else ''}{stuff}]"


def _glob_body(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
                continue
            body = pattern[i:j]
            i = j + 1
            negate = body.startswith("!")
            out.append(_glob_set(body[1:] if negate else body, negate))
        else:
            out.append(re.escape(c))
    return "".join(out)


def glob_regex(*patterns: str) -> str:
    """``patterns`` (see the module docstring; any of them matches) as one
    anchored regex, valid in Python and Java: ``(?s)^(?:...|...)$``."""
    return "(?s)^(?:" + "|".join(_glob_body(p) for p in patterns) + ")$"


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """``match(text) -> bool``: whether the whole ``text`` matches ``pattern``."""
    rx = re.compile(_glob_body(pattern), re.S)
    return lambda text: rx.fullmatch(text) is not None
