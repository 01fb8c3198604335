"""``jobctl check`` for the stream-group layout (seed 000 sections 11-13).

Invariants, per shard:

* the consumer group exists on the stream (``missing_group``);
* every pending entry still exists in the stream (``deleted_pending``: a
  trimmed or deleted entry that stays in the PEL forever; ``XAUTOCLAIM``
  reports such ids as deleted).  Repair: ``XACK`` it, which is always
  right: no worker can process an entry that is gone;
* every id in the scheduled zset, the dead list and the suppressed zset has a
  payload key (``dangling``; report only);
* no id is in more than one of those (``multiple_states``; report only).

Reads are windows of 1,000 (``XPENDING``, pipelined ``XRANGE``, ``ZRANGE``,
``LRANGE``, pipelined ``EXISTS``): linear in the queue's size, bounded per
command.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..keys import StreamGroupKeys
from .common import text
from .reliable_list_check import CheckReport, Problem
from .walks import WINDOW, keys_exist, walk_list, walk_zset

if TYPE_CHECKING:
    from .stream_group import StreamGroup

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
            if repair:
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
    for job_id, exists in zip(ids, keys_exist(client, [keys.job(i) for i in ids])):
        states = where[job_id]
        if len(states) > 1:
            report.problems.append(Problem("multiple_states", keys.tag, job_id, f"in {', '.join(states)}"))
        if not exists and layout.dead_kind == "list":
            report.problems.append(Problem("dangling", keys.tag, job_id,
                                           f"{states[0]} id without payload key {keys.job(job_id)}"))


def check_queue(layout: "StreamGroup", *, repair: bool = False) -> CheckReport:
    """Check every shard of ``layout``; with ``repair``, XACK deleted pending entries."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    for keys in layout.shards:
        _check_shard(layout, keys, report, repair)
    return report
