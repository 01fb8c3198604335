"""A filter compiled to the server-side program of ``prelude/predicate.lua``.

:func:`lua_program` turns a compiled :class:`~jobctl.filter.Filter` into the
program ``list_scan.lua`` evaluates over each reliable-list envelope decoded
by cjson, so that the plan of a filtered dead-list redrive does not ship the
envelopes the filter rules out (:mod:`jobctl.layouts.reliable_list.predicate_plan`).  The
server only rules jobs out: every job it cannot rule out (a match, or an
envelope cjson and orjson might read differently) is decided by the client
with :meth:`Filter.matches`, so a plan never depends on the two readers
agreeing.  A filter the program cannot express exactly returns ``None``: the
caller keeps today's client-side evaluation (:mod:`jobctl.layouts.reliable_list.lean_plan`).

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

Bounded per call (the limits below, in one place, measured in
``docs/performance.md``): a filter of more than :data:`SCAN_MAX_CLAUSES`
clauses, or whose program is over :data:`SCAN_MAX_PROGRAM_BYTES`, has no
program (the plan is client-side), and a ``list_scan.lua`` call reads at most
:func:`scan_call_bytes` bytes of envelopes into Lua (an envelope past that is
handed back to the client, which reads and decides it), so that no call takes
more than about :data:`SCAN_CALL_BUDGET_US` of server time whatever the data.
"""

from __future__ import annotations

from typing import Any

import orjson

from .compiled import Filter

__all__ = ["lua_program", "decodes", "scan_call_bytes", "program_clauses", "LUA_FIELDS", "SCAN_WINDOW",
           "SCAN_CALL_BUDGET_US", "SCAN_MAX_CLAUSES", "SCAN_MAX_PROGRAM_BYTES"]

#: filter field -> envelope key ("" = the job id, the dead list's element)
LUA_FIELDS: dict[str, str] = {
    "id": "", "type": "jobType", "tenant": "tenantId", "error": "lastErrorCode", "message": "lastErrorMessage",
    "idempotency_key": "idempotencyKey", "trace": "traceId", "correlation": "correlationId",
    "version": "jobVersion", "attempts": "attempt", "max_attempts": "maxAttempts", "created": "createdAtEpochMs",
}
_TEXT = frozenset({"id", "type", "tenant", "error", "message", "idempotency_key", "trace", "correlation"})
_EXACT = 2 ** 53

# -- the per-call bounds of the server-side scan (bench/scan_bounds.py measures them) --------------------------

#: Tail positions (payload keys) one ``list_scan.lua`` call judges; the
#: window engine applies the plan in windows of the same size.
SCAN_WINDOW = 120
#: The server time one ``list_scan.lua`` call may take, worst case, in µs
#: (typical calls take 0.2-0.8 ms; before these bounds one took seconds).
SCAN_CALL_BUDGET_US = 4_000
#: A filter of more clauses is planned client-side: each clause costs every
#: job of a call, and a text clause rescans every envelope byte.
SCAN_MAX_CLAUSES = 32
#: A program longer than this (JSON bytes) is planned client-side: every
#: call decodes it and builds its closures again.
SCAN_MAX_PROGRAM_BYTES = 8_192
#: Measured worst-case costs on the reference machine (docs/performance.md),
#: ns: cjson decoding one envelope byte (an array of small integers, the
#: worst shape) and the program's one byte, one text clause's plain search
#: over one envelope byte (quote-dense text), one clause of one job, and the
#: fixed cost of one job (its STRLEN, MGET slot and verdict).
COST_DECODE_NS_PER_BYTE = 30
COST_FIND_NS_PER_BYTE = 4
COST_CLAUSE_NS = 300
COST_JOB_NS = 8_000


class _Unsupported(Exception):
    pass


def _clause(compiler, node, out: list[Any]) -> None:
    from .grammar import Lit, unescape

    field_node, op_node, value_node = node.children
    spec, path, _get = compiler.field(field_node)
    if path or spec.name not in LUA_FIELDS:
        raise _Unsupported(spec.name)
    op = str(op_node.children[0]).lower()
    tok = value_node.children[0]
    raw = str(tok)
    text = unescape(compiler.text, raw, tok.start_pos or 0) if tok.type == "STRING" else raw
    key = LUA_FIELDS[spec.name]
    if spec.name in _TEXT:
        if op not in ("=", "!="):
            raise _Unsupported(op)
        out.append(["c", key, op, text])
        return
    if op not in ("=", "!=", "<", "<=", ">", ">="):
        raise _Unsupported(op)
    value = compiler._typed(spec, Lit(tok.type, text, raw, tok.start_pos or 0))
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
    from .compiler import Compiler
    from .grammar import parse_text

    try:
        tree = parse_text(flt.text, "start")
        out: list[Any] = []
        _emit(Compiler(flt.text), tree, out)
    except (_Unsupported, RecursionError):
        return None
    if sum(1 for t in out if t[0] == "c") > SCAN_MAX_CLAUSES:
        return None  # over the per-call bound: client-side
    try:
        program = orjson.dumps(out)
    except orjson.JSONEncodeError:  # a value that is not UTF-8 (surrogate escapes): client-side
        return None
    return program if len(program) <= SCAN_MAX_PROGRAM_BYTES else None


def program_clauses(program: bytes) -> tuple[int, int]:
    """``(clauses, text clauses)`` of ``program`` (a :func:`lua_program`
    result): every clause, and those the quick rule-out searches for in each
    envelope (a text ``=``/``!=`` on an envelope field)."""
    tokens = [t for t in orjson.loads(program) if t[0] == "c"]
    return len(tokens), sum(1 for t in tokens if t[1] != "" and t[2] in ("=", "!=") and _needle_ok(t[3]))


def scan_call_bytes(program: bytes) -> int:
    """The most envelope bytes one ``list_scan.lua`` call running
    ``program`` reads into Lua (its ARGV[4]; >= 0): what is left of
    :data:`SCAN_CALL_BUDGET_US` once the program's decoding and the per-job
    costs of a full window are paid, at the worst-case cost of a byte (cjson
    plus one search per text clause).  Raises ValueError on a program over
    :data:`SCAN_MAX_CLAUSES` or :data:`SCAN_MAX_PROGRAM_BYTES` (never made
    by :func:`lua_program`)."""
    clauses, needles = program_clauses(program)
    if clauses > SCAN_MAX_CLAUSES or len(program) > SCAN_MAX_PROGRAM_BYTES:
        raise ValueError(f"program over the scan's bounds: {clauses} clauses, {len(program)} bytes")
    fixed_ns = len(program) * COST_DECODE_NS_PER_BYTE + SCAN_WINDOW * (COST_JOB_NS + clauses * COST_CLAUSE_NS)
    left_ns = max(0, SCAN_CALL_BUDGET_US * 1000 - fixed_ns)
    return left_ns // (COST_DECODE_NS_PER_BYTE + needles * COST_FIND_NS_PER_BYTE)


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
