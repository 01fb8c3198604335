"""``jobctl check`` for the stream-group layout (seed 000 sections 11-13).

Invariants, per shard:

* the consumer group exists on the stream (``missing_group``);
* every pending entry still exists in the stream (``deleted_pending``: a
  trimmed or deleted entry that stays in the PEL forever; ``XAUTOCLAIM``
  reports such ids as deleted).  Repair: ``XACK`` it, which is always
  right: no worker can process an entry that is gone;
* every id in the scheduled zset, the dead list and the suppressed zset has a
  payload key (``dangling``; report only) that is a string
  (``wrong_type_payload``, naming the key; report only);
* no id is in more than one of those (``multiple_states``; report only).

Reads are windows of 1,000 (``XPENDING``, pipelined ``XRANGE``, ``ZRANGE``,
``LRANGE``, pipelined ``TYPE``): linear in the queue's size, bounded per
command.  Workers ack and dead-letter while the check reads (issue 12, item
10): before a finding is reported, its entry or job is read again in one
``MULTI``/``EXEC`` transaction, and a finding that no longer holds is
counted as ``transient`` instead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from jobctl.keys import StreamGroupKeys
from jobctl.layouts.common import PAYLOAD_TYPES, text, wrong_type_note
from jobctl.layouts.reliable_list.check import CheckReport, Problem, confirmed
from jobctl.layouts.walks import WINDOW, key_types, walk_list, walk_zset

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["check_queue"]


def _zset_ids(client, key: str) -> list[str]:
    return [text(m) for _, pairs in walk_zset(client, key) for m, _ in pairs]


def _list_ids(client, key: str) -> list[str]:
    return [text(x) for _, chunk in walk_list(client, key, from_right=False) for x in chunk]


def _stream_job_ids(client, key: str) -> list[str]:
    out, start = [], "-"
    while True:
        chunk = client.xrange(key, start, "+", count=WINDOW)
        for eid, fields in chunk:
            job = fields.get(b"jobId")
            out.append(text(job) if job is not None else text(eid))
        if len(chunk) < WINDOW:
            return out
        start = f"({text(chunk[-1][0])}"


def _check_shard(layout: "StreamGroup", keys: StreamGroupKeys, report: CheckReport, repair: bool) -> None:
    client = layout.client
    if client.exists(keys.stream) and layout.group_info(keys) is None:
        report.problems.append(Problem("missing_group", keys.tag, "", f"no consumer group {layout.group} on "
                                       f"{keys.stream}"))
    start = "-"
    while True:
        rows = layout._xpending(keys, start, WINDOW)
        if not rows:
            break
        pipe = client.pipeline(transaction=False)
        for r in rows:
            eid = text(r["message_id"])
            pipe.xrange(keys.stream, eid, eid)
        gone = [text(r["message_id"]) for r, e in zip(rows, pipe.execute()) if not e]
        report.checked_ids += len(rows)
        for eid in gone:
            p = Problem("deleted_pending", keys.tag, eid, f"pending entry {eid} no longer exists in "
                        f"{keys.stream}", "XACK the entry")
            if repair and confirmed(p):
                p.repaired = bool(client.xack(keys.stream, layout.group, eid))
            report.problems.append(p)
        if len(rows) < WINDOW:
            break
        start = f"({text(rows[-1]['message_id'])}"

    where: dict[str, list[str]] = defaultdict(list)
    for job_id in _zset_ids(client, keys.scheduled):
        where[job_id].append("scheduled")
    dead = _stream_job_ids(client, keys.dead_stream) if layout.dead_kind == "stream" \
        else _list_ids(client, keys.hold) + _list_ids(client, keys.dead)  # the hold: set aside by a walk
    for job_id in dead:
        where[job_id].append("dead")
    for job_id in _zset_ids(client, keys.suppressed):
        where[job_id].append("suppressed")
    ids = list(where)
    report.checked_ids += len(ids)
    for job_id, redis_type in zip(ids, key_types(client, [keys.job(i) for i in ids])):
        states = where[job_id]
        if len(states) > 1:
            report.problems.append(Problem("multiple_states", keys.tag, job_id, f"in {', '.join(states)}"))
        if redis_type not in PAYLOAD_TYPES:  # MGET reads it as nil: named, never "dangling"
            report.problems.append(Problem("wrong_type_payload", keys.tag, job_id,
                                           f"in {', '.join(states)}: {wrong_type_note(keys.job(job_id), redis_type)}"))
        elif redis_type == b"none" and layout.dead_kind == "list":
            report.problems.append(Problem("dangling", keys.tag, job_id,
                                           f"{states[0]} id without payload key {keys.job(job_id)}"))


def check_queue(layout: "StreamGroup", *, repair: bool = False) -> CheckReport:
    """Check every shard of ``layout``; with ``repair``, XACK deleted pending entries."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    for keys in layout.shards:
        before = len(report.problems)
        _check_shard(layout, keys, report, repair)
        _recheck(layout, keys, report, before)
    return report


def _recheck(layout: "StreamGroup", keys: StreamGroupKeys, report: CheckReport, start: int) -> None:
    """Drop the findings ``report.problems[start:]`` that no longer hold."""
    from jobctl.layouts.reliable_list.check import RECHECK_MAX, RECHECK_MAXLEN

    client = layout.client
    kept = report.problems[:start]
    for n, p in enumerate(report.problems[start:]):
        if n >= RECHECK_MAX or p.repaired or p.kind not in ("deleted_pending", "multiple_states", "dangling"):
            kept.append(p)
            continue
        pipe = client.pipeline(transaction=True)  # one atomic read per finding
        if p.kind == "deleted_pending":
            pipe.xpending_range(keys.stream, layout.group, p.job_id, p.job_id, 1)
            pipe.xrange(keys.stream, p.job_id, p.job_id)
        else:
            pipe.zscore(keys.scheduled, p.job_id)
            pipe.zscore(keys.suppressed, p.job_id)
            pipe.exists(keys.job(p.job_id))
            if layout.dead_kind == "list":
                pipe.llen(keys.dead)
                pipe.lpos(keys.dead, p.job_id, count=0, maxlen=RECHECK_MAXLEN)
                pipe.lpos(keys.dead, p.job_id, rank=-1, count=0, maxlen=RECHECK_MAXLEN)
        try:
            res = pipe.execute()
        except Exception:  # noqa: BLE001 - a wrong-typed key: keep the finding as read
            kept.append(p)
            continue
        if p.kind == "deleted_pending":
            holds = bool(res[0]) and not res[1]
        else:
            states = {s for s, v in (("scheduled", res[0]), ("suppressed", res[1])) if v is not None}
            if layout.dead_kind == "list":
                length, head, tail = res[3:6]
                copies = len(set(head or []) | set(tail or []))
                if copies or (length > 2 * RECHECK_MAXLEN and "dead" in p.detail):
                    states.add("dead")
            elif "dead" in p.detail:
                states.add("dead")  # a dead stream: as the walk saw it
            holds = len(states) > 1 if p.kind == "multiple_states" else (not res[2] and bool(states))
        if holds:
            kept.append(p)
        else:
            report.transient += 1
    report.problems = kept
