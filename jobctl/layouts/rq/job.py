"""An RQ job as the read model sees it, built without unpickling: the job
hash's text fields (``description``, ``origin``, ``status``, times) and the
exception text of the newest entry of its results stream (RQ stores the
traceback as base64 of zlib text, ``exc_string``; decoded, never executed).

The job's ``data`` field (zlib of a pickle) is never decoded: the record's
``raw`` is those bytes as stored (the export fence hashes them) and the
document shows only their length.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from datetime import datetime, timezone
from typing import Any

from jobctl.layouts.common import hash_record, text
from jobctl.model import Envelope, JobRecord, State

__all__ = ["RqJobs", "iso_ms", "exception_parts", "RESULT_TYPES", "STATUS_OF", "FAILED_AT_NOTE"]

#: RQ's result types (``rq/results.py``) by the stream entry's ``type`` field.
RESULT_TYPES = {b"1": "successful", b"2": "failed", b"3": "stopped", b"4": "retried", b"5": "max retries"}
#: The hash ``status`` each jobctl state implies (processing: ``started``).
STATUS_OF = {State.READY: "queued", State.PROCESSING: "started", State.SCHEDULED: "scheduled",
             State.DEAD: "failed", State.SUPPRESSED: "failed", State.HISTORY: "finished"}
#: Said wherever a failed job's times are shown.
FAILED_AT_NOTE = ("the failed registry's score is an expiry time (now + failure_ttl when the job failed), "
                  "not the failure time: failed_at is the job hash's ended_at")
#: Hash fields shown as ``meta`` (text), in display order.
META_FIELDS = ("status", "origin", "enqueued_at", "started_at", "ended_at", "worker_name", "retries_left",
               "number_of_retries", "failure_ttl", "result_ttl", "timeout", "group_id")
_EXC_CAP = 20_000  # characters of a traceback kept in a record


def iso_ms(value: Any) -> int | None:
    """Epoch ms of an RQ timestamp (``2026-11-28T00:14:11.349527Z``, UTC);
    ``None`` when blank or unparsable."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(text(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def decode_exc(value: bytes | None) -> str | None:
    """The traceback text of a results entry's ``exc_string`` (base64 of zlib); ``None`` if unreadable."""
    if not value:
        return None
    try:
        return zlib.decompress(base64.b64decode(value)).decode("utf-8", "replace")[-_EXC_CAP:]
    except (binascii.Error, zlib.error, ValueError):
        return None


def exception_parts(traceback: str | None) -> tuple[str | None, str | None]:
    """``(exception class, its line)`` from a traceback's last non-blank
    line (``RuntimeError: boom`` -> ``("RuntimeError", "RuntimeError: boom")``)."""
    last = traceback.rstrip().rsplit("\n", 1)[-1].strip() if traceback else ""
    if not last:
        return None, None
    head = last.split(":", 1)[0].strip()
    return (head.rsplit(".", 1)[-1] if head and " " not in head else None), last


def func_name(description: str | None) -> str | None:
    """The function of an RQ description (``mod.f('a', 1)`` -> ``mod.f``)."""
    if not description:
        return None
    return description.split("(", 1)[0].strip() or None


class RqJobs:
    """Reads of RQ job hashes (the layout provides ``client``, ``keys``,
    ``queue_name`` and ``name``)."""

    def load(self, ids: list[str]) -> list[tuple[dict[bytes, bytes], list]]:
        """``(hash fields, newest results entry or [])`` of each id: one
        pipelined round trip (``HGETALL`` and ``XREVRANGE ... COUNT 1``).
        A key of the wrong type reads as missing (its record says so)."""
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
            pipe.xrevrange(self.keys.results(job_id), count=1)
        res = pipe.execute(raise_on_error=False)
        out = []
        for n in range(len(ids)):
            fields, last = res[2 * n], res[2 * n + 1]
            out.append((fields if isinstance(fields, dict) else {}, last if isinstance(last, list) else []))
        return out

    def envelope_of(self, job_id: str, fields: dict[bytes, bytes], result: list) -> Envelope:
        """The :class:`Envelope` of a job: type = the function of its
        ``description``, created = ``created_at``, last attempt =
        ``ended_at``, next attempt (a queued job) = ``enqueued_at``, error = the exception class and message = its last
        traceback line (newest results entry), payload = ``{description,
        origin, func, status}``; document = the hash as text plus the
        traceback.  Never raises."""
        env = Envelope(job_id=job_id)
        if not fields:
            env.problems.append("missing job hash (expired or deleted)")
            return env
        doc: dict[str, Any] = {k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape")
                               for k, v in fields.items() if k != b"data" and k != b"exc_info"}
        if b"data" in fields:
            doc["data"] = f"<{len(fields[b'data'])} bytes, pickled: not decoded>"
        description = doc.get("description")
        env.job_type = func_name(description)
        env.created_ms = iso_ms(fields.get(b"created_at"))
        env.last_attempt_ms = iso_ms(fields.get(b"ended_at"))
        if fields.get(b"status") == b"queued":  # ready since it was (re)enqueued
            env.next_attempt_ms = iso_ms(fields.get(b"enqueued_at"))
        env.payload = {"description": description, "origin": doc.get("origin"), "func": env.job_type,
                       "status": doc.get("status")}
        if result:
            entry_id, entry = result[0]
            kind = RESULT_TYPES.get(entry.get(b"type", b""), text(entry.get(b"type", b"?")))
            doc["last_result"] = {"type": kind, "at_ms": int(text(entry_id).split("-")[0])}
            traceback = decode_exc(entry.get(b"exc_string"))
            if traceback:
                doc["exception"] = traceback
                env.last_error_code, env.last_error_message = exception_parts(traceback)
        env.document = doc
        return env

    def record(self, job_id: str, loaded: tuple[dict, list], state: State | None, *,
               position: int | None = None, score: int | None = None) -> JobRecord:
        """A :class:`JobRecord` of ``job_id`` in ``state``; ``raw`` is the
        hash's ``data`` field as stored (``None``: no hash, a dangling id)."""
        fields, result = loaded
        rec = hash_record(self, job_id, state, self.envelope_of(job_id, fields, result), fields, META_FIELDS,
                          position=position, score=score)
        if not fields:
            return rec
        status = rec.meta.get("status")
        if state is not None and state in STATUS_OF and status != STATUS_OF[state]:
            rec.meta["note"] = f"hash status {status!r} while in {state.value}"
        return rec

    def records(self, ids: list[str], state: State, extra: list[dict[str, Any]]) -> list[JobRecord]:
        """Records of ``ids`` in ``state``; ``extra[i]`` holds position/score."""
        return [self.record(i, loaded, state, **x) for i, loaded, x in zip(ids, self.load(ids), extra)]
