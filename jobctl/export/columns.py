"""Export columns built straight from the stored values: no per-row objects.

A :class:`ColumnBatch` holds one source window's export rows column by
column (:data:`~jobctl.export.schema.COLUMNS` order): a Python list per
column, or a :class:`Const` for a column that holds one value for the whole
window (queue, layout, shard, state, and the nulls of a clean window).

:func:`window_columns` builds it from a :class:`~jobctl.layouts.raw.RawWindow`
in one pass per column: each payload value is parsed once (``orjson``), each
envelope field taken with ``dict.get`` into its column, typed by checking
the set of Python types a column holds and its minimum and maximum, and
``payload_sha1`` is ``hashlib.sha1`` of the stored bytes (C, no
re-encoding).  It takes only *clean* windows: every value a JSON object that
:func:`jobctl.model.parse_envelope` would parse without a problem and
:func:`jobctl.export.rows.record_row` would type without a problem.  For any
other window it returns ``None`` and the caller builds the rows record by
record (:func:`rows_columns` of :func:`~jobctl.export.rows.record_row`), so
both paths write the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha1
from itertools import repeat
from typing import Any

import orjson

from ..layouts.raw import RawWindow
from ..model import ENVELOPE_FIELDS
from .rows import TS_MAX_MS, TS_MIN_MS, int64_or_none, json_text, ts_or_none, utf8_text
from .schema import COLUMNS, NAMES, column_index

__all__ = ["Const", "ColumnBatch", "window_columns", "window_extras", "rows_columns", "ENVELOPE_COLUMNS",
           "REQUIRED_COLUMNS", "KNOWN_KEYS", "I64_MIN", "I64_MAX", "ints_ok"]

#: the int64 range
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
_NONE = type(None)
_STR_TYPES = frozenset({str, _NONE})
_INT_TYPES = frozenset({int, _NONE})
KNOWN_KEYS = frozenset(ENVELOPE_FIELDS)
_RAW = column_index("raw")
_MALFORMED = column_index("malformed")

#: column name -> (envelope key, kind) of the typed envelope fields
ENVELOPE_COLUMNS: dict[str, tuple[str, str]] = {
    "envelope_job_id": ("jobId", "string"), "job_type": ("jobType", "string"),
    "job_version": ("jobVersion", "int64"), "tenant_id": ("tenantId", "string"),
    "idempotency_key": ("idempotencyKey", "string"), "created_at": ("createdAtEpochMs", "timestamp"),
    "not_before": ("notBeforeEpochMs", "timestamp"), "deadline": ("deadlineEpochMs", "timestamp"),
    "attempt": ("attempt", "int64"), "max_attempts": ("maxAttempts", "int64"),
    "trace_id": ("traceId", "string"), "correlation_id": ("correlationId", "string"),
    "payload_ref": ("payloadRef", "string"), "last_attempt_at": ("lastAttemptAtEpochMs", "timestamp"),
    "next_attempt_at": ("nextAttemptAtEpochMs", "timestamp"), "last_error_code": ("lastErrorCode", "string"),
    "last_error_message": ("lastErrorMessage", "string"),
}
#: columns of the envelope keys parse_envelope requires (a missing one is a problem)
REQUIRED_COLUMNS = tuple(name for name, (key, _kind) in ENVELOPE_COLUMNS.items()
                         if key in ("jobId", "jobType", "createdAtEpochMs"))


@dataclass(frozen=True, slots=True)
class Const:
    """A column that holds ``value`` in every row of its batch."""

    value: Any


@dataclass(slots=True)
class ColumnBatch:
    """``n`` export rows as ``columns`` (one list of ``n`` values or a
    :class:`Const` per column, in :data:`~jobctl.export.schema.COLUMNS`
    order).  ``raw_is_bytes``: the ``raw`` column holds the stored bytes,
    known to be UTF-8 (text formats decode them, Parquet takes them as they
    are).  ``arrow``: the rows already as a ``pyarrow.RecordBatch`` with the
    export schema (Parquet's column path, :mod:`.arrow_columns`), ``columns``
    then empty."""

    n: int
    columns: list[list | Const]
    raw_is_bytes: bool = False
    arrow: Any = None

    def column(self, index: int) -> list:
        """Column ``index`` as a list of ``n`` values."""
        if self.arrow is not None:
            return _arrow_column(self.arrow, index)
        col = self.columns[index]
        if isinstance(col, Const):
            return [col.value] * self.n
        if index == _RAW and self.raw_is_bytes:
            return [None if v is None else v.decode("utf-8") for v in col]
        return col

    def rows(self) -> Iterator[tuple]:
        """The rows as tuples, as :func:`~jobctl.export.rows.record_row` gives them."""
        if self.arrow is not None:
            return zip(*(self.column(i) for i in range(len(COLUMNS))))
        cols = [repeat(c.value, self.n) if isinstance(c, Const) else c for c in self.columns]
        if self.raw_is_bytes:
            cols[_RAW] = self.column(_RAW)
        return zip(*cols)

    @property
    def malformed(self) -> int:
        """How many rows are flagged ``malformed``."""
        if self.arrow is not None:
            return self.arrow.column(_MALFORMED).true_count
        col = self.columns[_MALFORMED]
        if isinstance(col, Const):
            return self.n if col.value else 0
        return sum(1 for v in col if v)


def _arrow_column(batch, index: int) -> list:
    """Column ``index`` of an Arrow record batch as row values (timestamps in epoch ms)."""
    arr = batch.column(index)
    if COLUMNS[index].kind == "timestamp":
        from .arrow_memory import pa, pc

        arr = pc.divide(arr.cast(pa.int64()), 1000)
    return arr.to_pylist()


def rows_columns(rows: list[tuple]) -> ColumnBatch:
    """A :class:`ColumnBatch` of row tuples (the record-by-record path)."""
    if not rows:
        return ColumnBatch(0, [Const(None) for _ in COLUMNS])
    return ColumnBatch(len(rows), [list(c) for c in zip(*rows)])


def ints_ok(values: list, lo: int, hi: int) -> bool:
    """Whether ``values`` holds only ints (not bools) in ``lo..hi`` and ``None``."""
    types = set(map(type, values))
    if not types <= _INT_TYPES:
        return False
    if _NONE in types:
        values = [v for v in values if v is not None]
        if not values:
            return True
    return lo <= min(values) and max(values) <= hi


def window_extras(docs: list[dict]) -> tuple[list, list, list] | None:
    """``(extra_json, redriven_at, redrive_count)`` columns of parsed
    envelopes with keys outside :data:`~jobctl.model.ENVELOPE_FIELDS`
    (``None`` in the rows without), or ``None`` when a redrive record there
    would be flagged (the record path then)."""
    n = len(docs)
    problems: list[str] = []
    extra_json: list = [None] * n
    redriven: list = [None] * n
    count: list = [None] * n
    for i, d in enumerate(docs):
        if KNOWN_KEYS.issuperset(d):
            continue
        extra = {k: v for k, v in d.items() if k not in KNOWN_KEYS}
        extra_json[i] = json_text(extra)
        redriven[i] = ts_or_none(extra.get("redrivenAtEpochMs"), "redrivenAtEpochMs", problems)
        count[i] = int64_or_none(extra.get("redriveCount"), "redriveCount", problems)
    if problems:
        return None
    return extra_json, redriven, count


def window_docs(w: RawWindow) -> list[dict] | None:
    """Every envelope of ``w`` parsed once with orjson, or ``None`` when a
    fast path cannot take the window: empty, a dangling id (no payload), an
    id with undecodable bytes (escaped on the slow path), an envelope that is
    not JSON or not an object.  Never raises for odd contents."""
    n = len(w.ids)
    raws = w.raws
    if n == 0 or len(raws) != n or set(map(type, raws)) != {bytes}:  # None: a dangling id
        return None
    try:
        docs = list(map(orjson.loads, raws))
        "".join(w.ids).encode("utf-8")
    except (orjson.JSONDecodeError, TypeError, UnicodeEncodeError):
        return None
    return docs if set(map(type, docs)) == {dict} else None


def window_columns(w: RawWindow, queue: str, layout: str, docs: list[dict] | None = None) -> ColumnBatch | None:
    """The export rows of every job of ``w`` as columns, or ``None`` when the
    window holds a value the fast path does not take (then build the rows
    with :func:`~jobctl.export.rows.record_row` from ``w.records()``).

    ``queue`` and ``layout`` are the layout's names; ``docs``:
    :func:`window_docs` of ``w`` when the caller parsed it (read only).
    Never raises for odd contents.
    """
    docs = window_docs(w) if docs is None else docs
    if docs is None:
        return None
    n, raws = len(w.ids), w.raws
    get = dict.get
    out: dict[str, list | Const] = {
        "queue": Const(utf8_text(queue)), "layout": Const(utf8_text(layout)), "shard": Const(utf8_text(w.shard)),
        "state": Const(w.state.value), "job_id": w.ids, "visibility_deadline": Const(None),
        "malformed": Const(False), "problems": Const(None), "raw_base64": Const(None), "raw": raws,
        "raw_bytes": list(map(len, raws)),
        "payload_sha1": [sha1(r).hexdigest() for r in raws],
    }
    for name, values in (("position", w.positions), ("score_ms", w.scores)):
        if values is None:
            out[name] = Const(None)
        elif len(values) != n or not ints_ok(values, I64_MIN, I64_MAX):
            return None
        else:
            out[name] = values
    for name, (key, kind) in ENVELOPE_COLUMNS.items():
        values = list(map(get, docs, repeat(key, n)))
        if kind == "string":
            if not set(map(type, values)) <= _STR_TYPES:
                return None
        elif not ints_ok(values, *((TS_MIN_MS, TS_MAX_MS) if kind == "timestamp" else (I64_MIN, I64_MAX))):
            return None
        out[name] = values
    for name in REQUIRED_COLUMNS:
        if None in out[name]:
            return None
    payloads = list(map(get, docs, repeat("payload", n)))
    out["payload_json"] = [None if p is None else json_text(p) for p in payloads]
    # one union of every key of the window first: a window without unknown keys is the common case
    if KNOWN_KEYS.issuperset(set().union(*docs)):
        out["extra_json"] = out["redriven_at"] = out["redrive_count"] = Const(None)
    else:
        extras = window_extras(docs)
        if extras is None:
            return None
        out["extra_json"], out["redriven_at"], out["redrive_count"] = extras
    return ColumnBatch(n, [out[name] for name in NAMES], raw_is_bytes=True)

