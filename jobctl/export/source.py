"""The streaming read side of an export: a layout's states, batch by batch.

Memory is bounded by one batch: each batch comes from
:meth:`jobctl.layouts.base.Layout.iter_batches` (one bounded range read and
one MGET per batch in the reliable-list layout), is filtered and handed on.
Batches are numbered (1-based, over all states in order) so that a resumed
export can skip what its committed parts already hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..filter import Filter
from ..model import JobRecord, State

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["SourceBatch", "walk", "selects"]


@dataclass
class SourceBatch:
    """One batch read from the source: its 1-based ``ordinal``, the
    ``state`` walked and the ``records`` read (all of them, matching or not)."""

    ordinal: int
    state: State
    records: list[JobRecord]


def walk(layout: "Layout", states: list[State], batch: int = 1000) -> Iterator[SourceBatch]:
    """Every job of ``states`` (in that order), in batches of at most ``batch``.

    Raises :class:`~jobctl.errors.UsageError` for a state the layout lacks,
    before reading anything.
    """
    for state in states:
        layout.check_supported(state)
    from ..layouts.walks import prefetched

    def batches() -> Iterator[tuple[State, list[JobRecord]]]:
        for state in states:
            for records in layout.iter_batches(state, batch=batch):
                yield state, records

    # the next window is read (and parsed) while the current one is written
    for ordinal, (state, records) in enumerate(prefetched(batches()), start=1):
        yield SourceBatch(ordinal, state, records)


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
