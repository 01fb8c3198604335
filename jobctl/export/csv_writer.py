"""CSV parts: RFC 4180 (comma, double-quote quoting and escaping, ``\\n``
line ends), a header row with the column names.

Nulls are empty fields (CSV cannot tell an empty string from a missing
value); booleans ``true``/``false``; timestamps ISO-8601 UTC text with
milliseconds.  A value may hold a line break inside quotes: Spark reads the
parts with ``multiLine=true`` and ``escape='"'``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .columns import ColumnBatch
from .rows import iso_ms
from .schema import COLUMNS, NAMES
from .writer import PartWriter

__all__ = ["CsvWriter", "encode_values"]

_BOOL_COLUMNS = tuple(i for i, c in enumerate(COLUMNS) if c.kind == "bool")
_TS_COLUMNS = tuple(i for i, c in enumerate(COLUMNS) if c.kind == "timestamp")


def encode_values(row: tuple) -> list:
    """The CSV fields of ``row`` (before quoting)."""
    values = ["" if v is None else v for v in row]
    for i in _TS_COLUMNS:
        if row[i] is not None:
            values[i] = iso_ms(row[i])
    for i in _BOOL_COLUMNS:
        if row[i] is not None:
            values[i] = "true" if row[i] else "false"
    return values


class CsvWriter(PartWriter):
    """Writes rows as CSV with a header (buffered; constant memory)."""

    def __init__(self, directory: Path, final: str) -> None:
        super().__init__(directory, final)
        self._f = open(self.temp_path, "w", encoding="utf-8", newline="", buffering=1 << 20)
        self._csv = csv.writer(self._f, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        self._csv.writerow(NAMES)

    def _write(self, rows: list[tuple]) -> None:
        self._csv.writerows(encode_values(r) for r in rows)

    def _write_batch(self, batch: ColumnBatch) -> None:
        """The same fields as :func:`encode_values`, converted column by column."""
        cols = []
        for i in range(len(NAMES)):
            col = batch.column(i)
            if i in _TS_COLUMNS:
                col = ["" if v is None else iso_ms(v) for v in col]
            elif i in _BOOL_COLUMNS:
                col = ["" if v is None else "true" if v else "false" for v in col]
            elif None in col:
                col = ["" if v is None else v for v in col]
            cols.append(col)
        self._csv.writerows(zip(*cols))

    def _close(self) -> None:
        if not self._f.closed:
            self._f.close()
