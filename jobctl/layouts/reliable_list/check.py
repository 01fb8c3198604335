"""``jobctl check`` for the reliable-list layout: the invariants of seed 000
sections 7-10, and the repairs that are unambiguous.

Invariants, per shard:

* every job id is in exactly one state (ready lists, scheduled, processing,
  dead, suppressed, jobctl's paused list);
* no id appears twice in one list;
* no dangling id: every indexed id has a payload key, and it is a string
  (``wrong_type_payload`` names a key of another type; report only);
* no orphan payload: every payload key's id is indexed somewhere;
* every processing id has a visibility deadline, every deadline a
  processing id.

The check reads every state key in windows of 1,000 (LRANGE/ZRANGE), checks
payload keys with pipelined TYPE, and SCANs the payload keys: its
cost is linear in the queue's size, in bounded commands.  On a live queue
the windows may see a job twice or in two places while it moves (claimed,
acked, dead-lettered between two reads): before a finding is reported, one
``rl_recheck.lua`` call reads where its job is, atomically, and a finding
that no longer holds is counted as ``transient`` instead (lists longer than
2 x :data:`RECHECK_MAXLEN` are searched only near their ends: a job not
found there is taken to be where the walk saw it).  Repairs run one
``rl_repair.lua`` call per problem and re-check their condition atomically
again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobctl.cluster import scan_pages
from jobctl.keys import OWNER_SUFFIX, ReliableListKeys
from jobctl.scripts import script
from jobctl.layouts.base import now_ms
from jobctl.layouts.common import PAYLOAD_TYPES, score_ms, text, wrong_type_note
from jobctl.layouts.walks import WINDOW, key_types, walk_list, walk_zset

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["Problem", "CheckReport", "check_queue", "RECHECK_MAXLEN", "RECHECK_MAX", "repairing_only",
           "confirmed"]

#: Entries searched from each end of a list when a finding is re-checked.
RECHECK_MAXLEN = 100_000
#: Findings per shard re-checked; beyond that they are reported as read.
RECHECK_MAX = 20_000


@dataclass
class Problem:
    """One broken invariant.  ``kind`` is one of ``multiple_states``,
    ``duplicate``, ``dangling``, ``orphan_payload``, ``missing_deadline``,
    ``stray_deadline``, ``wrong_type_payload`` (a payload key that is not a
    string, report only); ``repair`` names the fix (``None``: report only)."""

    kind: str
    shard: str
    job_id: str
    detail: str
    repair: str | None = None
    repaired: bool = False
    _args: tuple = field(default=(), repr=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(kind, shard, job id, detail)``: the same finding in two walks has the same key."""
        return self.kind, self.shard, self.job_id, self.detail

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "shard": self.shard, "id": self.job_id, "detail": self.detail,
                "repair": self.repair, "repaired": self.repaired}


#: The keys of the findings an operator confirmed (``None``: any finding may be repaired).
_CONFIRMED: ContextVar[frozenset | None] = ContextVar("jobctl_check_confirmed", default=None)


@contextmanager
def repairing_only(problems: Iterable[Problem]) -> Iterator[None]:
    """Inside, a ``check(repair=True)`` of any layout repairs only the
    findings whose :attr:`Problem.key` is one of ``problems``' (those the
    operator confirmed; each still re-verified atomically by its repair
    script): a finding that is new, or changed since, is reported, not
    repaired."""
    token = _CONFIRMED.set(frozenset(p.key for p in problems))
    try:
        yield
    finally:
        _CONFIRMED.reset(token)


def confirmed(p: Problem) -> bool:
    """Whether ``p`` may be repaired now (see :func:`repairing_only`)."""
    only = _CONFIRMED.get()
    return only is None or p.key in only


