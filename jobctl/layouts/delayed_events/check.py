"""``jobctl check`` for the delayed-events layout (seed 003).

Invariants (all reported, none repaired: each has a fix the library itself
applies or that needs a person):

* every zset member is ``<class>###<id>`` (``bad_member``);
* every zset member has an envelope in the events hash (``dangling``; the
  dispatcher drops such a member when it comes due);
* every envelope parses, has an integer ``attempt``, and its ``type`` and
  ``payload.id`` spell its member (``malformed``, ``mismatch``);
* every events-hash field has a zset member (``orphan_envelope``: an event
  nothing will ever dispatch).

Reads: ``ZRANGE`` + ``HMGET`` windows of 1,000 over the zset, ``HSCAN``
(COUNT 1,000) + ``ZMSCORE`` over the hash; linear in the size, bounded per
command.  The windows read a live queue over time (the dispatcher moves
members and rewrites envelopes between two reads), so before a finding is
reported its member is read again atomically (one ``MULTI`` of ``ZSCORE`` +
``HGET`` per finding, at most :data:`~.reliable_list_check.RECHECK_MAX`):
a finding that no longer holds is counted as ``transient`` instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobctl.keys import delayed_event_member, split_delayed_event_member
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import RECHECK_MAX, CheckReport, Problem
from jobctl.layouts.walks import WINDOW

if TYPE_CHECKING:
    from jobctl.layouts.delayed_events.layout import DelayedEvents

__all__ = ["check_queue"]


def check_queue(layout: "DelayedEvents", *, repair: bool = False) -> CheckReport:
    """Check ``layout``; ``repair`` changes nothing (no unambiguous repair)."""
    from jobctl.layouts.delayed_events.layout import event_envelope

    client, k = layout.client, layout.keys
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    seen: dict[str, bytes | None] = {}  # member -> the envelope a finding was judged on
    start = 0
    while True:
        pairs = client.zrange(k.zset, start, start + WINDOW - 1)
        if not pairs:
            break
        members = [text(m) for m in pairs]
        raws = client.hmget(k.events, members)
        report.checked_ids += len(members)
        for member, raw in zip(members, raws):
            seen[member] = raw
            parts = split_delayed_event_member(member)
            if parts is None:
                report.problems.append(Problem("bad_member", "", member, "member is not <class>###<id>"))
            if raw is None:
                report.problems.append(Problem("dangling", "", member, f"no envelope in {k.events} (the "
                                               "dispatcher drops the member when it comes due)"))
                continue
            env = event_envelope(raw, member)
            if env.problems:
                report.problems.append(Problem("malformed", "", member, "; ".join(env.problems)))
                continue
            doc = env.document or {}
            payload = doc.get("payload")
            spelled = delayed_event_member(str(doc.get("type")), str(payload.get("id"))) \
                if isinstance(payload, dict) and "id" in payload else None
            if parts is not None and spelled != member:
                report.problems.append(Problem("mismatch", "", member, f"envelope spells {spelled!r}"))
        if len(pairs) < WINDOW:
            break
        start += WINDOW
    cursor = 0
    while True:
        cursor, fields = client.hscan(k.events, cursor, count=WINDOW)
        names = [text(f) for f in fields]
        report.payload_keys += len(names)
        if names:
            for name, score in zip(names, client.zmscore(k.zset, names)):
                if score is None:
                    report.problems.append(Problem("orphan_envelope", "", name,
                                                   f"envelope in {k.events} without a member in {k.zset}"))
        if cursor == 0:
            break
    _recheck(client, k, report, seen)
    return report


def _recheck(client, k, report: CheckReport, seen: dict[str, bytes | None]) -> None:
    """Keep only the findings that still hold in one atomic read of their
    members (``MULTI``/``EXEC`` of ``ZSCORE`` + ``HGET`` each); the others
    count as ``report.transient``."""
    found = report.problems[:RECHECK_MAX]
    if not found:
        return
    pipe = client.pipeline(transaction=True)
    for p in found:
        pipe.zscore(k.zset, p.job_id)
        pipe.hget(k.events, p.job_id)
    replies = pipe.execute()
    kept = []
    for n, p in enumerate(found):
        score, raw = replies[2 * n], replies[2 * n + 1]
        if p.kind == "orphan_envelope":
            holds = score is None and raw is not None
        elif p.kind == "dangling":
            holds = score is not None and raw is None
        elif p.kind == "bad_member":
            holds = score is not None
        else:  # malformed, mismatch: judged on the envelope seen, still there and unchanged
            holds = score is not None and raw is not None and raw == seen.get(p.job_id)
        if holds:
            kept.append(p)
        else:
            report.transient += 1
    report.problems[:len(found)] = kept
