"""Parquet parts through pyarrow, with the explicit schema of
:func:`jobctl.export.schema.arrow_schema` (timestamps ``timestamp[us, UTC]``,
which Spark reads as ``TimestampType``), Snappy compression.

Each written :class:`~jobctl.export.columns.ColumnBatch` becomes an Arrow
record batch at once (column by column, no row tuples); record batches are
buffered up to ``row_group_rows`` rows and written as one row group, so
memory stays bounded by one row group (in Arrow's compact buffers) whatever
the part's size.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import accumulate
from pathlib import Path

from .arrow_memory import POOL as _POOL
from .arrow_memory import pa, pq
from .columns import ColumnBatch, Const, rows_columns
from .schema import COLUMNS, NAMES, arrow_schema
from .writer import PartWriter

__all__ = ["ParquetPartWriter", "rows_to_table", "batch_to_arrow", "DEFAULT_ROW_GROUP_ROWS"]

#: Rows per Parquet row group (~8 MiB of envelopes: one being encoded while
#: the next fills, memory stays flat).
DEFAULT_ROW_GROUP_ROWS = 10_000
#: Low-cardinality columns worth dictionary encoding (ids, raw values and
#: hashes are not: trying costs time and saves nothing).
DICTIONARY_COLUMNS = ("queue", "layout", "shard", "state", "job_type", "tenant_id", "last_error_code",
                      "last_error_message", "problems", "payload_ref")

_SCHEMA = None


def _schema() -> pa.Schema:
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = arrow_schema()
    return _SCHEMA


_TS_MS = pa.timestamp("ms", tz="UTC")
_RAW = NAMES.index("raw")
_I32_MAX = (1 << 31) - 1


def _array(kind: str, typ: pa.DataType, col, n: int) -> pa.Array:
    if isinstance(col, Const):
        if col.value is None:
            return pa.nulls(n, type=typ, memory_pool=_POOL)
        return pa.repeat(pa.scalar(col.value, type=typ, memory_pool=_POOL), n, memory_pool=_POOL)
    if kind == "timestamp":  # epoch ms in, microseconds stored
        return pa.array(col, type=_TS_MS, memory_pool=_POOL).cast(typ, memory_pool=_POOL)
    return pa.array(col, type=typ, memory_pool=_POOL)


def _utf8_array(values: list[bytes]) -> pa.Array:
    """A string array of byte strings known to be UTF-8: one copy, no per-value conversion."""
    offsets = array("i", accumulate(map(len, values), initial=0))
    if offsets[-1] > _I32_MAX:  # past 2 GiB in one window: let pyarrow split it
        return pa.array(values, type=pa.string(), memory_pool=_POOL)
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(values)))


def batch_to_arrow(batch: ColumnBatch) -> pa.RecordBatch:
    """A ``pyarrow.RecordBatch`` of ``batch`` with the export schema (a
    bytes ``raw`` column is taken as the UTF-8 text it is)."""
    schema = _schema()
    raw_bytes = batch.raw_is_bytes and not isinstance(batch.columns[_RAW], Const)
    arrays = [_utf8_array(col) if i == _RAW and raw_bytes else _array(c.kind, f.type, col, batch.n)
              for i, (c, f, col) in enumerate(zip(COLUMNS, schema, batch.columns))]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_table(rows: list[tuple]) -> pa.Table:
    """A ``pyarrow.Table`` of ``rows`` with the export schema."""
    return pa.Table.from_batches([batch_to_arrow(rows_columns(rows))], schema=_schema())


class _Hasher:
    """SHA-256 of a file that is only ever appended to, kept up as it grows:
    :meth:`catch_up` hashes the bytes written since the last call (read back
    from the page cache into one reused buffer).  The part's checksum then
    comes with the writing, in the encoding thread, instead of a second read
    of the whole file at commit."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._buffer = bytearray(1 << 18)
        self.sha256 = hashlib.sha256()
        self.hashed = 0

    def catch_up(self) -> None:
        view = memoryview(self._buffer)
        while k := os.preadv(self._fd, [view], self.hashed):
            self.sha256.update(view[:k])
            self.hashed += k

    def close(self) -> None:
        os.close(self._fd)


class ParquetPartWriter(PartWriter):
    """Writes rows to one Parquet file, a row group per ``row_group_rows``.

    Row groups are encoded and compressed in a background thread (pyarrow
    releases the GIL there) while the next windows are read and parsed; at
    most one row group is in flight, so memory stays bounded by two row
    groups.  An error of the background write is raised by the next write or
    by :meth:`commit`.
    """

    def __init__(self, directory: Path, final: str, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        super().__init__(directory, final)
        self.row_group_rows = row_group_rows
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0
        self._pending: Future | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobctl-parquet")
        self._pq = pq.ParquetWriter(str(self.temp_path), _schema(), compression="snappy",
                                    use_dictionary=list(DICTIONARY_COLUMNS),
                                    coerce_timestamps="us", allow_truncated_timestamps=False,
                                    memory_pool=_POOL)
        try:
            self._hasher = _Hasher(self.temp_path)
        except BaseException:
            self._pq.close()
            raise

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _flush(self) -> None:
        if self._buffer:
            table = pa.Table.from_batches(self._buffer, schema=_schema())
            self._buffer, self._buffered = [], 0
            self._wait()
            self._pending = self._pool.submit(self._write_group, table)

    def _write_group(self, table: pa.Table) -> None:
        """One row group (in the encoding thread), then its bytes hashed."""
        self._pq.write_table(table, row_group_size=table.num_rows)
        self._hasher.catch_up()

    def _write_batch(self, batch: ColumnBatch) -> None:
        self._buffer.append(batch.arrow if batch.arrow is not None else batch_to_arrow(batch))
        self._buffered += batch.n
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _write(self, rows: list[tuple]) -> None:
        self._write_batch(rows_columns(rows))

    def abort(self) -> None:
        """Drop the buffered rows, wait for the row group in flight, close
        and delete the temporary file."""
        self._buffer, self._buffered = [], 0
        super().abort()

    def _close(self) -> None:
        if self._pq is None:
            return
        try:
            self._flush()
            self._wait()
        finally:
            self._pool.shutdown(wait=True)
            try:
                self._pq.close()
                self._hasher.catch_up()  # the footer
            finally:
                self._hasher.close()
                self._pq = None

    def _written_sha256(self, size: int) -> str | None:
        return self._hasher.sha256.hexdigest() if self._hasher.hashed == size else None
