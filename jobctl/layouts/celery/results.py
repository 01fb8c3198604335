"""Celery's failed result records, the dead state of a Celery queue when
its catalogue entry opts in (``replay_results = 1``).

Celery's Redis result backend keeps one STRING ``celery-task-meta-<id>``
per task (JSON with the default ``result_serializer``).  Only with Celery's
``result_extended = True`` does it hold the task's ``name``, ``args``,
``kwargs``, ``retries`` and ``queue`` (the routing key it was delivered
with): a FAILURE record with them, whose ``queue`` is this queue, is one of
this queue's dead jobs.  A FAILURE record without them cannot be replayed
nor placed in a queue (counted, never guessed); one of this queue whose
``name`` is not a string, ``args`` not a list or ``kwargs`` neither an
object nor null is malformed (listed, never replayed: a worker would drop
the message); a record that is not JSON (``result_serializer = "pickle"``)
is never decoded (counted).

jobctl's replay hash names each record it replayed (original task id -> new
task id) and each task it sent (new task id -> ``^`` + original task id): a
failed task that jobctl sent as a replay is counted apart, never a dead job
(it is never replayed again: a replay loop would never end).

There is no index of failures: the records are found with ``SCAN MATCH
celery-task-meta-*`` (:data:`SCAN_COUNT` keys a step, every primary of a
cluster; a key SCAN returns twice counts once) and read with one pipelined
round trip of ``GET`` s per step, and the replay hash with one ``HMGET``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from jobctl.cluster import scan_pages
from jobctl.layouts.celery.keys import RESULT_PREFIX
from jobctl.layouts.celery.message import iso_ms
from jobctl.layouts.common import text
from jobctl.model import Envelope, JobRecord, State

__all__ = ["RecordTally", "walk_failed", "failed_record", "failed_of_queue", "SCAN_COUNT", "opted_in",
           "NOT_OPTED_IN", "RESULT_SCAN_CAP", "REPLAY_MARK", "record_task_id"]

#: Keys one SCAN step examines (COUNT) and records read by one pipelined round trip at most.
SCAN_COUNT = 1000
#: Keys a walk of the records examines at most (about 100 SCAN steps): status, depth and the dead walks.
RESULT_SCAN_CAP = 100_000
#: The replay hash's value of a task jobctl sent as a replay: ``^`` + the original task id.
REPLAY_MARK = "^"
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
    queue's FAILURE records (``failed``), how many of them jobctl already
    replayed (``replayed``) and how many were jobctl's replays themselves
    (``is_replay``); FAILURE records of any queue without
    ``result_extended`` data (``not_extended``); this queue's FAILURE
    records whose fields have the wrong types (``malformed``: task ids);
    records not JSON, never decoded (``not_json``); ``partial`` when a cap
    stopped the walk before the end of the keyspace."""

    records: int = 0
    failed: int = 0
    replayed: int = 0
    is_replay: int = 0
    not_extended: int = 0
    not_json: int = 0
    malformed: list[str] = field(default_factory=list)
    partial: bool = False

    def notes(self) -> list[str]:
        """One line per kind of record that cannot be replayed (none when all can)."""
        out = []
        if self.is_replay:
            out.append(f"{self.is_replay:,} failed task(s) were sent by jobctl replay themselves: not dead jobs, "
                       "never replayed again (jobctl inspect shows each by task id)")
        if self.not_extended:
            out.append(f"{self.not_extended:,} failed result record(s) without result_extended data (no task name, "
                       "arguments or queue): replay is not available for them")
        if self.malformed:
            out.append(f"{len(self.malformed):,} failed result record(s) of this queue with a task name, args or "
                       "kwargs of the wrong type: never replayed")
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


def _well_typed(doc: dict[str, Any]) -> bool:
    """Whether a record's task fields are what a Celery message carries (a worker drops anything else)."""
    name, kwargs = doc.get("name"), doc.get("kwargs")
    return isinstance(name, str) and bool(name) and isinstance(doc.get("args"), list) and \
        (kwargs is None or isinstance(kwargs, dict))


def record_task_id(key: str, doc: dict[str, Any]) -> str:
    """The task id of the record at ``key`` (its ``task_id``, else the key's suffix)."""
    return str(doc.get("task_id") or key[len(RESULT_PREFIX):])


def _exc_text(result: Any) -> tuple[str | None, str | None]:
    """``(exception type, message)`` of a FAILURE record's ``result``."""
    if not isinstance(result, dict):
        return None, None if result is None else str(result)
    msg = result.get("exc_message")
    if isinstance(msg, list):
        msg = ", ".join(str(m) for m in msg)
    return result.get("exc_type"), None if msg is None else str(msg)


