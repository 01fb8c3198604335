"""The ``delay-zset`` layout (layouts.md section 6; seed 004).

A single zset (e.g. ``delay_queue``) whose members are job
ids or small payloads, scored by due time (epoch ms).  Consumers take due
members with ``ZRANGEBYSCORE ... LIMIT 0 1`` + ``ZREM`` (the one that
removes it owns it) or one Lua script doing both.  **ready** = members due
now (``score <= now``), **scheduled** = members due later.  The member is the
job (id = the member's text); a JSON-object member is shown as its envelope.
There is no processing or dead state: a consumer owns a member once it has
removed it.  Operations: promote (scheduled -> ready: score to now) and
purge (``ZREM``) of ready or scheduled members, fenced by the score the plan
saw.  Config: ``key`` (the zset; default: the queue's tag, else its name).

Redisson's delayed queue (the same section): :mod:`.redisson_delayed_queue`;
what both share: :mod:`.delay_zset_common`; discovery of both:
:mod:`.discover`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jobctl.errors import NotFound
from jobctl.keys import DelayZsetKeys
from jobctl.model import JobRecord, QueueStatus, State
from jobctl.ops.plan import Plan
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.base import KeyedLayout, now_ms
from jobctl.layouts.facts import StrOption
from jobctl.layouts.common import DEFAULT_BATCH, read_scheduled, score_ms, text, wrongtype_errors
from jobctl.layouts.delay_zset.common import EPOCH_MS_RANGE, SEARCH_BOUND, glob_escape, member_envelope
from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.reliable_list.check import CheckReport, Problem
from jobctl.layouts.walks import WINDOW, window_starts

__all__ = ["DelayZset", "TRANSITIONS"]

TRANSITIONS: dict[tuple[Operation, State], tuple[State | None, ...]] = {
    (Operation.PROMOTE, State.SCHEDULED): (State.READY,),
    (Operation.PURGE, State.READY): (None,),
    (Operation.PURGE, State.SCHEDULED): (None,),
}


def _argv(job_id: str) -> bytes:
    """A member as the exact bytes Redis holds (ids keep undecodable bytes)."""
    return job_id.encode("utf-8", "surrogateescape")


class DelayZset(KeyedLayout):
    """A delay-zset queue; see the module docstring."""

    name = "delay-zset"
    states = (State.READY, State.SCHEDULED)
    operations = frozenset(op for op, _ in TRANSITIONS)
    config_options = {"key": StrOption(512)}

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.delay_zset.discover import recognize

        return recognize

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = DelayZsetKeys(str(queue.options.get("key") or queue.base_tag))
        if queue.shards or queue.priorities:
            from jobctl.errors import ConfigError

            raise ConfigError(f"queue {queue.name}: layout delay-zset has no shards or priorities")

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
            st.oldest_ready_since_ms = score_ms(first[0][1])
            st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
        if nxt:
            st.next_due_ms = score_ms(nxt[0][1])
        return st

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
        pattern = b"*" + glob_escape(_argv(job_id)) + b"*"
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
        from jobctl.layouts.planning import plan_by_payload

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
