"""A hash-job job hash as the read model sees it: its fields
(:data:`META_FIELDS`), the envelope and record built from it, a key of the
wrong type (:class:`WrongTypeHash`), and :class:`JobHashModel`, the mixin of
:class:`~jobctl.layouts.hash_job.layout.HashJob` that loads and reads
them."""

from __future__ import annotations

from typing import Any

import orjson

from jobctl.model import Envelope, JobRecord, State
from jobctl.layouts.common import text

__all__ = ["JobHashModel", "WrongTypeHash", "is_wrongtype", "unstamped_claim", "int_field", "META_FIELDS",
           "INT_META", "STATUS_OF", "UNSTAMPED", "WRONGTYPE_BREAKDOWN"]

#: Hash fields shown as layout metadata (``meta``), in display order.
META_FIELDS = ("status", "attempts", "claim_token", "enqueued_at_ms", "claimed_at_ms", "reclaimed_at_ms",
               "completed_at_ms", "last_error", "last_error_at_ms", "redriven_at_ms", "redrive_operation",
               "redrive_count")
INT_META = {"attempts", "enqueued_at_ms", "claimed_at_ms", "reclaimed_at_ms", "completed_at_ms",
            "last_error_at_ms", "redriven_at_ms", "redrive_count"}

#: The hash ``status`` each state's list implies.
STATUS_OF = {State.READY: "pending", State.PROCESSING: "processing", State.DEAD: "failed",
             State.SUPPRESSED: "failed", State.HISTORY: "completed"}


def int_field(value: Any) -> int | None:
    """An integer hash field (a float's integer part); ``None`` when missing or not a number."""
    if value is None or value == b"" or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None


#: Note on a processing job whose claim was never stamped.
UNSTAMPED = ("claim not stamped (status pending, no claimed_at_ms): the worker died between its BLMOVE "
             "and its HSET, or is about to stamp it; stuck 2 x the visibility timeout after enqueued_at_ms")


def unstamped_claim(state: State | None, fields: dict[bytes, bytes]) -> bool:
    """True for a processing id whose hash still says ``pending`` without a
    claim time: the window seed 001's 2 x timeout rule is for, not a fault."""
    return (state is State.PROCESSING and fields.get(b"status") == b"pending"
            and not int_field(fields.get(b"claimed_at_ms")))


def is_wrongtype(reply: Any) -> bool:
    """Whether a pipeline ``reply`` (``raise_on_error=False``) is a WRONGTYPE error."""
    return isinstance(reply, Exception) and str(reply).splitlines()[0].upper().startswith("WRONGTYPE")


