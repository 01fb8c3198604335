"""JSON Lines parts: one JSON object per line, keys in column order.

Nulls are ``null``; timestamps ISO-8601 UTC text with milliseconds
(``2026-11-21T10:04:05.123Z``), which Spark's JSON reader parses into
``TimestampType`` with the explicit schema of :mod:`jobctl.analyze`.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from .columns import ColumnBatch
from .rows import iso_ms
from .schema import NAMES, TIMESTAMP_COLUMNS
from .writer import PartWriter

__all__ = ["JsonlWriter", "encode_row"]

_NEWLINE = orjson.OPT_APPEND_NEWLINE


def encode_row(row: tuple) -> bytes:
    """One JSON line (with its newline) for ``row``."""
    values = list(row)
    for i in TIMESTAMP_COLUMNS:
        if values[i] is not None:
            values[i] = iso_ms(values[i])
    return orjson.dumps(dict(zip(NAMES, values))) + b"\n"


class JsonlWriter(PartWriter):
    """Writes rows as JSON lines (buffered; constant memory)."""

    def __init__(self, directory: Path, final: str) -> None:
        super().__init__(directory, final)
        self._f = open(self.temp_path, "wb", buffering=1 << 20)

    def _write(self, rows: list[tuple]) -> None:
        self._f.write(b"".join(encode_row(r) for r in rows))

    def _write_batch(self, batch: ColumnBatch) -> None:
        """The same lines as :func:`encode_row`, times converted column by column."""
        cols = [batch.column(i) for i in range(len(NAMES))]
        for i in TIMESTAMP_COLUMNS:
            cols[i] = [None if v is None else iso_ms(v) for v in cols[i]]
        dumps, names = orjson.dumps, NAMES
        self._f.write(b"".join([dumps(dict(zip(names, row)), option=_NEWLINE) for row in zip(*cols)]))

    def _close(self) -> None:
        if not self._f.closed:
            self._f.close()
