"""``jobctl replay QUEUE [--filter EXPR]`` on a Celery queue: each failed
task of its result records (:mod:`.results`) sent again as a new task,
once whatever the runs.  Opt-in: the queue's ``replay_results = 1``.

Plan (reads only): this queue's FAILURE records with ``result_extended``
data, minus those jobctl's replay hash already names (replayed, or sent
by a replay: a replay is never replayed, "is-replay"), filtered; each
planned record keeps its exact bytes (its fence: their SHA1).  A record
whose task name, args or kwargs have the wrong types is listed as malformed.

Apply: for each planned record the client builds a Celery protocol 2
message (:func:`task_message`: kombu's JSON envelope, the record's task
name, args and kwargs, JSON only) with a NEW task id, and one
``jobctl/lua/cel_replay.lua`` call per batch pushes it to the queue's list
while the record's bytes still hash to the plan's and jobctl's replay hash
does not name the task yet, and records ``original id -> new id`` and
``new id -> ^original id`` there in the same atomic step: a rerun or a
concurrent replay skips it ("already replayed"), so a task is never sent
twice, and the new task's own failure record is never replayed ("itself a
replay"), so a task that keeps failing is sent once, not once a run.

Why a new task id: Celery writes the replayed run's result under the new id,
so the failure record, the fence and the evidence, stays as it was; a task
id Celery's workers revoked stays revoked; and the new message says which
record it replays (header ``jobctl_replay_of``).  The new task starts with
``retries`` 0: the original spent its retries before failing.  Callbacks,
chords and groups of the original are not in the record and are not sent.
"""

from __future__ import annotations

import base64
import json
import reprlib
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from jobctl.errors import UsageError
from jobctl.layouts.celery.ops import TRANSITIONS
from jobctl.layouts.celery.results import NOT_OPTED_IN, RecordTally, opted_in, walk_failed
from jobctl.layouts.moves import call_move, move_result
from jobctl.layouts.planning import check_operation, plan_from_walk
from jobctl.ops.plan import Plan

__all__ = ["CeleryReplayPlan", "plan_replay", "apply_replay", "task_message",
           "REPLAY_BATCH"]

#: Characters of the ``argsrepr`` / ``kwargsrepr`` headers at most (Celery's ``task_argsrepr_maxsize``).
REPR_MAX = 1024
#: Records per script call (the layout's DEFAULT_BATCH): ~17 us of server time each with 1.3 KB records.
REPLAY_BATCH = 100
#: Bytes of records and messages one call hashes and copies at most (about 0.6 ms of server time).
CALL_BYTES = 128 * 1024


@dataclass
class CeleryReplayPlan(Plan):
    """A replay plan: ``records`` the exact bytes and ``record_keys`` the key
    of each planned record, by task id; ``tally`` what the walk saw."""

    records: dict[str, bytes] = field(default_factory=dict)
    record_keys: dict[str, str] = field(default_factory=dict)
    tally: RecordTally = field(default_factory=RecordTally)

    def describe(self) -> str:
        """The base plan's sentence, then how each failed task is sent and what is not replayed."""
        t = self.tally
        what = ("each failed task of Celery's result records sent to the queue again as a new task (new task id, "
                "retries 0), at most once whatever the runs")
        if t.replayed:
            what += f"; {t.replayed:,} already replayed (not planned)"
        return "; ".join([super().describe(), what, *t.notes()])


def plan_replay(layout, spec, now: int) -> Plan:
    """The plan of a replay at ``now`` (epoch ms).  Reads only.  Raises
    :class:`UsageError` (one line) when the queue did not opt in."""
    check_operation(layout.name, TRANSITIONS, spec)
    if not opted_in(layout):
        raise UsageError(f"replay on Celery queue {layout.queue_name}: {NOT_OPTED_IN}")
    if spec.replay_range:
        raise UsageError("--from/--to are for stream entries; a Celery replay selects with --filter")
    plan = CeleryReplayPlan(spec=spec, now_ms=now)

    def keep(rec, job) -> None:
        plan.records[job.job_id], plan.record_keys[job.job_id] = rec.raw, rec.meta["result_record"]

    plan_from_walk(plan, walk_failed(layout, plan.tally), lambda rec: rec.meta["sha1"], on_match=keep)
    plan.malformed += plan.tally.malformed
    return plan


