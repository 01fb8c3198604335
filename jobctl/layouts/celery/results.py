"""Celery's failed result records, the dead state of a Celery queue when
its catalogue entry opts in (``replay_results = 1``).

Celery's Redis result backend keeps one STRING ``celery-task-meta-<id>``
per task (JSON with the default ``result_serializer``).  Only with Celery's
``result_extended = True`` does it hold the task's ``name``, ``args``,
``kwargs``, ``retries`` and ``queue`` (the routing key it was delivered
with): a FAILURE record with them, whose ``queue`` is this queue, is one of
this queue's dead jobs.  A FAILURE record without them cannot be replayed
nor placed in a queue (counted, never guessed); a record that is not JSON
(``result_serializer = "pickle"``) is never decoded (counted as refused).

There is no index of failures: the records are found with ``SCAN MATCH
celery-task-meta-*`` (:data:`SCAN_COUNT` keys a step, every primary of a
cluster) and read with one pipelined round trip of ``GET`` s per step.  Each record's replay, when jobctl made one, is read from
jobctl's replay hash with one ``HMGET`` per step.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jobctl.cluster import scan_pages
from jobctl.layouts.celery.keys import RESULT_PREFIX
from jobctl.layouts.celery.message import iso_ms
from jobctl.layouts.common import text
from jobctl.model import Envelope, JobRecord, State

__all__ = ["RecordTally", "walk_failed", "failed_record", "failed_of_queue", "SCAN_COUNT", "opted_in",
           "NOT_OPTED_IN"]

#: Keys one SCAN step examines (COUNT) and records read by one MGET at most.
SCAN_COUNT = 1000
#: Said where the records are not read because the queue did not opt in.
NOT_OPTED_IN = ("failed result records not read: opt-in (replay_results = 1 in the queue's catalogue entry; "
                "needs Celery's result_extended = True)")
#: The fields ``result_extended`` adds to a record; without them a record cannot be replayed.
EXTENDED = ("name", "args", "kwargs", "queue")


def opted_in(layout) -> bool:
    """Whether ``layout``'s catalogue entry opted in to its result records (``replay_results = 1``)."""
    return bool(layout.queue.options.get("replay_results"))


@dataclass
class RecordTally:
    """What a walk of the result records saw: ``records`` examined; this
    queue's FAILURE records (``failed``) and how many of them jobctl already
    replayed (``replayed``); FAILURE records of any queue without
    ``result_extended`` data (``not_extended``); records not JSON, never
    decoded (``not_json``: their task ids in ``refused``); ``partial`` when
    a cap stopped the walk before the end of the keyspace."""

    records: int = 0
    failed: int = 0
    replayed: int = 0
    not_extended: int = 0
    not_json: int = 0
    refused: list[str] | None = None
    partial: bool = False

    def notes(self) -> list[str]:
        """One line per kind of record that cannot be replayed (none when all can)."""
        out = []
        if self.not_extended:
            out.append(f"{self.not_extended:,} failed result record(s) without result_extended data (no task name, "
                       "arguments or queue): replay is not available for them")
        if self.not_json:
            out.append(f"{self.not_json:,} result record(s) not JSON (pickle or another result_serializer): never "
                       "decoded, never replayed")
        return out


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _exc_text(result: Any) -> tuple[str | None, str | None]:
    """``(exception type, message)`` of a FAILURE record's ``result``."""
    if not isinstance(result, dict):
        return None, None if result is None else str(result)
    msg = result.get("exc_message")
    if isinstance(msg, list):
        msg = ", ".join(str(m) for m in msg)
    return result.get("exc_type"), None if msg is None else str(msg)


def failed_record(layout, key: str, raw: bytes, doc: dict[str, Any], replayed_as: str | None) -> JobRecord:
    """The dead :class:`JobRecord` of one FAILURE record (``doc`` its decoded
    ``raw``): id = task id, type = task name, error = exception type,
    message = exception message, attempts = retries, failed at =
    ``date_done``, payload = ``{args, kwargs}``; ``meta.result_record`` its
    key, ``meta.sha1`` the SHA1 of its bytes, ``meta.replayed_as`` the task
    id jobctl replayed it as (``None`` before)."""
    env = Envelope(job_id=str(doc.get("task_id") or key[len(RESULT_PREFIX):]), job_type=doc.get("name"))
    env.last_error_code, env.last_error_message = _exc_text(doc.get("result"))
    env.attempt = doc.get("retries") if isinstance(doc.get("retries"), int) else None
    env.last_attempt_ms = iso_ms(doc.get("date_done"))
    env.payload = {"args": doc.get("args"), "kwargs": doc.get("kwargs")}
    env.document = doc
    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=env.job_id, state=State.DEAD,
                    envelope=env, raw=raw, score=env.last_attempt_ms)
    rec.meta.update(source="Celery result record (status FAILURE)", result_record=key,
                    sha1=hashlib.sha1(raw).hexdigest(), replayed_as=replayed_as, worker=doc.get("worker"))
    if env.last_attempt_ms is not None:
        rec.meta["dead_since_ms"] = env.last_attempt_ms
    return rec


def failed_of_queue(layout, pairs: list[tuple[str, bytes]], tally: RecordTally) -> list[tuple[str, bytes, dict]]:
    """This queue's FAILURE records among ``(key, bytes)`` pairs, the others tallied."""
    out = []
    for key, raw in pairs:
        tally.records += 1
        doc = _decode(raw)
        if doc is None:
            tally.not_json += 1
            tally.refused = (tally.refused or []) + [key[len(RESULT_PREFIX):]]
        elif doc.get("status") != "FAILURE":
            continue
        elif any(f not in doc for f in EXTENDED):
            tally.not_extended += 1
        elif doc.get("queue") == layout.keys.name:
            out.append((key, raw, doc))
    return out


def walk_failed(layout, tally: RecordTally | None = None, *, cap: int | None = None) -> Iterator[list[JobRecord]]:
    """This queue's dead jobs: its FAILURE records that jobctl has not
    replayed, one window per SCAN step (in SCAN's order); ``tally`` counts
    what was seen (the replayed ones too).  ``cap``: stop after about that
    many keys examined (status' bound).  Yields nothing unless the queue
    opted in."""
    if not opted_in(layout):
        return
    tally = tally if tally is not None else RecordTally()
    client, seen = layout.client, 0
    for page in scan_pages(client, layout.keys.result_pattern, SCAN_COUNT):
        if cap is not None and seen >= cap:
            tally.partial = True
            return
        seen += SCAN_COUNT
        names = [text(n) for n in page]
        if names:
            yield _window(layout, names, tally)


def _window(layout, names: list[str], tally: RecordTally) -> list[JobRecord]:
    """The dead records among the result records ``names``: their bytes in
    one pipelined round trip of GETs (the keys may span Cluster slots), the
    replay hash in one ``HMGET``."""
    client = layout.client
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.get(name)
    values = pipe.execute(raise_on_error=False)
    pairs = [(k, v) for k, v in zip(names, values) if isinstance(v, bytes)]  # a wrong-typed key: not a record
    found = failed_of_queue(layout, pairs, tally)
    ids = [str(doc.get("task_id") or key[len(RESULT_PREFIX):]) for key, _, doc in found]
    replays = client.hmget(layout.keys.replayed, ids) if ids else []
    recs = [failed_record(layout, key, raw, doc, None if r is None else text(r))
            for (key, raw, doc), r in zip(found, replays)]
    tally.failed += len(recs)
    tally.replayed += sum(r.meta["replayed_as"] is not None for r in recs)
    return [r for r in recs if r.meta["replayed_as"] is None]
