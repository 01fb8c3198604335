"""Per-queue status history of the live dashboard: samples since it opened
(plus older ones read back from Prometheus: :meth:`QueueHistory.prepend`),
for the depth and oldest-ready-age sparklines and the DLQ growth rate (dead
jobs per minute over the last :data:`GROWTH_WINDOW_MS`).  Times are epoch ms.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from ..model import QueueStatus

__all__ = ["Sample", "QueueHistory", "GROWTH_WINDOW_MS", "HISTORY_LEN"]

#: Samples kept per queue (at a 1 s refresh: the last 10 minutes).
HISTORY_LEN = 600
#: The DLQ growth rate is measured over this trailing window (ms).
GROWTH_WINDOW_MS = 60_000


@dataclass(frozen=True, slots=True)
class Sample:
    """One status reading of one queue at ``at_ms``."""

    at_ms: int
    ready: int
    scheduled: int
    processing: int
    stuck: int
    dead: int
    oldest_ready_age_ms: int | None

    @classmethod
    def of(cls, status: QueueStatus) -> "Sample":
        return cls(status.now_ms, status.ready, status.scheduled, status.processing, status.stuck,
                   status.dead, status.oldest_ready_age_ms)


class QueueHistory:
    """The last ``maxlen`` samples of one queue (thread-safe)."""

    def __init__(self, maxlen: int = HISTORY_LEN) -> None:
        self._samples: deque[Sample] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def add(self, status: QueueStatus) -> None:
        with self._lock:
            self._samples.append(Sample.of(status))

    def prepend(self, older: list[Sample]) -> int:
        """Put ``older`` (oldest first, e.g. read back from Prometheus) before
        the samples taken so far, keeping only those older than the first of
        them; the history then holds that many more samples, so the older
        ones go only once ``maxlen`` new samples were added after them.
        Returns how many were added."""
        with self._lock:
            first = self._samples[0].at_ms if self._samples else None
            keep = [s for s in older if first is None or s.at_ms < first]
            merged = keep + list(self._samples)
            self._samples = deque(merged, maxlen=(self._samples.maxlen or len(merged)) + len(keep))
            return len(keep)

    @property
    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def series(self, name: str) -> list[int | None]:
        """Values of one :class:`Sample` field, oldest first."""
        return [getattr(s, name) for s in self.samples]

    def dead_growth_per_min(self, window_ms: int = GROWTH_WINDOW_MS) -> float | None:
        """Change of the DLQ depth per minute over the trailing ``window_ms``.

        Negative after a redrive or purge.  ``None`` until two samples at
        least one second apart exist.
        """
        samples = self.samples
        if len(samples) < 2:
            return None
        last = samples[-1]
        first = next((s for s in samples if s.at_ms >= last.at_ms - window_ms), samples[0])
        if first is last:
            first = samples[-2]
        dt = last.at_ms - first.at_ms
        if dt < 1000:
            return None
        return (last.dead - first.dead) * 60_000 / dt
