"""The attempt histogram of a queue state (seed 000 sections 17 and 21).

Exact when the state holds at most :data:`EXACT_BOUND` jobs; beyond that a
random sample of :data:`SAMPLE_WINDOWS` windows of :data:`SAMPLE_WINDOW`
consecutive jobs is read and the counts are scaled to the state's depth (the
result says so).  Attempts come from the envelope's ``attempt`` field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .layouts.base import Layout
from .model import State

__all__ = ["Histogram", "attempt_histogram", "EXACT_BOUND", "SAMPLE_WINDOWS", "SAMPLE_WINDOW"]

EXACT_BOUND = 100_000
SAMPLE_WINDOWS = 40
SAMPLE_WINDOW = 500


@dataclass
class Histogram:
    """``counts`` maps attempt number to jobs (scaled estimates when sampled).

    ``read`` is how many envelopes were read; ``depth`` the state's size;
    ``unknown`` counts jobs whose envelope had no readable ``attempt``.
    """

    queue: str
    state: str
    depth: int
    read: int = 0
    sampled: bool = False
    counts: dict[int, int] = field(default_factory=dict)
    unknown: int = 0

    def to_json(self) -> dict:
        return {"queue": self.queue, "state": self.state, "depth": self.depth, "read": self.read,
                "sampled": self.sampled, "unknown": self.unknown,
                "counts": {str(k): v for k, v in sorted(self.counts.items())}}


def attempt_histogram(layout: Layout, state: State, *, exact_bound: int = EXACT_BOUND) -> Histogram:
    """Histogram of envelope ``attempt`` over ``state``; see the module docstring."""
    depth = layout.depth(state)
    hist = Histogram(queue=layout.queue_name, state=state.value, depth=depth)
    sample = None
    if depth > exact_bound:
        hist.sampled = True
        sample = (SAMPLE_WINDOWS, SAMPLE_WINDOW)
    counts: Counter[int] = Counter()
    unknown = 0
    for batch in layout.iter_batches(state, batch=1000, sample=sample):
        for rec in batch:
            hist.read += 1
            if rec.envelope.attempt is None:
                unknown += 1
            else:
                counts[rec.envelope.attempt] += 1
    if hist.sampled and hist.read:
        scale = depth / hist.read
        hist.counts = {k: round(v * scale) for k, v in counts.items()}
        hist.unknown = round(unknown * scale)
    else:
        hist.counts = dict(counts)
        hist.unknown = unknown
    return hist
