"""The ``sidekiq`` layout: one Sidekiq instance (6.x, 7.x, 8.x), read from
Sidekiq's own keys (never through its API), repaired by jobctl's own
fenced moves.

States (``docs/layouts.md``, "sidekiq"): ready = every ``queue:<q>`` list
named by the ``queues`` set (clients LPUSH, workers BRPOP: the right end
is served next); scheduled = the ``schedule`` set (``perform_in``) and the
``retry`` set (a failed job waiting for its next attempt; ``meta.state_key``
says which), score = when Sidekiq's poller pushes it; processing = each
live process's ``<identity>:work`` (Sidekiq 6: ``:workers``) hash (display only: another worker's
in-flight job is never moved); dead = the ``dead`` set (score = died at;
Sidekiq keeps at most 9,999 and 180 days).  A job *is* its JSON string,
named by its ``jid``; the Sidekiq queue a job belongs to is its ``queue``
field (filter ``payload.queue``).

Config (``[queues.<name>]``): ``namespace`` = a redis-namespace prefix
(default none).  Operations (:mod:`jobctl.layouts.sidekiq.ops`): redrive
of dead jobs and promote of scheduled or retry jobs to their queue, purge
of either set.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import NotFound
from jobctl.layouts.package_layout import PackageModules
from jobctl.layouts.base import KeyedLayout, now_ms
from jobctl.layouts.common import text
from jobctl.layouts.facts import StrOption
from jobctl.layouts.sidekiq.job import job_record
from jobctl.layouts.sidekiq.keys import SidekiqKeys
from jobctl.layouts.sidekiq.ops import TRANSITIONS
from jobctl.layouts.sidekiq.walk import walk_by_score
from jobctl.layouts.walks import walk_list, walk_zset
from jobctl.model import JobRecord, QueueStatus, State

__all__ = ["Sidekiq"]


class Sidekiq(PackageModules, KeyedLayout):
    """A Sidekiq instance; see the module docstring."""

    name = "sidekiq"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD)
    operations = frozenset(op for op, _ in TRANSITIONS)
    config_options = {"namespace": StrOption(256)}

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = SidekiqKeys(str(queue.options.get("namespace") or ""))

    # -- operations (jobctl.layouts.sidekiq.ops) -----------------------------------
    def apply(self, plan, *, batch: int | None = None):
        """One fenced script call per batch (:func:`jobctl.layouts.sidekiq.ops.apply_plan`)."""
        from jobctl.layouts.sidekiq.ops import DEFAULT_BATCH, apply_plan

        return apply_plan(self, plan, batch=min(batch or DEFAULT_BATCH, DEFAULT_BATCH))

    def check(self, *, repair: bool = False):
        """Sidekiq's invariants, report only (:mod:`jobctl.layouts.sidekiq.check`)."""
        from jobctl.layouts.sidekiq.check import check_instance

        return check_instance(self)

    # -- the read model ----------------------------------------------------------
    def queue_names(self) -> list[str]:
        """The ``queues`` set, sorted."""
        return sorted(text(q) for q in self.client.smembers(self.keys.queues))

    def zset_keys(self, state: State) -> list[str]:
        """The sorted sets of a state (scheduled: ``schedule`` then ``retry``)."""
        k = self.keys
        return [k.schedule, k.retry] if state is State.SCHEDULED else [k.dead]

    def status(self, now: int | None = None) -> QueueStatus:
        from jobctl.layouts.sidekiq.status import instance_status

        return instance_status(self, now_ms() if now is None else now)

    def depth(self, state: State) -> int:
        """``LLEN``/``ZCARD``/``HLEN`` of the state's keys."""
        self.check_supported(state)
        if state is State.READY:
            return sum(self.client.llen(self.keys.queue(q)) for q in self.queue_names())
        if state is State.PROCESSING:
            return len(self.processing(10 ** 6))
        return sum(self.client.zcard(key) for key in self.zset_keys(state))

    def _zset_records(self, state: State, key: str, pairs: list, start: int) -> list[JobRecord]:
        return [job_record(self, m, state, position=start + n, score=sc, key=key) for n, (m, sc) in enumerate(pairs)]

    def processing(self, limit: int) -> list[JobRecord]:
        """In-flight jobs of the live processes (``<identity>:work``), at most ``limit``."""
        from jobctl.layouts.sidekiq.inspect import work_records

        return work_records(self, limit)

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: per queue (sorted by name), next popped first; scheduled:
        earliest due first (both sets merged); dead: newest first."""
        self.check_supported(state)
        if state is State.PROCESSING:
            return self.processing(limit)
        out: list[JobRecord] = []
        if state is State.READY:
            for q in self.queue_names():
                key = self.keys.queue(q)
                raws = list(reversed(self.client.lrange(key, -(limit - len(out)), -1)))
                out += [job_record(self, r, state, position=n, key=key) for n, r in enumerate(raws)]
                if len(out) >= limit:
                    break
            return out[:limit]
        desc = state is State.DEAD
        for key in self.zset_keys(state):
            out += self._zset_records(state, key, self.client.zrange(key, 0, limit - 1, desc=desc, withscores=True), 0)
        if state is State.SCHEDULED:
            out.sort(key=lambda r: r.score or 0)
        return out[:limit]

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches: one ``LRANGE``/``ZRANGE`` each (the
        sets by score: :mod:`~jobctl.layouts.sidekiq.walk`; processing: one
        read of every live process's work hash)."""
        self.check_supported(state)
        if state is State.PROCESSING:
            yield self.processing(10 ** 6)
            return
        if state is State.READY:
            for q in self.queue_names():
                key = self.keys.queue(q)
                for start, chunk in walk_list(self.client, key, from_right=True, batch=batch, sample=sample):
                    yield [job_record(self, r, state, position=start + n, key=key) for n, r in enumerate(chunk)]
            return
        for key in self.zset_keys(state):
            desc = state is State.DEAD
            windows = (walk_by_score(self.client, key, desc=desc, batch=batch) if sample is None else
                       walk_zset(self.client, key, desc=desc, batch=batch, sample=sample))
            for start, pairs in windows:
                yield self._zset_records(state, key, pairs, start)

    def inspect(self, job_id: str) -> JobRecord:
        """The job whose ``jid`` is ``job_id``: searched in the sets
        (``ZSCAN MATCH``), then the queue lists and the work hashes, in
        bounded windows.  Raises :class:`NotFound` when none holds it."""
        from jobctl.layouts.sidekiq.inspect import find_job

        rec = find_job(self, job_id)
        if rec is None:
            raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
        return rec
