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

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .columns import ColumnBatch, Const, rows_columns
from .schema import COLUMNS, arrow_schema
from .writer import PartWriter

__all__ = ["ParquetPartWriter", "rows_to_table", "batch_to_arrow", "DEFAULT_ROW_GROUP_ROWS"]

#: Rows per Parquet row group.
DEFAULT_ROW_GROUP_ROWS = 20_000
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


def _array(kind: str, typ: pa.DataType, col, n: int) -> pa.Array:
    if isinstance(col, Const):
        if col.value is None:
            return pa.nulls(n, type=typ)
        col = [col.value] * n
    if kind == "timestamp":
        return pc.multiply(pa.array(col, type=pa.int64()), 1000).cast(typ)
    return pa.array(col, type=typ)


def batch_to_arrow(batch: ColumnBatch) -> pa.RecordBatch:
    """A ``pyarrow.RecordBatch`` of ``batch`` with the export schema (a
    bytes ``raw`` column is taken as the UTF-8 text it is)."""
    schema = _schema()
    arrays = [_array(c.kind, f.type, col, batch.n) for c, f, col in zip(COLUMNS, schema, batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_table(rows: list[tuple]) -> pa.Table:
    """A ``pyarrow.Table`` of ``rows`` with the export schema."""
    return pa.Table.from_batches([batch_to_arrow(rows_columns(rows))], schema=_schema())


class ParquetPartWriter(PartWriter):
    """Writes rows to one Parquet file, a row group per ``row_group_rows``."""

    def __init__(self, directory: Path, final: str, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        super().__init__(directory, final)
        self.row_group_rows = row_group_rows
        self._buffer: list[pa.RecordBatch] = []
        self._buffered = 0
        self._pq = pq.ParquetWriter(str(self.temp_path), _schema(), compression="snappy",
                                    use_dictionary=list(DICTIONARY_COLUMNS),
                                    coerce_timestamps="us", allow_truncated_timestamps=False)

    def _flush(self) -> None:
        if self._buffer:
            table = pa.Table.from_batches(self._buffer, schema=_schema())
            self._buffer, self._buffered = [], 0
            self._pq.write_table(table, row_group_size=table.num_rows)

    def _write_batch(self, batch: ColumnBatch) -> None:
        self._buffer.append(batch_to_arrow(batch))
        self._buffered += batch.n
        if self._buffered >= self.row_group_rows:
            self._flush()

    def _write(self, rows: list[tuple]) -> None:
        self._write_batch(rows_columns(rows))

    def _close(self) -> None:
        if self._pq is not None:
            self._flush()
            self._pq.close()
            self._pq = None
