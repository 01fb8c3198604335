"""Fast direct writers of reliable-list keys for the benchmarks.

:func:`jobctl_fixtures.scenarios.load_scenario` simulates every producer,
worker and scheduler step (about 50 µs a job: ~1 min per million jobs and
~770 bytes of server memory each), which is right for tests and too slow
for ten queues of a million jobs.  These writers put the *end state*
directly: ids in the state lists and zsets, payload envelopes built by the
fixtures (:func:`jobctl_fixtures.envelopes.new_envelope`,
:func:`~jobctl_fixtures.envelopes.record_dead`, ids from
:func:`jobctl_fixtures.ids.new_job_id`), key names from
:class:`jobctl.keys.ReliableListKeys`.  Commands are RESP-packed and sent
from a background thread by :class:`jobctl_fixtures.batching.CommandStream`
(1,000 elements per LPUSH/ZADD/MSET).

Orientation follows the layout (layouts.md section 1): producers and workers
LPUSH, so the oldest job sits at the tail (the claim end of a ready list,
the oldest end of the dead list).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from jobctl.keys import HashJobKeys, JsonListKeys, ReliableListKeys, StreamGroupKeys
from jobctl_fixtures.batching import CommandStream
from jobctl_fixtures.catalog import ERRORS, JOB_TYPES
from jobctl_fixtures.envelopes import dumps, new_envelope, record_dead
from jobctl_fixtures.ids import new_job_id

__all__ = ["CHUNK", "dead_envelopes", "load_dead", "load_stream_group_dead", "load_hash_job_failed",
           "StatusQueueTruth", "load_status_queue"]

#: Elements per LPUSH / ZADD / MSET command.
CHUNK = 1000
#: Commands per pipeline flush (about 1 MB of RESP for payload MSETs).
_STREAM_BATCH = 4

MINUTE = 60_000
HOUR = 60 * MINUTE

_TYPES = list(JOB_TYPES)
_CODES = list(ERRORS)


def dead_envelopes(n: int, *, now_ms: int, seed: int = 0, tenants: int = 10) -> Iterator[tuple[str, bytes]]:
    """``n`` dead-lettered jobs as ``(job_id, envelope bytes)``, oldest first.

    Job ``i`` belongs to tenant ``t{i % tenants}`` (so ``tenant = t1``
    matches exactly ``1/tenants`` of them), its type and last error code
    cycle through the fixtures' catalogue, it was created within the last 6 h
    and died 1 s to 5 h before ``now_ms`` (epoch ms).  Deterministic given
    the arguments.
    """
    rng = random.Random(seed)
    span = 5 * HOUR
    for i in range(n):
        died = now_ms - span + (span * i) // max(1, n) - 1000
        created = died - HOUR
        job_id = new_job_id(created, rng)
        env = new_envelope(job_id, _TYPES[i % len(_TYPES)], f"t{i % tenants}", created, rng)
        record_dead(env, died, _CODES[(i // len(_TYPES)) % len(_CODES)])
        yield job_id, dumps(env)


def _chunks(iterable, size: int) -> Iterator[list]:
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def load_dead(client, tag: str, n: int, *, now_ms: int, seed: int = 0, tenants: int = 10) -> int:
    """Put ``n`` dead jobs of :func:`dead_envelopes` on ``tag``'s dead list,
    with their payload keys; returns the dead list's length afterwards."""
    return _load_dead_ids(client, ReliableListKeys(tag), n, now_ms=now_ms, seed=seed, tenants=tenants)


def _load_dead_ids(client, keys, n: int, *, now_ms: int, seed: int, tenants: int) -> int:
    """``n`` envelopes of :func:`dead_envelopes` at ``keys.job(id)`` and their
    ids LPUSHed on ``keys.dead`` (reliable-list and stream-group keep dead
    jobs alike); returns the dead list's length afterwards."""
    with CommandStream(client, batch=_STREAM_BATCH) as stream:
        for chunk in _chunks(dead_envelopes(n, now_ms=now_ms, seed=seed, tenants=tenants), CHUNK):
            mset: list = ["MSET"]
            for job_id, raw in chunk:
                mset += [keys.job(job_id), raw]
            stream.execute_command(*mset)
            stream.execute_command("LPUSH", keys.dead, *[job_id for job_id, _ in chunk])
            stream.maybe_flush()
    return int(client.llen(keys.dead))


def load_stream_group_dead(client, tag: str, n: int, *, now_ms: int, seed: int = 0, tenants: int = 10,
                           group: str = "workers") -> int:
    """``n`` dead jobs of a stream-group queue (layouts.md section 2, dead =
    "list"): the end state the fixtures' worker leaves (its ``fail`` XACKs
    the entry and LPUSHes the id), written directly: the stream with the
    consumer group (``XGROUP CREATE ... $ MKSTREAM``, no entries left),
    ``queue:{tag}:dead`` and one envelope per job.  Returns the dead list's
    length."""
    keys = StreamGroupKeys(tag)
    client.xgroup_create(keys.stream, group, id="$", mkstream=True)
    return _load_dead_ids(client, keys, n, now_ms=now_ms, seed=seed, tenants=tenants)


