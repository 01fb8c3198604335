"""Run an export: walk, filter, write parts, keep the manifest current.

:func:`run_export` is headless (the CLI and the purge fence both call it).
The walk is :func:`jobctl.export.source.walk`; an unfiltered export of a
layout with raw windows builds columns straight from the stored values
(:func:`jobctl.export.columns.window_columns`), anything else row by row
with :func:`jobctl.export.rows.record_row` (same rows); parts come from
:func:`jobctl.export.writer.open_writer`.

Atomicity and resumption:

* a part is written under a hidden temporary name and renamed when
  complete; the manifest (itself replaced atomically) then records the part
  and ``progress.batches``, the number of source batches its parts cover;
* parts close only at batch boundaries; when no rows are pending the
  manifest also records progress every ``checkpoint_batches`` batches;
* rerun with the same selector (queue, layout, states, filter, format) and
  server, an incomplete export skips the batches already covered (it reads
  them again, without writing) and continues with the next part number.
  Before continuing it checks that the last job id of the last covered batch
  is what the manifest recorded: if the source shifted (jobs left the walked
  end of the list), it starts over and says so;
* a complete export with the same selector is left as it is.

Lists are walked from their tail with negative indexes (reliable-list), so
jobs that arrive at the head during the walk do not shift it; a job that
arrives after the walk passed its place is simply not in this snapshot.  The
dead list only grows at its head (workers LPUSH), so a DLQ export is exact
unless an operator moves dead jobs meanwhile.  States that workers consume
from the walked end while the export runs (ready, processing) are exported
as seen, batch by batch: a job may be missed or seen twice there.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import UsageError
from ..escape import json_safe
from ..filter import MATCH_ALL, Filter
from ..model import State
from . import FORMATS
from .manifest import Manifest, find_manifest
from .columns import ColumnBatch, rows_columns, window_columns
from .rows import record_row
from .source import selects, walk
from .window_runs import window_runs
from .partitions import PARTITIONS, OpenParts

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["ExportResult", "run_export", "selector_of", "DEFAULT_PART_ROWS", "DEFAULT_BATCH"]

#: Rows per part file (a part may exceed it by less than one batch).
DEFAULT_PART_ROWS = 500_000
#: Jobs per source batch (one range read + one MGET).
DEFAULT_BATCH = 1000


@dataclass
class ExportResult:
    """What :func:`run_export` did.

    ``manifest`` is the final (or, when interrupted, last saved) manifest;
    ``resumed`` is True when an interrupted export was continued;
    ``already_complete`` when the directory held this export, complete, and
    nothing was read; ``restarted`` says why a resume started over (else
    ``None``); ``skipped_batches`` counts source batches re-read without
    writing on resume.
    """

    manifest: Manifest
    directory: Path
    resumed: bool = False
    already_complete: bool = False
    restarted: str | None = None
    skipped_batches: int = 0

    def to_json(self) -> dict:
        m = self.manifest
        return {"directory": str(self.directory), "queue": m.queue, "format": m.format,
                "complete": m.complete, "rows": m.rows, "counts": m.counts, "malformed": m.malformed,
                "scanned": m.scanned, "parts": len(m.parts), "snapshot_ms": m.snapshot_ms,
                "resumed": self.resumed, "already_complete": self.already_complete,
                "restarted": self.restarted}


def selector_of(layout: "Layout", states: list[State], flt: Filter, fmt: str, partition_by: str | None = None
                ) -> dict:
    """The selector recorded in (and compared against) the manifest."""
    sel = {"queue": layout.queue_name, "layout": layout.name, "states": [s.value for s in states],
           "filter": flt.text, "format": fmt}
    return {**sel, "partition_by": partition_by} if partition_by else sel


def _source_of(layout: "Layout", server: str | None) -> dict:
    shards = layout.shard_tags()
    return {"server": server, "queue": layout.queue_name, "layout": layout.name, "shards": shards}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _prepare_directory(out: Path, selector: dict, source: dict) -> Manifest | None:
    """The manifest to resume (or ``None`` to start fresh); raises
    :class:`UsageError` when ``out`` holds something else."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    m = find_manifest(out)
    if m is None:
        leftovers = [p.name for p in out.iterdir() if not p.name.startswith(".")]
        if leftovers:
            raise UsageError(f"--out {out}: directory is not empty and holds no jobctl export "
                             f"(e.g. {leftovers[0]}); choose an empty or new directory")
        return None
    if m.selector != selector:
        raise UsageError(f"--out {out}: holds another export ({_describe(m.selector)}); this one is "
                         f"{_describe(selector)}: choose another directory")
    if m.source.get("server") != source.get("server"):
        raise UsageError(f"--out {out}: holds an export from {m.source.get('server')}, not "
                         f"{source.get('server')}: choose another directory")
    return m


