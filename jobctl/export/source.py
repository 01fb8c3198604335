"""The streaming read side of an export: a layout's states, batch by batch.

Memory is bounded by one batch (plus the two read ahead): each batch comes
from :meth:`jobctl.layouts.base.Layout.iter_batches` (one bounded range read
and one MGET per batch in the reliable-list layout), or unparsed from the
layout's ``iter_raw_windows`` where it declares ``raw_windows``, is filtered and handed on.
Batches are numbered (1-based, over all states in order) so that a resumed
export can skip what its committed parts already hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..filter import Filter
from ..layouts.raw import RawWindow
from ..model import JobRecord, State

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["SourceBatch", "walk", "selects"]


@dataclass
class SourceBatch:
    """One batch read from the source: its 1-based ``ordinal``, the
    ``state`` walked, and either the ``window`` read (unparsed, from a layout
    with ``iter_raw_windows``) or the ``records`` read (all of them,
    matching or not; built from the window on first use)."""

    ordinal: int
    state: State
    loaded: list[JobRecord] | None = None
    window: RawWindow | None = None

    @property
    def records(self) -> list[JobRecord]:
        """Every job of the batch as a :class:`~jobctl.model.JobRecord`."""
        if self.loaded is None:
            self.loaded = self.window.records() if self.window is not None else []
        return self.loaded

    @property
    def size(self) -> int:
        """How many jobs the batch holds."""
        return len(self.window.ids) if self.window is not None else len(self.records)

    @property
    def last_id(self) -> str | None:
        """The id of the batch's last job (``None`` when empty)."""
        if self.window is not None:
            return self.window.ids[-1] if self.window.ids else None
        return self.records[-1].job_id if self.records else None


def walk(layout: "Layout", states: list[State], batch: int = 1000, *, raw: bool = False) -> Iterator[SourceBatch]:
    """Every job of ``states`` (in that order), in batches of at most ``batch``.

    With ``raw``, a layout that declares ``raw_windows`` (its ``iter_raw_windows``: same windows as
    ``iter_batches``, unparsed) yields batches with a ``window``.  The next
    two windows are read (two bounded commands each) in a background thread
    while the caller works on the current one.

    Raises :class:`~jobctl.errors.UsageError` for a state the layout lacks,
    before reading anything.
    """
    for state in states:
        layout.check_supported(state)
    from ..layouts.walks import prefetched

    raw_windows = layout.iter_raw_windows if raw and layout.raw_windows else None

    def batches() -> Iterator[SourceBatch]:
        for state in states:
            if raw_windows is not None:
                for w in raw_windows(state, batch=batch):
                    yield SourceBatch(0, state, window=w)
            else:
                for records in layout.iter_batches(state, batch=batch):
                    yield SourceBatch(0, state, loaded=records)

    # the next window is read while the current one is parsed and written
    for ordinal, sb in enumerate(prefetched(batches(), depth=2), start=1):
        sb.ordinal = ordinal
        yield sb


def selects(flt: Filter, record: JobRecord, now_ms: int) -> bool:
    """Whether the export takes ``record``.

    The filter decides, evaluated at the snapshot time ``now_ms``; but a
    malformed envelope (or a dangling id without payload) is taken whenever
    the filter reads envelope fields it may lack: an export never silently
    drops a job it cannot read.  It is flagged ``malformed`` in the row.
    """
    if flt.matches(record, now_ms):
        return True
    return bool(record.envelope.problems) and flt.needs_payload
