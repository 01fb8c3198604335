"""Scheduled due-time buckets and processing jobs by time left to their
visibility deadline (the queue screen's live part).  Times are epoch ms.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import JobRecord, State

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["DUE_BUCKETS", "DueDistribution", "due_distribution", "processing_by_deadline"]

#: (label, lower bound, upper bound) of due time minus now, in ms; ``None``
#: is unbounded.  A job falls in the bucket with ``lo <= due - now < hi``.
DUE_BUCKETS: tuple[tuple[str, int | None, int | None], ...] = (
    ("overdue", None, 0),
    ("< 1m", 0, 60_000),
    ("1m-5m", 60_000, 300_000),
    ("5m-15m", 300_000, 900_000),
    ("15m-1h", 900_000, 3_600_000),
    ("1h-6h", 3_600_000, 21_600_000),
    ("6h-24h", 21_600_000, 86_400_000),
    ("> 24h", 86_400_000, None),
)


@dataclass
class DueDistribution:
    """Scheduled jobs per :data:`DUE_BUCKETS` bucket at ``now_ms``."""

    now_ms: int
    counts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)


def due_distribution(layout: "Layout", now: int) -> DueDistribution:
    """Count scheduled jobs per due-time bucket.

    A layout with a cheaper count answers
    :meth:`~jobctl.layouts.facts.LayoutFacts.due_counts` (reliable-list:
    one pipelined ``ZCOUNT`` per bucket and shard, exact whatever the
    depth); the others' scheduled jobs' scores come from ``iter_batches``
    (bounded windows).
    """
    out = DueDistribution(now_ms=now)
    counted = layout.due_counts(now, DUE_BUCKETS)
    if counted is not None:
        out.counts = [(label, n) for (label, _, _), n in zip(DUE_BUCKETS, counted)]
        return out
    counts = Counter()
    for batch in layout.iter_batches(State.SCHEDULED, batch=1000):
        for rec in batch:
            if rec.score is None:
                continue
            delta = rec.score - now
            for label, lo, hi in DUE_BUCKETS:
                if (lo is None or delta >= lo) and (hi is None or delta < hi):
                    counts[label] += 1
                    break
    out.counts = [(label, counts[label]) for label, _, _ in DUE_BUCKETS]
    return out


def processing_by_deadline(layout: "Layout", limit: int = 200) -> list[JobRecord]:
    """Up to ``limit`` processing jobs, least time left to the visibility
    deadline first (stuck jobs, whose deadline passed, come first).

    A layout with a deadline index answers
    :meth:`~jobctl.layouts.facts.LayoutFacts.processing_by_deadline`
    (reliable-list: ``ZRANGE processing:deadline`` per shard plus one
    ``MGET``); the others: the oldest claims from ``list_jobs`` sorted by
    deadline.
    """
    indexed = layout.processing_by_deadline(limit)
    if indexed is not None:
        return indexed
    recs = layout.list_jobs(State.PROCESSING, limit)
    return sorted(recs, key=lambda r: (r.deadline_ms is None, r.deadline_ms or 0))