def _describe(sel: dict) -> str:
    flt = f", filter {sel.get('filter')!r}" if sel.get("filter") else ""
    return f"queue {sel.get('queue')}, states {','.join(sel.get('states', []))}{flt}, {sel.get('format')}"


def _clean(out: Path, keep: set[str]) -> None:
    """Delete temporary files and parts the manifest does not list (in
    partition directories too)."""
    for p in [*out.glob("*part-*"), *out.glob("*=*/*part-*")]:
        name = p.relative_to(out).as_posix()
        if name in keep or not p.is_file():
            continue
        if (p.name.startswith(".part-") and p.name.endswith(".tmp")) or p.name.startswith("part-"):
            p.unlink()


def run_export(layout: "Layout", out_dir: str | Path, *, states: list[State] | tuple[State, ...] = (State.DEAD,),
               flt: Filter = MATCH_ALL, fmt: str = "parquet", server: str | None = None,
               part_rows: int = DEFAULT_PART_ROWS, batch: int = DEFAULT_BATCH,
               snapshot_ms: int | None = None, checkpoint_batches: int = 100,
               progress: Callable[[int, int], None] | None = None,
               note: Callable[[str], None] | None = None,
               writer_options: dict | None = None, partition_by: str | None = None) -> ExportResult:
    """Export every job of ``states`` in ``layout`` matching ``flt`` to ``out_dir``.

    ``snapshot_ms`` (default: now) is the instant the filter is evaluated at
    (``age``, ``dead_for``); a resumed export keeps the first run's.
    ``partition_by`` (``day`` or ``type``): parts in one directory per
    partition (:mod:`jobctl.export.partitions`).
    ``server`` is the secret-free server name for the manifest
    (``session.target.display``).  ``progress(scanned, exported)`` is called
    after each batch; ``note(text)`` gets diagnostics (resume, restart).

    Raises :class:`UsageError` for a bad format, state, ``part_rows`` or an
    ``out_dir`` that holds something else; redis-py errors propagate (the
    CLI translates them).  A ``KeyboardInterrupt`` deletes the part being
    written and leaves the manifest at its last checkpoint: rerunning
    continues from there.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")
    if part_rows < 1 or batch < 1:
        raise UsageError("part rows and batch size must be at least 1")
    states = list(dict.fromkeys(states))
    for s in states:
        layout.check_supported(s)
    out = Path(out_dir)
    if partition_by not in (None, *PARTITIONS):
        raise UsageError(f"unknown partitioning {partition_by!r} (choose from {', '.join(PARTITIONS)})")
    selector = selector_of(layout, states, flt, fmt, partition_by)
    source = _source_of(layout, server)
    say = note or (lambda _text: None)
    result_flags: dict = {}
    m = _prepare_directory(out, selector, source)
    if m is not None and m.complete:
        return ExportResult(manifest=m, directory=out, already_complete=True)
    if m is None:
        now = _now_ms()
        m = Manifest(selector=selector, source=source, snapshot_ms=now if snapshot_ms is None else snapshot_ms,
                     started_ms=now, jobctl_version=__version__,
                     scanned={s.value: 0 for s in states})
        _clean(out, set())
        m.save(out)
    else:
        result_flags["resumed"] = True
        _clean(out, {p.file for p in m.parts})
        say(f"resuming the export in {out}: {len(m.parts)} part(s), {m.rows:,} row(s) already written")
    res = ExportResult(manifest=m, directory=out, **result_flags)
    with _no_cyclic_gc():
        _run(layout, out, m, res, states, flt, fmt, part_rows, batch, checkpoint_batches, progress, say,
             writer_options or {})
    return res


@contextmanager
def _no_cyclic_gc():
    """Pause the cyclic garbage collector for the walk: every window
    allocates ~10 containers per job (parsed envelopes), which triggers a
    collection every few hundred jobs, yet none of them is in a cycle:
    reference counting frees each window as soon as it is written."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _run(layout, out: Path, m: Manifest, res: ExportResult, states, flt: Filter, fmt: str, part_rows: int,
         batch: int, checkpoint_batches: int, progress, say, writer_options: dict) -> None:
    """Walk and write the export described by ``m`` into ``out``; a source
    that shifted under the resume point starts it over (once per shift)."""
    run = _ExportWalk(layout, out, m, res, states, flt, fmt, part_rows=part_rows,
                      checkpoint_batches=checkpoint_batches, progress=progress, writer_options=writer_options)
    try:
        run.walk(batch)
    except _Shifted as shifted:
        run.abort()
        say(f"the source changed since the interrupted export ({shifted}): starting over")
        fresh = Manifest(selector=m.selector, source=m.source, snapshot_ms=_now_ms(), started_ms=_now_ms(),
                         jobctl_version=__version__, scanned={s.value: 0 for s in states})
        _clean(out, set())
        fresh.save(out)
        res.manifest = fresh
        res.restarted = str(shifted)
        res.resumed = False
        res.skipped_batches = 0
        _run(layout, out, fresh, res, states, flt, fmt, part_rows, batch, checkpoint_batches, progress, say,
             writer_options)
    finally:
        run.abort()


