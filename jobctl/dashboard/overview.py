"""The dashboard's side panels, headless: :class:`Overview`.

* the top error groups across every queue (job type x error, count, queue),
  from each queue's DLQ :func:`~jobctl.dashboard.triage.triage`, kept in a
  :class:`TriageCache`: exact up to :data:`OVERVIEW_EXACT_BOUND` dead jobs,
  a bounded random sample beyond (the group then says ``sampled``), each
  queue re-read at most every :data:`TRIAGE_TTL_MS` and at most
  :data:`TRIAGE_QUEUES_PER_CALL` queues per call, so a refresh never walks
  a whole 1M-job DLQ;
* the operations under way (:class:`ActiveOp`, with progress): those this
  dashboard applies, and those other jobctl processes run on a dead list
  (:func:`running_walks`: the queue's lease and walk counts); each queue's
  holds (``jobctl pause --hold``, from the status already read);
* the newest journal entries of every queue (one bounded ``XREVRANGE``
  each).

Times are epoch ms.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import JobctlError
from ..humanize import outcome
from ..model import State

if TYPE_CHECKING:
    from .facade import Snapshot
    from .triage import Triage

__all__ = ["ErrorGroup", "ActiveOp", "HoldRow", "JournalRow", "Overview", "TriageCache", "top_errors", "running_walks",
           "holds_of", "journal_rows", "OVERVIEW_EXACT_BOUND", "TRIAGE_TTL_MS", "TRIAGE_QUEUES_PER_CALL",
           "TOP_ERRORS", "JOURNAL_ROWS"]

#: A queue's DLQ is grouped exactly up to this many dead jobs, else from a bounded random sample.
OVERVIEW_EXACT_BOUND = 5_000
#: A queue's triage is re-read at most this often (ms).
TRIAGE_TTL_MS = 60_000
#: Queues whose triage may be re-read by one :meth:`TriageCache.refresh`.
TRIAGE_QUEUES_PER_CALL = 4
#: Error groups and journal entries shown.
TOP_ERRORS = 8
JOURNAL_ROWS = 8


@dataclass(frozen=True)
class ErrorGroup:
    """One (job type, error) group of one queue's DLQ; ``count`` is scaled
    from a sample when ``sampled``; ``read_at_ms``: when the DLQ was read."""

    queue: str
    job_type: str | None
    error: str | None
    count: int
    sampled: bool
    read_at_ms: int


@dataclass
class ActiveOp:
    """An operation under way: ``done`` of ``total`` so far.  Applied by this
    dashboard (``by`` empty: jobs moved), or by another jobctl process that
    holds the queue's lease (``by``: its ``host pid``; ``done``/``total``:
    dead-list positions its walk has taken of those it will take; 0 of 0
    when its walk keeps no count; ``started_ms`` from its operation id)."""

    op_id: str
    operation: str
    queue: str
    total: int
    started_ms: int | None
    done: int = 0
    by: str = ""


@dataclass(frozen=True)
class HoldRow:
    """One active hold (``jobctl pause --hold``) of ``queue``; ``paused``: the queue's paused jobs."""

    queue: str
    filter: str
    age_ms: int | None
    reason: str
    paused: int


@dataclass(frozen=True)
class JournalRow:
    """One journal entry: when it ended, what, where, ``result`` (ok /
    interrupted / failed: :func:`jobctl.humanize.outcome`) and its counts."""

    ended_ms: int | None
    operation: str
    queue: str
    result: str
    planned: int
    moved: int
    skipped: int
    failed: int


@dataclass
class Overview:
    """The side panels at ``at_ms``: ``errors`` largest first, ``sampled``
    when any of them comes from a sample; ``triaged``/``queues``: how many
    queues' DLQs were grouped so far of how many shown."""

    at_ms: int
    errors: list[ErrorGroup] = field(default_factory=list)
    sampled: bool = False
    triaged: int = 0
    queues: int = 0
    active: list[ActiveOp] = field(default_factory=list)
    holds: list[HoldRow] = field(default_factory=list)
    journal: list[JournalRow] = field(default_factory=list)
    #: What could not be read (an ACL refusal, one line each): those panels show less.
    notes: list[str] = field(default_factory=list)


