"""Redisson's delayed queue, the ``redisson-delayed-queue`` layout
(layouts.md section 6; seed 004).

``RDelayedQueue`` of a destination queue
``name``: ``redisson_delay_queue_timeout:{name}`` (zset, score = due ms) and
``redisson_delay_queue:{name}`` (list, insertion order) hold binary-packed
members (:mod:`.redisson_member`); the destination list ``name`` holds due
values.  **scheduled** = the timeout zset (overdue: Redisson's transfer task
is behind), **ready** = the destination list.  Read-only: status, ls,
inspect, attempts and check work; every operation is refused, because
Redisson's codec bytes and its two-key bookkeeping belong to Redisson's API.
Config: the queue's tag (else its name) is ``name``.

Discovery: :mod:`.discover`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from jobctl.errors import NotFound, UsageError
from jobctl.keys import RedissonDelayedKeys
from jobctl.model import JobRecord, QueueStatus, State
from jobctl.ops.plan import Plan
from jobctl.ops.spec import OpSpec
from jobctl.layouts.base import KeyedLayout, now_ms
from jobctl.layouts.facts import StrOption
from jobctl.layouts.common import SCHEDULED_READS, fold_scheduled, read_scheduled, score_ms, wrongtype_errors
from jobctl.layouts.delay_zset.common import SEARCH_BOUND, glob_escape, member_envelope
from jobctl.layouts.redisson_delayed_queue.member import decode_member
from jobctl.layouts.reliable_list.check import CheckReport, Problem
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

__all__ = ["RedissonDelayedQueue"]


class RedissonDelayedQueue(KeyedLayout):
    """A Redisson ``RDelayedQueue`` (read-only); see the module docstring."""

    name = "redisson-delayed-queue"
    states = (State.READY, State.SCHEDULED)
    config_options = {"name": StrOption(512)}

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.redisson_delayed_queue.discover import recognize

        return recognize

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = RedissonDelayedKeys(str(queue.options.get("name") or queue.base_tag))

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
            pattern = glob_escape(prefix) + b"*"
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
