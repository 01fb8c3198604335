"""One window of a state as stored: ids and payload values, unparsed.

A layout that can hand out its windows before parsing them offers
``iter_raw_windows(state, batch)`` (the reliable-list layout does): the same
windows, in the same order and from the same bounded reads, as its
``iter_batches``, for readers that parse only what they need (the export's
column path, :mod:`jobctl.export.columns`).  ``records()`` builds the
:class:`~jobctl.model.JobRecord` list ``iter_batches`` would have yielded
(envelopes parsed with :func:`jobctl.model.parse_envelope`), for the windows
such a reader cannot take on its fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..model import JobRecord, State

__all__ = ["RawWindow"]


@dataclass(slots=True)
class RawWindow:
    """``ids`` (as the state's index holds them, ``str``) and ``raws`` (the
    payload values, ``bytes``, ``None`` for a dangling id) of one window of
    ``state`` in ``shard``; ``positions`` (lists: 0-based from the walked
    end) or ``scores`` (zsets, epoch ms), one per id, else ``None``."""

    state: State
    shard: str
    ids: list[str]
    raws: list[bytes | None]
    positions: list[int] | None
    scores: list[int] | None
    records: Callable[[], list[JobRecord]]

    def part(self, start: int, end: int) -> "RawWindow":
        """Jobs ``start`` to ``end`` (exclusive) of this window, as a window
        of their own (taken from a whole window, not from a part)."""
        cut = slice(start, end)
        return RawWindow(state=self.state, shard=self.shard, ids=self.ids[cut], raws=self.raws[cut],
                         positions=None if self.positions is None else self.positions[cut],
                         scores=None if self.scores is None else self.scores[cut],
                         records=partial(self.records, cut))
