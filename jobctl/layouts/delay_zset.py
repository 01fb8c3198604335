"""The ``delay-zset`` layout and Redisson's delayed queue (layouts.md section
6; seed 004).

``delay-zset``: a single zset (e.g. ``delay_queue``) whose members are job
ids or small payloads, scored by due time (epoch ms).  Consumers take due
members with ``ZRANGEBYSCORE ... LIMIT 0 1`` + ``ZREM`` (the one that
removes it owns it) or one Lua script doing both.  **ready** = members due
now (``score <= now``), **scheduled** = members due later.  The member is the
job (id = the member's text); a JSON-object member is shown as its envelope.
There is no processing or dead state: a consumer owns a member once it has
removed it.  Operations: promote (scheduled -> ready: score to now) and
purge (``ZREM``) of ready or scheduled members, fenced by the score the plan
saw.  Config: ``key`` (the zset; default: the queue's tag, else its name).

``redisson-delayed-queue``: ``RDelayedQueue`` of a destination queue
``name``: ``redisson_delay_queue_timeout:{name}`` (zset, score = due ms) and
``redisson_delay_queue:{name}`` (list, insertion order) hold binary-packed
members (:mod:`.redisson_member`); the destination list ``name`` holds due
values.  **scheduled** = the timeout zset (overdue: Redisson's transfer task
is behind), **ready** = the destination list.  Read-only: status, ls,
inspect, attempts and check work; every operation is refused, because
Redisson's codec bytes and its two-key bookkeeping belong to Redisson's API.
Config: the queue's tag (else its name) is ``name``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

from ..errors import NotFound, UsageError
from ..keys import REDISSON_DELAY_KEY_RE, DelayZsetKeys, RedissonDelayedKeys
from ..model import Envelope, JobRecord, QueueStatus, State
from ..ops.plan import Plan
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from .base import Layout, now_ms
from .common import (DEFAULT_BATCH, SCHEDULED_READS, fold_scheduled, lenient_envelope,
                     read_scheduled, score_ms, text, wrongtype_errors)
from .moves import call_move, move_result
from .redisson_member import decode_member
from .reliable_list_check import CheckReport, Problem
from .walks import WINDOW, walk_list, walk_zset, window_starts

__all__ = ["DelayZset", "RedissonDelayedQueue", "member_envelope", "recognize", "EPOCH_MS_RANGE"]

#: ``inspect`` scans at most this many members for a job id inside payloads.
SEARCH_BOUND = 100_000
#: Scores a due time in epoch ms can have (2001-01-01 .. 2100-01-01):
#: discovery and check use it to tell a delay queue from other zsets.
EPOCH_MS_RANGE = (978_307_200_000, 4_102_444_800_000)

TRANSITIONS: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
    (Operation.PURGE, State.READY): (None,),
    (Operation.PURGE, State.SCHEDULED): (None,),
}


def member_envelope(raw: bytes) -> Envelope:
    """A JSON-object member as an envelope (``jobId`` or ``id`` as the job
    id); any other member is a bare job id: an envelope with no document and
    no problem."""
    stripped = raw.lstrip()
    if stripped.startswith(b"{"):
        env = lenient_envelope(raw)
        if env.document is not None and env.job_id is None and isinstance(env.document.get("id"), (str, int)):
            env.job_id = str(env.document["id"])
        return env
    return Envelope(job_id=text(raw))


def _glob_escape(value: bytes) -> bytes:
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", value)


def _argv(job_id: str) -> bytes:
    """A member as the exact bytes Redis holds (ids keep undecodable bytes)."""
    return job_id.encode("utf-8", "surrogateescape")


class DelayZset(Layout):
    """A delay-zset queue; see the module docstring."""

    name = "delay-zset"
    states = (State.READY, State.SCHEDULED)

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = DelayZsetKeys(str(queue.options.get("key") or queue.base_tag))
        if queue.shards or queue.priorities:
            from ..errors import ConfigError

            raise ConfigError(f"queue {queue.name}: layout delay-zset has no shards or priorities")

    @property
    def journal_key(self) -> str:
        return self.keys.journal

    def _record(self, raw: bytes, score: float, state: State, position: int | None = None) -> JobRecord:
        return JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=text(raw), state=state,
                         envelope=member_envelope(raw), raw=raw, position=position, score=score_ms(score),
                         meta={"state_key": self.keys.zset})

    def status(self, now: int | None = None) -> QueueStatus:
        now = now_ms() if now is None else now
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now)
        z = self.keys.zset
        pipe = self.client.pipeline(transaction=False)
        read_scheduled(pipe, z, now)  # due members are ready here, not overdue
        res = pipe.execute(raise_on_error=False)
        st.errors.extend(wrongtype_errors(res, [z] * 4))
        if st.errors:
            return st
        total, due, first, nxt = res
        st.ready, st.scheduled = due, total - due
        if due and first:
            st.oldest_ready_since_ms = int(first[0][1])
            st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
        if nxt:
            st.next_due_ms = int(nxt[0][1])
        return st

    def depth(self, state: State) -> int:
        self.check_supported(state)
        st = self.status()
        return st.ready if state is State.READY else st.scheduled

    def _range(self, state: State, offset: int, count: int, now: int) -> list[tuple[bytes, float]]:
        lo, hi = ("-inf", now) if state is State.READY else (f"({now}", "+inf")
        return self.client.zrange(self.keys.zset, lo, hi, byscore=True, offset=offset, num=count, withscores=True)

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Earliest due first (ready: the next a consumer takes)."""
        self.check_supported(state)
        now = now_ms() if now is None else now
        return [self._record(m, s, state, n) for n, (m, s) in enumerate(self._range(state, 0, limit, now))]

    def inspect(self, job_id: str) -> JobRecord:
        raw = _argv(job_id)
        score = self.client.zscore(self.keys.zset, raw)
        if score is None:
            hit = self._search(job_id)
            if hit is None:
                raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
            raw, score = hit
        state = State.READY if score <= now_ms() else State.SCHEDULED
        rec = self._record(raw, score, state)
        rec.meta["rank"] = self.client.zrank(self.keys.zset, raw)
        return rec

    def _search(self, job_id: str) -> tuple[bytes, float] | None:
        """A JSON member whose ``jobId``/``id`` is ``job_id`` (ZSCAN MATCH)."""
        pattern = b"*" + _glob_escape(_argv(job_id)) + b"*"
        cursor, seen = 0, 0
        while seen < SEARCH_BOUND:
            cursor, pairs = self.client.zscan(self.keys.zset, cursor, match=pattern, count=WINDOW)
            seen += WINDOW
            for m, s in pairs:
                if member_envelope(m).job_id == job_id:
                    return m, s
            if cursor == 0:
                return None
        return None

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        self.check_supported(state)
        now = now_ms()
        batch = max(1, min(batch, WINDOW))
        if sample is not None:
            offsets, size = window_starts(self.depth(state), batch, sample)
            for off in offsets:
                pairs = self._range(state, off, size, now)
                if pairs:
                    yield [self._record(m, s, state, off + n) for n, (m, s) in enumerate(pairs)]
            return
        # walk by score, not by rank: consumers remove due members while we read
        lo: Any = "-inf" if state is State.READY else f"({now}"
        hi: Any = now if state is State.READY else "+inf"
        skip = pos = 0
        while True:
            pairs = self.client.zrange(self.keys.zset, lo, hi, byscore=True, offset=skip, num=batch,
                                       withscores=True)
            if not pairs:
                return
            yield [self._record(m, s, state, pos + n) for n, (m, s) in enumerate(pairs)]
            pos += len(pairs)
            if len(pairs) < batch:
                return
            last = pairs[-1][1]
            same = sum(1 for _, s in pairs if s == last)
            skip = skip + len(pairs) if same == len(pairs) and lo == last else same
            lo = last

    def plan(self, spec: OpSpec, now: int | None = None) -> Plan:
        """Plan promote (scheduled -> ready) or purge (ready or scheduled);
        reads only.  Raises :class:`UsageError` for anything else."""
        from .planning import plan_by_payload

        return plan_by_payload(self, spec, now_ms() if now is None else now, TRANSITIONS)

    def apply(self, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
        """One ``dz_move.lua`` call per batch, each member fenced by its score."""
        batch = batch or DEFAULT_BATCH
        mode = "purge" if plan.spec.operation is Operation.PURGE else "score"
        for i in range(0, len(plan.jobs), batch):
            chunk = plan.jobs[i:i + batch]
            args: list = [mode, now_ms(), len(chunk)]
            for j in chunk:
                args += [_argv(j.job_id), str(j.score)]
            yield move_result(call_move(self.client, "dz_move", [self.keys.zset], args))

    def check(self, *, repair: bool = False) -> CheckReport:
        """Report members whose score is not an epoch-ms due time
        (``bad_score``; e.g. seconds written by a buggy producer).  No repair."""
        report = CheckReport(queue=self.queue_name, layout=self.name)
        lo, hi = EPOCH_MS_RANGE
        for rng in (("-inf", f"({lo}"), (f"({hi}", "+inf")):
            pairs = self.client.zrange(self.keys.zset, rng[0], rng[1], byscore=True, offset=0, num=WINDOW,
                                       withscores=True)
            for m, s in pairs:
                report.problems.append(Problem("bad_score", "", text(m), f"score {s:.0f} is not an epoch-ms "
                                               "due time"))
        report.checked_ids = self.client.zcard(self.keys.zset)
        return report


class RedissonDelayedQueue(Layout):
    """A Redisson ``RDelayedQueue`` (read-only); see the module docstring."""

    name = "redisson-delayed-queue"
    states = (State.READY, State.SCHEDULED)

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = RedissonDelayedKeys(str(queue.options.get("name") or queue.base_tag))

    @property
    def journal_key(self) -> str:
        return self.keys.journal

    def _scheduled(self, raw: bytes, score: float, position: int | None = None) -> JobRecord:
        m = decode_member(raw)
        env = member_envelope(m.value)
        env.job_id = m.job_id
        rec = JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=m.job_id, state=State.SCHEDULED,
                        envelope=env, raw=m.value, position=position, score=score_ms(score),
                        meta={"state_key": self.keys.timeout, "member_bytes": len(raw)})
        if m.random_id is not None:
            rec.meta["random_id"] = m.random_id
        if m.problem:
            rec.meta["problem"] = m.problem
            env.problems.append(m.problem)
        return rec

    def _ready(self, value: bytes, position: int) -> JobRecord:
        job_id = hashlib.sha1(value).hexdigest()[:16]
        env = member_envelope(value)
        env.job_id = job_id
        return JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=job_id, state=State.READY,
                         envelope=env, raw=value, position=position,
                         meta={"state_key": self.keys.destination, "id_is": "sha1 of the value (first 16 hex)"})

    def status(self, now: int | None = None) -> QueueStatus:
        now = now_ms() if now is None else now
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now)
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        read_scheduled(pipe, k.timeout, now)
        pipe.llen(k.order)
        pipe.llen(k.destination)
        res = pipe.execute(raise_on_error=False)
        st.errors.extend(wrongtype_errors(res, [k.timeout] * len(SCHEDULED_READS) + [k.order, k.destination]))
        if st.errors:
            return st
        for what, reply in zip(SCHEDULED_READS, res):
            fold_scheduled(st, what, reply, now)
        total, order, st.ready = st.scheduled, res[-2], res[-1]
        if order != total:
            st.warnings.append(f"{k.order} holds {order} members, {k.timeout} {total}")
        return st

    def depth(self, state: State) -> int:
        self.check_supported(state)
        return self.client.llen(self.keys.destination) if state is State.READY else \
            self.client.zcard(self.keys.timeout)

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: the destination list from its head (``RQueue.poll`` takes the
        head); scheduled: earliest due first."""
        self.check_supported(state)
        if state is State.READY:
            return [self._ready(v, n) for n, v in enumerate(self.client.lrange(self.keys.destination, 0, limit - 1))]
        pairs = self.client.zrange(self.keys.timeout, 0, limit - 1, withscores=True)
        return [self._scheduled(m, s, n) for n, (m, s) in enumerate(pairs)]

    def inspect(self, job_id: str) -> JobRecord:
        """``job_id``: a scheduled member's random-id hex, or a ready value's
        SHA1 prefix (as ``ls`` shows them)."""
        try:
            prefix = bytes.fromhex(job_id)
        except ValueError:
            prefix = b""
        if len(prefix) == 8:
            cursor, seen = 0, 0
            pattern = _glob_escape(prefix) + b"*"
            while seen < SEARCH_BOUND:
                cursor, pairs = self.client.zscan(self.keys.timeout, cursor, match=pattern, count=WINDOW)
                seen += WINDOW
                for m, s in pairs:
                    if m[:8] == prefix:
                        rec = self._scheduled(m, s)
                        rec.meta["rank"] = self.client.zrank(self.keys.timeout, m)
                        return rec
                if cursor == 0:
                    break
            start = 0
            while start < SEARCH_BOUND:
                values = self.client.lrange(self.keys.destination, start, start + WINDOW - 1)
                for n, v in enumerate(values):
                    if hashlib.sha1(v).hexdigest()[:16] == job_id:
                        return self._ready(v, start + n)
                if len(values) < WINDOW:
                    break
                start += WINDOW
        raise NotFound(f"job {job_id!r} not found in queue {self.queue_name} (ids are 16 hex digits, as ls "
                       "shows them)")

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        self.check_supported(state)
        batch = max(1, min(batch, WINDOW))
        if state is State.READY:
            for start, values in walk_list(self.client, self.keys.destination, from_right=False, batch=batch,
                                           sample=sample):
                yield [self._ready(v, start + n) for n, v in enumerate(values)]
            return
        for start, pairs in walk_zset(self.client, self.keys.timeout, batch=batch, sample=sample):
            yield [self._scheduled(m, s, start + n) for n, (m, s) in enumerate(pairs)]

    def _refuse(self, what: str):
        raise UsageError(f"{what} refused: layout {self.name} is read-only in jobctl (members are packed by "
                         "Redisson's codec and kept in two keys; change them with Redisson's RDelayedQueue API)")

    def plan(self, spec: OpSpec, now: int | None = None) -> Plan:
        self._refuse(spec.operation.value)

    def apply(self, plan: Plan, *, batch: int | None = None):
        self._refuse(plan.spec.operation.value)

    def check(self, *, repair: bool = False) -> CheckReport:
        """Report members that do not decode (``bad_member``) and a timeout
        zset and order list of different sizes (``order_mismatch``).
        ``repair`` is refused (read-only layout)."""
        if repair:
            self._refuse("check --repair")
        report = CheckReport(queue=self.queue_name, layout=self.name)
        for batch in self.iter_batches(State.SCHEDULED):
            report.checked_ids += len(batch)
            for rec in batch:
                if "problem" in rec.meta:
                    report.problems.append(Problem("bad_member", "", rec.job_id, rec.meta["problem"]))
        total, order = self.client.zcard(self.keys.timeout), self.client.llen(self.keys.order)
        if total != order:
            report.problems.append(Problem("order_mismatch", "", "", f"{self.keys.order} holds {order} members, "
                                           f"{self.keys.timeout} {total}"))
        return report


# -- discovery ----------------------------------------------------------------------------

_DELAY_NAME_RE = re.compile(r"delay", re.IGNORECASE)


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Redisson delayed queues and delay zsets in a scanned keyspace
    (:mod:`jobctl.discovery`).

    Redisson: ``redisson_delay_queue_timeout:{name}`` (zset) or
    ``redisson_delay_queue:{name}`` (list); the destination list ``name``
    is claimed with them.  Delay zset: a zset whose name contains ``delay``
    and no hash tag; with a client, its lowest and highest scores must be
    epoch-ms due times (:data:`EPOCH_MS_RANGE`).
    """
    from ..config import QueueConfig

    out = []
    redisson: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = REDISSON_DELAY_KEY_RE.match(key)
        if m and typ == (b"zset" if m.group(1) else b"list"):
            redisson.setdefault(m.group(2), []).append(key)
    for name, evidence in sorted(redisson.items()):
        if keys.get(name) == b"list":
            evidence.append(name)
        out.append((QueueConfig(name=name, layout="redisson-delayed-queue", tag=name, discovered=True),
                    sorted(evidence)))
    taken = {k for _, ev in out for k in ev}
    lo, hi = EPOCH_MS_RANGE
    for key, typ in sorted(keys.items()):
        if typ != b"zset" or key in taken or "{" in key or ":jobctl:" in key or not _DELAY_NAME_RE.search(key):
            continue
        if client is not None:
            first = client.zrange(key, 0, 0, withscores=True)
            last = client.zrange(key, -1, -1, withscores=True)
            if not first or not all(lo <= p[0][1] < hi for p in (first, last)):
                continue
        evidence = [key]
        if keys.get(DelayZsetKeys(key).journal) == b"stream":
            evidence.append(DelayZsetKeys(key).journal)
        out.append((QueueConfig(name=key, layout="delay-zset", tag=key, discovered=True), evidence))
    return out
