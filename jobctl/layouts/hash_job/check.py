"""``jobctl check`` for the hash-job layout: the invariants of seed 001, and
the repairs that are unambiguous.

Invariants:

* every job id is in exactly one of pending, processing, failed (or
  jobctl's hold: failed ids a window-engine walk set aside, dead too),
  suppressed and completed (``multiple_states``);
* no id appears twice in one list (``duplicate``; repair: drop the extra
  copies from the tail);
* no dangling id: every id has its job hash (``dangling``; repair: remove
  the id from its list or from the suppressed zset, if the hash is still
  missing).  A failed id whose hash expired (the workers' TTL) is reported
  here too; a completed id whose hash expired is normal history cleanup
  and only counted (``expired_history`` in the JSON);
* the hash's ``status`` matches its list (``status_mismatch``, report only:
  which one is right is not knowable), except for a processing id still
  ``pending`` without a claim time: a claim not stamped yet (or whose
  worker died between BLMOVE and HSET), which seed 001's 2 x timeout rule
  reclaims;
* every processing job can be reclaimed: it has ``claimed_at_ms`` or
  ``enqueued_at_ms`` (``no_deadline``; repair: set ``claimed_at_ms`` so
  that it is stuck now, and ``requeue --stuck`` or the workers' reclaimer
  takes it);
* no orphan job: a hash whose status is pending or processing, or that has
  no TTL, is in some list (``orphan_job``, report only).  Hashes of jobs
  trimmed off the capped completed/failed lists, still within their TTL,
  are normal.

Cost: every list and the suppressed zset are read in windows of 1,000,
statuses with pipelined ``HMGET``, and the job hashes are SCANned: linear in
the queue's size, in bounded commands.

On a live queue the workers claim, ack and fail jobs while the check reads
(issue 12, item 10): before a finding is reported, its job is read again in
one ``MULTI``/``EXEC`` transaction (the hash, and the id's copies near both
ends of every list: ``LPOS ... MAXLEN``), and a finding that no longer holds
is counted as ``transient`` instead.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from jobctl.cluster import scan_pages
from jobctl.model import State
from jobctl.scripts import script
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import RECHECK_MAXLEN, CheckReport, Problem, confirmed
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

if TYPE_CHECKING:
    from jobctl.layouts.hash_job.layout import HashJob

__all__ = ["check_queue", "RECHECK_MAX"]

#: Findings re-checked atomically; beyond that they are reported as read.
RECHECK_MAX = 20_000


class HashJobCheckReport(CheckReport):
    """:class:`CheckReport` plus ``expired_history``: completed ids whose
    hash expired (normal; not a problem)."""

    expired_history: int = 0

    def to_json(self):
        out = super().to_json()
        out["expired_history"] = self.expired_history
        return out


#: the hash status a job has in each place it is listed
_EXPECTED_STATUS = {"ready": "pending", "processing": "processing", "dead": "failed", "history": "completed",
                    "suppressed": "failed"}


def check_queue(layout: "HashJob", *, repair: bool = False) -> CheckReport:
    """Check ``layout``; with ``repair``, apply the unambiguous fixes."""
    client, k = layout.client, layout.keys
    report = HashJobCheckReport(queue=layout.queue_name, layout=layout.name)
    where = _places(layout, report)
    ids = list(where)
    report.checked_ids = len(ids)
    now = now_ms()
    for i in range(0, len(ids), WINDOW):
        chunk = ids[i:i + WINDOW]
        pipe = client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.hmget(k.job(job_id), "status", "claimed_at_ms", "enqueued_at_ms")
        for job_id, reply in zip(chunk, pipe.execute(raise_on_error=False)):
            _check_job(layout, report, job_id, reply, where[job_id], now)
    _check_orphans(layout, report, where)
    _recheck(layout, report, _EXPECTED_STATUS)
    if repair:
        fix = script(client, "hj_repair")
        for p in report.problems:
            if not p._args or not confirmed(p):
                continue
            kind, key, arg = p._args
            # reach: the re-read's, so a finding it confirmed is within reach of the repair
            p.repaired = bool(fix(keys=[key, k.job(p.job_id), k.suppressed_info],
                                  args=[kind, p.job_id, arg, RECHECK_MAXLEN]))
    return report


def _places(layout: "HashJob", report: CheckReport) -> dict[str, list[tuple[str, str]]]:
    """Every listed id -> its ``[(state, key)]``; a duplicate in one list is reported."""
    client, k = layout.client, layout.keys
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)
    lists = [(k.pending, "ready"), (k.processing, "processing"), (k.failed, "dead"), (k.hold, "dead"),
             (k.completed, "history")]
    for key, state in lists:
        counts: Counter[str] = Counter()
        for _, chunk in walk_list(client, key, from_right=False):
            counts.update(text(x) for x in chunk)
        for job_id, n in counts.items():
            where[job_id].append((state, key))
            if n > 1:
                report.problems.append(Problem("duplicate", k.name, job_id, f"{n} copies in {key}",
                                               "remove extra copies", _args=("duplicate", key, str(n))))
    for _, pairs in walk_zset(client, k.suppressed):
        for m, _ in pairs:
            where[text(m)].append(("suppressed", k.suppressed))
    return where


def _check_job(layout: "HashJob", report: CheckReport, job_id: str, reply, places: list[tuple[str, str]],
               now: int) -> None:
    """The findings of one listed job: ``reply`` is its hash's HMGET of
    status, claimed_at_ms, enqueued_at_ms (or the error of a wrong type)."""
    k, shard = layout.keys, layout.keys.name
    if isinstance(reply, Exception):  # a job key of the wrong type: that job's finding alone
        report.problems.append(Problem("wrong_type_payload", shard, job_id,
                                       f"{k.job(job_id)} is not a hash ({str(reply).splitlines()[0][:80]})"))
        return
    status, claimed, enqueued = reply
    states = sorted({s for s, _ in places})
    if len(states) > 1:
        report.problems.append(Problem("multiple_states", shard, job_id, "in " + " and ".join(states)))
    if status is None:
        _check_missing_hash(report, shard, job_id, places)
        return
    _check_status(report, shard, job_id, places, status, claimed)
    if any(s == "processing" for s, _ in places) and \
            layout.deadline_of({b"claimed_at_ms": claimed or b"", b"enqueued_at_ms": enqueued or b""}) is None:
        stuck_at = now - layout.visibility_ms - 1
        report.problems.append(Problem("no_deadline", shard, job_id,
                                       "processing without claimed_at_ms or enqueued_at_ms: never reclaimed",
                                       "set claimed_at_ms so that it is stuck now",
                                       _args=("no_deadline", k.processing, str(stuck_at))))


def _check_missing_hash(report: CheckReport, shard: str, job_id: str, places: list[tuple[str, str]]) -> None:
    """A listed id without its hash: expired history, else dangling."""
    for state, key in places:
        if state == "history":
            report.expired_history += 1
            continue
        kind = "dangling_zset" if state == "suppressed" else "dangling_list"
        why = "hash expired (workers' TTL)" if state == "dead" else "no job hash"
        report.problems.append(Problem("dangling", shard, job_id, f"in {state} ({key}): {why}",
                                       "remove the id from the index", _args=(kind, key, "")))


def _check_status(report: CheckReport, shard: str, job_id: str, places: list[tuple[str, str]], status,
                  claimed) -> None:
    """The hash's status against each place the id is listed."""
    from jobctl.layouts.hash_job.layout import unstamped_claim

    for state, key in places:
        if state == "processing" and \
                unstamped_claim(State.PROCESSING, {b"status": status, b"claimed_at_ms": claimed or b""}):
            continue  # the 2 x timeout rule covers it
        if text(status) != _EXPECTED_STATUS[state]:
            report.problems.append(Problem("status_mismatch", shard, job_id,
                                           f"hash status {text(status)!r} while in {state} ({key})"))


