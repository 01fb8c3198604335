"""Parquet's column path: one raw window straight to an Arrow record batch.

:func:`window_record_batch` builds the export rows of a
:class:`~jobctl.layouts.raw.RawWindow` as a ``pyarrow.RecordBatch`` with the
export schema (:func:`jobctl.export.schema.arrow_schema`), doing per row
only what must be done per row in Python: one ``orjson.loads`` and one
``sha1`` of each stored value.  The typed envelope fields go to Arrow in one
C++ pass over the parsed envelopes (``pyarrow.array`` with an explicit
struct type); the payloads are serialised by one ``orjson.dumps`` call per
window and cut at separators; ``raw`` is the stored bytes, copied once.

It takes the windows :func:`jobctl.export.columns.window_columns` takes and
gives the same rows; for any other window it returns ``None`` and the caller
goes on with :func:`~jobctl.export.columns.window_columns` and, failing
that, the record-by-record path.  Arrow's int64 conversion refuses bools,
text and values past int64 but truncates a float without a word (``1.5`` ->
``1``), so the int fields' Python types are checked first (ints and nulls
only, as the column path takes them).

pyarrow is loaded here (through :mod:`.arrow_memory`): only the Parquet writer's callers import this module.
"""

from __future__ import annotations

import secrets
from array import array
from hashlib import sha1
from itertools import accumulate, repeat

import orjson

from ..layouts.raw import RawWindow
from .arrow_memory import POOL as _POOL
from .arrow_memory import pa, pc
from .columns import (ENVELOPE_COLUMNS, I64_MAX, I64_MIN, KNOWN_KEYS, REQUIRED_COLUMNS, ints_ok, window_docs,
                      window_extras)
from .rows import TS_MAX_MS, TS_MIN_MS, utf8_text
from .schema import COLUMNS, NAMES, arrow_schema

__all__ = ["window_record_batch"]

_SCHEMA = arrow_schema()
_TYPES = {f.name: f.type for f in _SCHEMA}
_KINDS = {c.name: c.kind for c in COLUMNS}
_I64 = pa.int64()
_STR = pa.string()
_TS_MS = pa.timestamp("ms", tz="UTC")
_TS_US = _TYPES["created_at"]

#: the typed envelope fields, in column order, as one struct
_STRUCT = pa.struct([pa.field(key, _STR if kind == "string" else _I64) for key, kind in ENVELOPE_COLUMNS.values()])
_FIELD_COLUMNS = tuple(ENVELOPE_COLUMNS)  # column names, struct field order
#: envelope keys of the int64 and timestamp columns
_INT_KEYS = tuple(key for key, kind in ENVELOPE_COLUMNS.values() if kind != "string")
_INT_TYPES = frozenset({int, type(None)})
#: a string no payload holds (checked: a window where one does is serialised row by row)
_SEP_TEXT = f"jobctl-export-{secrets.token_hex(16)}"
_SEP = f',"{_SEP_TEXT}",'

_constants: dict[tuple, pa.Array] = {}


def _const(name: str, value, n: int) -> pa.Array:
    """``n`` times ``value`` (or null) as column ``name``'s type; cached (Arrow arrays are immutable)."""
    key = (name, value, n)
    arr = _constants.get(key)
    if arr is None:
        typ = _TYPES[name]
        arr = (pa.nulls(n, type=typ, memory_pool=_POOL) if value is None
               else pa.repeat(pa.scalar(value, type=typ, memory_pool=_POOL), n, memory_pool=_POOL))
        if len(_constants) > 256:  # a few windows' sizes and states: never grows past that in practice
            _constants.clear()
        _constants[key] = arr
    return arr


def _bytes_array(values: list[bytes], typ: pa.DataType = _STR) -> pa.Array:
    """A string array of byte strings known to be UTF-8 (one copy, no per-value conversion)."""
    try:
        offsets = array("i", accumulate(map(len, values), initial=0))
    except OverflowError:  # past 2 GiB in one window: let pyarrow split it
        return pa.array(values, type=typ, memory_pool=_POOL)
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(values)))


def _payload_json(payloads: list) -> pa.Array | None:
    """The ``payload_json`` column: compact JSON of each payload, null for a
    missing or null one; ``None`` when a payload does not serialise."""
    n = len(payloads)
    seq: list = [_SEP_TEXT] * (2 * n - 1)
    seq[0::2] = payloads
    try:
        blob = orjson.dumps(seq)  # one call: orjson's per-call cost dwarfs a small payload's
        whole = pa.StringArray.from_buffers(1, pa.py_buffer(array("i", (1, len(blob) - 1))), pa.py_buffer(blob))
    except (TypeError, OverflowError):  # orjson.JSONEncodeError, or past 2 GiB: row by row
        return None
    arr = pc.split_pattern(whole, pattern=_SEP, memory_pool=_POOL).flatten()
    if len(arr) != n:  # a payload holds the separator text
        return None
    if None in payloads:
        missing = pa.array([p is None for p in payloads], type=pa.bool_(), memory_pool=_POOL)
        arr = pc.if_else(missing, pa.scalar(None, _STR, memory_pool=_POOL), arr, memory_pool=_POOL)
    return arr


