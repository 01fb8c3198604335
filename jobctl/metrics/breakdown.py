"""Dead jobs by job type and tenant, from a bounded read of the DLQ.

The reliable-list layout indexes jobs by id only: the job type and tenant
are in the envelopes.  :func:`dead_breakdown` reads every dead envelope when
the DLQ holds at most ``bound`` jobs, otherwise ``bound // WINDOW`` random
windows of :data:`WINDOW` consecutive jobs, and scales the counts to the
depth (the result says so).  Cost: at most ``bound`` envelopes (MGET in
windows), whatever the depth.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..layouts.base import Layout
from ..model import State

__all__ = ["Breakdown", "dead_breakdown", "BREAKDOWN_BOUND", "WINDOW", "MAX_SERIES", "OTHER", "UNKNOWN"]

#: Envelopes read at most per breakdown.
BREAKDOWN_BOUND = 5_000
#: Consecutive jobs per sampled window.
WINDOW = 500
#: (type, tenant) pairs reported per queue; the rest are summed under :data:`OTHER`.
MAX_SERIES = 50
#: Label value of the pairs beyond :data:`MAX_SERIES`.
OTHER = "_other"
#: Label value when the envelope has no readable jobType/tenantId.
UNKNOWN = "_unknown"


@dataclass
class Breakdown:
    """``counts[(job_type, tenant)]`` = dead jobs (estimates when ``sampled``).

    ``depth``: the DLQ's size; ``read``: envelopes read.
    """

    queue: str
    depth: int
    read: int = 0
    sampled: bool = False
    counts: dict[tuple[str, str], int] = field(default_factory=dict)


def dead_breakdown(layout: Layout, *, bound: int = BREAKDOWN_BOUND, max_series: int = MAX_SERIES) -> Breakdown:
    """Count the dead jobs of ``layout`` by (jobType, tenantId); see the module docstring."""
    depth = layout.depth(State.DEAD)
    out = Breakdown(queue=layout.queue_name, depth=depth)
    sample = None
    if depth > bound:
        out.sampled = True
        sample = (max(1, bound // WINDOW), WINDOW)
    counts: Counter[tuple[str, str]] = Counter()
    for batch in layout.iter_batches(State.DEAD, batch=WINDOW, sample=sample):
        for rec in batch:
            out.read += 1
            env = rec.envelope
            counts[(env.job_type or UNKNOWN, env.tenant_id or UNKNOWN)] += 1
        if out.read >= bound and not out.sampled:
            break
    scale = depth / out.read if out.sampled and out.read else 1.0
    ranked = counts.most_common()
    kept = {k: round(v * scale) for k, v in ranked[:max_series]}
    rest = sum(v for _, v in ranked[max_series:])
    if rest:
        kept[(OTHER, OTHER)] = round(rest * scale)
    out.counts = kept
    return out
