"""The ``stream-group`` layout (layouts.md section 2; seed 000 sections 11-13):
a stream of ``jobId <id>`` entries read by a consumer group, the group's
pending entries list (PEL), a scheduled zset whose due ids a scheduler
appends to the stream, a dead-letter list (or stream) and one JSON envelope
string per job.

States, per shard (summed over shard tags ``<tag>:00..`` as for
reliable-list):

* **ready**: entries after the group's last-delivered id, i.e. the group's
  lag (``XINFO GROUPS``).  When the server reports no lag (Redis 7.0 after an
  ``XDEL`` or a trim past undelivered entries) the entries after the
  last-delivered id are counted, at most :data:`COUNT_BOUND` of them.
* **processing**: the PEL (``XPENDING``): consumer, idle time and delivery
  count, which is the job's attempt count here.  The visibility deadline of
  an entry is ``now - idle + visibility_timeout_ms``; **stuck** entries are
  idle at least the visibility timeout (``XPENDING ... IDLE``), the ones
  the workers' ``XAUTOCLAIM`` would recover.
* **scheduled**: ``queue:{tag}:scheduled`` (section 13), as for reliable-list.
* **dead**: ``queue:{tag}:dead`` (list of ids, newest at the head), or
  ``stream:{tag}:dead`` with ``dead = "stream"``.
* **suppressed**: jobctl's own zset, as for reliable-list.

Config (``[queues.NAME]``): ``tag``, ``shards``, ``visibility_timeout_ms``
(default 60,000: the seed's ``XAUTOCLAIM`` min-idle), ``group`` (default
``"workers"``), ``dead`` (``"list"`` or ``"stream"``).

Operations (:mod:`.stream_group_ops`): requeue acknowledges the pending
entry and appends a fresh entry with the same fields (``sg_requeue.lua``),
so any worker's next ``XREADGROUP >`` gets the job at once; promote appends
the due id to the stream as the seed's scheduler does; redrive, suppress,
unsuppress and purge move dead jobs (``sg_dead_move.lua``,
``sg_zset_move.lua``).  The counts: :mod:`.stream_group_status`; batched
walks: :mod:`.stream_group_walk`; ``inspect``'s search:
:mod:`.stream_group_inspect`; ``replay``: :mod:`.stream_group_replay`;
checks: :mod:`.stream_group_check`; discovery:
:mod:`.discover`.  Keys come from
:class:`jobctl.keys.StreamGroupKeys`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from jobctl.errors import ConfigError
from jobctl.keys import StreamGroupKeys
from jobctl.model import Envelope, JobRecord, QueueStatus, State, parse_envelope
from jobctl.ops.plan import Plan
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import OpSpec
from jobctl.layouts.base import ShardedLayout, now_ms
from jobctl.layouts.facts import StrOption
from jobctl.layouts.planning import TRANSITIONS_WITH_SCHEDULED
from jobctl.ops.spec import Operation
from jobctl.layouts.common import first_found, json_object, lenient_envelope, mark_wrong_typed, merge_shard_lists, score_ms, text
from jobctl.layouts.stream_group.replies import missing_stream_or_group

__all__ = ["StreamGroup", "DEFAULT_GROUP", "DEFAULT_VISIBILITY_TIMEOUT_MS", "COUNT_BOUND", "SEARCH_BOUND"]

#: Consumer group name when the config names none (seed 000 s.11).
DEFAULT_GROUP = "workers"
#: Visibility timeout when the config sets none: the seed's XAUTOCLAIM min-idle.
DEFAULT_VISIBILITY_TIMEOUT_MS = 60_000
#: At most this many entries are counted by a bounded count (stuck, lag fallback).
COUNT_BOUND = 10_000
#: ``inspect`` looks for a job id among at most this many stream entries.
SEARCH_BOUND = 20_000

STREAM_ID_RE = re.compile(r"^\d+-\d+$")

def entry_ms(entry_id: str) -> int:
    """The epoch-ms part of a stream entry id (when the entry was added)."""
    return int(entry_id.split("-", 1)[0])


def entry_fields(raw: dict) -> dict[str, str]:
    """A stream entry's fields (``XRANGE`` reply, bytes) as text."""
    return {text(k): text(v) for k, v in raw.items()}


