"""DLQ export: every matching job of a queue to part files plus a manifest.

``jobctl export`` (seed 000 section 22, "export: send to audit/object
storage") walks one or more states of a queue in bounded batches
(:meth:`jobctl.layouts.base.Layout.iter_batches`, or unparsed windows
where the layout has them: :mod:`.columns`, :mod:`.arrow_columns`) and writes typed rows
(:mod:`.schema`) to part files in one of three formats (:mod:`.writer`),
with a ``_manifest.json`` (:mod:`.manifest`) that records the selector, the
counts per state, the schema version, the snapshot time, the source server
(without secrets) and a SHA-256 per part.  Parts are written under a hidden
temporary name and renamed when complete; the manifest records progress, so
an interrupted export continues when rerun with the same arguments
(:mod:`.exporter`).

The export is also the fence of "export, then purge" and the input of
``jobctl analyze`` (:mod:`jobctl.analyze`); :mod:`.fence` turns a manifest
or a redrive plan into the ``{job id: payload SHA1}`` fence of an
:class:`~jobctl.ops.spec.OpSpec`.

pyarrow is imported only by the Parquet writer, its column path
(:mod:`.arrow_columns`) and the reader, each through :mod:`.arrow_memory`,
which chooses Arrow's allocators as pyarrow loads.
"""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "FORMATS"]

#: Version of the row schema and manifest layout (:mod:`.schema`).
SCHEMA_VERSION = 1

#: Output formats, default first.
FORMATS = ("parquet", "jsonl", "csv")
