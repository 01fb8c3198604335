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

On a live queue workers claim (``BLMOVE``, then ``ZADD`` of the claim time:
two commands), ack and retry while the check reads (issue 12, item 10):
before a finding is reported, what it is about is read again in one
``MULTI``/``EXEC`` transaction (the strings' copies near both ends of their
lists, ``LPOS ... MAXLEN``; the claim time; the processing list when it
holds at most :data:`RECHECK_PROCESSING` strings), and a finding that no
longer holds is counted as ``transient`` instead.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from jobctl.scripts import script
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import CheckReport, Problem, confirmed
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

if TYPE_CHECKING:
    from jobctl.layouts.json_list.layout import JsonList

__all__ = ["check_queue", "RECHECK_PROCESSING"]

#: A processing list up to this long is re-read whole when a claim-time finding is re-checked.
RECHECK_PROCESSING = 10_000


def check_queue(layout: "JsonList", *, repair: bool = False) -> CheckReport:
    """Check ``layout``; with ``repair``, apply the unambiguous fixes."""
    client, k = layout.client, layout.keys
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    shard = k.prefix
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)
    raws: dict[tuple[str, str], bytes] = {}  # (id, list key) -> the string seen there
    processing: dict[str, bytes] = {}
    for key, state in ((k.pending, "ready"), (k.processing, "processing"), (k.dead, "dead"), (k.hold, "dead")):
        counts: Counter[bytes] = Counter()
        for _, chunk in walk_list(client, key, from_right=False):
            counts.update(chunk)
        for raw, n in counts.items():
            env = layout.parse(raw)
            job_id = env.job_id
            where[job_id].append((state, key))
            raws[(job_id, key)] = raw
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
                                           "processing without a claim time: the workers' recovery never finds it",
                                           "set a claim time that makes it stuck now",
                                           _args=("missing_claim_time", k.processing, repr(stuck_at), raw)))
    for job_id, score in times.items():
        if job_id not in processing:
            report.problems.append(Problem("stray_claim_time", shard, job_id,
                                           "claim time without a processing string", "remove the claim time",
                                           _args=("stray_claim_time", k.processing, repr(score), b"")))

    _recheck(layout, report, raws, times)
    if repair:
        fix = script(client, "jl_repair")
        for p in report.problems:
            if not p._args or not confirmed(p):
                continue
            kind, key, arg, raw = p._args
            p.repaired = bool(fix(keys=[key, k.processing_times, k.suppressed_raw, k.suppressed_info],
                                  args=[kind, p.job_id, arg, raw]))
    return report


def _recheck(layout: "JsonList", report: CheckReport, raws: dict[tuple[str, str], bytes],
             times: dict[str, float]) -> None:
    """Drop the findings that no longer hold (see the module docstring)."""
    from jobctl.layouts.reliable_list.check import RECHECK_MAX, RECHECK_MAXLEN

    client, k = layout.client, layout.keys
    lists = {k.pending: "ready", k.processing: "processing", k.dead: "dead"}
    kept = []
    for n, p in enumerate(report.problems):
        if n >= RECHECK_MAX or p.kind not in ("duplicate", "multiple_states", "missing_claim_time",
                                               "stray_claim_time"):
            kept.append(p)
            continue
        seen = [(key, raws[(p.job_id, key)]) for key in lists if (p.job_id, key) in raws]
        pipe = client.pipeline(transaction=True)  # one atomic read per finding
        for key, raw in seen:
            pipe.llen(key)
            pipe.lpos(key, raw, count=0, maxlen=RECHECK_MAXLEN)
            pipe.lpos(key, raw, rank=-1, count=0, maxlen=RECHECK_MAXLEN)
        pipe.zscore(k.processing_times, p.job_id)
        pipe.zscore(k.suppressed, p.job_id)
        pipe.llen(k.processing)
        pipe.lrange(k.processing, 0, RECHECK_PROCESSING - 1)
        try:
            res = pipe.execute()
        except Exception:  # noqa: BLE001 - a wrong-typed key: keep the finding as read
            kept.append(p)
            continue
        copies: dict[str, int | None] = {}
        for i, (key, _) in enumerate(seen):
            length, head, tail = res[3 * i: 3 * i + 3]
            c = len(set(head or []) | set(tail or []))
            copies[key] = None if c == 0 and length > 2 * RECHECK_MAXLEN else c
        claim, supp, plen, pstrings = res[-4:]
        if _holds_jl(layout, p, copies, lists, claim, supp, plen, pstrings, times):
            kept.append(p)
        else:
            report.transient += 1
    report.problems = kept


def _holds_jl(layout, p, copies, lists, claim, supp, plen, pstrings, times) -> bool:
    k = layout.keys
    if p.kind == "duplicate":
        c = copies.get(p._args[1])
        return c is None or c > 1
    if p.kind == "multiple_states":
        states = {lists[key] for key, c in copies.items() if c is None or c > 0}
        if supp is not None:
            states.add("suppressed")
        return len(states) > 1
    if p.kind == "missing_claim_time":
        c = copies.get(k.processing)
        return claim is None and (c is None or c > 0)
    if p.kind == "stray_claim_time":
        if claim is None or float(claim) != times.get(p.job_id):
            return False  # acked or re-claimed since
        if plen > RECHECK_PROCESSING:
            return True  # cannot tell: as read
        return all(layout.parse(raw).job_id != p.job_id for raw in pstrings)
    return True