class WrongTypeHash(dict):
    """What :meth:`HashJob.load` gives for a job key that is not a hash: no
    fields (an empty dict), ``key`` the key's name and ``problem`` the
    sentence that names it.  The job holds only itself: it is listed and
    exported with that problem, and an operation plans it so that the apply
    fails it alone (``hj_window.lua``'s per-job step: ``wrongtype``)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.problem = f"job key {key} holds the wrong Redis type (not a hash)"


#: The breakdown row of a planned job whose key is not a hash: (job type,
#: error); ``ls --state dead`` names each such key.
WRONGTYPE_BREAKDOWN = ("?", "wrongtype: job key is not a hash (ls --state dead names it)")


class JobHashModel:
    """Reads of job hashes (the layout provides ``client``, ``keys``,
    ``queue_name``, ``name``, ``visibility_ms``, ``max_attempts``,
    ``type_field`` and ``tenant_field``)."""

    # -- the model -------------------------------------------------------------
    def deadline_of(self, fields: dict[bytes, bytes]) -> int | None:
        """Visibility deadline (epoch ms) of a processing job's hash:
        ``claimed_at_ms + timeout``, else ``enqueued_at_ms + 2 x timeout``,
        else ``None`` (the seed's reclaimer would never take it)."""
        claimed = int_field(fields.get(b"claimed_at_ms"))
        if claimed:
            return claimed + self.visibility_ms
        enqueued = int_field(fields.get(b"enqueued_at_ms"))
        if enqueued:
            return enqueued + 2 * self.visibility_ms
        return None

    def envelope_of(self, fields: dict[bytes, bytes]) -> Envelope:
        """The :class:`Envelope` of a job hash: id, payload (parsed JSON),
        job type and tenant from the payload's ``type_field``/``tenant_field``,
        created = ``enqueued_at_ms``, attempt = ``attempts``, last error =
        ``last_error``/``last_error_at_ms``; a job put back on ``pending``
        (retry, reclaim) is ready since then (``nextAttemptAtEpochMs``).
        ``document`` is the whole hash.  Never raises."""
        env = Envelope()
        if isinstance(fields, WrongTypeHash):
            env.problems.append(fields.problem)
            return env
        doc: dict[str, Any] = {text(k): text(v) for k, v in fields.items()}
        if not fields:
            env.problems.append("missing job hash (expired or deleted)")
            return env
        env.job_id = doc.get("id")
        raw = fields.get(b"payload")
        if raw is None:
            env.problems.append("job hash has no payload field")
        else:
            try:
                payload = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                env.problems.append(f"payload is not JSON: {exc}".splitlines()[0][:120])
            else:
                env.payload = payload
                doc["payload"] = payload
                if isinstance(payload, dict):
                    jt = payload.get(self.type_field)
                    env.job_type = jt if isinstance(jt, str) else None
                    if self.tenant_field:
                        tenant = payload.get(str(self.tenant_field))
                        env.tenant_id = tenant if isinstance(tenant, str) else None
        if "result" in doc:
            try:
                doc["result"] = orjson.loads(fields[b"result"])
            except orjson.JSONDecodeError:
                pass
        env.created_ms = int_field(fields.get(b"enqueued_at_ms"))
        env.attempt = int_field(fields.get(b"attempts"))
        env.max_attempts = self.max_attempts
        env.last_error_message = doc.get("last_error") or None
        env.last_attempt_ms = int_field(fields.get(b"last_error_at_ms")) or None
        if doc.get("status") == "pending":
            back = [t for t in (int_field(fields.get(b"reclaimed_at_ms")), env.last_attempt_ms) if t]
            env.next_attempt_ms = max(back) if back else None
        redriven = int_field(fields.get(b"redriven_at_ms"))
        if redriven:
            env.extra["redrivenAtEpochMs"] = redriven
        env.document = doc
        return env

    def record(self, job_id: str, fields: dict[bytes, bytes], state: State | None, *,
               position: int | None = None, score: int | None = None) -> JobRecord:
        """A :class:`JobRecord` of ``job_id`` in ``state`` from its hash
        (``{}`` when the hash is missing: a dangling id, ``raw`` ``None``).
        ``raw`` is the payload field as stored."""
        env = self.envelope_of(fields)
        rec = JobRecord(queue=self.queue_name, layout=self.name, shard=self.keys.name, job_id=job_id,
                        state=state, envelope=env, raw=fields.get(b"payload") if fields else None,
                        position=position, score=score)
        for f in META_FIELDS:
            v = fields.get(f.encode())
            if v is None or (v == b"" and f != "claim_token"):  # an empty token says "no claim"
                continue
            rec.meta[f] = int_field(v) if f in INT_META else text(v)
        if isinstance(fields, WrongTypeHash):
            rec.meta["problem"] = fields.problem
            return rec
        if not fields:
            rec.meta["problem"] = ("dangling id: job hash expired" if state in (State.DEAD, State.HISTORY)
                                   else "dangling id: no job hash")
            return rec
        status = rec.meta.get("status")
        if unstamped_claim(state, fields):
            rec.meta["note"] = UNSTAMPED
        elif state is not None and status != STATUS_OF[state]:
            rec.meta["problem"] = f"hash status {status!r} while in {state.value}"
        if state is State.PROCESSING:
            rec.deadline_ms = self.deadline_of(fields)
            if rec.deadline_ms is None:
                rec.meta["problem"] = "no claimed_at_ms nor enqueued_at_ms: never reclaimed"
        if state in (State.DEAD, State.SUPPRESSED) and env.last_attempt_ms is not None:
            rec.meta["dead_since_ms"] = env.last_attempt_ms
        return rec

    def load(self, ids: list[str]) -> list[dict[bytes, bytes]]:
        """The hashes of ``ids`` (one pipelined HGETALL each; ``{}`` when
        missing, a :class:`WrongTypeHash` for a key that is not a hash).
        Any other error reply is raised."""
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
        out = pipe.execute(raise_on_error=False)
        for n, reply in enumerate(out):
            if is_wrongtype(reply):
                out[n] = WrongTypeHash(self.keys.job(ids[n]))
            elif isinstance(reply, Exception):
                raise reply
        return out

    def records(self, ids: list[str], state: State, extra: list[dict[str, Any]]) -> list[JobRecord]:
        """Records of ``ids`` in ``state``; ``extra[i]`` holds position/score."""
        return [self.record(i, f, state, **x) for i, f, x in zip(ids, self.load(ids), extra)]
