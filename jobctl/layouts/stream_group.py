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

Operations (:mod:`jobctl.ops`): requeue acknowledges the pending entry and
appends a fresh entry with the same fields (``sg_requeue.lua``), so any
worker's next ``XREADGROUP >`` gets the job at once; promote appends the
due id to the stream as the seed's scheduler does; redrive, suppress,
unsuppress and purge move dead jobs (``sg_dead_move.lua``,
``sg_zset_move.lua``).  Keys come from :class:`jobctl.keys.StreamGroupKeys`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ConfigError, DataError
from ..keys import STREAM_GROUP_KEY_RE, ReliableListKeys, StreamGroupKeys, shard_tags, split_shard_tag
from ..model import Envelope, JobRecord, QueueStatus, State, parse_envelope
from ..ops.plan import Plan, PlannedJob, payload_sha1
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .base import Layout, now_ms
from .common import (DEFAULT_BATCH, SCHEDULED_READS, check_transition, first_found,
                     fold_scheduled, json_object, lenient_envelope, merge_shard_lists, read_scheduled,
                     redrive_envelope, score_ms, suppression_record, text, wrongtype_errors)
from .moves import call_move, move_result
from .planning import TRANSITIONS_WITH_SCHEDULED
from .walks import WINDOW, walk_list, walk_zset

__all__ = ["StreamGroup", "StreamPlannedJob", "recognize", "DEFAULT_GROUP", "DEFAULT_VISIBILITY_TIMEOUT_MS",
           "COUNT_BOUND", "SEARCH_BOUND"]

#: Consumer group name when the config names none (seed 000 s.11).
DEFAULT_GROUP = "workers"
#: Visibility timeout when the config sets none: the seed's XAUTOCLAIM min-idle.
DEFAULT_VISIBILITY_TIMEOUT_MS = 60_000
#: At most this many entries are counted by a bounded count (stuck, lag fallback).
COUNT_BOUND = 10_000
#: ``inspect`` looks for a job id among at most this many stream entries.
SEARCH_BOUND = 20_000

_STREAM_ID_RE = re.compile(r"^\d+-\d+$")

#: (operation, source) -> allowed targets (None: purge)
TRANSITIONS = TRANSITIONS_WITH_SCHEDULED


def entry_ms(entry_id: str) -> int:
    """The epoch-ms part of a stream entry id (when the entry was added)."""
    return int(entry_id.split("-", 1)[0])


def _fields(raw: dict) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}


@dataclass(slots=True)
class StreamPlannedJob(PlannedJob):
    """A planned stream-group job: ``entry_id`` is the pending entry
    (requeue) or the dead-stream entry (dead moves), else ``""``;
    ``consumer`` and ``deliveries`` are the PEL fence of a requeue."""

    entry_id: str
    consumer: str
    deliveries: int


@dataclass
class _Group:
    """The consumer group of one shard as ``XINFO GROUPS`` reports it."""

    last_id: str
    pending: int
    lag: int | None


