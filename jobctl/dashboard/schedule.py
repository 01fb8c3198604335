"""Scheduled due-time buckets and processing jobs by time left to their
visibility deadline (the queue screen's live part).  Times are epoch ms.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import JobRecord, State, parse_envelope

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

    Reliable-list: one pipelined ``ZCOUNT`` per bucket and shard (exact,
    independent of depth).  Other layouts: their scheduled jobs' scores
    from ``iter_batches`` (bounded windows).
    """
    out = DueDistribution(now_ms=now)
    shards = getattr(layout, "shards", None)
    if layout.name == "reliable-list" and shards:
        pipe = layout.client.pipeline(transaction=False)
        for keys in shards:
            for _, lo, hi in DUE_BUCKETS:
                pipe.zcount(keys.scheduled, "-inf" if lo is None else now + lo,
                            "+inf" if hi is None else f"({now + hi}")
        res = pipe.execute()
        n = len(DUE_BUCKETS)
        for i, (label, _, _) in enumerate(DUE_BUCKETS):
            out.counts.append((label, sum(res[s * n + i] for s in range(len(shards)))))
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

    Reliable-list: ``ZRANGE processing:deadline 0 limit-1 WITHSCORES`` per
    shard plus one ``MGET`` of the envelopes.  Other layouts: the oldest
    claims from ``list_jobs`` sorted by deadline.
    """
    shards = getattr(layout, "shards", None)
    if layout.name != "reliable-list" or not shards:
        recs = layout.list_jobs(State.PROCESSING, limit)
        return sorted(recs, key=lambda r: (r.deadline_ms is None, r.deadline_ms or 0))
    from ..layouts.common import score_ms  # +inf/-inf deadlines: never / always, not an OverflowError

    records: list[JobRecord] = []
    for keys in shards:
        pairs = layout.client.zrange(keys.deadline, 0, limit - 1, withscores=True)
        if not pairs:
            continue
        ids = [m.decode("utf-8", "surrogateescape") if isinstance(m, bytes) else m for m, _ in pairs]
        raws = layout.client.mget([keys.job(i) for i in ids])
        for (_, score), job_id, raw in zip(pairs, ids, raws):
            records.append(JobRecord(queue=layout.queue_name, layout=layout.name, shard=keys.tag,
                                     job_id=job_id, state=State.PROCESSING, envelope=parse_envelope(raw),
                                     raw=raw, deadline_ms=score_ms(score)))
    records.sort(key=lambda r: (r.deadline_ms, r.job_id))
    return records[:limit]
