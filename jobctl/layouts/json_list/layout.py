"""The ``json-list`` layout (layouts.md section 4; seed 002): whole job JSON
strings (``{"id": ..., "task": ...}``) in ``<prefix>:pending``,
``<prefix>:processing`` and ``<prefix>:dead``; claim times in
``<prefix>:processing:times`` (zset id -> epoch *seconds*, float); failed
attempts in ``<prefix>:attempts`` and last errors in ``<prefix>:errors``
(hashes keyed by job id).  ``prefix`` is the queue's ``tag`` (default
``jobs``, the seed's).

States: ready = pending (producers LPUSH, workers BLMOVE RIGHT LEFT; a
retried job is RPUSHed, so it is claimed next); processing; dead (workers
RPUSH: newest at the tail); suppressed = jobctl's keys.  No scheduled
state, no history.

A job *is* its string: the workers find it again with ``LREM`` on the exact
bytes, so jobctl moves the byte-identical string and never re-serialises
one.  Claim times are converted to epoch ms in the model; the visibility
deadline is claim time + ``visibility_timeout_ms`` (default the seed's
``PROCESSING_TIMEOUT``, 300 s).  A processing job with no claim time (a
worker died between its BLMOVE and its ZADD) has no deadline: the seed's
recovery never finds it; ``check`` reports it.

An element that is not a JSON object with an ``id`` is malformed; it is
named ``sha1:<hex SHA1 of its bytes>``.

Costs: ``status`` is one pipelined round trip.  ``ls`` and
``iter_batches`` read one window per command.  ``inspect`` must look for the
id inside the strings: it walks every list in windows of 1,000 (linear in
the queue's size; the processing list first, then pending and dead).

Config (``[queues.<name>]``): ``tag`` = key prefix (default ``jobs``);
``visibility_timeout_ms``; options ``max_retries`` (the workers'
``MAX_RETRIES``, default 3, shown as max attempts), ``type_field`` (the
JSON field shown as the job type, default ``task``), ``tenant_field``
(default none).

Operations: :mod:`.json_list_ops`; checks: :mod:`.json_list_check`;
discovery: :mod:`.discover`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import orjson

from jobctl.config import QueueConfig
from jobctl.errors import DataError, NotFound
from jobctl.keys import JSON_LIST_DEFAULT_PREFIX, JsonListKeys
from jobctl.model import Envelope, JobRecord, QueueStatus, State
from jobctl.layouts.base import ListStatesLayout, now_ms
from jobctl.layouts.facts import IntOption, StrOption
from jobctl.layouts.planning import TRANSITIONS_WITHOUT_SCHEDULED
from jobctl.layouts.common import score_after, score_ms, status_replies, suppression_info, text, wrongtype_errors
from jobctl.layouts.walks import WINDOW, walk_list, walk_zset

__all__ = ["JsonList", "raw_sha1", "element_id", "DEFAULT_VISIBILITY_MS", "MALFORMED_ID_PREFIX"]

#: The seed's ``PROCESSING_TIMEOUT`` (300 s).
DEFAULT_VISIBILITY_MS = 300_000
#: The seed's ``MAX_RETRIES``.
DEFAULT_MAX_RETRIES = 3
#: Id given to an element that is not a JSON object with an ``id``.
MALFORMED_ID_PREFIX = "sha1:"


def raw_sha1(raw: bytes) -> str:
    """Hex SHA1 of a job string, as Lua's ``redis.sha1hex`` computes it."""
    return hashlib.sha1(raw).hexdigest()


def element_id(raw: bytes) -> tuple[str, bool]:
    """``(job id, malformed)`` of a job string, the id :meth:`JsonList.parse`
    gives it (``sha1:<hex>`` when malformed) without building an envelope."""
    try:
        doc = orjson.loads(raw)  # raises JSONDecodeError on bytes that are not UTF-8, as parse() rules them out
    except orjson.JSONDecodeError:
        doc = None
    # exact types (orjson builds no subclasses; a bool is not an int here): one call a job of a tail walk
    job_id = doc.get("id") if type(doc) is dict else None
    kind = type(job_id)
    if kind is str and job_id:
        return job_id, False
    if kind is int:
        return str(job_id), False
    return MALFORMED_ID_PREFIX + raw_sha1(raw), True


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def claim_ms(seconds: Any) -> int | None:
    """A ``processing:times`` score (epoch seconds, float) as epoch ms;
    ``+-inf`` as ``+-SCORE_INF_MS`` (:func:`~jobctl.layouts.common.score_ms`)."""
    if seconds is None:
        return None
    f = float(seconds)
    return score_ms(f) if f in (float("inf"), float("-inf")) else score_ms(round(f * 1000))


