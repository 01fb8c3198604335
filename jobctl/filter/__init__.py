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
with a one-line message that names the column.  The compiler and grammar
modules are imported, and the Lark parser built, on first use (not at
import) so that ``jobctl --help`` and an operation without a filter stay fast.


Modules: :mod:`.fields` (the fields and their kinds), :mod:`.grammar` (the
Lark grammar, parse errors, literals), :mod:`.errors`, :mod:`.compiled`
(:class:`Filter`) and :mod:`.compiler` (tree -> predicate); every public
name is importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .compiled import MATCH_ALL, Filter
from .errors import FilterError, error_at
from .fields import FIELDS, FieldKind, FieldSpec, Getter, Predicate

if TYPE_CHECKING:
    from .compiler import Compiler
    from .grammar import lark_parser, parse_text  # noqa: F401 - lark_parser: tests check it is cached

__all__ = [
    "FilterError",
    "FieldKind",
    "FieldSpec",
    "FIELDS",
    "Filter",
    "MATCH_ALL",
    "compile_filter",
    "checked_filter_text",
    "field_getter",
    "Predicate",
    "Getter",
]


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
    checked_filter_text(text)
    from .compiler import Compiler
    from .grammar import parse_text

    tree = parse_text(text, "start")
    comp = Compiler(text)
    try:
        pred = comp.expr(tree)
    except RecursionError:
        pred = None
    if pred is None:
        raise error_at(text, 0, "filter is nested too deeply")
    try:
        normalized = comp.normalized(tree)
    except RecursionError:
        raise error_at(text, 0, "filter is nested too deeply") from None
    return Filter(text, pred, frozenset(comp.fields), normalized)


def checked_filter_text(text: str | None) -> str | None:
    """``text`` itself, or ``None`` for no filter (every job).

    Every filter an operator gives passes here before anything is read, so a
    blank shell variable never widens a filtered command to every job.

    Raises:
        FilterError: (exit code 2) when ``text`` is empty or only white space.
    """
    if text is not None and not text.strip():
        raise error_at(text, 0, "empty filter", "leave --filter out to match everything")
    return text


def field_getter(name: str) -> Getter:
    """Resolve a field name, including a payload path, to a value getter.

    ``field_getter("tenant")`` or ``field_getter("payload.items[0].sku")``
    returns ``get(record, now_ms) -> value | None`` (values as described in
    :class:`FieldSpec`).  For export and TUI columns.

    Raises:
        FilterError: unknown field or bad path syntax.
    """
    if not isinstance(name, str) or not name.strip():
        raise error_at(name if isinstance(name, str) else "", 0, "empty field name")
    from .compiler import Compiler
    from .grammar import parse_text

    tree = parse_text(name, "field_only")
    _, _, get = Compiler(name).field(tree.children[0])
    return get


#: Names served by :func:`__getattr__`: the compiler and the grammar are
#: imported on first use, so that an operation without a filter (and
#: ``jobctl --help``) does not pay for them.
_LAZY = {"Compiler": "compiler", "parse_text": "grammar", "lark_parser": "grammar"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

