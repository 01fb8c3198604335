"""Parquet parts through pyarrow, with the explicit schema of
:func:`jobctl.export.schema.arrow_schema` (timestamps ``timestamp[us, UTC]``,
which Spark reads as ``TimestampType``), Snappy compression.

Rows are buffered up to ``row_group_rows`` and written as one row group, so
memory stays bounded by one row group whatever the part's size.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import COLUMNS, arrow_schema
from .writer import PartWriter

__all__ = ["ParquetPartWriter", "rows_to_table", "DEFAULT_ROW_GROUP_ROWS"]

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


def rows_to_table(rows: list[tuple]) -> pa.Table:
    """A ``pyarrow.Table`` of ``rows`` with the export schema."""
    schema = _schema()
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    arrays = []
    for col, field, values in zip(COLUMNS, schema, columns):
        if col.kind == "timestamp":
            ms = pa.array(values, type=pa.int64())
            arrays.append(pc.multiply(ms, 1000).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


class ParquetPartWriter(PartWriter):
    """Writes rows to one Parquet file, a row group per ``row_group_rows``."""

    def __init__(self, directory: Path, final: str, row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        super().__init__(directory, final)
        self.row_group_rows = row_group_rows
        self._buffer: list[tuple] = []
        self._pq = pq.ParquetWriter(str(self.temp_path), _schema(), compression="snappy",
                                    use_dictionary=list(DICTIONARY_COLUMNS),
                                    coerce_timestamps="us", allow_truncated_timestamps=False)

    def _flush(self) -> None:
        if self._buffer:
            self._pq.write_table(rows_to_table(self._buffer), row_group_size=len(self._buffer))
            self._buffer = []

    def _write(self, rows: list[tuple]) -> None:
        self._buffer.extend(rows)
        if len(self._buffer) >= self.row_group_rows:
            self._flush()

    def _close(self) -> None:
        if self._pq is not None:
            self._flush()
            self._pq.close()
            self._pq = None