class JsonList(ListStatesLayout):
    """A json-list queue; see the module docstring."""

    name = "json-list"
    package = "jobctl.layouts.json_list"
    states = (State.READY, State.PROCESSING, State.DEAD, State.SUPPRESSED)
    operations = frozenset(op for op, _ in TRANSITIONS_WITHOUT_SCHEDULED)
    visibility_default_ms = DEFAULT_VISIBILITY_MS
    config_options = {"max_retries": IntOption(1, 1_000_000), "type_field": StrOption(256),
                      "tenant_field": StrOption(256)}

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.json_list.discover import recognize

        return recognize

    def dead_audits(self):
        """The dead list; its entries are the payloads (duplicates and the list's TTL only)."""
        from jobctl.layouts.common import PAYLOAD_TYPES

        return [(self.keys.dead, None, PAYLOAD_TYPES)]

    def __init__(self, client, queue: QueueConfig) -> None:
        super().__init__(client, queue)
        self.keys = JsonListKeys(queue.tag or JSON_LIST_DEFAULT_PREFIX)
        opts = queue.options or {}
        self.visibility_ms = queue.visibility_timeout_ms or self.visibility_default_ms
        self.max_retries = _int(opts.get("max_retries")) or DEFAULT_MAX_RETRIES
        self.type_field = str(opts.get("type_field", "task"))
        self.tenant_field = opts.get("tenant_field")

    # -- the model -------------------------------------------------------------
    def parse(self, raw: bytes) -> Envelope:
        """The :class:`Envelope` of a job string: ``job_id`` from ``id``,
        job type and tenant from ``type_field``/``tenant_field``, ``payload``
        and ``document`` the whole object.  Malformed strings (not UTF-8, not
        JSON, not an object, no ``id``) get ``problems`` and the id
        ``sha1:<hex>``.  Never raises."""
        env = Envelope(max_attempts=self.max_retries)
        try:
            raw.decode("utf-8")
            doc = orjson.loads(raw)
        except UnicodeDecodeError as exc:
            env.problems.append(f"not UTF-8 at byte {exc.start}")
            doc = None
        except orjson.JSONDecodeError as exc:
            env.problems.append(f"bad JSON: {exc}".splitlines()[0][:120])
            doc = None
        if doc is not None and not isinstance(doc, dict):
            env.problems.append(f"job is a JSON {type(doc).__name__}, not an object")
            doc = None
        if doc is not None:
            env.document = doc
            env.payload = doc
            job_id = doc.get("id")
            if isinstance(job_id, bool) or not isinstance(job_id, (str, int)) or job_id == "":
                env.problems.append("missing field id")
            else:
                env.job_id = str(job_id)
            jt = doc.get(self.type_field)
            env.job_type = jt if isinstance(jt, str) else None
            if self.tenant_field:
                tenant = doc.get(str(self.tenant_field))
                env.tenant_id = tenant if isinstance(tenant, str) else None
        if env.job_id is None:
            env.job_id = MALFORMED_ID_PREFIX + raw_sha1(raw)
        return env

    def records(self, raws: list[bytes], state: State, extra: list[dict[str, Any]],
                suppressed_ids: list[str] | None = None) -> list[JobRecord]:
        """Records of the job strings ``raws`` in ``state``, with attempts,
        last error and (processing) claim time: one pipelined round trip.
        ``suppressed_ids`` names the ids of suppressed jobs (a ``None`` raw
        there is a dangling suppressed id)."""
        envs = [self.parse(r) if r is not None else None for r in raws]
        ids = suppressed_ids or [e.job_id for e in envs]  # type: ignore[union-attr]
        if not ids:
            return []
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(k.attempts, ids)
        pipe.hmget(k.errors, ids)
        if state is State.PROCESSING:
            pipe.zmscore(k.processing_times, ids)
        res = pipe.execute()
        attempts, errors = res[0], res[1]
        times = res[2] if state is State.PROCESSING else [None] * len(ids)
        out = []
        for n, (job_id, raw, env) in enumerate(zip(ids, raws, envs)):
            if env is None:
                env = Envelope(problems=["missing job string"])
            env.attempt = _int(attempts[n]) or 0
            env.last_error_message = text(errors[n]) if errors[n] is not None else None
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard=k.prefix, job_id=job_id,
                            state=state, envelope=env, raw=raw)
            for key, v in extra[n].items():
                setattr(rec, key, v)
            rec.meta["attempts"] = env.attempt
            if env.last_error_message is not None:
                rec.meta["error"] = env.last_error_message
            if raw is not None:
                rec.meta["sha1"] = raw_sha1(raw)
            if state is State.PROCESSING:
                claimed = claim_ms(times[n])
                if claimed is None:
                    rec.meta["problem"] = "no claim time in processing:times: never recovered"
                else:
                    rec.meta["claimed_at_ms"] = claimed
                    rec.meta["claimed_at_s"] = times[n]
                    rec.deadline_ms = score_after(claimed, self.visibility_ms)
            if env.problems and raw is not None:
                rec.meta.setdefault("problem", "malformed job string: " + env.problems[0])
            out.append(rec)
        return out

    # -- status ----------------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        """One pipelined round trip: LLENs, ZCARD, and the stuck count and
        next deadline from ``processing:times`` (``ZCOUNT``, ``ZRANGE BYSCORE
        LIMIT 0 1``).  ``oldest_ready`` stays unknown: the layout stores no
        enqueue time."""
        now = now_ms() if now is None else now
        k = self.keys
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now)
        cutoff = (now - self.visibility_ms) / 1000.0
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(k.pending)
        pipe.llen(k.processing)
        pipe.zcount(k.processing_times, "-inf", f"({cutoff!r}")
        pipe.zrange(k.processing_times, repr(cutoff), "+inf", byscore=True, offset=0, num=1, withscores=True)
        pipe.llen(k.dead)
        pipe.zcard(k.suppressed)
        pipe.llen(k.hold)  # dead strings a window-engine walk set aside: still dead
        names = [k.pending, k.processing, k.processing_times, k.processing_times, k.dead, k.suppressed, k.hold]
        val = status_replies(st, pipe.execute(raise_on_error=False), names)
        st.ready = val[0] or 0
        st.processing = val[1] or 0
        st.stuck = val[2] or 0
        if val[3]:
            st.next_deadline_ms = score_after(claim_ms(val[3][0][1]), self.visibility_ms)
        st.dead = (val[4] or 0) + (val[6] or 0)
        st.suppressed = val[5] or 0
        return st

    def depth(self, state: State) -> int:
        """As :meth:`ListStatesLayout.depth`; dead counts jobctl's hold too."""
        if state is State.DEAD:
            return self.client.llen(self.keys.dead) + self.client.llen(self.keys.hold)
        return super().depth(state)

    def _list_key(self, state: State) -> str:
        k = self.keys
        return {State.READY: k.pending, State.PROCESSING: k.processing, State.DEAD: k.dead}[state]

    def _suppressed_records(self, pairs: list[tuple[bytes, float]]) -> list[JobRecord]:
        ids = [text(m) for m, _ in pairs]
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.suppressed_raw, ids)
        pipe.hmget(self.keys.suppressed_info, ids)
        raws, infos = pipe.execute()
        recs = self.records(raws, State.SUPPRESSED, [{"score": score_ms(s)} for _, s in pairs], suppressed_ids=ids)
        for rec, info in zip(recs, infos):
            if rec.raw is None:
                rec.meta["problem"] = "dangling id: suppressed without its job string"
            if info is not None:
                rec.meta["suppressed"] = suppression_info(info)
        return recs

    # -- listing ---------------------------------------------------------------
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: next to be claimed first; processing: earliest deadline
        first; dead: newest first (the tail); suppressed: most recently
        suppressed first.  ``position`` counts from that end."""
        self.check_supported(state)
        if state is State.SUPPRESSED:
            return self._suppressed_records(
                self.client.zrange(self.keys.suppressed, 0, limit - 1, desc=True, withscores=True))
        raws = list(reversed(self.client.lrange(self._list_key(state), -limit, -1)))
        if state is State.DEAD and len(raws) < limit:  # the hold: the oldest dead strings
            raws += list(reversed(self.client.lrange(self.keys.hold, -(limit - len(raws)), -1)))
        recs = self.records(raws, state, [{"position": n} for n in range(len(raws))])
        if state is State.PROCESSING:
            recs.sort(key=lambda r: (r.deadline_ms is None, r.deadline_ms or 0))
        return recs

    # -- inspect ---------------------------------------------------------------
    def find(self, job_id: str) -> list[tuple[State, int, bytes]]:
        """Every ``(state, position, raw)`` whose string has id ``job_id`` (or,
        for ``sha1:<hex>``, those bytes), looking in processing, pending and
        dead (positions from the served end; dead: from the newest).  Walks
        each list in windows of 1,000: linear in the queue's size."""
        want_sha = job_id[len(MALFORMED_ID_PREFIX):] if job_id.startswith(MALFORMED_ID_PREFIX) else None
        needle = job_id.encode("utf-8", "surrogateescape")
        found = []
        walks = [(State.PROCESSING, self._list_key(State.PROCESSING)), (State.READY, self._list_key(State.READY)),
                 (State.DEAD, self.keys.dead), (State.DEAD, self.keys.hold)]
        for state, key in walks:
            base = self.client.llen(self.keys.dead) if key == self.keys.hold else 0
            for start, chunk in walk_list(self.client, key, from_right=True, batch=WINDOW):
                start += base
                for n, raw in enumerate(chunk):
                    if want_sha is not None:
                        if raw_sha1(raw) == want_sha:
                            found.append((state, start + n, raw))
                    elif needle in raw and self.parse(raw).job_id == job_id:
                        found.append((state, start + n, raw))
        return found

    def inspect(self, job_id: str) -> JobRecord:
        """The job with its state, position, claim time and deadline
        (processing), attempts and last error (the layout's hashes) and
        suppression record.  Costs a walk of the lists (:meth:`find`)."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.zscore(k.suppressed, job_id)
        pipe.zscore(k.processing_times, job_id)
        res = pipe.execute(raise_on_error=False)
        errors = wrongtype_errors(res, [k.suppressed, k.processing_times])
        if errors:
            raise DataError(errors[0])
        supp, claim = res
        try:
            found = self.find(job_id)
        except Exception as exc:  # noqa: BLE001 - only WRONGTYPE is translated here
            wrongtype_errors([exc], [""])  # re-raises anything else
            raise DataError(f"a list of queue {self.queue_name} ({k.pending}, {k.processing} or {k.dead}) "
                            "holds the wrong Redis type") from None
        if found:
            state, pos, raw = found[0]
            rec = self.records([raw], state, [{"position": pos}])[0]
            rec.meta["state_key"] = self._list_key(state)
            also = [s.value for s, _, _ in found[1:]]
            if supp is not None:
                also.append(State.SUPPRESSED.value)
            if also:
                rec.meta["also_in"] = also
        elif supp is not None:
            rec = self._suppressed_records([(job_id.encode("utf-8", "surrogateescape"), supp)])[0]
            rec.meta["state_key"] = k.suppressed
        else:
            raise NotFound(f"job {job_id!r} not found in queue {self.queue_name}")
        if claim is not None and rec.state is not State.PROCESSING:
            rec.meta["stray_claim_time_ms"] = claim_ms(claim)
        from jobctl.ops.redrive_record import lookup

        redriven = lookup(self.client, k, job_id, now_ms())
        if redriven is not None:  # jobctl's record of its redrives (the string is never rewritten)
            rec.meta["redriven"] = redriven
        return rec

    # -- batched walks ---------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches.  Ready and processing are walked from
        the served end (the right); dead from its oldest end (the left),
        where the workers' RPUSHes do not shift the indexes; ``position``
        counts from that end.  Suppressed by rank (``score`` set)."""
        self.check_supported(state)
        if state is State.SUPPRESSED:
            for _, pairs in walk_zset(self.client, self.keys.suppressed, batch=batch, sample=sample):
                yield self._suppressed_records(pairs)
            return
        from_right = state is not State.DEAD
        base = 0
        if state is State.DEAD:  # jobctl's hold (set aside by a walk) is the oldest part of the dead list
            for start, chunk in walk_list(self.client, self.keys.hold, from_right=False, batch=batch, sample=sample):
                yield self.records(chunk, state, [{"position": start + n} for n in range(len(chunk))])
            base = self.client.llen(self.keys.hold)
        for start, chunk in walk_list(self.client, self._list_key(state), from_right=from_right, batch=batch,
                                      sample=sample):
            yield self.records(chunk, state, [{"position": base + start + n} for n in range(len(chunk))])