#: hash-job payload ``kind`` values (seed 001's demo) and their errors.
_HJ_KINDS = (("email", "smtp timeout"), ("webhook", "HTTP 503 from endpoint"),
             ("thumbnail", "image decode error"), ("invoice", "tax service unavailable"))


def load_hash_job_failed(client, name: str, n: int, *, now_ms: int, attempts: int = 3,
                         payload_bytes: int = 500) -> int:
    """``n`` terminally failed jobs of a hash-job queue (layouts.md section
    3; seed 001): the hash the seed's ``fail`` script leaves (``status
    failed``, ``attempts``, ``last_error``, ``last_error_at_ms``, empty
    ``claim_token``; no TTL here) with a JSON payload of about
    ``payload_bytes``, and the id on ``queue:{name}:failed``, oldest at the
    tail.  Ids are ``hj-<i>``; payload ``tenant`` is ``t{i % 10}``.
    Returns the failed list's length."""
    keys = HashJobKeys(name)
    span = 5 * HOUR
    filler = "x" * max(0, payload_bytes - 110)
    with CommandStream(client, batch=_STREAM_BATCH * 50) as stream:
        for start in range(0, n, CHUNK):
            ids = []
            for i in range(start, min(n, start + CHUNK)):
                job_id = f"hj-{i:09d}"
                kind, error = _HJ_KINDS[i % len(_HJ_KINDS)]
                failed_at = now_ms - span + (span * i) // max(1, n)
                payload = dumps({"kind": kind, "tenant": f"t{i % 10}", "to": f"user_{i % 9973}@example.com",
                                 "body": filler})
                stream.execute_command(
                    "HSET", keys.job(job_id), "id", job_id, "payload", payload, "status", "failed",
                    "attempts", attempts, "enqueued_at_ms", failed_at - HOUR, "claimed_at_ms", failed_at - 1000,
                    "claim_token", "", "last_error", error, "last_error_at_ms", failed_at)
                ids.append(job_id)
            stream.execute_command("LPUSH", keys.failed, *ids)
            stream.maybe_flush()
    return int(client.llen(keys.failed))


def load_json_list_dead(client, tag: str, n: int, *, tenants: int = 10, payload_bytes: int = 500) -> int:
    """``n`` dead jobs of a json-list queue (layouts.md section 4; seed 002):
    the whole job JSON strings (``{"id", "task", "args"}``, about
    ``payload_bytes`` each) RPUSHed on ``<tag>:dead`` (oldest at the head, as
    the seed's ``nack`` leaves them), with ``<tag>:attempts`` and
    ``<tag>:errors`` entries.  Ids are ``jl-<i>``; ``args.tenant`` is
    ``t{i % tenants}``.  Returns the dead list's length."""
    keys = JsonListKeys(tag)
    filler = "x" * max(0, payload_bytes - 110)
    with CommandStream(client, batch=_STREAM_BATCH) as stream:
        for start in range(0, n, CHUNK):
            ids = [f"jl-{i:09d}" for i in range(start, min(n, start + CHUNK))]
            kinds = [_HJ_KINDS[i % len(_HJ_KINDS)] for i in range(start, start + len(ids))]
            jobs = [dumps({"id": job_id, "task": kind, "args": {"tenant": f"t{(start + k) % tenants}",
                                                                "to": f"user_{(start + k) % 9973}@example.com",
                                                                "body": filler}})
                    for k, (job_id, (kind, _)) in enumerate(zip(ids, kinds))]
            stream.execute_command("RPUSH", keys.dead, *jobs)
            stream.execute_command("HSET", keys.attempts, *[v for job_id in ids for v in (job_id, 3)])
            stream.execute_command("HSET", keys.errors, *[v for job_id, (_, error) in zip(ids, kinds)
                                                          for v in (job_id, error)])
            stream.maybe_flush()
    return int(client.llen(keys.dead))


@dataclass
class StatusQueueTruth:
    """What ``status`` must report for a queue written by
    :func:`load_status_queue` (counts; ``oldest_ready_since_ms`` in epoch ms)."""

    ready: int
    scheduled: int
    scheduled_overdue: int
    processing: int
    stuck: int
    dead: int
    oldest_ready_since_ms: int | None
    payloads: int

    @property
    def depth(self) -> int:
        return self.ready + self.scheduled + self.processing + self.dead


#: Share of a status queue's depth in each state.
STATUS_SPREAD = {"ready": 0.50, "scheduled": 0.20, "processing": 0.05, "dead": 0.25}
#: Shares of scheduled jobs that are overdue and of processing jobs that are stuck.
OVERDUE_SHARE = 0.10
STUCK_SHARE = 0.20