class TriageCache:
    """The last triage of each queue's DLQ with when it was read (thread-safe)."""

    def __init__(self) -> None:
        self._by_queue: dict[str, Triage] = {}
        self._lock = threading.Lock()

    def refresh(self, layouts: dict[str, Any], now_ms: int, *, ttl_ms: int = TRIAGE_TTL_MS,
                per_call: int = TRIAGE_QUEUES_PER_CALL, exact_bound: int = OVERVIEW_EXACT_BOUND) -> None:
        """Re-read the triage of at most ``per_call`` of ``layouts`` (queue
        -> layout with a dead state): never read first, then the oldest,
        only those older than ``ttl_ms``."""
        from .triage import triage

        with self._lock:
            due = sorted((self._by_queue[q].now_ms if q in self._by_queue else -1, q) for q in layouts)
        due = [q for at, q in due if at < 0 or now_ms - at >= ttl_ms][:per_call]
        for q in due:
            t = triage(layouts[q], now=now_ms, state=State.DEAD, exact_bound=exact_bound)
            with self._lock:
                self._by_queue[q] = t

    def get(self, queues: list[str]) -> "list[Triage]":
        with self._lock:
            return [self._by_queue[q] for q in queues if q in self._by_queue]


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _started_ms(op_id: str) -> int | None:
    """The start time in a ``redrive-20261121T101500Z-1a2b3c4d`` operation id."""
    import calendar
    import time

    try:
        return calendar.timegm(time.strptime(op_id.split("-")[1], "%Y%m%dT%H%M%SZ")) * 1000
    except (IndexError, ValueError):
        return None


def running_walks(layouts: dict[str, Any], skip: set[str] = frozenset()) -> list[ActiveOp]:
    """Operations other jobctl processes run on the dead lists of ``layouts``
    (queue -> layout): each shard's lease holder and its walk's counts, one
    pipelined round trip per queue; operation ids in ``skip`` are left out."""
    from ..ops.orphan_holds import hold_sources

    found: dict[tuple[str, str], ActiveOp] = {}
    for queue, layout in layouts.items():
        try:
            sources = hold_sources(layout)
        except JobctlError:  # a layout that cannot walk its dead store: nothing to show
            continue
        if not sources:
            continue
        pipe = sources[0].client.pipeline(transaction=False)
        for src in sources:
            pipe.get(src.lease)
            pipe.hmget(src.walk, "op", "total", "popped")
        replies = pipe.execute()
        for holder, (walk_op, total, popped) in zip(replies[::2], replies[1::2]):
            if holder is None or _text(holder).split(" ")[0] in skip:
                continue
            op_id, _, by = _text(holder).partition(" ")
            op = found.setdefault((queue, op_id), ActiveOp(op_id, op_id.split("-")[0], queue, 0,
                                                           _started_ms(op_id), by=by or "?"))
            if walk_op is not None and _text(walk_op) == op_id:
                op.total += int(total or 0)
                op.done += int(popped or 0)
    return list(found.values())


def top_errors(triages: "list[Triage]", n: int = TOP_ERRORS) -> list[ErrorGroup]:
    """The ``n`` largest (job type, error) groups across ``triages``."""
    groups = [ErrorGroup(t.queue, g.job_type, g.error, g.count, t.sampled, t.now_ms)
              for t in triages for g in t.groups]
    groups.sort(key=lambda g: (-g.count, g.queue, g.job_type or "", g.error or ""))
    return groups[:n]


def holds_of(snap: "Snapshot") -> list[HoldRow]:
    """Every active hold of the queues in ``snap`` (read with their status)."""
    out = []
    for row in snap.rows:
        st = row.status
        for h in (st.held_filters if st is not None else []):
            out.append(HoldRow(row.name, h.get("filter") or "", h.get("age_ms"), str(h.get("reason") or ""),
                               st.paused))
    return out


def journal_rows(entries: list[dict[str, Any]], n: int = JOURNAL_ROWS) -> list[JournalRow]:
    """The newest ``n`` of ``entries`` (journal dicts, newest first) as rows."""
    def num(e: dict, key: str) -> int:
        v = e.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    return [JournalRow(e.get("ended_ms") if isinstance(e.get("ended_ms"), int) else None,
                       str(e.get("operation") or "?"), str(e.get("queue") or "?"), outcome(e),
                       num(e, "planned"), num(e, "moved"), num(e, "skipped"), num(e, "failed"))
            for e in entries[:n]]
