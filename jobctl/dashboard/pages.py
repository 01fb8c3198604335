"""Job lists with a filter: the jobs of one state in serving order
(dead newest first, scheduled earliest due first...)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..filter import MATCH_ALL, Filter
from ..model import JobRecord, State

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["JobPage", "find_jobs", "FIND_SCAN_BOUND"]

#: Jobs examined at most by a filtered :func:`find_jobs`.
FIND_SCAN_BOUND = 50_000


@dataclass
class JobPage:
    """Jobs of one state that pass ``filter_text`` (at most ``limit``).

    ``scanned`` jobs were examined; ``complete`` is False when the walk
    stopped at the limit or the scan bound before the end of the state.
    """

    queue: str
    state: str
    filter_text: str
    now_ms: int
    records: list[JobRecord] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True


_PAGE_ORDER: dict[State, Callable[[JobRecord], Any]] = {
    State.READY: lambda r: r.position if r.position is not None else 0,
    State.SCHEDULED: lambda r: r.score or 0,
    State.PROCESSING: lambda r: (r.deadline_ms is None, r.deadline_ms or 0),
    State.DEAD: lambda r: -(r.meta.get("dead_since_ms") or r.envelope.last_attempt_ms or 0),
    State.SUPPRESSED: lambda r: -(r.score or 0),
}


def find_jobs(layout: "Layout", state: State, *, flt: Filter = MATCH_ALL, now: int, limit: int = 200,
              scan_bound: int = FIND_SCAN_BOUND) -> JobPage:
    """Jobs of ``state`` in serving order; with a filter, the first ``limit``
    matches of a walk over at most ``scan_bound`` jobs (shown in the
    state's order: dead newest first, scheduled earliest due first...)."""
    page = JobPage(queue=layout.queue_name, state=state.value, filter_text=flt.text, now_ms=now)
    if flt.is_match_all:
        page.records = layout.list_jobs(state, limit, now=now)
        page.scanned = len(page.records)
        page.complete = len(page.records) < limit
        return page
    for batch in layout.iter_batches(state, batch=1000):
        for rec in batch:
            page.scanned += 1
            if flt.matches(rec, now):
                page.records.append(rec)
                if len(page.records) >= limit:
                    page.complete = False
                    break
        if not page.complete:
            break
        if page.scanned >= scan_bound:
            page.complete = False
            break
    page.records.sort(key=_PAGE_ORDER.get(state, lambda r: 0))
    return page
