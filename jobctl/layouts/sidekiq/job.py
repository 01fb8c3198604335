"""A Sidekiq job as the read model sees it, and the client-side edit of a
redrive.

A job *is* its JSON string (``class``, ``args``, ``queue``, ``jid``,
``retry``, ``created_at``, ``enqueued_at``; after a failure
``retry_count``, ``error_class``, ``error_message``, ``failed_at``,
``retried_at``, ``error_backtrace``).  Sidekiq <= 7 stores the times as
epoch seconds (float), >= 8 as epoch ms (integer): each value is read by
its magnitude (:func:`time_ms`) and every record shows epoch ms.

JSON is parsed with Python's own ``json`` when orjson refuses it (an
integer past 64 bits), so no integer loses a digit; a record's ``raw`` is
the stored bytes (a redrive's edit: :mod:`jobctl.layouts.sidekiq.edit`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from jobctl.model import Envelope, JobRecord, State

__all__ = ["job_doc", "time_ms", "envelope_of", "job_record", "ms_clock"]

#: A time above this is epoch ms (Sidekiq >= 8), below it epoch seconds (year 5138 in seconds).
_MS_FROM = 1e11
#: Sidekiq's default retry budget (``retry: true``).
DEFAULT_RETRIES = 25


def job_doc(raw: bytes | str) -> dict | None:
    """The job JSON object of ``raw``; ``None`` when not a JSON object."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
    return doc if isinstance(doc, dict) else None


def time_ms(value: Any) -> int | None:
    """A Sidekiq time (epoch s float, or epoch ms from Sidekiq 8) as epoch ms; ``None`` if not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value > _MS_FROM else int(value * 1000)


def ms_clock(doc: dict) -> bool:
    """True when ``doc``'s times are epoch ms (Sidekiq >= 8), judged by ``created_at``/``enqueued_at``."""
    for f in ("created_at", "enqueued_at", "failed_at"):
        v = doc.get(f)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v > _MS_FROM
    return False


def envelope_of(raw: bytes) -> Envelope:
    """type = ``wrapped`` (ActiveJob) else ``class``, created = ``created_at``,
    attempts = ``retry_count`` (retries so far), max attempts = ``retry``
    (an integer, or 25 for ``true``), last attempt = ``failed_at``
    (else ``retried_at``), error = ``error_class``, message =
    ``error_message``, payload and document = the whole job.  Never raises."""
    doc = job_doc(raw)
    if doc is None:
        return Envelope(problems=["not a JSON object"])
    env = Envelope(job_id=str(doc.get("jid") or "") or None, payload=doc, document=doc)
    cls = doc.get("wrapped") or doc.get("class")
    env.job_type = cls if isinstance(cls, str) else None
    env.created_ms = time_ms(doc.get("created_at"))
    count = doc.get("retry_count")
    env.attempt = count if isinstance(count, int) and not isinstance(count, bool) else None
    budget = doc.get("retry")
    if isinstance(budget, bool):
        env.max_attempts = DEFAULT_RETRIES if budget else 0
    elif isinstance(budget, int):
        env.max_attempts = budget
    env.last_attempt_ms = time_ms(doc.get("failed_at")) or time_ms(doc.get("retried_at"))
    for attr, f in (("last_error_code", "error_class"), ("last_error_message", "error_message")):
        if isinstance(doc.get(f), str):
            setattr(env, attr, doc[f])
    if env.job_id is None:
        env.problems.append("missing field jid")
    return env


def job_record(layout, raw: bytes, state: State, *, position: int | None = None, score: float | None = None,
               key: str = "") -> JobRecord:
    """A :class:`JobRecord` of the job JSON ``raw`` in ``state``; ``score``
    is the sorted set's (epoch s, kept as stored in ``meta["set_score"]``: the
    fence); a member without a ``jid`` is named ``sha1:<hex>``."""
    import hashlib

    env = envelope_of(raw)
    job_id = env.job_id or "sha1:" + hashlib.sha1(raw).hexdigest()
    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=job_id, state=state,
                    envelope=env, raw=raw, position=position, meta={"state_key": key})
    doc = env.document or {}
    if isinstance(doc.get("queue"), str):
        rec.meta["sidekiq_queue"] = doc["queue"]
    if score is not None:
        rec.score = int(score * 1000) if score < _MS_FROM else int(score)
        rec.meta["set_score"] = repr(float(score))
    if state is State.DEAD:
        since = env.last_attempt_ms or rec.score
        if since is not None:
            rec.meta["dead_since_ms"] = since
    return rec
