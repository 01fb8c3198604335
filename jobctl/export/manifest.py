"""``_manifest.json``: what an export directory holds, and how far it got.

Its name starts with ``_`` so that dataset readers (Spark, pandas, pyarrow,
DuckDB) skip it and the directory reads whole as a dataset of its parts.
Exports written before are read under their old name, ``manifest.json``
(:data:`LEGACY_MANIFEST_NAME`); saving a resumed one renames it.

Shape (schema version 1)::

    {
      "kind": "jobctl-export", "schema_version": 1, "jobctl_version": "0.1.0",
      "selector": {"queue": "email", "layout": "reliable-list", "states": ["dead"],
                   "filter": "", "format": "parquet"},
      "source": {"server": "redis://user:***@host:6379/0", "shards": ["email:00", ...]},
      "snapshot_ms": 1795000000000, "snapshot_at": "2026-11-21T10:04:05.123Z",
      "started_ms": ..., "finished_ms": ... | null,
      "complete": true,
      "rows": 950, "counts": {"dead": 950}, "malformed": 3,
      "scanned": {"dead": 950},
      "parts": [{"file": "part-00000.parquet", "rows": 950, "bytes": 123456,
                 "sha256": "<hex>", "counts": {"dead": 950}, "malformed": 3}],
      "progress": {"batches": 1, "last_id": "job_..."},
      "columns": [{"name": "queue", "type": "string", "doc": "..."}, ...]
    }

``snapshot_ms`` is the instant the filter was evaluated at (epoch ms); it is
kept across a resumed run.  ``counts`` are rows exported per state,
``scanned`` jobs examined per state.  ``progress.batches`` counts the source
batches (:meth:`~jobctl.layouts.base.Layout.iter_batches`) fully covered by
the committed parts; ``last_id`` is the last job id of the last of them (a
resumed run checks it to detect a source that shifted).  The server is shown
as :attr:`jobctl.connection.Target.display`: never a password.

The file is replaced atomically (temporary name, fsync, rename).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import DataError
from . import SCHEMA_VERSION
from .rows import iso_ms
from .writer import fsync_dir, sha256_file

__all__ = ["Manifest", "PartInfo", "MANIFEST_NAME", "LEGACY_MANIFEST_NAME", "MANIFEST_NAMES", "load_manifest",
           "find_manifest", "KIND"]

MANIFEST_NAME = "_manifest.json"
#: the name of exports before ``_manifest.json``: still read
LEGACY_MANIFEST_NAME = "manifest.json"
MANIFEST_NAMES = (MANIFEST_NAME, LEGACY_MANIFEST_NAME)
KIND = "jobctl-export"


@dataclass
class PartInfo:
    """One committed part: file name (relative to the export directory),
    rows, size in bytes, SHA-256, rows per state and malformed rows."""

    file: str
    rows: int
    bytes: int
    sha256: str
    counts: dict[str, int] = field(default_factory=dict)
    malformed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256,
                "counts": dict(self.counts), "malformed": self.malformed}


@dataclass
class Manifest:
    """An export's manifest (see the module docstring for the JSON shape)."""

    selector: dict[str, Any]
    source: dict[str, Any]
    snapshot_ms: int
    started_ms: int
    finished_ms: int | None = None
    complete: bool = False
    scanned: dict[str, int] = field(default_factory=dict)
    parts: list[PartInfo] = field(default_factory=list)
    progress: dict[str, Any] = field(default_factory=lambda: {"batches": 0, "last_id": None})
    schema_version: int = SCHEMA_VERSION
    jobctl_version: str = ""

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.parts)

    @property
    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in self.selector.get("states", [])}
        for p in self.parts:
            for s, n in p.counts.items():
                out[s] = out.get(s, 0) + n
        return out

    @property
    def malformed(self) -> int:
        return sum(p.malformed for p in self.parts)

    @property
    def queue(self) -> str:
        return self.selector["queue"]

    @property
    def format(self) -> str:
        return self.selector["format"]

    def to_json(self) -> dict[str, Any]:
        from .schema import describe

        return {
            "kind": KIND, "schema_version": self.schema_version, "jobctl_version": self.jobctl_version,
            "selector": self.selector, "source": self.source,
            "snapshot_ms": self.snapshot_ms, "snapshot_at": iso_ms(self.snapshot_ms),
            "started_ms": self.started_ms, "finished_ms": self.finished_ms,
            "complete": self.complete, "rows": self.rows, "counts": self.counts,
            "malformed": self.malformed, "scanned": dict(self.scanned),
            "parts": [p.to_json() for p in self.parts], "progress": dict(self.progress),
            "columns": describe(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Manifest":
        """Raises :class:`DataError` for a document that is not a jobctl manifest."""
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            raise DataError("not a jobctl export manifest (kind is not 'jobctl-export')")
        version = doc.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise DataError(f"export schema version {version!r} is newer than this jobctl reads "
                            f"({SCHEMA_VERSION}); upgrade jobctl")
        try:
            return cls(
                selector=dict(doc["selector"]), source=dict(doc["source"]),
                snapshot_ms=int(doc["snapshot_ms"]), started_ms=int(doc["started_ms"]),
                finished_ms=doc.get("finished_ms"), complete=bool(doc["complete"]),
                scanned=dict(doc.get("scanned") or {}),
                parts=[PartInfo(file=p["file"], rows=int(p["rows"]), bytes=int(p["bytes"]),
                                sha256=p["sha256"], counts=dict(p.get("counts") or {}),
                                malformed=int(p.get("malformed") or 0)) for p in doc["parts"]],
                progress=dict(doc.get("progress") or {"batches": 0, "last_id": None}),
                schema_version=version, jobctl_version=str(doc.get("jobctl_version") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed export manifest: {exc.__class__.__name__}: {exc}") from None

    # -- files ---------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write ``_manifest.json`` atomically (temporary file, fsync, rename);
        a ``manifest.json`` of an older jobctl is then removed."""
        tmp = directory / f".{MANIFEST_NAME}.tmp"
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / MANIFEST_NAME)
        (directory / LEGACY_MANIFEST_NAME).unlink(missing_ok=True)
        fsync_dir(directory)

    def verify(self, directory: Path) -> list[str]:
        """Problems with the part files (missing, size or SHA-256 mismatch); ``[]`` when sound."""
        problems = []
        for p in self.parts:
            path = directory / p.file
            if not path.is_file():
                problems.append(f"{p.file}: missing")
                continue
            if path.stat().st_size != p.bytes:
                problems.append(f"{p.file}: {path.stat().st_size} bytes, manifest says {p.bytes}")
                continue
            if sha256_file(path) != p.sha256:
                problems.append(f"{p.file}: SHA-256 differs from the manifest")
        return problems


def find_manifest(directory: str | Path) -> Manifest | None:
    """The manifest in ``directory`` (``_manifest.json``, else the older
    ``manifest.json``), or ``None`` when there is none.

    Raises :class:`DataError` when the file exists but is not a readable
    jobctl manifest.
    """
    path = next((Path(directory) / n for n in MANIFEST_NAMES if (Path(directory) / n).is_file()), None)
    if path is None:
        return None
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({str(exc).splitlines()[0]})") from None
    return Manifest.from_json(doc)


def load_manifest(directory: str | Path, *, verify: bool = True, complete: bool = True) -> Manifest:
    """The manifest of the export in ``directory``.

    ``complete=True`` refuses an interrupted export; ``verify=True`` checks
    every part's size and SHA-256.  Raises :class:`~jobctl.errors.NotFound`
    when there is no manifest and :class:`DataError` for an incomplete
    export or a part that does not match.
    """
    from ..errors import NotFound

    m = find_manifest(directory)
    if m is None:
        raise NotFound(f"{directory}: no {MANIFEST_NAME} (not a jobctl export directory)")
    if complete and not m.complete:
        raise DataError(f"{directory}: the export is incomplete (interrupted?): rerun the same "
                        "`jobctl export` command to finish it")
    if verify:
        problems = m.verify(Path(directory))
        if problems:
            raise DataError(f"{directory}: export parts do not match the manifest: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return m