def task_message(record: dict[str, Any], task_id: str, queue: str, replay_of: str) -> bytes:
    """kombu's JSON envelope of a Celery protocol 2 task message (what
    ``apply_async`` sends on the Redis transport) running ``record``'s
    ``name`` with its ``args`` and ``kwargs`` as task ``task_id`` on
    ``queue`` (priority 0, the default exchange).  JSON only: Python's
    ``json`` keeps 64-bit integers exact."""
    args, kwargs = list(record.get("args") or []), dict(record.get("kwargs") or {})
    body = json.dumps([args, kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}])
    headers = {"lang": "py", "task": record["name"], "id": task_id, "shadow": None, "eta": None, "expires": None,
               "group": None, "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id,
               "parent_id": None, "argsrepr": _repr(tuple(args)), "kwargsrepr": _repr(kwargs),
               "origin": f"jobctl@{socket.gethostname()}", "ignore_result": False, "replaced_task_nesting": 0,
               "stamped_headers": None, "stamps": {}, "jobctl_replay_of": replay_of}
    props = {"correlation_id": task_id, "reply_to": "", "delivery_mode": 2,
             "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0, "body_encoding": "base64",
             "delivery_tag": str(uuid.uuid4())}
    message = {"body": base64.b64encode(body.encode()).decode(), "content-encoding": "utf-8",
               "content-type": "application/json", "headers": headers, "properties": props}
    return json.dumps(message).encode()


def _short_repr() -> reprlib.Repr:
    short = reprlib.Repr()  # containers of up to 100 items, strings to REPR_MAX: the cut below does the rest
    short.maxtuple = short.maxlist = short.maxdict = short.maxset = 100
    short.maxstring = short.maxother = short.maxlong = REPR_MAX
    return short


_SHORT = _short_repr()


def _repr(value: Any) -> str:
    """``repr(value)`` in at most :data:`REPR_MAX` characters (a long one cut, ``...`` at its end)."""
    out = _SHORT.repr(value)
    return out if len(out) <= REPR_MAX else out[:REPR_MAX - 3] + "..."


def _calls(layout, plan: CeleryReplayPlan, batch: int):
    """``(KEYS, ARGV)`` of each call: at most ``batch`` records and about
    :data:`CALL_BYTES` of records and messages (the server hashes and copies them)."""
    k = layout.keys
    keys, args, size = [k.replayed, k.queue], [0], 0
    for job in plan.jobs:
        new_id, raw = str(uuid.uuid4()), plan.records[job.job_id]
        message = task_message(json.loads(raw), new_id, k.name, job.job_id)
        keys.append(plan.record_keys[job.job_id])
        args += [job.job_id, job.sha1, new_id, message]
        args[0] += 1
        size += len(raw) + len(message)
        if args[0] >= batch or size >= CALL_BYTES:
            yield keys, args
            keys, args, size = [k.replayed, k.queue], [0], 0
    if args[0]:
        yield keys, args


def apply_replay(layout, plan: CeleryReplayPlan, *, batch: int = REPLAY_BATCH):
    """Apply ``plan``: one ``cel_replay.lua`` call per ``batch`` records
    (at most 1000) or :data:`CALL_BYTES`; yields one
    :class:`~jobctl.ops.result.BatchResult` each (ids: the original task
    ids; skips ``replayed``, ``is-replay``, ``gone``, ``changed``, ``wrongtype``).  Raises
    :class:`~jobctl.errors.DataError` when the replay hash or the queue's
    list has the wrong type."""
    for keys, args in _calls(layout, plan, max(1, min(batch, 1000))):
        yield move_result(call_move(layout.client, "cel_replay", keys, args))