def _time_column(arr: pa.Array) -> pa.Array | None:
    """An int64 column of epoch ms as ``timestamp[us, UTC]``: ``None`` when
    a value is outside years 1..9999."""
    if arr.null_count < len(arr):
        lo, hi = pc.min_max(arr, memory_pool=_POOL).values()
        if lo.as_py() < TS_MIN_MS or hi.as_py() > TS_MAX_MS:
            return None
    return arr.view(_TS_MS).cast(_TS_US, memory_pool=_POOL)


def window_record_batch(w: RawWindow, queue: str, layout: str,
                        docs: list[dict] | None = None) -> pa.RecordBatch | None:
    """The export rows of every job of ``w`` as an Arrow record batch with the
    export schema, or ``None`` when the window holds a value this path does
    not take (then build it with :func:`jobctl.export.columns.window_columns`
    or record by record).  ``queue`` and ``layout`` are the layout's names;
    ``docs``: :func:`~jobctl.export.columns.window_docs` of ``w`` when the
    caller parsed it (they are changed here).  Never raises for odd contents.
    """
    docs = window_docs(w) if docs is None else docs
    if docs is None:
        return None
    n, raws = len(w.ids), w.raws
    try:
        ids = pa.array(w.ids, type=_STR, memory_pool=_POOL)
    except (TypeError, UnicodeEncodeError, pa.ArrowException):
        return None
    cols: dict[str, pa.Array] = {
        "queue": _const("queue", utf8_text(queue), n), "layout": _const("layout", utf8_text(layout), n),
        "shard": _const("shard", utf8_text(w.shard), n), "state": _const("state", w.state.value, n),
        "job_id": ids, "visibility_deadline": _const("visibility_deadline", None, n),
        "malformed": _const("malformed", False, n), "problems": _const("problems", None, n),
        "raw_base64": _const("raw_base64", None, n),
    }
    for name, values in (("position", w.positions), ("score_ms", w.scores)):
        if values is None:
            cols[name] = _const(name, None, n)
        elif len(values) != n or not ints_ok(values, I64_MIN, I64_MAX):
            return None
        else:
            cols[name] = pa.array(values, type=_I64, memory_pool=_POOL)
    # unknown keys: the column path types jobctl's redrive record and keeps the rest as JSON
    extras = None
    if not KNOWN_KEYS.issuperset(set().union(*docs)):
        extras = window_extras(docs)
        if extras is None:
            return None
    get = dict.get
    own = {k: k for k in docs[0]}  # orjson's own (cached) key objects: lookups by identity
    for key in _INT_KEYS:  # a float (or anything but an int) there: Arrow would truncate it
        if not _INT_TYPES.issuperset(map(type, map(get, docs, repeat(own.get(key, key), n)))):
            return None
    payloads = list(map(dict.pop, docs, repeat("payload", n), repeat(None, n)))
    try:
        envelopes = pa.array(docs, type=_STRUCT, memory_pool=_POOL)
    except (pa.ArrowException, OverflowError, UnicodeEncodeError):  # a field of another type
        return None
    del docs
    for i, name in enumerate(_FIELD_COLUMNS):
        arr = envelopes.field(i)
        if _KINDS[name] == "timestamp":
            arr = _time_column(arr)
            if arr is None:
                return None
        cols[name] = arr
    for name in REQUIRED_COLUMNS:
        if cols[name].null_count:
            return None
    payload_json = _payload_json(payloads)
    if payload_json is None:
        return None
    cols["payload_json"] = payload_json
    if extras is None:
        for name in ("extra_json", "redriven_at", "redrive_count"):
            cols[name] = _const(name, None, n)
    else:
        extra_json, redriven, count = extras
        cols["extra_json"] = pa.array(extra_json, type=_STR, memory_pool=_POOL)
        cols["redriven_at"] = pa.array(redriven, type=_TS_MS, memory_pool=_POOL).cast(_TS_US, memory_pool=_POOL)
        cols["redrive_count"] = pa.array(count, type=_I64, memory_pool=_POOL)
    raw = _bytes_array(raws)
    cols["raw"] = raw
    cols["raw_bytes"] = pc.binary_length(raw, memory_pool=_POOL).cast(_I64, memory_pool=_POOL)
    cols["payload_sha1"] = pa.array([sha1(r).hexdigest() for r in raws], type=_STR, memory_pool=_POOL)
    return pa.RecordBatch.from_arrays([cols[name] for name in NAMES], schema=_SCHEMA)
