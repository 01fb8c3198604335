"""The planned jobs of an unfiltered BullMQ redrive, kept column-wise.

:class:`FencedColumns` holds, per planned job in plan order, the id, the
failed score and the fence as the server returned them (``bytes``: never
decoded or re-encoded on the way to the move), and a flow child (whose move
needs its parent's keys) as a :class:`~jobctl.layouts.bullmq.ops.BullPlannedJob`
at its place.  No Python object is built per job unless one is asked for
(indexing, iteration: the plan's sample ids, tests).
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.ops.plan import PlannedJob

__all__ = ["FencedColumns"]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class FencedColumns:
    """A list-like of planned jobs (``len``, iteration, indexing, slicing:
    a slice is a ``list``): :class:`~jobctl.layouts.bullmq.ops.BullFencedJob`
    built on access, or the flow child's
    :class:`~jobctl.layouts.bullmq.ops.BullPlannedJob` kept as it is."""

    __slots__ = ("ids", "scores", "fences", "children")

    def __init__(self) -> None:
        #: ids, failed scores (as stored) and fences (40 hex digits; ``b""``
        #: at a child's place), one entry per planned job
        self.ids: list[bytes] = []
        self.scores: list[bytes] = []
        self.fences: list[bytes] = []
        #: place -> the flow child planned there
        self.children: dict[int, PlannedJob] = {}

    def extend(self, ids: list[bytes], scores: list[bytes], fences: list[bytes]) -> None:
        """Add jobs that are no flow child (the three lists of equal length)."""
        self.ids += ids
        self.scores += scores
        self.fences += fences

    def add_child(self, raw_id: bytes, job: PlannedJob) -> None:
        """Add a flow child (planned whole as ``job``) at the next place."""
        self.children[len(self.ids)] = job
        self.ids.append(raw_id)
        self.scores.append(b"")
        self.fences.append(b"")

    def runs(self) -> Iterator[tuple[int, int, bool]]:
        """``(start, stop, child)``: the places in order, in maximal runs of
        flow children (``child``) or of the other jobs."""
        places, start, n = sorted(self.children), 0, 0
        while n < len(places):
            if places[n] > start:
                yield start, places[n], False
            first = places[n]
            while n + 1 < len(places) and places[n + 1] == places[n] + 1:
                n += 1
            start, n = places[n] + 1, n + 1
            yield first, start, True
        if start < len(self.ids):
            yield start, len(self.ids), False

    def __len__(self) -> int:
        return len(self.ids)

    def _job(self, n: int) -> PlannedJob:
        from jobctl.layouts.bullmq.ops import BullFencedJob

        if n in self.children:
            return self.children[n]
        job = PlannedJob(_text(self.ids[n]), 0, n, None, _text(self.scores[n]))
        return BullFencedJob(job, _text(self.fences[n]))

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self._job(n) for n in range(*key.indices(len(self.ids)))]
        n = key + len(self.ids) if key < 0 else key
        if not 0 <= n < len(self.ids):
            raise IndexError(key)
        return self._job(n)

    def __iter__(self) -> Iterator[PlannedJob]:
        return (self._job(n) for n in range(len(self.ids)))
