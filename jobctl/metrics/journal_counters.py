"""Counters of jobctl's own operations, read from the queues' journal streams.

Every applied operation (and every runbook step) appends an entry to the
queue's capped journal stream (:mod:`jobctl.ops.journal`).  The exporter
reads each stream incrementally (``XRANGE key (<last id> + COUNT n``) and
counts, per (queue, operation): entries, jobs moved, skipped and failed.

The counts start from what the stream still holds when the exporter starts
(it is capped at about :data:`~jobctl.keys.JOURNAL_STREAM_MAXLEN` entries),
then grow with every new entry; a restarted exporter starts again from the
stream (Prometheus treats that as a counter reset).  At most
``max_entries`` entries are read per stream per refresh: a backlog is
caught up over a few scrapes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import orjson

__all__ = ["OpCounts", "JournalCounters", "MAX_ENTRIES_PER_REFRESH"]

MAX_ENTRIES_PER_REFRESH = 2_000
_PAGE = 500


@dataclass
class OpCounts:
    """Totals for one (queue, operation)."""

    entries: int = 0
    moved: int = 0
    skipped: int = 0
    failed: int = 0


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class JournalCounters:
    """Incremental totals per (queue, operation); not thread-safe (the
    collector calls :meth:`update` under its lock)."""

    def __init__(self, max_entries: int = MAX_ENTRIES_PER_REFRESH) -> None:
        self.max_entries = max_entries
        self.last_id: dict[str, bytes] = {}
        self.counts: dict[tuple[str, str], OpCounts] = defaultdict(OpCounts)

    def update(self, client, streams: dict[str, str]) -> int:
        """Read new entries of ``streams`` (queue -> journal stream key);
        returns how many were read."""
        total = 0
        for queue, key in streams.items():
            read = 0
            while read < self.max_entries:
                last = self.last_id.get(key)
                start = b"(" + last if last else "-"
                rows = client.xrange(key, min=start, max="+", count=min(_PAGE, self.max_entries - read))
                if not rows:
                    break
                for _stream_id, fields in rows:
                    self._count(queue, fields)
                self.last_id[key] = rows[-1][0] if isinstance(rows[-1][0], bytes) else rows[-1][0].encode()
                read += len(rows)
                if len(rows) < _PAGE:
                    break
            total += read
        return total

    def _count(self, queue: str, fields) -> None:
        raw = fields.get(b"entry") or fields.get("entry")
        try:
            doc = orjson.loads(raw)
        except (orjson.JSONDecodeError, TypeError):
            return
        if not isinstance(doc, dict):
            return
        c = self.counts[(queue, str(doc.get("operation") or "unknown"))]
        c.entries += 1
        c.moved += _int(doc.get("moved"))
        c.skipped += _int(doc.get("skipped"))
        c.failed += _int(doc.get("failed"))
