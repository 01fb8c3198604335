"""``jobctl check`` for the reliable-list layout: the invariants of seed 000
sections 7-10, and the repairs that are unambiguous.

Invariants, per shard:

* every job id is in exactly one state (ready lists, scheduled, processing,
  dead, suppressed, jobctl's paused list);
* no id appears twice in one list;
* no dangling id: every indexed id has a payload key;
* no orphan payload: every payload key's id is indexed somewhere;
* every processing id has a visibility deadline, every deadline a
  processing id.

The check reads every state key in windows of 1,000 (LRANGE/ZRANGE), checks
payload existence with pipelined EXISTS, and SCANs the payload keys: its
cost is linear in the queue's size, in bounded commands.  Repairs run one
``rl_repair.lua`` call per problem and re-check their condition atomically:
on a live queue the windows may see a job twice or in two places while it
moves, and such a transient problem is then left alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..keys import OWNER_SUFFIX, ReliableListKeys
from ..scripts import script
from .base import now_ms
from .common import text
from .walks import WINDOW, keys_exist, walk_list, walk_zset

if TYPE_CHECKING:
    from .reliable_list import ReliableList

__all__ = ["Problem", "CheckReport", "check_queue"]


@dataclass
class Problem:
    """One broken invariant.  ``kind`` is one of ``multiple_states``,
    ``duplicate``, ``dangling``, ``orphan_payload``, ``missing_deadline``,
    ``stray_deadline``; ``repair`` names the fix (``None``: report only)."""

    kind: str
    shard: str
    job_id: str
    detail: str
    repair: str | None = None
    repaired: bool = False
    _args: tuple = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "shard": self.shard, "id": self.job_id, "detail": self.detail,
                "repair": self.repair, "repaired": self.repaired}


@dataclass
class CheckReport:
    """All problems of one queue; ``ok`` when none is left unrepaired."""

    queue: str
    layout: str
    checked_ids: int = 0
    payload_keys: int = 0
    problems: list[Problem] = field(default_factory=list)

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
                "payload_keys": self.payload_keys, "counts": self.counts(),
                "repaired": sum(p.repaired for p in self.problems),
                "problems": [p.to_json() for p in self.problems[:1000]],
                "problems_truncated": len(self.problems) > 1000}


def _read_list(client, key: str) -> list[str]:
    return [text(x) for _, chunk in walk_list(client, key, from_right=False) for x in chunk]


def _read_zset(client, key: str) -> dict[str, int]:
    return {text(m): int(s) for _, pairs in walk_zset(client, key) for m, s in pairs}


def _check_shard(layout: "ReliableList", keys: ReliableListKeys, report: CheckReport) -> None:
    client = layout.client
    where: dict[str, list[tuple[str, str]]] = defaultdict(list)  # id -> [(state, key)]
    list_keys = [(r.key, "ready") for r in layout.ready_lists(keys)] + \
        [(keys.processing, "processing"), (keys.dead, "dead"), (keys.paused, "paused"),
                                                                  (keys.migrating, "migrating")]
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
    for job_id, exists in zip(ids, keys_exist(client, [keys.job(i) for i in ids])):
        if not exists:
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
    cursor = 0
    while True:
        cursor, found = client.scan(cursor=cursor, match=keys.job_pattern, count=WINDOW)
        for raw in found:
            job_id = text(raw)[len(prefix):]
            if job_id.endswith(OWNER_SUFFIX):
                continue
            report.payload_keys += 1
            if job_id not in where:
                report.problems.append(Problem("orphan_payload", keys.tag, job_id,
                                               f"payload key {text(raw)} is in no state"))
        if cursor == 0:
            break


def check_queue(layout: "ReliableList", *, repair: bool = False) -> CheckReport:
    """Check every shard of ``layout``; with ``repair``, apply unambiguous fixes."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    for keys in layout.shards:
        before = len(report.problems)
        _check_shard(layout, keys, report)
        if repair:
            fix = script(layout.client, "rl_repair")
            for p in report.problems[before:]:
                if not p._args:
                    continue
                kind, key, arg = p._args
                p.repaired = bool(fix(keys=[key, keys.job(p.job_id), keys.deadline, keys.processing],
                                      args=[kind, p.job_id, arg]))
    return report
