"""The ``hash-job`` layout (layouts.md section 3; seed 001, the Redis
documentation's job queue): a ``pending``, ``processing``, ``completed`` and
``failed`` list of job ids, and one hash per job holding its payload (JSON
text) and metadata: ``status``, ``attempts``, ``enqueued_at_ms``,
``claimed_at_ms``, ``claim_token``, ``completed_at_ms``, ``result``,
``last_error``, ``last_error_at_ms``, ``reclaimed_at_ms``.

States: ready = ``pending``; processing = ``processing``; dead = ``failed``
(the DLQ, LTRIM-capped by the workers); history = ``completed`` (capped
too); suppressed = jobctl's zset.  There is no scheduled state.

No deadline is stored.  A processing job's visibility deadline is
``claimed_at_ms + visibility timeout`` (the queue's ``visibility_timeout_ms``,
default the seed's 5,000 ms), or ``enqueued_at_ms + 2 x timeout`` when
``claimed_at_ms`` is missing or 0 (a worker died between its BLMOVE and its
HSET; seed 001 "Reclaiming stuck jobs").  So ``status`` reads the claim
times of processing jobs: from the tail (oldest claims) in windows of 1,000
ids with one pipelined ``HMGET`` each, at most :data:`STUCK_SCAN_LIMIT` ids
(processing is bounded by the workers' concurrency; beyond the limit the
status says so).

Completed and failed hashes carry a TTL (the seed's ``EXPIRE``): an id whose
hash expired is *dangling*; ``ls`` and ``inspect`` flag it, ``check``
reports it, operations skip it.

Config (``[queues.<name>]``): ``tag`` = the queue name of ``queue:<name>:*``
(default the catalogue name); ``visibility_timeout_ms``; options
``max_attempts`` (default 3, the seed's), ``type_field`` (payload field
shown as the job type, default ``kind``), ``tenant_field`` (payload field
shown as the tenant, default none).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from jobctl.config import QueueConfig
from jobctl.errors import DataError, NotFound
from jobctl.keys import HashJobKeys
from jobctl.model import JobRecord, QueueStatus, State
from jobctl.layouts.base import ListStatesLayout, now_ms
from jobctl.layouts.facts import IntOption, StrOption
from jobctl.layouts.planning import TRANSITIONS_WITHOUT_SCHEDULED
from jobctl.layouts.common import score_ms, status_replies, suppression_info, text, wrongtype_errors
from jobctl.layouts.walks import walk_list, walk_zset
from jobctl.layouts.hash_job.job_hash import (WRONGTYPE_BREAKDOWN, JobHashModel, WrongTypeHash, int_field,
                                              is_wrongtype, unstamped_claim)  # the last four: re-exported

__all__ = ["HashJob", "FENCE_FIELDS", "fence_of", "unstamped_claim", "DEFAULT_VISIBILITY_MS",
           "STUCK_SCAN_LIMIT", "WrongTypeHash", "is_wrongtype", "WRONGTYPE_BREAKDOWN"]

#: The seed's demo visibility timeout (``RedisJobQueue(conn, "jobs", 5000, ...)``).
DEFAULT_VISIBILITY_MS = 5_000
#: The seed's default ``maxAttempts``.
DEFAULT_MAX_ATTEMPTS = 3
#: At most this many processing ids are read by one ``status`` for the stuck count.
STUCK_SCAN_LIMIT = 10_000
_STATUS_WINDOW = 1_000

#: Hash fields a worker or the reclaimer changes: an operation's fence is the
#: SHA1 of their values joined by ``\x1f`` (missing fields as ""), computed
#: the same way in Lua from this list, passed as ARGV (``hj_window.lua``
#: kind ``hj`` for the failed list; the other ``hj_*.lua``).
FENCE_FIELDS = ("status", "attempts", "claim_token", "claimed_at_ms", "last_error_at_ms", "payload")

_fence_keys: tuple[tuple, tuple] = ((), ())  # (FENCE_FIELDS, their bytes), rebuilt if the list is replaced


def _fence_key_bytes() -> tuple:
    global _fence_keys
    if _fence_keys[0] is not FENCE_FIELDS:
        _fence_keys = (FENCE_FIELDS, tuple(f.encode() for f in FENCE_FIELDS))
    return _fence_keys[1]

def fence_of(fields: dict[bytes, bytes]) -> str:
    """The SHA1 fence of a job hash (see :data:`FENCE_FIELDS`)."""
    get = fields.get
    joined = b"\x1f".join([get(f, b"") for f in _fence_key_bytes()])
    return hashlib.sha1(joined).hexdigest()


class HashJob(JobHashModel, ListStatesLayout):
    """A hash-job queue; see the module docstring."""

    name = "hash-job"
    package = "jobctl.layouts.hash_job"
    states = (State.READY, State.PROCESSING, State.DEAD, State.SUPPRESSED, State.HISTORY)
    operations = frozenset(op for op, _ in TRANSITIONS_WITHOUT_SCHEDULED)
    visibility_default_ms = DEFAULT_VISIBILITY_MS
    config_options = {"max_attempts": IntOption(1, 1_000_000), "type_field": StrOption(256),
                      "tenant_field": StrOption(256)}

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.hash_job.discover import recognize

        return recognize

    def dead_audits(self):
        """The failed list; payloads are the job hashes (``none``: expired)."""
        return [(self.keys.failed, self.keys.job, frozenset({b"hash", b"none"}))]

    def history_key(self) -> str:
        return self.keys.completed

    def __init__(self, client, queue: QueueConfig) -> None:
        super().__init__(client, queue)
        self.keys = HashJobKeys(queue.base_tag)
        opts = queue.options or {}
        self.visibility_ms = queue.visibility_timeout_ms or self.visibility_default_ms
        self.max_attempts = int_field(opts.get("max_attempts")) or DEFAULT_MAX_ATTEMPTS
        self.type_field = str(opts.get("type_field", "kind"))
        self.tenant_field = opts.get("tenant_field")

    @property
    def journal_key(self) -> str:
        return self.keys.journal

    # -- status ----------------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        now = now_ms() if now is None else now
        k = self.keys
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now)
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(k.pending)
        pipe.lindex(k.pending, -1)
        pipe.llen(k.processing)
        pipe.lrange(k.processing, -_STATUS_WINDOW, -1)
        pipe.llen(k.failed)
        pipe.zcard(k.suppressed)
        pipe.llen(k.hold)  # failed ids a window-engine walk set aside: still dead
        names = [k.pending, k.pending, k.processing, k.processing, k.failed, k.suppressed, k.hold]
        val = status_replies(st, pipe.execute(raise_on_error=False), names)
        st.ready = val[0] or 0
        st.processing = val[2] or 0
        st.dead = (val[4] or 0) + (val[6] or 0)
        st.suppressed = val[5] or 0
        tail = text(val[1]) if val[1] is not None else None
        window = [text(x) for x in (val[3] or [])]

        pipe = self.client.pipeline(transaction=False)
        if tail is not None:
            pipe.hmget(k.job(tail), "enqueued_at_ms", "reclaimed_at_ms", "last_error_at_ms", "redriven_at_ms")
        read = 0
        start = 0
        while True:
            for job_id in window:
                pipe.hmget(k.job(job_id), "claimed_at_ms", "enqueued_at_ms")
            replies = pipe.execute()
            if tail is not None:
                times = [t for t in (int_field(x) for x in replies.pop(0)) if t]
                if times:
                    st.oldest_ready_since_ms = max(times)
                else:
                    st.warnings.append(f"oldest ready job {tail}: no job hash or no enqueued_at_ms")
                tail = None
            for claimed, enqueued in replies:
                deadline = self.deadline_of({b"claimed_at_ms": claimed or b"", b"enqueued_at_ms": enqueued or b""})
                if deadline is None:
                    continue
                if deadline < now:
                    st.stuck += 1
                elif st.next_deadline_ms is None or deadline < st.next_deadline_ms:
                    st.next_deadline_ms = deadline
            read += len(window)
            start += _STATUS_WINDOW
            if len(window) < _STATUS_WINDOW or read >= STUCK_SCAN_LIMIT:
                break
            window = [text(x) for x in self.client.lrange(k.processing, -(start + _STATUS_WINDOW), -(start + 1))]
            if not window:
                break
            pipe = self.client.pipeline(transaction=False)
        if st.processing > read:
            st.warnings.append(f"stuck counted over the {read:,} oldest claims of {st.processing:,} "
                               "processing jobs")
        if st.oldest_ready_since_ms is not None:
            st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
        return st

    def depth(self, state: State) -> int:
        """As :meth:`ListStatesLayout.depth`; dead counts jobctl's hold too."""
        if state is State.DEAD:
            return self.client.llen(self.keys.failed) + self.client.llen(self.keys.hold)
        return super().depth(state)

    def dead_windows(self, batch: int = 1000, sample: tuple[int, int] | None = None
                     ) -> Iterator[tuple[int, list[bytes]]]:
        """``(tail position of the first, ids)`` windows of the dead state
        from its tail: jobctl's hold (the oldest failed ids, set aside by a
        window-engine walk), then the failed list, positions counted on
        from the hold's (the window engine's tail positions)."""
        base = 0
        for key in (self.keys.hold, self.keys.failed):
            length = 0
            for start, chunk in walk_list(self.client, key, from_right=True, batch=batch, sample=sample):
                yield base + start, chunk
                length = start + len(chunk)
            base += self.client.llen(key) if sample else length

    def _list_key(self, state: State) -> str:
        k = self.keys
        return {State.READY: k.pending, State.PROCESSING: k.processing, State.DEAD: k.failed,
                State.HISTORY: k.completed}[state]

    # -- listing ---------------------------------------------------------------
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: next to be claimed first; processing: earliest deadline
        first; dead (failed) and history (completed): newest first;
        suppressed: most recently suppressed first."""
        self.check_supported(state)
        if state is State.SUPPRESSED:
            pairs = self.client.zrange(self.keys.suppressed, 0, limit - 1, desc=True, withscores=True)
            return self.records([text(m) for m, _ in pairs], state, [{"score": score_ms(s)} for _, s in pairs])
        from_right = state in (State.READY, State.PROCESSING)
        key = self._list_key(state)
        if from_right:
            ids = [text(x) for x in reversed(self.client.lrange(key, -limit, -1))]
        else:
            ids = [text(x) for x in self.client.lrange(key, 0, limit - 1)]
            if state is State.DEAD and len(ids) < limit:  # the hold (a walk in progress): the oldest failed ids
                ids += [text(x) for x in self.client.lrange(self.keys.hold, 0, limit - 1 - len(ids))]
        recs = self.records(ids, state, [{"position": n} for n in range(len(ids))])
        if state is State.PROCESSING:
            recs.sort(key=lambda r: (r.deadline_ms is None, r.deadline_ms or 0))
        return recs

    # -- inspect ---------------------------------------------------------------
    def inspect(self, job_id: str) -> JobRecord:
        """The job with its state, position (from the served end; failed and
        completed: from the newest), deadline, TTL (``ttl_ms`` for failed
        and completed hashes), suppression record, and every hash field."""
        k = self.keys
        lists = [(k.pending, State.READY), (k.processing, State.PROCESSING), (k.failed, State.DEAD),
                 (k.hold, State.DEAD),  # the hold: failed ids a window-engine walk set aside
                 (k.completed, State.HISTORY)]
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(k.job(job_id))
        pipe.pttl(k.job(job_id))
        for key, _ in lists:
            pipe.lpos(key, job_id)
            pipe.llen(key)
        pipe.zscore(k.suppressed, job_id)
        pipe.hget(k.suppressed_info, job_id)
        res = pipe.execute(raise_on_error=False)
        if is_wrongtype(res[0]):  # the job's own key: shown with the problem, as ls shows it
            res[0] = WrongTypeHash(k.job(job_id))
        names = [k.job(job_id)] * 2 + [key for key, _ in lists for _ in (0, 1)] + [k.suppressed, k.suppressed_info]
        errors = wrongtype_errors(res, names)
        if errors:
            raise DataError(errors[0])
        fields, ttl = res[0], res[1]
        found: list[tuple[State, dict[str, Any]]] = []
        for n, (key, state) in enumerate(lists):
            idx, length = res[2 + 2 * n], res[3 + 2 * n]
            if idx is None:
                continue
            pos = length - 1 - idx if state in (State.READY, State.PROCESSING) else idx
            if key == k.hold:  # after the failed list's own elements
                pos += res[2 + 2 * (n - 1) + 1] or 0
            found.append((state, {"position": pos, "key": key}))
        supp, info = res[-2], res[-1]
        if supp is not None:
            found.insert(len([s for s, _ in found if s is not State.HISTORY]),
                         (State.SUPPRESSED, {"score": score_ms(supp), "key": k.suppressed}))
        if not fields and not found:
            raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
        state, where = found[0] if found else (None, {})
        rec = self.record(job_id, fields, state, position=where.get("position"), score=where.get("score"))
        rec.meta["job_key"] = k.job(job_id)
        if "key" in where:
            rec.meta["state_key"] = where["key"]
        if len(found) > 1:
            rec.meta["also_in"] = [s.value for s, _ in found[1:]]
        if fields and ttl is not None and ttl >= 0:
            rec.meta["ttl_ms"] = ttl
        if info is not None:
            rec.meta["suppressed"] = suppression_info(info)
        if fields and not found:
            rec.meta["problem"] = "orphan job hash: in no list"
        return rec

    # -- batched walks ---------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches (lists from the tail, ``position``
        counted from it; suppressed by rank, ``score`` set).  One LRANGE or
        ZRANGE plus one pipelined HGETALL round trip per batch."""
        self.check_supported(state)
        if state is State.SUPPRESSED:
            for _, pairs in walk_zset(self.client, self.keys.suppressed, batch=batch, sample=sample):
                yield self.records([text(m) for m, _ in pairs], state, [{"score": score_ms(s)} for _, s in pairs])
            return
        windows = self.dead_windows(batch, sample) if state is State.DEAD else \
            walk_list(self.client, self._list_key(state), from_right=True, batch=batch, sample=sample)
        for start, chunk in windows:
            yield self.records([text(x) for x in chunk], state,
                               [{"position": start + n} for n in range(len(chunk))])
