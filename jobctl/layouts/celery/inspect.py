"""Where a Celery message is: ``unacked`` (by delivery tag, or by task id
in this queue's entries) or a ready list (by task id or delivery tag),
read in bounded windows; else, when the queue opted in, the task's failed
result record (dead)."""

from __future__ import annotations

from jobctl.layouts.celery.records import Router, unacked_records, walk_ready, walk_unacked
from jobctl.layouts.celery.results import RecordTally, failed_of_queue, failed_record, opted_in
from jobctl.model import JobRecord

__all__ = ["find_message"]


def _matches(rec: JobRecord, ident: str) -> bool:
    return rec.job_id == ident or rec.meta.get("delivery_tag") == ident


def find_message(layout, ident: str) -> JobRecord | None:
    """The record of the message whose task id or delivery tag is ``ident``; ``None`` when no key holds it."""
    score = layout.client.zscore(layout.keys.unacked_index, ident)
    if score is not None:
        recs = unacked_records(layout, [(ident.encode(), score)], Router(layout.client, layout.keys))
        if recs:
            return recs[0]
    for walk in (walk_unacked, walk_ready):
        for recs in walk(layout, 1000):
            for rec in recs:
                if _matches(rec, ident):
                    return rec
    return _failed_record(layout, ident) if opted_in(layout) else None


def _failed_record(layout, task_id: str) -> JobRecord | None:
    """Task ``task_id``'s failed result record when it belongs to this queue (one ``GET``, one ``HGET``)."""
    key = layout.keys.result_record(task_id)
    raw = layout.client.get(key)
    found = failed_of_queue(layout, [(key, raw)], RecordTally()) if raw is not None else []
    if not found:
        return None
    mark = layout.client.hget(layout.keys.replayed, task_id)
    return failed_record(layout, key, raw, found[0][2], None if mark is None else mark.decode())