class StreamGroup(Layout):
    """A stream-group queue; see the module docstring."""

    name = "stream-group"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD, State.SUPPRESSED)

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.shards = [StreamGroupKeys(t) for t in shard_tags(queue.base_tag, queue.shards)]
        opts = queue.options
        self.group: str = str(opts.get("group") or DEFAULT_GROUP)
        self.dead_kind: str = str(opts.get("dead") or "list")
        if self.dead_kind not in ("list", "stream"):
            raise ConfigError(f"queue {queue.name}: dead must be \"list\" or \"stream\", got {self.dead_kind!r}")
        if queue.priorities:
            raise ConfigError(f"queue {queue.name}: layout stream-group has no priority lists")
        self.visibility_timeout_ms: int = queue.visibility_timeout_ms or DEFAULT_VISIBILITY_TIMEOUT_MS

    def shard_tags(self) -> list[str]:
        return [k.tag for k in self.shards]

    def check(self, *, repair: bool = False):
        from .stream_group_check import check_queue

        return check_queue(self, repair=repair)

    @property
    def journal_key(self) -> str:
        return StreamGroupKeys(self.queue.base_tag).journal

    def dead_key(self, keys: StreamGroupKeys) -> str:
        """The shard's dead-letter key (list or stream, per config)."""
        return keys.dead_stream if self.dead_kind == "stream" else keys.dead

    def _pipeline(self):
        return self.client.pipeline(transaction=False)

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
            if _missing(exc):
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
        return out

    def _entry_items(self, entries: list, **extra_by_pos) -> list[dict[str, Any]]:
        items = []
        for n, (eid, raw_fields) in enumerate(entries):
            eid = text(eid)
            fields = _fields(raw_fields)
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
            fields = _fields(entry[0][1]) if entry else None
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
        now = now_ms() if now is None else now
        vt = self.visibility_timeout_ms
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now, shards=len(self.shards))
        pipe = self._pipeline()
        plan: list[tuple[str, str, StreamGroupKeys]] = []
        summary = script(self.client, "sg_pel_summary")
        for keys in self.shards:
            pipe.xinfo_groups(keys.stream)
            plan.append(("groups", keys.stream, keys))
            summary(keys=[keys.stream], args=[self.group, vt, COUNT_BOUND], client=pipe)
            plan.append(("pel", keys.stream, keys))
            plan.extend((what, keys.scheduled, keys) for what in read_scheduled(pipe, keys.scheduled, now))
            dead = self.dead_key(keys)
            (pipe.xlen if self.dead_kind == "stream" else pipe.llen)(dead)
            plan.append(("dead", dead, keys))
            if self.dead_kind == "list":  # jobctl's hold (a window-engine walk set those aside): still dead
                pipe.llen(keys.hold)
                plan.append(("dead", keys.hold, keys))
            pipe.zcard(keys.suppressed)
            plan.append(("suppressed", keys.suppressed, keys))
        results = pipe.execute(raise_on_error=False)

        groups: list[tuple[StreamGroupKeys, _Group]] = []
        for (what, key, keys), res in zip(plan, results):
            if isinstance(res, Exception):
                if _missing(res):
                    if what == "groups":
                        st.warnings.append(f"stream {key} does not exist")
                    elif what == "pel" and not any(w.startswith(f"stream {key} ") for w in st.warnings):
                        st.warnings.append(f"consumer group {self.group} does not exist on {key}")
                    continue
                st.errors.extend(wrongtype_errors([res], [key]))
                continue
            if what == "groups":
                g = self._group_from(res)
                if g is not None:
                    groups.append((keys, g))
                    st.processing += g.pending
            elif what == "pel":
                stuck, truncated, max_idle = (int(x) for x in res)
                st.stuck += stuck
                if truncated:
                    st.warnings.append(f"stuck entries of {key} counted up to {COUNT_BOUND:,}")
                if max_idle >= 0:
                    d = now - max_idle + vt
                    st.next_deadline_ms = d if st.next_deadline_ms is None else min(st.next_deadline_ms, d)
            elif what in SCHEDULED_READS:
                fold_scheduled(st, what, res, now)
            elif what == "dead":
                st.dead += res
            elif what == "suppressed":
                st.suppressed += res

        if groups:
            pipe = self._pipeline()
            count_after = script(self.client, "sg_count_after")
            for keys, g in groups:
                if g.lag is None:
                    count_after(keys=[keys.stream], args=[g.last_id, COUNT_BOUND], client=pipe)
                pipe.xrange(keys.stream, f"({g.last_id}", "+", count=1)
            res = iter(pipe.execute())
            for keys, g in groups:
                ready = g.lag
                if ready is None:
                    ready = int(next(res))
                    if ready >= COUNT_BOUND:
                        st.warnings.append(f"ready entries of {keys.stream} counted up to {COUNT_BOUND:,} "
                                           "(the server reports no lag)")
                st.ready += ready
                first = next(res)
                if first:
                    since = entry_ms(text(first[0][0]))
                    if st.oldest_ready_since_ms is None or since < st.oldest_ready_since_ms:
                        st.oldest_ready_since_ms = since
        if st.oldest_ready_since_ms is not None:
            st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
        return st

    def depth(self, state: State) -> int:
        self.check_supported(state)
        st = self.status()
        return {State.READY: st.ready, State.SCHEDULED: st.scheduled, State.PROCESSING: st.processing,
                State.DEAD: st.dead, State.SUPPRESSED: st.suppressed}[state]

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
            if _missing(exc):
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
        for keys in self.shards:
            rec = self._inspect_shard(keys, job_id, now)
            if rec is not None:
                found.append(rec)
        return first_found(found, job_id, self.queue_name)

    def _inspect_shard(self, keys: StreamGroupKeys, job_id: str, now: int) -> JobRecord | None:
        pipe = self._pipeline()
        pipe.get(keys.job(job_id))
        pipe.zscore(keys.scheduled, job_id)
        pipe.zscore(keys.suppressed, job_id)
        if self.dead_kind == "list":
            pipe.lpos(keys.dead, job_id)
            pipe.lpos(keys.hold, job_id)  # the hold is the dead list's oldest part
            pipe.llen(keys.dead)
        res = pipe.execute(raise_on_error=False)
        errors = wrongtype_errors(res, [keys.job(job_id), keys.scheduled, keys.suppressed, keys.dead, keys.hold,
                                        keys.dead][:len(res)])
        if errors:
            raise DataError(errors[0])
        raw, sched, supp = res[0], score_ms(res[1]), score_ms(res[2])
        states: list[tuple[State, dict[str, Any]]] = []
        stream_item = self._find_in_stream(keys, job_id, now)
        if stream_item is not None:
            states.append(stream_item)
        if sched is not None:
            states.append((State.SCHEDULED, {"job_id": job_id, "score": sched, "state_key": keys.scheduled}))
        if self.dead_kind == "list":
            if res[3] is not None:
                states.append((State.DEAD, {"job_id": job_id, "position": res[3], "state_key": keys.dead}))
            elif res[4] is not None:
                states.append((State.DEAD, {"job_id": job_id, "position": res[5] + res[4], "state_key": keys.hold}))
        else:
            dead = self._find_entry(keys.dead_stream, job_id, "-", SEARCH_BOUND)
            if dead is not None:
                eid, fields = dead
                states.append((State.DEAD, {"job_id": job_id, "dead_entry_id": eid, "fields": fields,
                                            "dead_since_ms": entry_ms(eid), "state_key": keys.dead_stream}))
        if supp is not None:
            states.append((State.SUPPRESSED, {"job_id": job_id, "score": supp, "state_key": keys.suppressed}))
        history = None
        if states and states[0][0] is None:
            history = states.pop(0)[1]
        if raw is None and not states:
            return None  # at most an acknowledged entry: the job is gone
        state, item = states[0] if states else (None, dict(history or {"job_id": job_id}))
        rec = self._records(keys, [dict(item, job_id=job_id)], state)[0]
        if state is State.SUPPRESSED:
            self._attach_suppressed_info(keys, [rec])
        rec.meta["payload_key"] = keys.job(job_id)
        if len(states) > 1:
            rec.meta["also_in"] = [s.value for s, _ in states[1:]]
        if history is not None:
            rec.meta["acknowledged_entry"] = history.get("entry_id")
        if state is None and raw is not None and history is None:
            rec.meta["problem"] = "orphan payload: no state holds this id"
        return rec

    def _find_entry(self, stream: str, job_id: str, start: str, bound: int) -> tuple[str, dict] | None:
        """The newest entry of ``stream`` whose ``jobId`` is ``job_id`` among
        its newest ``bound`` entries (``XREVRANGE`` windows)."""
        if _STREAM_ID_RE.match(job_id):
            hit = self.client.xrange(stream, job_id, job_id)
            if hit:
                return text(hit[0][0]), _fields(hit[0][1])
        end = "+"
        seen = 0
        while seen < bound:
            entries = self.client.xrevrange(stream, end, start, count=WINDOW)
            if not entries:
                return None
            for eid, raw_fields in entries:
                fields = _fields(raw_fields)
                if fields.get("jobId") == job_id:
                    return text(eid), fields
            seen += len(entries)
            end = f"({text(entries[-1][0])}"
            if len(entries) < WINDOW:
                return None
        return None

    def _find_in_stream(self, keys: StreamGroupKeys, job_id: str, now: int) -> tuple[Any, dict] | None:
        """(READY | PROCESSING | None for an acknowledged entry, item) of the
        newest stream entry carrying ``job_id``; the PEL is searched too."""
        try:
            hit = self._find_entry(keys.stream, job_id, "-", SEARCH_BOUND)
        except Exception as exc:  # noqa: BLE001
            if _missing(exc):
                return None
            raise
        g = self.group_info(keys)
        if hit is None and g is not None and g.pending:
            hit = self._find_pending(keys, job_id)
        if hit is None:
            return None
        eid, fields = hit
        item: dict[str, Any] = {"job_id": job_id, "entry_id": eid, "fields": fields, "entered_ms": entry_ms(eid),
                                "state_key": keys.stream}
        if g is not None and _id_after(eid, g.last_id):
            n = len(self.client.xrange(keys.stream, f"({g.last_id}", f"({eid}", count=WINDOW))
            item["position"] = n if n < WINDOW else None
            return State.READY, item
        pel = self._xpending_one(keys, eid)
        if pel is not None:
            item.update(self._pending_items(keys, [pel], now)[0])
            item["fields"] = fields
            return State.PROCESSING, item
        return None, item

    def _xpending_one(self, keys: StreamGroupKeys, eid: str) -> dict | None:
        try:
            rows = self.client.xpending_range(keys.stream, self.group, eid, eid, 1)
        except Exception as exc:  # noqa: BLE001
            if _missing(exc):
                return None
            raise
        return rows[0] if rows else None

    def _find_pending(self, keys: StreamGroupKeys, job_id: str) -> tuple[str, dict] | None:
        start, seen = "-", 0
        while seen < SEARCH_BOUND:
            rows = self._xpending(keys, start, WINDOW)
            if not rows:
                return None
            pipe = self._pipeline()
            for r in rows:
                eid = text(r["message_id"])
                pipe.xrange(keys.stream, eid, eid)
            for entry in pipe.execute():
                if entry:
                    fields = _fields(entry[0][1])
                    if fields.get("jobId") == job_id:
                        return text(entry[0][0]), fields
            seen += len(rows)
            start = f"({text(rows[-1]['message_id'])}"
            if len(rows) < WINDOW:
                return None
        return None

    # -- batched walks -------------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        self.check_supported(state)
        cap = None if sample is None else sample[0] * sample[1]
        for keys in self.shards:
            yield from self.iter_batches_of(keys, state, batch, cap=cap, sample=sample)

    def iter_batches_of(self, keys: StreamGroupKeys, state: State, batch: int = 1000, *,
                        cap: int | None = None, sample: tuple[int, int] | None = None,
                        idle: int | None = None, now: int | None = None) -> Iterator[list[JobRecord]]:
        """Walk one shard's ``state`` in windows of ``batch``.  Streams and
        the PEL are walked in id order (``cap``: stop after that many, the
        sample of a large state); the dead list from its tail (``position``
        counts from the tail); zsets by rank (random windows when ``sample``).
        ``idle`` restricts the PEL to entries idle at least that long."""
        now = now_ms() if now is None else now
        batch = max(1, min(batch, WINDOW))
        if state is State.READY:
            g = self.group_info(keys)
            if g is not None:
                yield from self._walk_stream(keys, keys.stream, f"({g.last_id}", batch, cap, state)
            return
        if state is State.PROCESSING:
            start, seen = "-", 0
            while cap is None or seen < cap:
                rows = self._xpending(keys, start, batch, idle=idle)
                if not rows:
                    return
                yield self._records(keys, self._pending_items(keys, rows, now), state)
                seen += len(rows)
                start = f"({text(rows[-1]['message_id'])}"
            return
        if state is State.DEAD and self.dead_kind == "stream":
            yield from self._walk_stream(keys, keys.dead_stream, "-", batch, cap, state)
            return
        if state is State.DEAD:
            # from the tail with negative indexes: LPUSHes at the head do not shift them;
            # jobctl's hold (set aside by a window-engine walk) first: it is the oldest part
            base = 0
            for key in (keys.hold, keys.dead):
                for start, chunk in walk_list(self.client, key, from_right=True, batch=batch, sample=sample):
                    yield self._records(keys, [{"job_id": text(x), "position": base + start + n}
                                               for n, x in enumerate(chunk)], state)
                base = self.client.llen(keys.hold)
            return
        key = keys.scheduled if state is State.SCHEDULED else keys.suppressed
        for _, pairs in walk_zset(self.client, key, batch=batch, sample=sample):
            recs = self._records(keys, [{"job_id": text(m), "score": score_ms(s)} for m, s in pairs], state)
            if state is State.SUPPRESSED:
                self._attach_suppressed_info(keys, recs)
            yield recs

    def _walk_stream(self, keys: StreamGroupKeys, stream: str, start: str, batch: int, cap: int | None,
                     state: State) -> Iterator[list[JobRecord]]:
        """Records of the entries of ``stream`` from ``start`` (an ``XRANGE``
        bound) in id order, ``batch`` per ``XRANGE``, until ``cap`` entries.
        Ready entries get ``position`` (from the first undelivered one);
        dead-stream entries ``dead_entry_id`` and ``dead_since_ms``."""
        seen = 0
        while cap is None or seen < cap:
            entries = self.client.xrange(stream, start, "+", count=batch)
            if not entries:
                return
            items = self._entry_items(entries)
            for it in items:
                if state is State.DEAD:
                    it["dead_entry_id"] = it.pop("entry_id")
                    it["dead_since_ms"] = it.pop("entered_ms")
                    it["position"] = None
                else:
                    it["position"] += seen
            yield self._records(keys, items, state)
            seen += len(entries)
            start = f"({text(entries[-1][0])}"

    # -- operations --------------------------------------------------------------------
    def plan(self, spec: OpSpec, now: int | None = None) -> Plan:
        """Plan ``spec``: walk the source, filter, fence each match
        (:func:`~jobctl.layouts.planning.plan_from_walk`).  Reads only.

        Raises :class:`UsageError` for a transition the layout does not have
        (see :data:`TRANSITIONS`) or a ``--priority``."""
        from .planning import plan_from_walk, refuse_priority, require_requeue_scope, shard_index

        now = now_ms() if now is None else now
        if spec.operation.value == "replay":  # jobctl replay: stream_group_replay
            from .stream_group_replay import plan_replay

            return plan_replay(self, spec, now)
        check_transition(self.name, TRANSITIONS, spec)
        refuse_priority(self.name, spec)
        require_requeue_scope(spec)
        on_engine = spec.source is State.DEAD and self.dead_kind == "list"  # the window engine
        if on_engine:  # unfiltered: the tail length only, ids read by the engine (reliable-list's TailRange)
            from .reliable_list_ops import plan_tail, unfiltered_tail

            if unfiltered_tail(spec):
                return plan_tail(self, spec, now)
        plan = Plan(spec=spec, now_ms=now, redrive_record="hash" if on_engine else "envelope")

        def fence(rec: JobRecord) -> str:
            return "" if rec.meta.get("payload_in_entry") else payload_sha1(rec.raw)

        def keep(rec: JobRecord, job: PlannedJob) -> None:
            entry = rec.meta.get("entry_id" if spec.source is State.PROCESSING else "dead_entry_id") or ""
            plan.jobs[-1] = StreamPlannedJob(
                job_id=job.job_id, shard=job.shard, position=rec.position,
                score=rec.deadline_ms if spec.source is State.PROCESSING else rec.score, sha1=job.sha1,
                entry_id=entry, consumer=rec.meta.get("consumer", ""),
                deliveries=int(rec.meta.get("delivery_count") or 0))

        return plan_from_walk(plan, self._source_walk(spec, now), fence, shard_of=shard_index(self.shards),
                              is_stuck=lambda r: r.deadline_ms is not None and r.deadline_ms <= now,
                              on_match=keep)

    def _source_walk(self, spec: OpSpec, now: int) -> Iterator[list[JobRecord]]:
        """The source's records: ``spec.ids`` looked up in every shard, else
        every shard walked (the PEL only past the visibility timeout with
        ``--stuck``).  Dead-list positions count from the tail."""
        if spec.ids:
            for job_id in spec.ids:
                for keys in self.shards:
                    rec = self._inspect_shard(keys, job_id, now)
                    if rec is None or rec.state is not spec.source:
                        continue
                    if spec.source is State.DEAD and self.dead_kind == "list" and rec.position is not None:
                        rec.position = self.client.llen(keys.dead) + self.client.llen(keys.hold) - 1 - rec.position
                    yield [rec]
            return
        idle = self.visibility_timeout_ms if spec.stuck_only else None
        for keys in self.shards:
            yield from self.iter_batches_of(keys, spec.source, WINDOW, idle=idle, now=now)

    def sources(self, spec: OpSpec):
        """The window-engine sources (one per shard) of an operation from a
        dead *list* (``dead = "list"``): ids as reliable-list's, a redrive
        to ready is an ``XADD jobId <id>`` to the stream.  ``[]`` otherwise."""
        from ..ops.window import ListSource, drives

        if not drives(spec) or self.dead_kind != "list":
            return []
        from .common import suppression_record
        from .reliable_list_ops import reset_payloads

        out = []
        for shard, keys in enumerate(self.shards):
            if spec.operation is Operation.PURGE:
                mode, target = "purge", keys.dead
            elif spec.target is State.SUPPRESSED:
                mode, target = "suppressed", keys.suppressed
            elif spec.target is State.SCHEDULED:
                mode, target = "scheduled", keys.scheduled
            else:
                mode, target = "stream", keys.stream
            reset = spec.operation is Operation.REDRIVE and spec.reset_attempts
            out.append(ListSource(
                client=self.client, kind="rl", tag=keys.tag, shard=shard, dead=keys.dead, hold=keys.hold,
                walk=keys.walk, lease=keys.lease, redriven=keys.redriven, info_hash=keys.suppressed_info,
                target=target, mode=mode, payload_key=keys.job,
                new_payloads=reset_payloads(self.client, keys, spec, mode) if reset else None,
                info=(lambda now: suppression_record(spec, now)) if mode == "suppressed" else None,
                delay_ms=spec.delay_ms if mode == "scheduled" else 0,
                window=128))  # an XADD a job: ~2x a reliable-list LMOVE, so half its tail window
        return out

    def apply(self, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
        """Apply ``plan`` one script call at a time; yields each call's result.
        Each job moves atomically and only if its fence still holds.  A
        dead list is the window engine's (:meth:`sources`)."""
        spec = plan.spec
        if spec.operation.value == "replay":
            from .stream_group_replay import apply_replay

            yield from apply_replay(self, plan, batch=batch or DEFAULT_BATCH)
            return
        if spec.source is State.DEAD and self.dead_kind == "list":
            from ..ops.window import drive

            yield from drive(self.sources(spec), plan, batch=batch, depth=1)
            return
        batch = batch or DEFAULT_BATCH
        by_shard: dict[int, list[StreamPlannedJob]] = defaultdict(list)
        for job in plan.jobs:
            by_shard[job.shard].append(job)  # type: ignore[arg-type]
        for shard, jobs in by_shard.items():
            keys = self.shards[shard]
            for i in range(0, len(jobs), batch):
                chunk = jobs[i:i + batch]
                if spec.source is State.PROCESSING:
                    args: list = [self.group, len(chunk)]
                    for j in chunk:
                        args += [j.job_id, j.entry_id, j.consumer, j.deliveries]
                    yield move_result(call_move(self.client, "sg_requeue", [keys.stream], args))
                elif spec.source is State.DEAD:
                    yield self._apply_dead(keys, spec, chunk)
                else:
                    if spec.source is State.SCHEDULED:
                        mode, src, target = "promote", keys.scheduled, keys.stream
                    elif spec.operation is Operation.PURGE:
                        mode, src, target = "purge", keys.suppressed, keys.suppressed
                    else:
                        mode, src, target = "unsuppress", keys.suppressed, self.dead_key(keys)
                    args = [mode, self.dead_kind, len(chunk)]
                    for j in chunk:
                        args += [j.job_id, str(j.score), j.sha1]
                    yield move_result(call_move(
                        self.client, "sg_zset_move",
                        [src, target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args))

    def _apply_dead(self, keys: StreamGroupKeys, spec: OpSpec, chunk: list[StreamPlannedJob]) -> BatchResult:
        now = now_ms()
        if spec.operation is Operation.PURGE:
            mode, target, at = "purge", self.dead_key(keys), now
        elif spec.target is State.SUPPRESSED:
            mode, target, at = "suppressed", keys.suppressed, now
        elif spec.target is State.SCHEDULED:
            mode, target, at = "scheduled", keys.scheduled, now + spec.delay_ms
        else:
            mode, target, at = "ready", keys.stream, now
        raws = self.client.mget([keys.job(j.job_id) for j in chunk]) if spec.operation is Operation.REDRIVE \
            else [None] * len(chunk)
        args: list = [mode, self.dead_kind, at, len(chunk)]
        for j, raw in zip(chunk, raws):
            locator = j.entry_id if self.dead_kind == "stream" else str((j.position or 0) + 1)
            new = b""
            if raw is not None and payload_sha1(raw) == j.sha1:
                new = redrive_envelope(raw, spec, now, at if mode == "scheduled" else None)
            info = suppression_record(spec, now) if mode == "suppressed" else b""
            args += [j.job_id, locator, j.sha1, new, info]
        return move_result(call_move(
            self.client, "sg_dead_move",
            [self.dead_key(keys), target, keys.suppressed_info] + [keys.job(j.job_id) for j in chunk], args))


def _missing(exc: BaseException) -> bool:
    """True for the errors of a missing stream (``no such key``) or group (``NOGROUP``)."""
    msg = str(exc)
    return "no such key" in msg or msg.startswith("NOGROUP") or "NOGROUP" in msg.split(" ", 1)[0]


def _carries_job(fields: dict[str, str] | None) -> bool:
    """True when entry fields carry more than the job id (the job itself)."""
    return bool(fields) and not set(fields) <= {"jobId"}


def _id_after(a: str, b: str) -> bool:
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


# -- discovery -----------------------------------------------------------------------

def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Stream-group queues in a scanned keyspace (:mod:`jobctl.discovery`).

    Evidence: ``stream:{tag}:jobs`` of type stream; with a client, it must
    also have a consumer group (its first group's name goes to the config
    when it is not ``workers``).  The tag's ``queue:{tag}:scheduled`` (zset),
    ``queue:{tag}:dead`` (list), ``stream:{tag}:dead`` (stream) and jobctl's
    ``queue:{tag}:jobctl:*`` keys are claimed with it, unless the tag also
    has reliable-list ready/processing lists.  Shard tags ``<name>:NN``
    group into one queue.
    """
    from ..config import QueueConfig

    tags: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = STREAM_GROUP_KEY_RE.match(key)
        if m and typ == b"stream":
            tags[m.group(1)] = [key]
    groups: dict[str, Any] = {}
    if client is not None and tags:
        pipe = client.pipeline(transaction=False)
        order = sorted(tags)
        for tag in order:
            pipe.xinfo_groups(StreamGroupKeys(tag).stream)
        groups = dict(zip(order, pipe.execute(raise_on_error=False)))
    found: dict[str, dict[str, Any]] = {}
    for tag, evidence in sorted(tags.items()):
        k = StreamGroupKeys(tag)
        group = DEFAULT_GROUP
        if client is not None:
            infos = groups.get(tag)
            if isinstance(infos, Exception) or not infos:
                continue  # no consumer group: nobody works this stream
            names = [text(g.get("name", b"")) for g in infos]
            group = DEFAULT_GROUP if DEFAULT_GROUP in names else names[0]
        rk = ReliableListKeys(tag)
        rl_lists = any(keys.get(x) == b"list" for x in (rk.ready, rk.processing)) or \
            any(key.startswith(rk.ready_priority_pattern[:-1]) for key in keys)
        dead_kind = "stream" if keys.get(k.dead_stream) == b"stream" else "list"
        if keys.get(k.dead_stream) == b"stream":
            evidence.append(k.dead_stream)
        if not rl_lists:
            for key, want in ((k.scheduled, b"zset"), (k.dead, b"list"), (k.suppressed, b"zset"),
                              (k.suppressed_info, b"hash"), (k.journal, b"stream")):
                if keys.get(key) == want:
                    evidence.append(key)
        shard = split_shard_tag(tag)
        base = shard[0] if shard else tag
        entry = found.setdefault(base, {"tags": {}, "group": group, "dead": dead_kind})
        entry["tags"][tag] = evidence
    out = []
    for base, entry in sorted(found.items()):
        members = entry["tags"]
        nums = [split_shard_tag(t) for t in members]
        sharded = base not in members and all(n is not None for n in nums)
        opts: dict[str, Any] = {}
        if entry["group"] != DEFAULT_GROUP:
            opts["group"] = entry["group"]
        if entry["dead"] != "list":
            opts["dead"] = entry["dead"]
        if sharded:
            nshards = max(n[1] for n in nums if n) + 1
            out.append((QueueConfig(name=base, layout="stream-group", tag=base, shards=nshards, options=opts,
                                    discovered=True), sorted(k for ev in members.values() for k in ev)))
        else:
            for tag, ev in sorted(members.items()):
                out.append((QueueConfig(name=tag, layout="stream-group", tag=tag, options=dict(opts),
                                        discovered=True), sorted(ev)))
    return out
