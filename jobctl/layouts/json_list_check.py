"""``jobctl check`` for the json-list layout: the invariants of seed 002, and
the repairs that are unambiguous.

Invariants:

* every job string is a JSON object with an ``id`` (``malformed``, report
  only: the workers cannot parse it either);
* every job id is in exactly one of pending, processing, dead and
  suppressed (``multiple_states``, report only);
* no string appears twice in one list (``duplicate``; repair: drop the
  extra copies from the tail);
* every processing string has a claim time in ``processing:times``
  (``missing_claim_time``: the seed's recovery never finds it; repair: set
  a claim time that makes it stuck now, so ``requeue --stuck`` or the
  seed's recovery takes it);
* every claim time has a processing string (``stray_claim_time``; repair:
  remove it if its score is unchanged);
* every suppressed id has its kept string (``dangling``; repair: remove the
  id).

Entries of ``attempts`` and ``errors`` for ids in no state are normal: the
seed's ack never deletes them.

Cost: every list and zset is read in windows of 1,000 and every string
parsed: linear in the queue's size, in bounded commands.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..scripts import script
from .base import now_ms
from .common import text
from .reliable_list_check import CheckReport, Problem
from .walks import WINDOW, walk_list, walk_zset

if TYPE_CHECKING:
    from .json_list import JsonList

__all__ = ["check_queue"]


def check_queue(layout: "JsonList", *, repair: bool = False) -> CheckReport:
    """Check ``layout``; with ``repair``, apply the unambiguous fixes."""
    client, k = layout.client, layout.keys
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    shard = k.prefix
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)
    processing: dict[str, bytes] = {}
    for key, state in ((k.pending, "ready"), (k.processing, "processing"), (k.dead, "dead"), (k.hold, "dead")):
        counts: Counter[bytes] = Counter()
        for _, chunk in walk_list(client, key, from_right=False):
            counts.update(chunk)
        for raw, n in counts.items():
            env = layout.parse(raw)
            job_id = env.job_id
            where[job_id].append((state, key))
            if env.problems:
                report.problems.append(Problem("malformed", shard, job_id,
                                               f"in {state} ({key}): {env.problems[0]}"))
            if n > 1:
                report.problems.append(Problem("duplicate", shard, job_id, f"{n} copies of one string in {key}",
                                               "remove extra copies", _args=("duplicate", key, str(n), raw)))
            if state == "processing":
                processing[job_id] = raw
    suppressed = []
    for _, pairs in walk_zset(client, k.suppressed):
        suppressed += [text(m) for m, _ in pairs]
    for i in range(0, len(suppressed), WINDOW):
        chunk = suppressed[i:i + WINDOW]
        for job_id, raw in zip(chunk, client.hmget(k.suppressed_raw, chunk)):
            where[job_id].append(("suppressed", k.suppressed))
            if raw is None:
                report.problems.append(Problem("dangling", shard, job_id, "suppressed without its kept string",
                                               "remove the id", _args=("dangling", k.suppressed, "", b"")))
    times: dict[str, float] = {}
    for _, pairs in walk_zset(client, k.processing_times):
        times.update((text(m), s) for m, s in pairs)
    report.checked_ids = len(where)

    for job_id, places in where.items():
        states = sorted({s for s, _ in places})
        if len(states) > 1:
            report.problems.append(Problem("multiple_states", shard, job_id, "in " + " and ".join(states)))
    stuck_at = (now_ms() - layout.visibility_ms - 1) / 1000.0
    for job_id, raw in processing.items():
        if job_id not in times:
            report.problems.append(Problem("missing_claim_time", shard, job_id,
                                           "processing without a claim time: the seed's recovery never finds it",
                                           "set a claim time that makes it stuck now",
                                           _args=("missing_claim_time", k.processing, repr(stuck_at), raw)))
    for job_id, score in times.items():
        if job_id not in processing:
            report.problems.append(Problem("stray_claim_time", shard, job_id,
                                           "claim time without a processing string", "remove the claim time",
                                           _args=("stray_claim_time", k.processing, repr(score), b"")))

    if repair:
        fix = script(client, "jl_repair")
        for p in report.problems:
            if not p._args:
                continue
            kind, key, arg, raw = p._args
            p.repaired = bool(fix(keys=[key, k.processing_times, k.suppressed_raw, k.suppressed_info],
                                  args=[kind, p.job_id, arg, raw]))
    return report