@dataclass
class CheckReport:
    """All problems of one queue; ``ok`` when none is left unrepaired."""

    queue: str
    layout: str
    checked_ids: int = 0
    payload_keys: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: Findings of the walk that no longer held when re-checked atomically (jobs that moved).
    transient: int = 0

    @property
    def remaining(self) -> list[Problem]:
        return [p for p in self.problems if not p.repaired]

    @property
    def ok(self) -> bool:
        return not self.remaining

    def counts(self) -> dict[str, int]:
        return dict(Counter(p.kind for p in self.problems))

    def to_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "layout": self.layout, "ok": self.ok, "checked_ids": self.checked_ids,
                "payload_keys": self.payload_keys, "counts": self.counts(), "transient": self.transient,
                "repaired": sum(p.repaired for p in self.problems),
                "problems": [p.to_json() for p in self.problems[:1000]],
                "problems_truncated": len(self.problems) > 1000}


def _read_list(client, key: str) -> list[str]:
    return [text(x) for _, chunk in walk_list(client, key, from_right=False) for x in chunk]


def _read_zset(client, key: str) -> dict[str, int]:
    return {text(m): score_ms(s) for _, pairs in walk_zset(client, key) for m, s in pairs}


def _check_shard(layout: "ReliableList", keys: ReliableListKeys, report: CheckReport) -> None:
    client = layout.client
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)  # id -> [(state, key)]
    list_keys = list(_list_states(layout, keys).items())
    processing: set[str] = set()
    for key, state in list_keys:
        counts = Counter(_read_list(client, key))
        for job_id, n in counts.items():
            where[job_id].append((state, key))
            if n > 1:
                report.problems.append(Problem("duplicate", keys.tag, job_id, f"{n} copies in {key}",
                                               "remove extra copies", _args=("duplicate", key, n)))
        if state == "processing":
            processing = set(counts)
    for key, state in ((keys.scheduled, "scheduled"), (keys.suppressed, "suppressed")):
        for job_id in _read_zset(client, key):
            where[job_id].append((state, key))
    deadlines = _read_zset(client, keys.deadline)

    ids = list(where)
    report.checked_ids += len(ids)
    for job_id, redis_type in zip(ids, key_types(client, [keys.job(i) for i in ids])):
        if redis_type not in PAYLOAD_TYPES:  # MGET reads it as nil: named, never "dangling"
            states = " and ".join(sorted({s for s, _ in where[job_id]}))
            report.problems.append(Problem("wrong_type_payload", keys.tag, job_id,
                                           f"in {states}: {wrong_type_note(keys.job(job_id), redis_type)}"))
        elif redis_type == b"none":
            for state, key in where[job_id]:
                kind = "dangling_zset" if state in ("scheduled", "suppressed") else "dangling_list"
                report.problems.append(Problem("dangling", keys.tag, job_id,
                                               f"in {state} ({key}) without payload key",
                                               "remove the id from the index", _args=(kind, key, "")))
    for job_id, places in where.items():
        states = sorted({s for s, _ in places})
        if len(states) > 1:
            report.problems.append(Problem("multiple_states", keys.tag, job_id,
                                           "in " + " and ".join(states)))
    now = now_ms()
    for job_id in processing:
        if job_id not in deadlines:
            report.problems.append(Problem("missing_deadline", keys.tag, job_id,
                                           "processing without a visibility deadline",
                                           "set the deadline to now (requeue --stuck then takes it)",
                                           _args=("missing_deadline", keys.processing, str(now))))
    for job_id, score in deadlines.items():
        if job_id not in processing:
            report.problems.append(Problem("stray_deadline", keys.tag, job_id,
                                           "visibility deadline without a processing entry",
                                           "remove the deadline", _args=("stray_deadline", keys.deadline,
                                                                         str(score))))
    prefix = keys.job_prefix
    for found in scan_pages(client, keys.job_pattern, WINDOW):  # the shard's node on a cluster
        for raw in found:
            job_id = text(raw)[len(prefix):]
            if job_id.endswith(OWNER_SUFFIX):
                continue
            report.payload_keys += 1
            if job_id not in where:
                report.problems.append(Problem("orphan_payload", keys.tag, job_id,
                                               f"payload key {text(raw)} is in no state"))


