"""Read an export's rows back, part by part (constant memory per part batch).

Rows come back as tuples in :data:`~jobctl.export.schema.COLUMNS` order
(or only the ``columns`` asked for), with the values :func:`record_row`
produced: timestamps as epoch milliseconds, ints, bools, text.  Only the
parts the manifest lists are read; the caller verifies checksums first
(:func:`jobctl.export.manifest.load_manifest` does).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from ..errors import DataError
from .manifest import Manifest
from .rows import parse_iso_ms
from .schema import KINDS, NAMES

__all__ = ["iter_rows"]


def iter_rows(directory: str | Path, manifest: Manifest,
              columns: tuple[str, ...] | None = None) -> Iterator[tuple]:
    """Every row of the export in ``directory``, part after part.

    Raises :class:`DataError` for a part that does not parse.
    """
    cols = tuple(columns) if columns else NAMES
    unknown = [c for c in cols if c not in KINDS]
    if unknown:
        raise ValueError(f"unknown export column {unknown[0]!r}")
    reader = {"parquet": _parquet_rows, "jsonl": _jsonl_rows, "csv": _csv_rows}[manifest.format]
    for part in manifest.parts:
        path = Path(directory) / part.file
        try:
            yield from reader(path, cols)
        except (ValueError, KeyError, orjson.JSONDecodeError, csv.Error) as exc:
            raise DataError(f"{path}: unreadable export part: {exc.__class__.__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


def _parquet_rows(path: Path, cols: tuple[str, ...]) -> Iterator[tuple]:
    from .arrow_memory import pa, pc, pq

    pf = pq.ParquetFile(str(path))
    for rb in pf.iter_batches(batch_size=10_000, columns=list(cols)):
        lists = []
        for name in cols:
            arr = rb.column(name)
            if KINDS[name] == "timestamp":
                arr = pc.divide(arr.cast(pa.int64()), 1000)
            lists.append(arr.to_pylist())
        yield from zip(*lists)


def _convert(name: str, value):
    if value is None:
        return None
    kind = KINDS[name]
    if kind == "timestamp":
        return parse_iso_ms(value)
    return value


def _jsonl_rows(path: Path, cols: tuple[str, ...]) -> Iterator[tuple]:
    with open(path, "rb") as f:
        for line in f:
            doc = orjson.loads(line)
            yield tuple(_convert(c, doc[c]) for c in cols)


def _csv_value(name: str, text: str):
    if text == "":
        return None
    kind = KINDS[name]
    if kind == "int64":
        return int(text)
    if kind == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"column {name}: {text!r} is not true/false")
        return text == "true"
    if kind == "timestamp":
        return parse_iso_ms(text)
    return text


def _csv_rows(path: Path, cols: tuple[str, ...]) -> Iterator[tuple]:
    csv.field_size_limit(sys.maxsize)
    with open(path, encoding="utf-8", newline="") as f:
        rd = csv.reader(f)
        header = next(rd, None)
        if header is None:
            return
        idx = [header.index(c) for c in cols]
        for rec in rd:
            yield tuple(_csv_value(c, rec[i]) for c, i in zip(cols, idx))
