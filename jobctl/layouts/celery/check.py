"""``jobctl check`` for the celery layout: kombu's invariants, report only.

* every ``unacked`` value has its ``unacked_index`` entry and every index
  entry its value (``unindexed`` / ``dangling``: kombu writes both in one
  pipeline and removes both on ack; a value without an index entry is never
  restored by kombu's ``restore_visible``);
* every ``unacked`` value is kombu's ``[message, exchange, routing_key]``
  and routes to a queue (``malformed`` / ``unroutable``: kombu's restore
  would drop it);
* no ready message of this queue is also unacked (``multiple_states``,
  by delivery tag).

The unacked store is global: its findings are reported by the check of
every Celery queue.  Nothing is repaired.  Each finding is read again in one
``MULTI``/``EXEC`` before it is reported; one that no longer holds is
counted as ``transient``.  Cost: ``unacked`` and its index are read with
``HSCAN``/``ZSCAN`` and the ready lists in windows of 1,000.
"""

from __future__ import annotations

from jobctl.layouts.celery.message import unacked_parts
from jobctl.layouts.celery.records import Router, walk_ready
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import CheckReport, Problem

__all__ = ["check_queue"]


def _unacked_findings(layout, report: CheckReport) -> tuple[list[Problem], set[str]]:
    """Findings of the global unacked store, and every tag it holds."""
    k, client = layout.keys, layout.client
    router = Router(client, k)
    out, tags = [], set()
    for tag, stored in client.hscan_iter(k.unacked, count=1000):
        tag = text(tag)
        tags.add(tag)
        parts = unacked_parts(stored)
        if parts is None:
            out.append(Problem("malformed", "", tag, "unacked value is not [message, exchange, routing_key]"))
        elif not router.queues(parts.exchange, parts.routing_key):
            out.append(Problem("unroutable", "", tag, f"exchange {parts.exchange!r} routing key "
                                                     f"{parts.routing_key!r} reach no bound queue"))
    indexed = {text(m) for m, _ in client.zscan_iter(k.unacked_index, count=1000)}
    out += [Problem("unindexed", "", t, "unacked value without an unacked_index entry") for t in sorted(tags - indexed)]
    out += [Problem("dangling", "", t, "unacked_index entry without an unacked value") for t in sorted(indexed - tags)]
    report.checked_ids += len(tags | indexed)
    return out, tags


def _still_holds(layout, p: Problem) -> bool:
    """Re-read ``p``'s tag in one transaction: does the finding still hold?"""
    k = layout.keys
    pipe = layout.client.pipeline(transaction=True)
    pipe.hget(k.unacked, p.job_id)
    pipe.zscore(k.unacked_index, p.job_id)
    value, score = pipe.execute()
    if p.kind == "unindexed":
        return value is not None and score is None
    if p.kind == "dangling":
        return value is None and score is not None
    if p.kind == "multiple_states":
        return value is not None
    if value is None:
        return False
    parts = unacked_parts(value)
    if p.kind == "malformed":
        return parts is None
    return parts is not None and not Router(layout.client, k).queues(parts.exchange, parts.routing_key)


def check_queue(layout, *, repair: bool = False) -> CheckReport:
    """The check report of a Celery queue (``repair`` repairs nothing)."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    problems, tags = _unacked_findings(layout, report)
    for recs in walk_ready(layout, 1000):
        report.checked_ids += len(recs)
        problems += [Problem("multiple_states", "", str(r.meta["delivery_tag"]), "ready and unacked")
                     for r in recs if r.meta.get("delivery_tag") in tags]
    for p in problems:
        if _still_holds(layout, p):
            report.problems.append(p)
        else:
            report.transient += 1
    return report