def _recheck(layout: "ReliableList", keys: ReliableListKeys, report: CheckReport, start: int) -> None:
    """Drop the findings ``report.problems[start:]`` that no longer hold
    (one atomic ``rl_recheck`` call per job id, pipelined)."""
    found = report.problems[start:]
    if not found:
        return
    states = _list_states(layout, keys)
    lists = list(states)
    ids = list(dict.fromkeys(p.job_id for p in found))[:RECHECK_MAX]
    recheck = script(layout.client, "rl_recheck")
    pipe = layout.client.pipeline(transaction=False)
    for job_id in ids:
        recheck(keys=[keys.job(job_id), keys.deadline, keys.scheduled, keys.suppressed, *lists],
                args=[job_id, RECHECK_MAXLEN], client=pipe)
    snaps = dict(zip(ids, pipe.execute()))
    kept = []
    for p in found:
        snap = snaps.get(p.job_id)
        if snap is None or _still_holds(p, snap, states, keys):
            kept.append(p)
        else:
            report.transient += 1
    report.problems[start:] = kept


def _list_states(layout: "ReliableList", keys: ReliableListKeys) -> dict[str, str]:
    """``{list key: state}`` of every list of the shard that holds ids: the
    ready lists, processing, dead and jobctl's hold (dead jobs a walk set
    aside), paused and migrating lists."""
    states = {r.key: "ready" for r in layout.ready_lists(keys)}
    states.update({keys.processing: "processing", keys.dead: "dead", keys.hold: "dead", keys.paused: "paused",
                   keys.migrating: "migrating"})
    return states


def _still_holds(p: Problem, snap: list, states: dict[str, str], keys: ReliableListKeys) -> bool:
    lists = list(states)
    payload, deadline, scheduled, suppressed = bool(snap[0]), snap[1], snap[2], snap[3]
    copies = {key: int(snap[4 + 2 * i]) for i, key in enumerate(lists)}
    long = {key for i, key in enumerate(lists) if int(snap[5 + 2 * i]) > 2 * RECHECK_MAXLEN}

    def in_list(key: str, was_there: bool) -> bool:  # unknown deep in a long list: as the walk saw it
        return copies[key] > 0 or (key in long and was_there)

    if p.kind == "duplicate":
        key = p._args[1]
        return copies[key] > 1 or (key in long and copies[key] == 0)
    if p.kind == "dangling":
        if payload:
            return False
        key = p._args[1]
        if key == keys.scheduled:
            return scheduled is not None
        if key == keys.suppressed:
            return suppressed is not None
        return in_list(key, True)
    if p.kind == "multiple_states":
        now_in = {"scheduled"} if scheduled is not None else set()
        if suppressed is not None:
            now_in.add("suppressed")
        seen = set(p.detail[3:].split(" and "))
        for key, state in states.items():
            if in_list(key, state in seen):
                now_in.add(state)
        return len(now_in) > 1
    if p.kind == "missing_deadline":
        return deadline is None and in_list(keys.processing, True)
    if p.kind == "stray_deadline":
        return deadline is not None and not in_list(keys.processing, False) and keys.processing not in long
    if p.kind == "orphan_payload":
        return payload and scheduled is None and suppressed is None \
            and not any(in_list(k, False) for k in lists) and not (set(lists) & long)
    return True


def check_queue(layout: "ReliableList", *, repair: bool = False) -> CheckReport:
    """Check every shard of ``layout``; with ``repair``, apply unambiguous fixes."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    for keys in layout.shards:
        before = len(report.problems)
        _check_shard(layout, keys, report)
        _recheck(layout, keys, report, before)
        if repair:
            fix = script(layout.client, "rl_repair")
            for p in report.problems[before:]:
                if not p._args or not confirmed(p):
                    continue
                kind, key, arg = p._args
                p.repaired = bool(fix(keys=[key, keys.job(p.job_id), keys.deadline, keys.processing],
                                      args=[kind, p.job_id, arg]))
    return report