def failed_record(layout, key: str, raw: bytes, doc: dict[str, Any], mark: str | None) -> JobRecord:
    """The dead :class:`JobRecord` of one FAILURE record (``doc`` its decoded
    ``raw``; ``mark`` its value in jobctl's replay hash, ``None`` when
    absent): id = task id, type = task name, error = exception type,
    message = exception message, attempts = retries, failed at =
    ``date_done``, payload = ``{args, kwargs}``; ``meta.result_record`` its
    key, ``meta.sha1`` the SHA1 of its bytes, ``meta.replayed_as`` the task
    id jobctl replayed it as, ``meta.replay_of`` the task id it is jobctl's
    replay of (each ``None`` when not)."""
    env = Envelope(job_id=record_task_id(key, doc), job_type=doc.get("name"))
    env.last_error_code, env.last_error_message = _exc_text(doc.get("result"))
    env.attempt = doc.get("retries") if isinstance(doc.get("retries"), int) else None
    env.last_attempt_ms = iso_ms(doc.get("date_done"))
    env.payload = {"args": doc.get("args"), "kwargs": doc.get("kwargs")}
    env.document = doc
    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=env.job_id, state=State.DEAD,
                    envelope=env, raw=raw, score=env.last_attempt_ms)
    is_replay = mark is not None and mark.startswith(REPLAY_MARK)
    rec.meta.update(source="Celery result record (status FAILURE)", result_record=key,
                    sha1=hashlib.sha1(raw).hexdigest(), replayed_as=None if is_replay else mark,
                    replay_of=mark[len(REPLAY_MARK):] if is_replay else None, worker=doc.get("worker"))
    if env.last_attempt_ms is not None:
        rec.meta["dead_since_ms"] = env.last_attempt_ms
    return rec


def failed_of_queue(layout, pairs: list[tuple[str, bytes]], tally: RecordTally) -> list[tuple[str, bytes, dict]]:
    """This queue's well-typed FAILURE records among ``(key, bytes)`` pairs, the others tallied."""
    out = []
    for key, raw in pairs:
        tally.records += 1
        doc = _decode(raw)
        if doc is None:
            tally.not_json += 1
        elif doc.get("status") != "FAILURE":
            continue
        elif any(f not in doc for f in EXTENDED):
            tally.not_extended += 1
        elif doc.get("queue") != layout.keys.name:
            continue
        elif _well_typed(doc):
            out.append((key, raw, doc))
        else:
            tally.malformed.append(record_task_id(key, doc))
    return out


def walk_failed(layout, tally: RecordTally | None = None, *, cap: int | None = None,
                steps: int | None = None) -> Iterator[list[JobRecord]]:
    """This queue's dead jobs: its FAILURE records that jobctl has not
    replayed and that are no replays of jobctl, one window per SCAN step (in
    SCAN's order, each key once); ``tally`` counts what was seen.  ``cap``:
    stop after about that many keys examined (status, depth: :data:`RESULT_SCAN_CAP`);
    ``steps``: after that many SCAN steps (a sample).  Yields nothing unless
    the queue opted in.  Raises ``redis.ResponseError`` for any error reply
    but a wrong-typed record key (skipped: not a record)."""
    if not opted_in(layout):
        return
    tally = tally if tally is not None else RecordTally()
    examined, done, seen = 0, 0, set()
    for page in scan_pages(layout.client, layout.keys.result_pattern, SCAN_COUNT):
        if (cap is not None and examined >= cap) or (steps is not None and done >= steps):
            tally.partial = True
            return
        examined, done = examined + SCAN_COUNT, done + 1
        names = [n for n in (text(n) for n in page) if n not in seen]
        seen.update(names)
        if names:
            yield _window(layout, names, tally)


def _records(client, names: list[str]) -> list[tuple[str, bytes]]:
    """``(key, bytes)`` of the string keys among ``names``: one pipelined
    round trip of GETs (the keys may span Cluster slots); a key of another
    type is skipped, any other error reply raised."""
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.get(name)
    out = []
    for name, value in zip(names, pipe.execute(raise_on_error=False)):
        if isinstance(value, ResponseError):
            if not str(value).startswith("WRONGTYPE"):
                raise value
        elif value is not None:
            out.append((name, value))
    return out


def _window(layout, names: list[str], tally: RecordTally) -> list[JobRecord]:
    """The dead records among the result records ``names``, the replay hash read in one ``HMGET``."""
    client = layout.client
    found = failed_of_queue(layout, _records(client, names), tally)
    ids = [record_task_id(key, doc) for key, _, doc in found]
    marks = client.hmget(layout.keys.replayed, ids) if ids else []
    recs = [failed_record(layout, key, raw, doc, None if m is None else text(m))
            for (key, raw, doc), m in zip(found, marks)]
    tally.failed += len(recs)
    tally.replayed += sum(r.meta["replayed_as"] is not None for r in recs)
    tally.is_replay += sum(r.meta["replay_of"] is not None for r in recs)
    return [r for r in recs if r.meta["replayed_as"] is None and r.meta["replay_of"] is None]
