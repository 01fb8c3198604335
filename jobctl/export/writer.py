"""Part writers: the interface, the file-name rules and the factory.

A part is written under a hidden temporary name (``.part-00000.parquet.tmp``:
Spark and Hadoop skip names starting with a dot) and renamed to its final
name (``part-00000.parquet``) only when complete, after an ``fsync``.  One
writer per format: :mod:`.jsonl_writer`, :mod:`.csv_writer`,
:mod:`.parquet_writer`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from . import FORMATS

if TYPE_CHECKING:
    from .columns import ColumnBatch

__all__ = ["PartWriter", "open_writer", "part_name", "temp_name", "sha256_file", "fsync_dir",
           "EXTENSIONS"]

#: format -> file extension of its parts
EXTENSIONS = {"parquet": "parquet", "jsonl": "jsonl", "csv": "csv"}


def part_name(index: int, fmt: str) -> str:
    """``part-00003.parquet``: the final name of part ``index``."""
    return f"part-{index:05d}.{EXTENSIONS[fmt]}"


def temp_name(final: str) -> str:
    """The hidden name a part is written under before its rename."""
    return f".{final}.tmp"


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort on odd filesystems)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class PartWriter:
    """Writes rows (tuples in :data:`~jobctl.export.schema.COLUMNS` order) to
    one temporary file; :meth:`commit` makes it the final part.

    Subclasses implement :meth:`_write` and :meth:`_close`.
    """

    def __init__(self, directory: Path, final: str) -> None:
        self.directory = directory
        self.final = final
        self.temp_path = directory / temp_name(final)
        self.rows = 0

    def write(self, rows: list[tuple]) -> None:
        """Append ``rows``."""
        if rows:
            self._write(rows)
            self.rows += len(rows)

    def write_batch(self, batch: "ColumnBatch") -> None:
        """Append the rows of ``batch`` (:class:`~jobctl.export.columns.ColumnBatch`)."""
        if batch.n:
            self._write_batch(batch)
            self.rows += batch.n

    def commit(self) -> tuple[int, str]:
        """Close, fsync and rename to the final name; returns ``(bytes, sha256)``."""
        self._close()
        with open(self.temp_path, "rb+") as f:
            os.fsync(f.fileno())
        size = self.temp_path.stat().st_size
        digest = self._written_sha256(size) or sha256_file(self.temp_path)
        os.replace(self.temp_path, self.directory / self.final)
        fsync_dir(self.directory)
        return size, digest

    def abort(self) -> None:
        """Close and delete the temporary file (an interrupted part)."""
        try:
            self._close()
        except Exception:  # noqa: BLE001 - the file is deleted anyway
            pass
        try:
            self.temp_path.unlink()
        except FileNotFoundError:
            pass

    # -- subclasses -------------------------------------------------------
    def _write(self, rows: list[tuple]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _write_batch(self, batch: "ColumnBatch") -> None:
        """Text formats: the batch's rows (Parquet overrides it: columns)."""
        self._write(list(batch.rows()))

    def _written_sha256(self, size: int) -> str | None:
        """Hex SHA-256 of the closed file's ``size`` bytes when the writer
        hashed them as it wrote them, else ``None`` (the file is read again)."""
        return None


def open_writer(fmt: str, directory: Path, index: int, **options) -> PartWriter:
    """A writer for part ``index`` in ``fmt`` (one of :data:`~jobctl.export.FORMATS`).

    Raises :class:`~jobctl.errors.UsageError` for an unknown format, or when
    Parquet is asked for and pyarrow is not installed.
    """
    final = part_name(index, fmt)
    if fmt == "jsonl":
        from .jsonl_writer import JsonlWriter

        return JsonlWriter(directory, final)
    if fmt == "csv":
        from .csv_writer import CsvWriter

        return CsvWriter(directory, final)
    if fmt == "parquet":
        try:
            from .parquet_writer import ParquetPartWriter
        except ImportError:
            raise UsageError("--format parquet needs pyarrow (pip install pyarrow), "
                             "or use --format jsonl") from None
        return ParquetPartWriter(directory, final, **options)
    raise UsageError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
