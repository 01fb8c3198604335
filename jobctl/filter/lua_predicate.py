"""A filter compiled to the server-side program of ``prelude/predicate.lua``.

:func:`lua_program` turns a compiled :class:`~jobctl.filter.Filter` into the
program ``list_scan.lua`` evaluates over each reliable-list envelope decoded
by cjson, so that the plan of a filtered dead-list redrive does not ship the
envelopes the filter rules out (:mod:`jobctl.layouts.predicate_plan`).  The
server only rules jobs out: every job it cannot rule out (a match, or an
envelope cjson and orjson might read differently) is decided by the client
with :meth:`Filter.matches`, so a plan never depends on the two readers
agreeing.  A filter the program cannot express exactly returns ``None``: the
caller keeps today's client-side evaluation (:mod:`jobctl.layouts.lean_plan`).

Expressible (the same truth values as :meth:`Filter.matches` on every
envelope ``parse_envelope`` reads without problems):

- ``id``, ``type``, ``tenant``, ``error``, ``message``, ``idempotency_key``,
  ``trace``, ``correlation`` with ``=`` and ``!=`` (text ordering follows the
  server's collation locale in Lua, so ``<``... stay client-side);
- ``version``, ``attempts``, ``max_attempts`` (numbers) and ``created``
  (timestamp, epoch ms) with ``= != < <= > >=``;
- ``and``, ``or``, ``not`` and parentheses.

Not expressible (client-side): ``~`` and ``contains``, ``payload...``,
``age``, ``dead_for``, ``overdue_for``, ``state``.
"""

from __future__ import annotations

from typing import Any

import orjson

from .compiled import Filter

__all__ = ["lua_program", "decodes", "LUA_FIELDS"]

#: filter field -> envelope key ("" = the job id, the dead list's element)
LUA_FIELDS: dict[str, str] = {
    "id": "", "type": "jobType", "tenant": "tenantId", "error": "lastErrorCode", "message": "lastErrorMessage",
    "idempotency_key": "idempotencyKey", "trace": "traceId", "correlation": "correlationId",
    "version": "jobVersion", "attempts": "attempt", "max_attempts": "maxAttempts", "created": "createdAtEpochMs",
}
_TEXT = frozenset({"id", "type", "tenant", "error", "message", "idempotency_key", "trace", "correlation"})
_EXACT = 2 ** 53


class _Unsupported(Exception):
    pass


def _clause(compiler, node, out: list[Any]) -> None:
    from .grammar import _Lit, _unescape

    field_node, op_node, value_node = node.children
    spec, path, _get = compiler.field(field_node)
    if path or spec.name not in LUA_FIELDS:
        raise _Unsupported(spec.name)
    op = str(op_node.children[0]).lower()
    tok = value_node.children[0]
    raw = str(tok)
    text = _unescape(compiler.text, raw, tok.start_pos or 0) if tok.type == "STRING" else raw
    key = LUA_FIELDS[spec.name]
    if spec.name in _TEXT:
        if op not in ("=", "!="):
            raise _Unsupported(op)
        out.append(["c", key, op, text])
        return
    if op not in ("=", "!=", "<", "<=", ">", ">="):
        raise _Unsupported(op)
    value = compiler._typed(spec, _Lit(tok.type, text, raw, tok.start_pos or 0))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) >= _EXACT or value != value:
        raise _Unsupported(raw)
    out.append(["c", key, op, value])


def _emit(compiler, node, out: list[Any]) -> None:
    data = node.data
    if data in ("or_", "and_"):
        parts = []
        while getattr(node, "data", None) == data:
            parts.append(node.children[2])
            node = node.children[0]
        parts.append(node)
        parts.reverse()
        _emit(compiler, parts[0], out)
        for p in parts[1:]:
            _emit(compiler, p, out)
            out.append(["and" if data == "and_" else "or"])
    elif data == "not_":
        _emit(compiler, node.children[1], out)
        out.append(["not"])
    elif data == "group":
        _emit(compiler, node.children[1], out)
    elif data == "clause":
        _clause(compiler, node, out)
    else:
        raise _Unsupported(data)


def lua_program(flt: Filter) -> bytes | None:
    """The server-side program of ``flt`` (JSON bytes, postfix order: the
    format ``prelude/predicate.lua`` documents), or ``None`` when ``flt`` matches
    everything or uses a field or operator the program cannot express
    exactly (the caller evaluates it client-side)."""
    if flt.is_match_all:
        return None
    from .compiler import _Compiler
    from .grammar import _parse

    try:
        tree = _parse(flt.text, "start")
        out: list[Any] = []
        _emit(_Compiler(flt.text), tree, out)
    except (_Unsupported, RecursionError):
        return None
    try:
        return orjson.dumps(out)
    except orjson.JSONEncodeError:  # a value that is not UTF-8 (surrogate escapes): client-side
        return None


def decodes(program: bytes) -> bool:
    """Whether ``list_scan.lua`` decodes envelopes with cjson to run
    ``program`` (a :func:`lua_program` result): not when every clause is a
    text ``=``/``!=`` or on the id, which ``prelude/predicate.lua``'s quick
    rule-out decides from the values' absence alone (~1-2 µs of server time
    a job instead of ~6-7)."""
    return not all(t[0] != "c" or t[1] == "" or (t[2] in ("=", "!=") and _needle_ok(t[3]))
                   for t in orjson.loads(program))


def _needle_ok(value: Any) -> bool:
    """Whether the quick rule-out reads a text value: printable ASCII with
    no quote and no backslash (``prelude/predicate.lua``'s own test)."""
    return isinstance(value, str) and value.isascii() and value.isprintable() and '"' not in value \
        and "\\" not in value