def _arrow_window_of(fmt: str, flt: Filter):
    """``window_record_batch`` for an unfiltered Parquet export (``None``
    otherwise, or without pyarrow: open_writer says so)."""
    if fmt != "parquet":
        return None
    try:
        # pyarrow loads here, before the read-ahead thread starts: arrow_memory
        # sets an environment variable for the import
        from . import arrow_memory  # noqa: F401
        if flt.is_match_all:
            from .arrow_columns import window_record_batch
            return window_record_batch
    except ImportError:
        pass
    return None


class _ExportWalk:
    """One pass of an export over the source: the part being written, the
    counts since the last part and the manifest checkpoints."""

    def __init__(self, layout, out: Path, m: Manifest, res: ExportResult, states, flt: Filter, fmt: str, *,
                 part_rows: int, checkpoint_batches: int, progress, writer_options: dict) -> None:
        self.layout, self.out, self.m, self.res, self.states = layout, out, m, res, states
        self.flt, self.fmt, self.part_rows, self.checkpoint_batches = flt, fmt, part_rows, checkpoint_batches
        self.progress, self.writer_options = progress, writer_options
        self.skip = int(m.progress.get("batches") or 0)
        self.expected_last = m.progress.get("last_id")
        self.parts = OpenParts(fmt, out, m.selector.get("partition_by"), writer_options)
        self.scanned: Counter = Counter(m.scanned)
        self.exported = m.rows
        self.since_checkpoint = 0
        self.last_seen_id = None
        self.last_ordinal = self.skip
        self.arrow_window = _arrow_window_of(fmt, flt)
        self.fast = flt.is_match_all

    def checkpoint(self, ordinal: int, last_id: str | None) -> None:
        m = self.m
        m.progress = {"batches": ordinal, "last_id": json_safe(last_id)}  # undecodable bytes escaped
        m.scanned = {s.value: self.scanned.get(s.value, 0) for s in self.states}
        m.save(self.out)

    def abort(self) -> None:
        """Delete the part being written, if any."""
        self.parts.abort()

    def walk(self, batch: int) -> None:
        """Write every batch past the resume point, then complete the manifest.
        Raises :class:`_Shifted` when the source no longer matches it."""
        for sb in walk(self.layout, self.states, batch, raw=self.fast):
            if sb.ordinal <= self.skip:
                self._covered(sb)
                continue
            self.scanned[sb.state.value] += sb.size
            for cols in self._columns(sb):
                self._write(sb, cols)
            self._after(sb)
            if self.progress:
                self.progress(sum(self.scanned.values()), self.exported)
        self._finish()

    def _covered(self, sb) -> None:
        """A batch an earlier run already covered: read, not written; the
        last one must end on the job the manifest recorded."""
        self.res.skipped_batches += 1
        if sb.ordinal == self.skip:
            last = json_safe(sb.last_id)  # as the manifest holds it
            if last != self.expected_last:
                raise _Shifted(f"the job at the resume point is {last!r}, the manifest recorded "
                               f"{self.expected_last!r}")

    def _columns(self, sb) -> list[ColumnBatch]:
        """The batch's rows, in order: a window's clean runs on a column path,
        each poison job and every filtered batch record by record."""
        if sb.window is None:  # a filter, or a layout without raw windows
            return [rows_columns([record_row(rec) for rec in sb.records
                                  if self.fast or selects(self.flt, rec, self.m.snapshot_ms)])]
        return [self._run_columns(part, docs) for part, docs in window_runs(sb.window)]

    def _run_columns(self, part, docs: list[dict] | None) -> ColumnBatch:
        layout, cols = self.layout, None
        if docs is not None:
            if self.arrow_window is not None:  # Parquet: the run straight to an Arrow record batch
                rb = self.arrow_window(part, layout.queue_name, layout.name, docs)
                cols = None if rb is None else ColumnBatch(rb.num_rows, [], arrow=rb)
            if cols is None:  # the Arrow path changed the docs it was given: parse again
                cols = window_columns(part, layout.queue_name, layout.name,
                                      None if self.arrow_window is not None else docs)
        if cols is None:  # poison, or odd values a column path does not type
            cols = rows_columns([record_row(rec) for rec in part.records()])
        return cols

    def _write(self, sb, cols: ColumnBatch) -> None:
        if not cols.n:
            return
        self.parts.write(self.m, sb.state.value, cols)
        self.exported += cols.n

    def _after(self, sb) -> None:
        """Close the part once it holds ``part_rows``; with no part open,
        checkpoint every ``checkpoint_batches`` batches."""
        self.last_seen_id = sb.last_id if sb.size else self.last_seen_id
        self.last_ordinal = sb.ordinal
        self.since_checkpoint += 1
        if self.parts.open and self.parts.rows >= self.part_rows:
            self.parts.commit(self.m)
            self.checkpoint(sb.ordinal, self.last_seen_id)
            self.since_checkpoint = 0
        elif not self.parts.open and self.since_checkpoint >= self.checkpoint_batches:
            self.checkpoint(sb.ordinal, self.last_seen_id)
            self.since_checkpoint = 0

    def _finish(self) -> None:
        if self.skip and self.res.skipped_batches < self.skip:
            raise _Shifted("the source now has fewer batches than the export had covered")
        self.parts.commit(self.m)
        m = self.m
        m.complete = True
        m.finished_ms = _now_ms()
        self.checkpoint(self.last_ordinal,
                        self.last_seen_id if self.last_seen_id is not None else m.progress.get("last_id"))


class _Shifted(Exception):
    """The source no longer matches the manifest's resume point."""
