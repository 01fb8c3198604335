"""The part files an export has open: one, or one per partition.

An export partitioned by ``day`` or ``type`` writes each row into a
Hive-style directory named for the partition, ``day=2026-11-28/`` (the
UTC day the job died, ``last_attempt_at``, else the day it was created)
or ``type=webhook.deliver/`` (``job_type``, percent-escaped); a row
without the value goes to ``day=unknown`` or ``type=unknown`` (Hive's
null directory breaks pyarrow's and pandas's reading of the whole
directory).  The partition names are not
columns of the export schema, so readers that discover partitions add a
column of their own.  Parts of every partition are committed together,
so the manifest's checkpoint is the same as an unpartitioned export's.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from .columns import ColumnBatch, rows_columns
from .manifest import Manifest, PartInfo
from .schema import column_index
from .writer import PartWriter, open_writer

__all__ = ["PARTITIONS", "NULL_PARTITION", "OpenParts"]

#: ``--partition-by`` values
PARTITIONS = ("day", "type")
#: the directory value of a row without one
NULL_PARTITION = "unknown"
_DIED, _CREATED, _TYPE = column_index("last_attempt_at"), column_index("created_at"), column_index("job_type")


def partition_of(by: str, row: tuple) -> str:
    """The directory name of ``row``'s partition (``day=...`` or ``type=...``)."""
    if by == "day":
        ms = row[_DIED] if row[_DIED] is not None else row[_CREATED]
        value = (dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).date().isoformat()
                 if isinstance(ms, int) else None)
    else:
        value = quote(row[_TYPE], safe="") if isinstance(row[_TYPE], str) and row[_TYPE] else None
    return f"{by}={value or NULL_PARTITION}"


class _Open:
    """One open part: its writer, rows per state and malformed rows."""

    def __init__(self, writer: PartWriter) -> None:
        self.writer, self.counts, self.malformed = writer, Counter(), 0


class OpenParts:
    """The parts being written into ``out``: one writer, or (``by``: one of
    :data:`PARTITIONS`) one per partition directory; part numbers go on
    from the manifest's committed parts."""

    def __init__(self, fmt: str, out: Path, by: str | None, writer_options: dict) -> None:
        self.fmt, self.out, self.by, self.writer_options = fmt, out, by, writer_options
        self.open: dict[str, _Open] = {}

    @property
    def rows(self) -> int:
        """Rows written to the open parts."""
        return sum(p.writer.rows for p in self.open.values())

    def write(self, m: Manifest, state: str, cols: ColumnBatch) -> None:
        """Append ``cols`` (rows of ``state``) to its part(s)."""
        if self.by is None:
            self._write(m, "", state, cols)
            return
        groups: dict[str, list[tuple]] = {}
        for row in cols.rows():
            groups.setdefault(partition_of(self.by, row), []).append(row)
        for name, rows in groups.items():
            self._write(m, name, state, rows_columns(rows))

    def _write(self, m: Manifest, name: str, state: str, cols: ColumnBatch) -> None:
        part = self.open.get(name)
        if part is None:
            directory = self.out / name if name else self.out
            directory.mkdir(exist_ok=True)
            part = _Open(open_writer(self.fmt, directory, len(m.parts) + len(self.open), **self.writer_options))
            self.open[name] = part
        part.writer.write_batch(cols)
        part.counts[state] += cols.n
        part.malformed += cols.malformed

    def commit(self, m: Manifest) -> None:
        """Make every open part final and list it in ``m`` (file relative to ``out``)."""
        for name, part in sorted(self.open.items()):
            size, digest = part.writer.commit()
            file = f"{name}/{part.writer.final}" if name else part.writer.final
            m.parts.append(PartInfo(file=file, rows=part.writer.rows, bytes=size, sha256=digest,
                                    counts=dict(part.counts), malformed=part.malformed))
        self.open = {}

    def abort(self) -> None:
        """Delete every open part's temporary file."""
        for part in self.open.values():
            part.writer.abort()
        self.open = {}