def load_status_queue(client, tag: str, depth: int, *, now_ms: int, seed: int = 0,
                      payload_window: int | None = 1000) -> StatusQueueTruth:
    """Write a queue of ``depth`` jobs spread over the states by
    :data:`STATUS_SPREAD`: a ready backlog created over the last hour,
    scheduled jobs (10 % overdue by 1-10 min, the rest due 10 min to 24 h
    ahead), processing jobs with visibility deadlines (20 % stuck, 10 min to
    1 h past; the rest 1-2 h ahead) and dead jobs.

    Payload keys: ``status`` reads only the envelope at the claim end of
    each ready list, so by default only the ``payload_window`` oldest ready
    jobs get one (``None``: every job does, ~600 bytes each).  The index
    entries (what ``status`` counts) are all there.  Returns the truth.
    """
    keys = ReliableListKeys(tag)
    rng = random.Random(seed)
    n_ready = int(depth * STATUS_SPREAD["ready"])
    n_sched = int(depth * STATUS_SPREAD["scheduled"])
    n_proc = int(depth * STATUS_SPREAD["processing"])
    n_dead = depth - n_ready - n_sched - n_proc
    n_overdue = int(n_sched * OVERDUE_SHARE)
    n_stuck = int(n_proc * STUCK_SHARE)
    payloads = 0
    oldest_since = None
    with CommandStream(client, batch=_STREAM_BATCH) as stream:
        # ready: oldest first, LPUSHed, so the oldest ends at the tail (claim end)
        created0 = now_ms - HOUR
        for start in range(0, n_ready, CHUNK):
            ids, mset = [], ["MSET"]
            for i in range(start, min(n_ready, start + CHUNK)):
                created = created0 + (HOUR * i) // max(1, n_ready)
                job_id = new_job_id(created, rng)
                ids.append(job_id)
                if payload_window is None or i < payload_window:
                    env = new_envelope(job_id, _TYPES[i % len(_TYPES)], f"t{i % 10}", created, rng)
                    mset += [keys.job(job_id), dumps(env)]
                    payloads += 1
                if i == 0:
                    oldest_since = created
            if len(mset) > 1:
                stream.execute_command(*mset)
            stream.execute_command("LPUSH", keys.ready, *ids)
            stream.maybe_flush()
        # scheduled: overdue ones first, then future
        for start in range(0, n_sched, CHUNK):
            args: list = ["ZADD", keys.scheduled]
            mset = ["MSET"]
            for i in range(start, min(n_sched, start + CHUNK)):
                if i < n_overdue:
                    due = now_ms - MINUTE - rng.randrange(9 * MINUTE)
                else:
                    due = now_ms + 10 * MINUTE + rng.randrange(24 * HOUR - 10 * MINUTE)
                job_id = new_job_id(now_ms - HOUR + rng.randrange(HOUR), rng)
                args += [due, job_id]
                if payload_window is None:
                    env = new_envelope(job_id, _TYPES[i % len(_TYPES)], f"t{i % 10}", now_ms - HOUR, rng,
                                       not_before_ms=due)
                    mset += [keys.job(job_id), dumps(env)]
                    payloads += 1
            if len(mset) > 1:
                stream.execute_command(*mset)
            stream.execute_command(*args)
            stream.maybe_flush()
        # processing: list + deadline zset
        for start in range(0, n_proc, CHUNK):
            ids, zargs = [], ["ZADD", keys.deadline]
            mset = ["MSET"]
            for i in range(start, min(n_proc, start + CHUNK)):
                if i < n_stuck:
                    deadline = now_ms - 10 * MINUTE - rng.randrange(50 * MINUTE)
                else:
                    deadline = now_ms + HOUR + rng.randrange(HOUR)
                job_id = new_job_id(now_ms - 2 * HOUR + rng.randrange(HOUR), rng)
                ids.append(job_id)
                zargs += [deadline, job_id]
                if payload_window is None:
                    env = new_envelope(job_id, _TYPES[i % len(_TYPES)], f"t{i % 10}", now_ms - 2 * HOUR, rng)
                    mset += [keys.job(job_id), dumps(env)]
                    payloads += 1
            if len(mset) > 1:
                stream.execute_command(*mset)
            stream.execute_command("LPUSH", keys.processing, *ids)
            stream.execute_command(*zargs)
            stream.maybe_flush()
        # dead
        if payload_window is None:
            stream.flush()
        else:
            for start in range(0, n_dead, CHUNK):
                ids = [new_job_id(now_ms - 5 * HOUR + rng.randrange(4 * HOUR), rng)
                       for _ in range(start, min(n_dead, start + CHUNK))]
                stream.execute_command("LPUSH", keys.dead, *ids)
                stream.maybe_flush()
    if payload_window is None and n_dead:
        payloads += load_dead(client, tag, n_dead, now_ms=now_ms, seed=seed + 1)
    return StatusQueueTruth(ready=n_ready, scheduled=n_sched, scheduled_overdue=n_overdue,
                            processing=n_proc, stuck=n_stuck, dead=n_dead,
                            oldest_ready_since_ms=oldest_since, payloads=payloads)
