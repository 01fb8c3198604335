"""The ``delayed-events`` layout (layouts.md section 5; seed 003, the Java
delayed-event library): a zset ``delayed_events`` (member ``<event
class>###<event id>`` -> next attempt time, epoch ms), a hash ``events``
(same member -> envelope JSON ``{"type", "payload": {..., "id"}, "attempt",
"logContext"}``), one list per event type (the lowercase simple class name)
holding envelopes dispatched for handling, and the dispatcher's lock
``delayed_events_lock``.

The library's dispatcher (under its lock) takes due members, pushes the
current envelope onto the type's list and, in the same ``MULTI``, stores
the envelope with ``attempt + 1`` and the next attempt time as the score,
or drops the event when that attempt reaches its retry limit.  A handler
``BRPOP``s the list; on success it removes the member and the hash field.

States (job id = the member); each event is in exactly one:

* **ready**: envelopes on the type lists, waiting for a handler (served
  from the right; the member stays in the zset for the next attempt and is
  shown only as this copy), and members that are due (``score <= now``):
  the dispatcher hands them to a handler on its next pass, so dispatcher
  lag shows as the age of the oldest ready event.  (``scheduled_overdue``
  stays 0 for this layout.)
* **scheduled**: members due later whose envelope ``attempt`` is below the
  queue's ``max_attempts``.
* **dead**: there is no DLQ: members whose ``attempt`` is at or over
  ``max_attempts`` (the library keeps retrying them until its own limit).
* **suppressed**: jobctl's own zset + info hash (the member's score and
  envelope are kept there, so unsuppress can restore both).
* no processing: a handler's claim (a ``BRPOP``) leaves nothing in Redis
  but the member, due again at its next attempt time.

Splitting the zset reads every envelope's ``attempt`` and the type lists:
exact up to :data:`.delayed_events_status.EXACT_BOUND` members and :data:`READY_BOUND` list
entries (windows of ``ZRANGE`` + ``HMGET``, ``LRANGE``), estimated from a
sample beyond (``status`` says so).

Operations (:mod:`.delayed_events_ops`): promote sets the score to now (the event becomes ready);
redrive resets ``attempt`` to 1, as the library creates an event, and sets
the score to now (``--to scheduled``: now + ``--delay``): the envelope gets
no other field, because the library's JSON reader rejects unknown ones, so
the redrive is recorded in jobctl's journal only; suppress moves the member
and its envelope to jobctl's keys (the dispatcher stops retrying it);
unsuppress restores both; purge removes the member and the envelope
together.  Requeue does not apply.  Every move is fenced by the score and
the envelope's SHA1, and waits while the dispatcher holds its lock
(``de_move.lua``).

Config (``[queues.NAME]``): ``prefix`` (the library's data-set prefix,
default ""), ``max_attempts`` (default :data:`DEFAULT_MAX_ATTEMPTS`),
``event_lists`` (type list names; default: derived from a sample of members).

The counts: :mod:`.delayed_events_status`; checks:
:mod:`.delayed_events_check`; discovery: :mod:`.discover`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from jobctl.errors import ConfigError, DataError, NotFound
from jobctl.keys import DelayedEventsKeys, split_delayed_event_member
from jobctl.model import Envelope, JobRecord, QueueStatus, State
from jobctl.ops.plan import Plan
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import OpSpec
from jobctl.layouts.base import KeyedLayout, now_ms
from jobctl.layouts.facts import AnyOption, IntOption, StrOption
from jobctl.ops.spec import Operation
from jobctl.layouts.common import json_object, score_ms, text, wrongtype_errors
from jobctl.layouts.walks import WINDOW, list_window, window_starts
from jobctl.layouts.delayed_events.envelope import READY_BOUND, TYPE_SAMPLE, TypeLists, event_envelope

__all__ = ["DelayedEvents", "event_envelope", "DEFAULT_MAX_ATTEMPTS", "READY_BOUND", "TYPE_SAMPLE"]

#: Attempt at which an event counts as dead when the config sets none: the
#: end of the library's first backoff tier (10 attempts 10 s apart).
DEFAULT_MAX_ATTEMPTS = 10
#: Type lists are searched at most this deep by ``inspect``.
SEARCH_BOUND = 20_000


class DelayedEvents(TypeLists, KeyedLayout):
    """A delayed-events service; see the module docstring."""

    name = "delayed-events"
    states = (State.READY, State.SCHEDULED, State.DEAD, State.SUPPRESSED)
    operations = frozenset({Operation.PROMOTE, Operation.REDRIVE, Operation.SUPPRESS, Operation.UNSUPPRESS,
                            Operation.PURGE})
    config_options = {"prefix": StrOption(512), "max_attempts": IntOption(1, 1_000_000),
                      "event_lists": AnyOption()}

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.delayed_events.discover import recognize

        return recognize

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        opts = queue.options
        self.keys = DelayedEventsKeys(str(opts.get("prefix") or ""))
        limit = opts.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"queue {queue.name}: max_attempts must be a positive integer, got {limit!r}")
        self.max_attempts: int = limit
        lists = opts.get("event_lists")
        if lists is not None and (not isinstance(lists, list) or not all(isinstance(x, str) for x in lists)):
            raise ConfigError(f"queue {queue.name}: event_lists must be a list of key names")
        self._event_lists: list[str] | None = list(lists) if lists is not None else None
        if queue.shards or queue.priorities:
            raise ConfigError(f"queue {queue.name}: layout delayed-events has no shards or priorities")

    def check(self, *, repair: bool = False):
        from jobctl.layouts.delayed_events.check import check_queue

        return check_queue(self, repair=repair)

    # -- helpers ---------------------------------------------------------------
    def is_dead(self, env: Envelope) -> bool:
        """Dead: envelope ``attempt`` at or over ``max_attempts``."""
        return env.attempt is not None and env.attempt >= self.max_attempts

    def classify(self, env: Envelope, score: int, now: int, dispatched: bool) -> State:
        """The state of a zset member: READY when a copy waits on its type
        list (``dispatched``) or it is due, DEAD at ``max_attempts``,
        SCHEDULED otherwise (see the module docstring)."""
        if dispatched:
            return State.READY
        if self.is_dead(env):
            return State.DEAD
        return State.READY if score <= now else State.SCHEDULED

    def _zset_window(self, start: int, size: int, now: int, shadow: set[str],
                     desc: bool = False) -> list[JobRecord]:
        """Members ranked ``start..start+size-1`` with their envelopes and
        states (``score`` = next attempt time, epoch ms)."""
        pairs = self.client.zrange(self.keys.zset, start, start + size - 1, withscores=True, desc=desc)
        if not pairs:
            return []
        members = [text(m) for m, _ in pairs]
        raws = self.client.hmget(self.keys.events, members)
        out = []
        for (member, (_, score)), raw in zip(zip(members, pairs), raws):
            env = event_envelope(raw, member)
            state = self.classify(env, score_ms(score), now, member in shadow)
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=member, state=state,
                            envelope=env, raw=raw, score=score_ms(score), meta={"state_key": self.keys.zset})
            if member in shadow:
                rec.meta["dispatched"] = True
            if raw is None:
                rec.meta["problem"] = "dangling member: no envelope in the events hash"
            out.append(rec)
        return out

    # -- status --------------------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        from jobctl.layouts.delayed_events.status import queue_status

        return queue_status(self, now)

    def depth(self, state: State) -> int:
        """As :meth:`Layout.depth`; suppressed: its ``ZCARD`` alone."""
        if state is State.SUPPRESSED:
            return self.client.zcard(self.keys.suppressed)
        return super().depth(state)

    # -- listing -----------------------------------------------------------------------
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: copies waiting on the type lists (served from the right),
        then due members, earliest first.  Scheduled: earliest due first.
        Dead: latest next attempt first.  Suppressed: newest first."""
        self.check_supported(state)
        now = now_ms() if now is None else now
        if state is State.SUPPRESSED:
            pairs = self.client.zrange(self.keys.suppressed, 0, limit - 1, withscores=True, desc=True)
            return self._suppressed_records([(text(m), score_ms(s)) for m, s in pairs])
        out: list[JobRecord] = []
        for batch in self._walk(state, now, desc=state is State.DEAD):
            out.extend(batch)
            if len(out) >= limit:
                break
        return out[:limit]

    def _walk(self, state: State, now: int, *, batch: int = WINDOW, desc: bool = False,
              shadow: set[str] | None = None) -> Iterator[list[JobRecord]]:
        """Records of ``state`` (not suppressed) in windows, from the type
        lists and the zset; a member with a list copy shows only as that copy."""
        if shadow is None:
            shadow = self.dispatched()[0]
        if state is State.READY:
            for key in self.event_lists():
                start = 0
                while True:
                    window = self._list_window(key, start, batch)
                    if window:
                        yield window
                    if len(window) < batch:
                        break
                    start += batch
        start = 0
        while True:
            window = self._zset_window(start, batch, now, shadow, desc=desc)
            if not window:
                return
            recs = [r for r in window if r.state is state and not r.meta.get("dispatched")]
            if recs:
                yield recs
            if state is State.READY and not desc and window[-1].score > now:
                return  # ranks ascend by score: nothing due further on
            start += batch

    def _list_window(self, key: str, start: int, size: int) -> list[JobRecord]:
        """Envelopes of a type list from the served (right) end; ``position``
        counts from it."""
        raws = list_window(self.client, key, start, size, from_right=True)
        out = []
        for n, raw in enumerate(raws):
            env = event_envelope(raw)
            out.append(JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=env.job_id or "?",
                                 state=State.READY, envelope=env, raw=raw, position=start + n,
                                 meta={"state_key": key, "dispatched": True}))
        return out

    def _suppressed_records(self, pairs: list[tuple[str, int]]) -> list[JobRecord]:
        if not pairs:
            return []
        infos = self.client.hmget(self.keys.suppressed_info, [m for m, _ in pairs])
        out = []
        for (member, score), info in zip(pairs, infos):
            doc: dict[str, Any] = {}
            if info is not None:
                try:
                    doc = orjson.loads(info)
                except orjson.JSONDecodeError:
                    doc = {}
            raw = doc.get("envelope")
            raw_b = raw.encode() if isinstance(raw, str) else None
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=member,
                            state=State.SUPPRESSED, envelope=event_envelope(raw_b, member), raw=info, score=score)
            rec.meta["suppressed"] = {k: v for k, v in doc.items() if k != "envelope"}
            out.append(rec)
        return out

    # -- inspect -----------------------------------------------------------------------
    def inspect(self, job_id: str) -> JobRecord:
        """The event ``<class>###<id>``: its list copies (ready), else its
        suppressed record, else its zset member and envelope."""
        now = now_ms()
        pipe = self.client.pipeline(transaction=False)
        pipe.zscore(self.keys.zset, job_id)
        pipe.hget(self.keys.events, job_id)
        pipe.zscore(self.keys.suppressed, job_id)
        res = pipe.execute(raise_on_error=False)
        errors = wrongtype_errors(res, [self.keys.zset, self.keys.events, self.keys.suppressed])
        if errors:
            raise DataError(errors[0])
        score, raw, supp = res
        copies = self._ready_copies(job_id)
        if copies:
            rec = copies[0]
            rec.meta["ready_copies"] = len(copies)
            if score is not None:
                rec.meta["retry_at_ms"] = score_ms(score)  # the member stays for the next attempt
                rec.meta["next_envelope_attempt"] = event_envelope(raw, job_id).attempt
        elif supp is not None:
            rec = self._suppressed_records([(job_id, score_ms(supp))])[0]
        elif score is not None or raw is not None:
            env = event_envelope(raw, job_id)
            state = self.classify(env, score_ms(score), now, False) if score is not None else None
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=job_id, state=state,
                            envelope=env, raw=raw, score=None if score is None else score_ms(score),
                            meta={"state_key": self.keys.zset})
            if score is None:
                rec.meta["problem"] = "orphan envelope: in the events hash, not in the zset"
            elif raw is None:
                rec.meta["problem"] = "dangling member: no envelope in the events hash"
        else:
            raise NotFound(f"event {job_id!r} not found in queue {self.queue_name} (ids look like "
                           "<event class>###<event id>)")
        parts = split_delayed_event_member(job_id)
        if parts:
            rec.meta["event_class"], rec.meta["event_id"] = parts
        rec.meta["max_attempts"] = self.max_attempts
        return rec

    def _ready_copies(self, member: str) -> list[JobRecord]:
        parts = split_delayed_event_member(member)
        if not parts:
            return []
        key = self.keys.type_list(parts[0])
        found: list[JobRecord] = []
        start = 0
        while start < SEARCH_BOUND:
            window = self._list_window(key, start, WINDOW)
            found.extend(r for r in window if r.job_id == member)
            if len(window) < WINDOW:
                break
            start += WINDOW
        return found

    # -- batched walks -------------------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in windows.  ``sample`` reads random zset windows
        (the dead or scheduled records found in them)."""
        self.check_supported(state)
        batch = max(1, min(batch, WINDOW))
        now = now_ms()
        if state is State.SUPPRESSED:
            start = 0
            while True:
                pairs = self.client.zrange(self.keys.suppressed, start, start + batch - 1, withscores=True)
                if pairs:
                    yield self._suppressed_records([(text(m), score_ms(s)) for m, s in pairs])
                if len(pairs) < batch:
                    return
                start += batch
        if sample is None:
            yield from self._walk(state, now, batch=batch)
            return
        shadow = self.dispatched()[0]
        starts, size = window_starts(self.client.zcard(self.keys.zset), batch, sample)
        for start in starts:
            recs = [r for r in self._zset_window(start, size, now, shadow)
                    if r.state is state and not r.meta.get("dispatched")]
            if recs:
                yield recs

    # -- operations ------------------------------------------------------------------------
    def plan(self, spec: OpSpec, now: int | None = None) -> Plan:
        """Plan ``spec`` (:func:`.delayed_events_ops.plan_operation`); reads only."""
        from jobctl.layouts.delayed_events.ops import plan_operation

        return plan_operation(self, spec, now)

    def apply(self, plan: Plan, *, batch: int | None = None) -> Iterator[BatchResult]:
        """Apply ``plan`` (:func:`.delayed_events_ops.apply_plan`)."""
        from jobctl.layouts.delayed_events.ops import apply_plan

        return apply_plan(self, plan, batch=batch)



def attempt_of(raw: bytes | None) -> int | None:
    """The envelope's ``attempt`` without building an Envelope (status)."""
    doc = None if raw is None else json_object(raw)
    attempt = None if doc is None else doc.get("attempt")
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None
