"""A BullMQ job as the read model sees it: its hash ``<prefix>:<q>:<id>``
(``name``, ``data`` and ``opts`` as JSON text, ``timestamp``,
``processedOn``, ``finishedOn``, ``atm``, ``failedReason``, ...).

``data`` is parsed client-side for the filter (``payload.*``) and never
rewritten: a record's ``raw`` is those bytes as stored (the export fence
hashes them), so a 64-bit integer in them is moved as it is.
"""

from __future__ import annotations

import json
from typing import Any

from jobctl.layouts.common import hash_record, text
from jobctl.model import Envelope, JobRecord, State

__all__ = ["BullJobs", "int_field", "json_value", "version_major", "TESTED_MAJORS"]

#: BullMQ major versions whose keys and moves jobctl follows (``meta.version``).
TESTED_MAJORS = (5, 6)
#: Hash fields shown as ``meta`` (text).
META_FIELDS = ("name", "timestamp", "delay", "priority", "processedOn", "finishedOn", "atm", "ats",
               "parentKey", "deid")


def int_field(value: Any) -> int | None:
    """An integer hash field (bytes) as ``int``; ``None`` when blank or not a number."""
    try:
        return int(float(text(value))) if value not in (None, b"") else None
    except ValueError:
        return None


def version_major(version: str | None) -> int | None:
    """The major version of ``meta.version`` (``bullmq:6.7.0`` -> 6); ``None`` when unreadable."""
    if not version:
        return None
    head = version.rsplit(":", 1)[-1].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def json_value(raw: bytes | None) -> Any:
    """``raw`` parsed as JSON (Python ints keep every digit); ``None`` when not JSON."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


class BullJobs:
    """Reads of BullMQ job hashes (the layout provides ``client``, ``keys``,
    ``queue_name`` and ``name``)."""

    def load(self, ids: list[str]) -> list[dict[bytes, bytes]]:
        """Each id's hash fields (one pipelined round trip of ``HGETALL``);
        a key of another type reads as ``{}``."""
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hgetall(self.keys.job(job_id))
        return [r if isinstance(r, dict) else {} for r in pipe.execute(raise_on_error=False)]

    def envelope_of(self, job_id: str, fields: dict[bytes, bytes]) -> Envelope:
        """type = ``name``, created = ``timestamp``, attempts = ``atm``
        (attemptsMade), max attempts = ``opts.attempts``, last attempt =
        ``finishedOn`` (else ``processedOn``), error and message =
        ``failedReason``, payload = ``data`` parsed; the document is every
        field as text.  Never raises."""
        env = Envelope(job_id=job_id)
        if not fields:
            env.problems.append("missing job hash (removed or never stored)")
            return env
        doc = {k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in fields.items()}
        opts = json_value(fields.get(b"opts"))
        env.job_type = doc.get("name")
        env.created_ms = int_field(fields.get(b"timestamp"))
        env.attempt = int_field(fields.get(b"atm")) or 0
        if isinstance(opts, dict) and isinstance(opts.get("attempts"), int):
            env.max_attempts = opts["attempts"]
        env.last_attempt_ms = int_field(fields.get(b"finishedOn")) or int_field(fields.get(b"processedOn"))
        reason = doc.get("failedReason")
        if reason:
            env.last_error_code = env.last_error_message = reason
        env.payload = json_value(fields.get(b"data"))
        env.document = doc
        return env

    def record(self, job_id: str, fields: dict[bytes, bytes], state: State | None, *,
               position: int | None = None, score: int | None = None) -> JobRecord:
        """A :class:`JobRecord` of ``job_id`` in ``state``; ``raw`` is the
        hash's ``data`` as stored (``None``: no hash, a dangling id)."""
        return hash_record(self, job_id, state, self.envelope_of(job_id, fields), fields, META_FIELDS,
                           position=position, score=score)

    def records(self, ids: list[str], state: State, extra: list[dict[str, Any]]) -> list[JobRecord]:
        """Records of ``ids`` in ``state``; ``extra[i]`` holds position/score."""
        return [self.record(i, f, state, **x) for i, f, x in zip(ids, self.load(ids), extra)]
