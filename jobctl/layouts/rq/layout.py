"""The ``rq`` layout: a queue of RQ 2.x (python-rq), read from RQ's own keys
(never through RQ's API, whose reads clean up; never unpickling a job).

States (``docs/layouts.md``, "rq"): ready = ``rq:queue:<q>`` (a list; RQ
workers pop from the left); processing = started jobs in ``rq:wip:<q>``
(members ``<id>:<execution>``, score = heartbeat expiry) plus the ids a
worker has taken to ``rq:queue:<q>:intermediate``; scheduled =
``rq:scheduled:<q>`` (score = run-at); dead = the failed registry
``rq:failed:<q>`` (score = an *expiry* time, ``failure_ttl`` after the
failure: the failure time is the hash's ``ended_at``); history = the
finished registry; suppressed = jobctl's ``jobctl:rq:<q>:suppressed`` zset
(:mod:`jobctl.layouts.rq.suppress`).  Deferred and canceled jobs are counted
in a status note and shown by ``inspect``.

Config (``[queues.<name>]``): ``tag`` = the RQ queue name (default the
catalogue name).  Operations: redrive, suppress and purge of the failed registry,
unsuppress and purge of suppressed jobs (:mod:`jobctl.layouts.rq.ops`).
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import NotFound
from jobctl.layouts.base import KeyedLayout
from jobctl.layouts.common import score_ms, text
from jobctl.layouts.package_layout import PackageModules
from jobctl.layouts.rq.job import FAILED_AT_NOTE, RqJobs
from jobctl.layouts.rq.keys import RqKeys
from jobctl.layouts.rq.inspect import suppressed_records
from jobctl.layouts.rq.ops import TRANSITIONS
from jobctl.layouts.walks import walk_list, walk_zset
from jobctl.model import JobRecord, State

__all__ = ["Rq"]

#: Registries whose score is shown, per state: (key attribute, meaning of the score).
_ZSET_STATES = {State.SCHEDULED: "scheduled", State.DEAD: "failed", State.SUPPRESSED: "suppressed",
                State.HISTORY: "finished"}


def _sec_ms(score) -> int | None:
    """An RQ score (epoch seconds) as epoch ms."""
    return None if score is None else score_ms(float(score) * 1000)


class Rq(PackageModules, RqJobs, KeyedLayout):
    """An RQ queue; see the module docstring."""

    name = "rq"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD, State.SUPPRESSED, State.HISTORY)
    operations = frozenset(op for op, _ in TRANSITIONS)

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = RqKeys(queue.base_tag)

    # -- operations: the failed registry (jobctl.layouts.rq.ops) ------------------
    def check(self, *, repair: bool = False):
        """RQ's invariants, report only (:mod:`jobctl.layouts.rq.check`)."""
        from jobctl.layouts.rq.check import check_queue

        return check_queue(self, repair=repair)

    # -- the read model ----------------------------------------------------------
    def depth(self, state: State) -> int:
        """One ``LLEN``/``ZCARD`` (processing: both of its keys)."""
        self.check_supported(state)
        k = self.keys
        if state is State.READY:
            return self.client.llen(k.queue)
        if state is State.PROCESSING:
            return self.client.zcard(k.wip) + self.client.llen(k.intermediate)
        return self.client.zcard(getattr(k, _ZSET_STATES[state]))

    def _zset_records(self, state: State, pairs: list, start: int) -> list[JobRecord]:
        ids = [text(m) for m, _ in pairs]
        if state is State.DEAD:  # the score is the registry's expiry, not the failure time
            recs = self.records(ids, state, [{"position": start + n} for n in range(len(ids))])
            for rec, (_, sc) in zip(recs, pairs):
                rec.meta["failed_registry_expires_at_ms"] = _sec_ms(sc)
                rec.meta["failed_registry_score"] = repr(float(sc))  # the fence, as RQ stored it
            return recs
        if state is State.SUPPRESSED:  # jobctl's zset: scores are ms
            return suppressed_records(self, ids, pairs)
        return self.records(ids, state, [{"score": _sec_ms(sc)} for _, sc in pairs])

    def _processing(self, pairs: list, inter: list[bytes]) -> list[JobRecord]:
        """Started jobs (wip members ``<id>:<execution>``, deadline = heartbeat expiry), then intermediate ids."""
        ids = [text(m).rsplit(":", 1)[0] for m, _ in pairs] + [text(x) for x in inter]
        recs = self.records(ids, State.PROCESSING, [{} for _ in ids])
        for rec, (member, sc) in zip(recs, pairs):
            rec.deadline_ms = _sec_ms(sc)
            rec.meta["execution"] = text(member).rsplit(":", 1)[-1]
        for rec in recs[len(pairs):]:
            rec.meta["note"] = "taken by a worker (intermediate list), not yet marked started"
        return recs

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: next popped first; scheduled: earliest due first;
        processing: earliest heartbeat expiry first; dead and history: the
        newest registry entries first (by expiry score)."""
        self.check_supported(state)
        k = self.keys
        if state is State.READY:
            ids = [text(x) for x in self.client.lrange(k.queue, 0, limit - 1)]
            return self.records(ids, state, [{"position": n} for n in range(len(ids))])
        if state is State.PROCESSING:
            pairs = self.client.zrange(k.wip, 0, limit - 1, withscores=True)
            return self._processing(pairs, self.client.lrange(k.intermediate, 0, limit - 1 - len(pairs)))
        desc = state is not State.SCHEDULED
        pairs = self.client.zrange(getattr(k, _ZSET_STATES[state]), 0, limit - 1, desc=desc, withscores=True)
        return self._zset_records(state, pairs, 0)

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches: one ``LRANGE``/``ZRANGE`` plus one
        pipelined read of the batch's hashes and results each."""
        self.check_supported(state)
        k = self.keys
        if state is State.READY:
            for start, chunk in walk_list(self.client, k.queue, from_right=False, batch=batch, sample=sample):
                ids = [text(x) for x in chunk]
                yield self.records(ids, state, [{"position": start + n} for n in range(len(ids))])
            return
        if state is State.PROCESSING:
            for _, pairs in walk_zset(self.client, k.wip, batch=batch, sample=sample):
                yield self._processing(pairs, [])
            for _, chunk in walk_list(self.client, k.intermediate, from_right=False, batch=batch, sample=sample):
                yield self._processing([], chunk)
            return
        for start, pairs in walk_zset(self.client, getattr(k, _ZSET_STATES[state]), batch=batch, sample=sample):
            yield self._zset_records(state, pairs, start)

    def inspect(self, job_id: str) -> JobRecord:
        """The job with its state (found in RQ's keys), every hash field as
        text and the newest exception text.  Raises :class:`NotFound` when
        no key holds it."""
        from jobctl.layouts.rq.inspect import find_job

        state, extra, where = find_job(self, job_id)
        loaded = self.load([job_id])[0]
        if state is None and not loaded[0]:
            raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
        rec = self.record(job_id, loaded, state, **extra)
        rec.meta.update(where)
        if state is State.DEAD:
            rec.meta["ages"] = FAILED_AT_NOTE
        if "heartbeat_expires_at_ms" in where:
            rec.deadline_ms = where["heartbeat_expires_at_ms"]
        if state is None and loaded[0] and "rq_registry" not in where:
            rec.meta["problem"] = "orphan job hash: in none of the queue's RQ keys"
        rec.meta["job_key"] = self.keys.job(job_id)
        ttl = self.client.pttl(self.keys.job(job_id))
        if loaded[0] and ttl is not None and ttl >= 0:
            rec.meta["ttl_ms"] = ttl
        return rec