@dataclass
class _Group:
    """The consumer group of one shard as ``XINFO GROUPS`` reports it."""

    last_id: str
    pending: int
    lag: int | None


class StreamGroup(ShardedLayout):
    """A stream-group queue; see the module docstring."""

    name = "stream-group"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD, State.SUPPRESSED)
    operations = frozenset(op for op, _ in TRANSITIONS_WITH_SCHEDULED) | {Operation.REPLAY}
    visibility_default_ms = DEFAULT_VISIBILITY_TIMEOUT_MS
    braced_tag = True
    config_options = {"group": StrOption(512), "dead": StrOption(16)}
    replay_by_range = True  # jobctl replay --from/--to: a range of the stream
    replay_source = "acknowledged entries"

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.stream_group.discover import recognize

        return recognize
    keys_class = StreamGroupKeys
    shards: list[StreamGroupKeys]

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        opts = queue.options
        self.group: str = str(opts.get("group") or DEFAULT_GROUP)
        self.dead_kind: str = str(opts.get("dead") or "list")
        if self.dead_kind not in ("list", "stream"):
            raise ConfigError(f"queue {queue.name}: dead must be \"list\" or \"stream\", got {self.dead_kind!r}")
        if queue.priorities:
            raise ConfigError(f"queue {queue.name}: layout stream-group has no priority lists")
        self.visibility_timeout_ms: int = queue.visibility_timeout_ms or self.visibility_default_ms

    def check(self, *, repair: bool = False):
        from jobctl.layouts.stream_group.check import check_queue

        return check_queue(self, repair=repair)

    def dead_key(self, keys: StreamGroupKeys) -> str:
        """The shard's dead-letter key (list or stream, per config)."""
        return keys.dead_stream if self.dead_kind == "stream" else keys.dead

    # -- consumer group ------------------------------------------------------
    def _group_from(self, infos: Any) -> _Group | None:
        for g in infos or []:
            if text(g.get("name", b"")) == self.group:
                lag = g.get("lag")
                return _Group(last_id=text(g.get("last-delivered-id") or b"0-0"),
                              pending=int(g.get("pending") or 0), lag=None if lag is None else int(lag))
        return None

    def group_info(self, keys: StreamGroupKeys) -> _Group | None:
        """The group of one shard; ``None`` when the stream or group is missing."""
        try:
            return self._group_from(self.client.xinfo_groups(keys.stream))
        except Exception as exc:  # noqa: BLE001 - classified below
            if missing_stream_or_group(exc):
                return None
            raise

    # -- envelopes -------------------------------------------------------------
    @staticmethod
    def envelope_of(raw: bytes | None, fields: dict[str, str] | None) -> Envelope:
        """The payload key's envelope when it exists, else one built from the
        entry's fields (``jobId``, ``jobType``, ``payload`` as JSON)."""
        if raw is not None or not fields or set(fields) <= {"jobId"}:
            return parse_envelope(raw)
        doc: dict[str, Any] = {}
        for k, v in fields.items():
            if k == "payload":
                try:
                    doc[k] = orjson.loads(v)
                except orjson.JSONDecodeError:
                    doc[k] = v
            else:
                doc[k] = v
        return lenient_envelope(doc, required=("jobId",))

    def _records(self, keys: StreamGroupKeys, items: list[dict[str, Any]], state: State | None) -> list[JobRecord]:
        """``items``: dicts with ``job_id`` and optional ``fields``, ``position``,
        ``score``, ``deadline_ms`` and meta keys; one MGET for the payloads."""
        if not items:
            return []
        raws = self.client.mget([keys.job(it["job_id"]) for it in items])
        out = []
        for it, raw in zip(items, raws):
            fields = it.get("fields")
            env = self.envelope_of(raw, fields)
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard=keys.tag, job_id=it["job_id"],
                            state=state, envelope=env, raw=raw, position=it.get("position"),
                            score=it.get("score"), deadline_ms=it.get("deadline_ms"))
            for k, v in it.items():
                if k not in ("job_id", "fields", "position", "score", "deadline_ms"):
                    rec.meta[k] = v
            if fields is not None:
                rec.meta["entry_fields"] = fields
            if "delivery_count" in it:
                # attempts of a pending entry = its delivery count (layouts.md s.2)
                if env.attempt is not None and env.attempt != it["delivery_count"]:
                    rec.meta["envelope_attempt"] = env.attempt
                env.attempt = it["delivery_count"]
            if raw is None and _carries_job(fields):
                rec.raw = orjson.dumps(fields)  # the entry carries the job: no payload key
                rec.meta["payload_in_entry"] = True
            elif raw is None:
                rec.meta["problem"] = "dangling id: no payload key"
            if state in (State.DEAD, State.SUPPRESSED) and env.last_attempt_ms is not None:
                rec.meta.setdefault("dead_since_ms", env.last_attempt_ms)
            out.append(rec)
        mark_wrong_typed(self.client, [r for r in out if not r.meta.get("payload_in_entry")],
                         lambda r: keys.job(r.job_id))
        return out

    def _entry_items(self, entries: list, **extra_by_pos) -> list[dict[str, Any]]:
        items = []
        for n, (eid, raw_fields) in enumerate(entries):
            eid = text(eid)
            fields = entry_fields(raw_fields)
            items.append({"job_id": fields.get("jobId") or eid, "entry_id": eid, "fields": fields,
                          "entered_ms": entry_ms(eid), "position": n})
        return items

    def _pending_items(self, keys: StreamGroupKeys, pending: list[dict], now: int) -> list[dict[str, Any]]:
        """PEL rows (``XPENDING`` extended form) with their entries' fields."""
        if not pending:
            return []
        pipe = self._pipeline()
        for p in pending:
            eid = text(p["message_id"])
            pipe.xrange(keys.stream, eid, eid)
        items = []
        for p, entry in zip(pending, pipe.execute()):
            eid = text(p["message_id"])
            idle = int(p["time_since_delivered"])
            fields = entry_fields(entry[0][1]) if entry else None
            item = {"job_id": (fields or {}).get("jobId") or eid, "entry_id": eid, "fields": fields,
                    "consumer": text(p["consumer"]), "idle_ms": idle,
                    "delivery_count": int(p["times_delivered"]),
                    "deadline_ms": now - idle + self.visibility_timeout_ms}
            if fields is None:
                item["problem"] = "pending entry deleted from the stream"
            items.append(item)
        return items

    # -- status ------------------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        from jobctl.layouts.stream_group.status import queue_status

        return queue_status(self, now)

    # -- listing -------------------------------------------------------------------
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        self.check_supported(state)
        now = now_ms() if now is None else now
        return merge_shard_lists([self._list_shard(keys, state, limit, now) for keys in self.shards],
                                 _SORT_KEYS[state], limit)

    def _list_shard(self, keys: StreamGroupKeys, state: State, limit: int, now: int) -> list[JobRecord]:
        if state is State.READY:
            g = self.group_info(keys)
            if g is None:
                return []
            entries = self.client.xrange(keys.stream, f"({g.last_id}", "+", count=limit)
            return self._records(keys, self._entry_items(entries), state)
        if state is State.PROCESSING:
            pending = self._xpending(keys, "-", limit)
            items = self._pending_items(keys, pending, now)
            items.sort(key=lambda it: it["deadline_ms"])
            return self._records(keys, items, state)
        if state is State.DEAD:
            return self._records(keys, self._dead_items(keys, 0, limit), state)
        key = keys.scheduled if state is State.SCHEDULED else keys.suppressed
        pairs = self.client.zrange(key, 0, limit - 1, withscores=True, desc=state is State.SUPPRESSED)
        recs = self._records(keys, [{"job_id": text(m), "score": score_ms(s)} for m, s in pairs], state)
        if state is State.SUPPRESSED:
            self._attach_suppressed_info(keys, recs)
        return recs

    def _xpending(self, keys: StreamGroupKeys, start: str, count: int, idle: int | None = None) -> list[dict]:
        try:
            return self.client.xpending_range(keys.stream, self.group, start, "+", count, idle=idle)
        except Exception as exc:  # noqa: BLE001
            if missing_stream_or_group(exc):
                return []
            raise

    def _dead_items(self, keys: StreamGroupKeys, start: int, count: int) -> list[dict[str, Any]]:
        """Dead jobs newest first from ``start``; ``position`` counts from the head."""
        if self.dead_kind == "stream":
            if start:
                entries = self.client.xrevrange(keys.dead_stream, count=start + count)[start:]
            else:
                entries = self.client.xrevrange(keys.dead_stream, count=count)
            items = self._entry_items(entries)
            for n, it in enumerate(items):
                it["position"] = start + n
                it["dead_entry_id"] = it.pop("entry_id")
                it["dead_since_ms"] = it.pop("entered_ms")
            return items
        ids = self.client.lrange(keys.dead, start, start + count - 1)
        if len(ids) < count:  # the hold (a window-engine walk in progress) holds the oldest dead jobs
            held_from = max(0, start - self.client.llen(keys.dead))
            ids += self.client.lrange(keys.hold, held_from, held_from + count - len(ids) - 1)
        return [{"job_id": text(x), "position": start + n} for n, x in enumerate(ids)]

    def _attach_suppressed_info(self, keys: StreamGroupKeys, recs: list[JobRecord]) -> None:
        if not recs:
            return
        for rec, info in zip(recs, self.client.hmget(keys.suppressed_info, [r.job_id for r in recs])):
            doc = None if info is None else json_object(info)
            if doc is not None:
                rec.meta["suppressed"] = {k: v for k, v in doc.items() if k != "dead_fields"}
                dead_fields = doc.get("dead_fields")
                if isinstance(dead_fields, list):
                    fields = dict(zip(dead_fields[::2], dead_fields[1::2]))
                    rec.meta["entry_fields"] = fields
                    if rec.raw is None and _carries_job(fields):
                        rec.meta.pop("problem", None)
                        rec.envelope = self.envelope_of(None, fields)
                        rec.raw = orjson.dumps(fields)
                        rec.meta["payload_in_entry"] = True

    # -- inspect ---------------------------------------------------------------------
    def inspect(self, job_id: str) -> JobRecord:
        found: list[JobRecord] = []
        now = now_ms()
        from jobctl.layouts.stream_group.inspect import inspect_shard

        for keys in self.shards:
            rec = inspect_shard(self, keys, job_id, now)
            if rec is not None:
                found.append(rec)
        return first_found(found, job_id, self.queue_name)

    # -- batched walks -------------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        from jobctl.layouts.stream_group.walk import walk_shard

        self.check_supported(state)
        cap = None if sample is None else sample[0] * sample[1]
        for keys in self.shards:
            yield from walk_shard(self, keys, state, batch, cap=cap, sample=sample)

    def iter_batches_of(self, keys: StreamGroupKeys, state: State, batch: int = 1000,
                        sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """:meth:`iter_batches` for one shard (the walk reliable-list's
        unfiltered dead-list plan samples: :func:`.reliable_list_ops.plan_tail`)."""
        from jobctl.layouts.stream_group.walk import walk_shard

        yield from walk_shard(self, keys, state, batch, sample=sample)

    # -- operations --------------------------------------------------------------------
    def plan(self, spec: OpSpec, now: int | None = None) -> Plan:
        """Plan ``spec`` (:func:`.stream_group_ops.plan_operation`).  Reads only."""
        from jobctl.layouts.stream_group.ops import plan_operation

        return plan_operation(self, spec, now)

    def sources(self, spec: OpSpec):
        """The window-engine sources of an operation from a dead *list*
        (:func:`.stream_group_ops.dead_sources`), ``[]`` otherwise."""
        from jobctl.layouts.stream_group.ops import dead_sources

        return dead_sources(self, spec)

    def apply(self, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
        """Apply ``plan`` (:func:`.stream_group_ops.apply_plan`)."""
        from jobctl.layouts.stream_group.ops import apply_plan

        return apply_plan(self, plan, batch=batch)


def _carries_job(fields: dict[str, str] | None) -> bool:
    """True when entry fields carry more than the job id (the job itself)."""
    return bool(fields) and not set(fields) <= {"jobId"}


def id_after(a: str, b: str) -> bool:
    """Stream id ``a`` > ``b``."""
    am, _, aseq = a.partition("-")
    bm, _, bseq = b.partition("-")
    return (int(am), int(aseq or 0)) > (int(bm), int(bseq or 0))


_SORT_KEYS = {
    State.READY: lambda r: r.meta.get("entered_ms") or 0,
    State.SCHEDULED: lambda r: r.score or 0,
    State.PROCESSING: lambda r: r.deadline_ms or 0,
    State.DEAD: lambda r: -(r.meta.get("dead_since_ms") or r.envelope.last_attempt_ms or 0),
    State.SUPPRESSED: lambda r: -(r.score or 0),
}