def _check_orphans(layout: "HashJob", report: CheckReport, where: dict) -> None:
    """Job hashes listed nowhere (pending, processing or without a TTL)."""
    client, k = layout.client, layout.keys
    prefix = k.job_prefix
    for found in scan_pages(client, k.job_pattern, WINDOW):  # every primary on a cluster
        orphans = [text(raw)[len(prefix):] for raw in found]
        report.payload_keys += len(orphans)
        orphans = [job_id for job_id in orphans if job_id not in where]
        if not orphans:
            continue
        pipe = client.pipeline(transaction=False)
        for job_id in orphans:
            pipe.hget(k.job(job_id), "status")
            pipe.pttl(k.job(job_id))
        res = pipe.execute()
        for n, job_id in enumerate(orphans):
            status, ttl = res[2 * n], res[2 * n + 1]
            status = text(status) if status is not None else None
            if status in ("pending", "processing") or ttl == -1:
                report.problems.append(Problem("orphan_job", k.name, job_id,
                                               f"job hash (status {status!r}) is in no list"))


def _recheck(layout: "HashJob", report: CheckReport, expected_status: dict[str, str]) -> None:
    """Drop the findings that no longer hold (see the module docstring)."""
    if not report.problems:
        return
    client, k = layout.client, layout.keys
    lists = [(k.pending, "ready"), (k.processing, "processing"), (k.failed, "dead"), (k.hold, "dead"),
             (k.completed, "history")]
    snaps: dict[str, dict] = {}
    for job_id in list(dict.fromkeys(p.job_id for p in report.problems))[:RECHECK_MAX]:
        pipe = client.pipeline(transaction=True)  # one atomic read per job
        pipe.hmget(k.job(job_id), "status", "claimed_at_ms", "enqueued_at_ms")
        pipe.pttl(k.job(job_id))
        pipe.zscore(k.suppressed, job_id)
        for key, _ in lists:
            pipe.llen(key)
            pipe.lpos(key, job_id, count=0, maxlen=RECHECK_MAXLEN)
            pipe.lpos(key, job_id, rank=-1, count=0, maxlen=RECHECK_MAXLEN)
        try:
            res = pipe.execute()
        except Exception:  # noqa: BLE001 - a wrong-typed key: keep the findings as read
            continue
        (status, claimed, enqueued), ttl, supp = res[0], res[1], res[2]
        places: dict[str, int | None] = {}  # state -> copies (None: unknown, deep in a long list)
        for n, (key, state) in enumerate(lists):
            length, head, tail = res[3 + 3 * n: 6 + 3 * n]
            copies = len(set(head or []) | set(tail or []))  # LPOS positions count from the head
            places[key] = None if copies == 0 and length > 2 * RECHECK_MAXLEN else copies
        snaps[job_id] = {"status": status, "claimed": claimed, "enqueued": enqueued, "ttl": ttl,
                         "suppressed": supp, "places": places}
    kept = []
    for p in report.problems:
        snap = snaps.get(p.job_id)
        if snap is None or _holds(layout, p, snap, lists, expected_status):
            kept.append(p)
        else:
            report.transient += 1
    report.problems = kept


