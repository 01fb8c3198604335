"""The ``bullmq`` layout: a queue of BullMQ 5.x/6.x, read from BullMQ's own
keys (never through its scripts), repaired by jobctl's own fenced moves.

States (``docs/layouts.md``, "bullmq"): ready = ``wait`` (a list; workers
take from the right) plus ``prioritized`` (zset); scheduled = ``delayed``
(score = due ms * 0x1000 + sequence); processing = ``active`` (never
moved: another worker's in-flight state); dead = ``failed`` (score =
finishedOn, ms); history = ``completed``.  ``waiting-children`` and a pause
(``meta.paused``) are shown in ``status`` and ``inspect``.

Config (``[queues.<name>]``): ``tag`` = the BullMQ queue name (default the
catalogue name), ``prefix`` = BullMQ's prefix (default ``bull``; a
``{...}`` hash tag keeps the queue in one Cluster slot).  The version comes
from ``meta.version``; an untested major version is refused by the
operations.  Operations: redrive and purge of failed jobs
(:mod:`jobctl.layouts.bullmq.ops`).
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import NotFound
from jobctl.layouts.package_layout import PackageModules
from jobctl.layouts.base import KeyedLayout
from jobctl.layouts.bullmq.job import BullJobs
from jobctl.layouts.bullmq.keys import DEFAULT_PREFIX, BullKeys
from jobctl.layouts.bullmq.ops import TRANSITIONS
from jobctl.layouts.common import score_ms, text
from jobctl.layouts.facts import StrOption
from jobctl.layouts.walks import walk_list, walk_zset
from jobctl.model import JobRecord, State

__all__ = ["BullMQ"]

#: Zset states and their key attribute (ready is ``wait`` then ``prioritized``).
_ZSET_STATES = {State.SCHEDULED: "delayed", State.DEAD: "failed", State.HISTORY: "completed"}


class BullMQ(PackageModules, BullJobs, KeyedLayout):
    """A BullMQ queue; see the module docstring."""

    name = "bullmq"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD, State.HISTORY)
    operations = frozenset(op for op, _ in TRANSITIONS)
    config_options = {"prefix": StrOption(512)}

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = BullKeys(str(queue.options.get("prefix") or DEFAULT_PREFIX), queue.base_tag)

    # -- operations (jobctl.layouts.bullmq.ops) ------------------------------------
    # -- the read model ----------------------------------------------------------
    def depth(self, state: State) -> int:
        """``LLEN``/``ZCARD`` of the state's keys."""
        self.check_supported(state)
        k = self.keys
        if state is State.READY:
            return self.client.llen(k.wait) + self.client.zcard(k.prioritized)
        if state is State.PROCESSING:
            return self.client.llen(k.active)
        return self.client.zcard(getattr(k, _ZSET_STATES[state]))

    def _zset_records(self, state: State, pairs: list, start: int) -> list[JobRecord]:
        ids = [text(m) for m, _ in pairs]
        if state is State.SCHEDULED:  # the due time is the score's high bits
            return self.records(ids, state, [{"score": int(sc) // 0x1000} for _, sc in pairs])
        if state is State.READY:
            extra = [{"position": start + n} for n in range(len(ids))]
        else:
            extra = [{"position": start + n, "score": score_ms(sc)} for n, (_, sc) in enumerate(pairs)]
        recs = self.records(ids, state, extra)
        for rec, (_, sc) in zip(recs, pairs):
            rec.meta["score"] = repr(float(sc))  # the fence, as BullMQ stored it
        return recs

    def _list_records(self, state: State, chunk: list[bytes], start: int) -> list[JobRecord]:
        ids = [text(x) for x in chunk]
        return self.records(ids, state, [{"position": start + n} for n in range(len(ids))])

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: ``wait`` next taken first (its right end), then
        ``prioritized`` by score; scheduled: earliest due first; processing:
        ``active``; dead and history: newest first."""
        self.check_supported(state)
        k = self.keys
        if state in (State.READY, State.PROCESSING):
            key = k.wait if state is State.READY else k.active
            recs = self._list_records(state, list(reversed(self.client.lrange(key, -limit, -1))), 0)
            if state is State.READY and len(recs) < limit:
                pairs = self.client.zrange(k.prioritized, 0, limit - len(recs) - 1, withscores=True)
                recs += self._zset_records(state, pairs, len(recs))
            return recs
        desc = state is not State.SCHEDULED
        pairs = self.client.zrange(getattr(k, _ZSET_STATES[state]), 0, limit - 1, desc=desc, withscores=True)
        return self._zset_records(state, pairs, 0)

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches: one ``LRANGE``/``ZRANGE`` plus one
        pipelined ``HGETALL`` of the batch's hashes each."""
        self.check_supported(state)
        k = self.keys
        if state in (State.READY, State.PROCESSING):
            key = k.wait if state is State.READY else k.active
            for start, chunk in walk_list(self.client, key, from_right=True, batch=batch, sample=sample):
                yield self._list_records(state, chunk, start)
            if state is State.PROCESSING:
                return
            zkey = k.prioritized
        else:
            zkey = getattr(k, _ZSET_STATES[state])
        for start, pairs in walk_zset(self.client, zkey, batch=batch, sample=sample):
            yield self._zset_records(state, pairs, start)

    def inspect(self, job_id: str) -> JobRecord:
        """The job with its state (found in BullMQ's keys) and every hash
        field as text.  Raises :class:`NotFound` when no key holds it."""
        from jobctl.layouts.bullmq.inspect import find_job

        state, extra, where = find_job(self, job_id)
        fields = self.load([job_id])[0]
        if state is None and not fields and not where:
            raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
        rec = self.record(job_id, fields, state, **extra)
        rec.meta.update(where)
        rec.meta["job_key"] = self.keys.job(job_id)
        if state is None and fields and not where:
            rec.meta["problem"] = "orphan job hash: in none of the queue's BullMQ keys"
        return rec