def _holds(layout, p: Problem, snap: dict, lists, expected_status) -> bool:
    """Whether finding ``p`` still holds on the atomic re-read ``snap``."""
    from jobctl.layouts.hash_job.layout import unstamped_claim

    places = snap["places"]

    def present(key: str, was_there: bool) -> bool:
        copies = places.get(key)
        return was_there if copies is None else copies > 0

    states = {state for key, state in lists if present(key, state in p.detail)}
    if snap["suppressed"] is not None:
        states.add("suppressed")
    status = text(snap["status"]) if snap["status"] is not None else None
    if p.kind == "duplicate":
        copies = places.get(p._args[1])
        return copies is None or copies > 1
    if p.kind == "multiple_states":
        return len(states) > 1
    if p.kind == "dangling":
        key = p._args[1]
        still = snap["suppressed"] is not None if key == layout.keys.suppressed else present(key, True)
        return status is None and still
    if p.kind == "status_mismatch":
        if status is None:
            return False
        for key, state in lists:
            if state in p.detail and present(key, True):
                if state == "processing" and unstamped_claim(
                        State.PROCESSING, {b"status": snap["status"], b"claimed_at_ms": snap["claimed"] or b""}):
                    return False
                return status != expected_status[state]
        return False
    if p.kind == "no_deadline":
        return present(layout.keys.processing, True) and status is not None and layout.deadline_of(
            {b"claimed_at_ms": snap["claimed"] or b"", b"enqueued_at_ms": snap["enqueued"] or b""}) is None
    if p.kind == "orphan_job":
        if status is None or any(c is None or c > 0 for c in places.values()) or snap["suppressed"] is not None:
            return False
        return status in ("pending", "processing") or snap["ttl"] == -1
    return True
