"""Small helpers shared by the layouts of ``../shared/design/layouts.md``.

Only what two or more layouts need lives here: decoding Redis replies,
turning WRONGTYPE replies into status errors, reading a scheduled zset into
a status, merging what the shards of a queue return, building an :class:`~jobctl.model.Envelope` for layouts whose
envelope is not seed 000's, the seed 000 redrive record, and turning a Lua
script's ``{id, code, ...}`` reply into a
:class:`~jobctl.ops.result.BatchResult`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ..model import Envelope, JobRecord, parse_envelope
from ..ops.result import BatchResult

__all__ = ["text", "score_ms", "wrongtype_errors", "lenient_envelope", "batch_result",
           "suppression_record", "check_transition", "redrive_envelope", "read_scheduled", "fold_scheduled",
           "status_replies", "json_object", "suppression_info", "merge_shard_lists", "first_found", "SCHEDULED_READS",
           "COUNTED_READS", "fold_count", "DEFAULT_BATCH", "SCORE_INF_MS", "hash_record"]

#: Jobs per script call of an operation when ``--batch`` sets none.  A
#: layout whose calls cost more per job keeps its own (reliable-list: 128).
DEFAULT_BATCH = 256

#: The replies :func:`read_scheduled` queues, in order.
SCHEDULED_READS = ("scheduled", "overdue", "first_due", "next_due")
#: Status reads (``LLEN``, ``ZCARD``, ``ZCOUNT``, ...) whose reply is a count
#: summed into the :class:`~jobctl.model.QueueStatus` field of the same name.
COUNTED_READS = frozenset({"processing", "stuck", "dead", "suppressed", "paused", "migrating"})


def text(value: bytes | str) -> str:
    """A Redis reply as ``str``; undecodable bytes survive (surrogateescape)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


#: What a zset score of ``+inf`` (``-inf``) becomes in epoch ms: a due
#: time no clock reaches, exactly representable as a double and in JSON.
#: Renderers show it as "never" (:func:`jobctl.cli.render.fmt_ms`).
SCORE_INF_MS = 2 ** 53


def score_ms(value: Any) -> int | None:
    """A zset score (float or bytes) as integer epoch ms; ``None`` stays
    ``None``; ``+inf``/``-inf`` (``ZADD`` accepts them) become
    ``+-SCORE_INF_MS`` rather than raising ``OverflowError``."""
    if value is None:
        return None
    f = float(value)
    if f != f:  # NaN: Redis never stores one; be safe anyway
        return None
    if f in (float("inf"), float("-inf")):
        return SCORE_INF_MS if f > 0 else -SCORE_INF_MS
    return int(max(-SCORE_INF_MS, min(SCORE_INF_MS, f)))


def score_after(epoch_ms: int, delta_ms: int) -> int:
    """``epoch_ms + delta_ms`` (e.g. a claim time plus the visibility
    timeout), where ``+-SCORE_INF_MS`` (a ``+-inf`` score) stays what it is:
    a deadline no clock reaches, or one always past."""
    return epoch_ms if abs(epoch_ms) >= SCORE_INF_MS else epoch_ms + delta_ms


#: Redis types a payload key may have (``none``: missing, a dangling id).
PAYLOAD_TYPES = frozenset({b"string", b"none"})


def wrong_type_note(key: str, redis_type: bytes | str, expected: str = "string") -> str:
    """``"payload key K holds the wrong Redis type (a hash, not a string)"``."""
    return f"payload key {key} holds the wrong Redis type (a {text(redis_type)}, not a {expected})"


def wrong_typed_keys(client, names: list[str]) -> dict[str, bytes]:
    """``{key: its Redis type}`` for each of ``names`` that exists but is not
    a string (``MGET`` answers nil for such a key, as for a missing one).
    One pipelined ``TYPE`` per name: call it with the keys ``MGET`` found
    empty only."""
    if not names:
        return {}
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
    types = [t.encode() if isinstance(t, str) else t for t in pipe.execute()]
    return {n: t for n, t in zip(names, types) if t not in PAYLOAD_TYPES}


def mark_wrong_typed(client, records: list[JobRecord], key_of: Callable[[JobRecord], str]) -> None:
    """Each record of ``records`` whose ``raw`` is ``None`` and whose payload
    key (``key_of(record)``) holds another type than a string: its
    envelope's problem and ``meta["problem"]`` name the key, instead of a
    missing payload (:func:`wrong_type_note`)."""
    empty: dict[str, list[JobRecord]] = {}
    for r in records:
        if r.raw is None:
            empty.setdefault(key_of(r), []).append(r)
    for key, redis_type in wrong_typed_keys(client, list(empty)).items():
        for rec in empty[key]:
            rec.envelope.problems = [wrong_type_note(key, redis_type)]
            rec.meta["problem"] = rec.envelope.problems[0]
            rec.meta["payload_key_type"] = text(redis_type)


#: Dangling ids of a plan looked at again for a payload key of another type.
DANGLING_RECHECK = 1_000


def unreadable_not_dangling(layout, plan) -> None:
    """Move the ids of ``plan.dangling`` (their ``MGET`` answered nil) whose
    payload key exists with another type than a string to
    ``plan.malformed``: an unreadable payload, not a missing one.  For
    the layouts whose payload keys are strings in every shard
    (a :class:`~jobctl.layouts.base.ShardedLayout`: ``layout.shards``'
    ``job(id)``); the first :data:`DANGLING_RECHECK` ids, one pipelined
    ``TYPE`` per id and shard."""
    from .base import ShardedLayout

    if not isinstance(layout, ShardedLayout) or not layout.shards:
        return
    shards = layout.shards
    ids = plan.dangling[:max(1, DANGLING_RECHECK // len(shards))]
    wrong = wrong_typed_keys(layout.client, [keys.job(i) for i in ids for keys in shards])
    if not wrong:
        return
    moved = {i for i in ids if any(keys.job(i) in wrong for keys in shards)}
    plan.dangling[:] = [i for i in plan.dangling if i not in moved]
    plan.malformed.extend(i for i in ids if i in moved)


def wrongtype_errors(results: list[Any], keys: list[str]) -> list[str]:
    """``"key K holds the wrong Redis type"`` for each WRONGTYPE reply in a
    pipeline's ``results`` (``raise_on_error=False``); any other error reply
    is raised, carrying the key it read (``jobctl_key``: an ACL refusal is
    then named, :func:`jobctl.redis_errors.translate`)."""
    errors = []
    for res, key in zip(results, keys):
        if isinstance(res, Exception):
            if str(res).splitlines()[0].upper().startswith("WRONGTYPE"):
                errors.append(f"key {key} holds the wrong Redis type")
            else:
                res.jobctl_key = key or None
                raise res
    return errors


def status_replies(st, results: list[Any], keys: list[str]) -> list[Any]:
    """A status pipeline's ``results`` (``raise_on_error=False``; ``keys``
    names the key each command read) with every error reply as ``None``;
    each WRONGTYPE reply's error (:func:`wrongtype_errors`) goes once into
    ``st.errors``.  Any other error reply is raised."""
    for err in wrongtype_errors(results, keys):
        if err not in st.errors:  # one key is read by several commands
            st.errors.append(err)
    return [None if isinstance(r, Exception) else r for r in results]


def json_object(raw: bytes | str) -> dict | None:
    """The JSON object ``raw`` holds; ``None`` when it is not JSON (or not
    UTF-8) or not an object.  Never raises."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def merge_shard_lists(lists: list[list[JobRecord]], key: Callable[[JobRecord], Any],
                      limit: int) -> list[JobRecord]:
    """The first ``limit`` of the records the shards of a queue listed
    (``lists``, one per shard, each in serving order): sorted by ``key``
    when there is more than one shard."""
    records = [rec for recs in lists for rec in recs]
    if len(lists) > 1:
        records.sort(key=key)
    return records[:limit]


def hash_record(layout, job_id: str, state, env: Envelope, fields: dict[bytes, bytes], meta_fields,
                *, position: int | None = None, score: int | None = None) -> JobRecord:
    """A :class:`JobRecord` of a job kept as one hash (RQ, BullMQ): ``raw``
    the hash's ``data`` field as stored (``None``: no hash, a dangling id),
    ``meta`` each non-empty field of ``meta_fields`` as text, plus
    ``problem`` for a dangling id and ``dead_since_ms`` for a dead job whose
    last attempt (epoch ms) is known."""
    from ..model import State

    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=job_id, state=state,
                    envelope=env, raw=fields.get(b"data", b"") if fields else None, position=position, score=score)
    for f in meta_fields:
        v = fields.get(f.encode()) if fields else None
        if v not in (None, b""):
            rec.meta[f] = text(v)
    if not fields:
        rec.meta["problem"] = "dangling id: no job hash (expired or deleted)"
    elif state is State.DEAD and env.last_attempt_ms is not None:
        rec.meta["dead_since_ms"] = env.last_attempt_ms
    return rec


def first_found(found: list[JobRecord], job_id: str, queue_name: str) -> JobRecord:
    """The first shard's record of ``job_id`` among ``found`` (one per
    shard holding it); the others' shard tags go to its
    ``meta["also_in_shards"]``.  Raises :class:`~jobctl.errors.NotFound`
    when ``found`` is empty."""
    if not found:
        from ..errors import NotFound

        raise NotFound(f"job {job_id!r} not found in queue {queue_name}")
    if len(found) > 1:
        found[0].meta["also_in_shards"] = [r.shard for r in found[1:]]
    return found[0]


def _dict_envelope(doc: dict) -> Envelope:
    """:func:`~jobctl.model.parse_envelope` of ``doc`` serialised; strings
    JSON cannot carry (lone surrogates) go through :func:`~jobctl.escape.json_safe`
    and come back whole on the envelope's text attributes."""
    try:
        return parse_envelope(orjson.dumps(doc))
    except TypeError:  # a lone surrogate (undecodable bytes) or an integer past 64 bits
        from ..escape import json_safe
        from ..model import ENVELOPE_FIELDS

        env = parse_envelope(orjson.dumps(json_safe(doc)))
        for key, attr in ENVELOPE_FIELDS.items():
            if isinstance(doc.get(key), str) and isinstance(getattr(env, attr, None), str):
                setattr(env, attr, doc[key])
        return env


def lenient_envelope(raw: bytes | str | dict | None, *, required: tuple[str, ...] = ()) -> Envelope:
    """:func:`~jobctl.model.parse_envelope` for layouts whose documents are
    not seed 000 envelopes: the seed-000 required fields (jobId, jobType,
    createdAtEpochMs) are only required when named in ``required``.  A dict
    is serialised first; a text value holding bytes that are not UTF-8
    (a surrogate-escaped id: :func:`text`) is kept as it is on the
    envelope's attribute (the document shows it escaped).  Never raises."""
    if isinstance(raw, dict):
        env = _dict_envelope(raw)
    else:
        env = parse_envelope(raw)
    keep = {f"missing field {f}" for f in required}
    env.problems = [p for p in env.problems if not p.startswith("missing field ") or p in keep]
    return env


def batch_result(reply: list[Any]) -> BatchResult:
    """A Lua ``{id1, code1, id2, code2, ...}`` reply: ``moved`` counts as
    moved, every other code is a skip reason (``gone``, ``changed``...)."""
    out = BatchResult()
    for i in range(0, len(reply), 2):
        job_id, code = text(reply[i]), text(reply[i + 1])
        if code == "moved":
            out.moved.append(job_id)
        else:
            out.skipped.append(job_id)
            out.reasons[job_id] = code
    return out


def suppression_record(spec, now: int, **extra: Any) -> bytes:
    """JSON ``{by, at_ms, reason, operation, ...extra}`` kept with a
    suppressed job (jobctl's own suppressed-info hash)."""
    return orjson.dumps({"by": spec.operator, "at_ms": now, "reason": spec.reason,
                         "operation": spec.op_id, **extra})


def suppression_info(info: bytes) -> Any:
    """A kept suppression record (:func:`suppression_record`) as its JSON
    value; its text when it is not JSON."""
    try:
        return orjson.loads(info)
    except orjson.JSONDecodeError:
        return text(info)


def check_transition(layout_name: str, transitions: dict, spec) -> None:
    """Raise :class:`~jobctl.errors.UsageError` unless ``(operation, source)
    -> target`` is in ``transitions`` (``{(Operation, State): (targets...)}``)."""
    from ..errors import UsageError

    allowed = transitions.get((spec.operation, spec.source))
    if allowed is None or spec.target not in allowed:
        target = spec.target.value if spec.target else "nowhere"
        raise UsageError(f"{spec.operation.value} from {spec.source.value} to {target} is not possible "
                         f"in layout {layout_name}")


def redrive_envelope(raw: bytes, spec, now: int, due: int | None) -> bytes:
    """A seed 000 envelope with jobctl's redrive record (seed 000 section
    22): ``redrivenAtEpochMs`` = ``now``, ``redriveOperation`` = the
    operation id, ``redriveCount`` + 1, ``attempt`` 0 with
    ``--reset-attempts``, ``nextAttemptAtEpochMs`` = ``due`` (epoch ms)
    unless ``None``.  Raises ``orjson.JSONDecodeError`` for a payload that
    is not JSON."""
    doc = orjson.loads(raw)
    doc["redrivenAtEpochMs"] = now
    doc["redriveOperation"] = spec.op_id
    prev = doc.get("redriveCount")
    doc["redriveCount"] = (prev if isinstance(prev, int) and not isinstance(prev, bool) else 0) + 1
    if spec.reset_attempts:
        doc["attempt"] = 0
    if due is not None:
        doc["nextAttemptAtEpochMs"] = due
    return orjson.dumps(doc)


def read_scheduled(pipe, key: str, now: int) -> tuple[str, ...]:
    """Queue on ``pipe`` the reads of a scheduled zset ``key`` (score = due
    time, epoch ms) that a status needs: ``ZCARD``, ``ZCOUNT -inf now``,
    ``ZRANGE 0 0 WITHSCORES`` (the earliest due) and ``ZRANGE (now +inf
    BYSCORE LIMIT 0 1 WITHSCORES`` (the next due later).  Returns the
    replies' names in order (:data:`SCHEDULED_READS`), for
    :func:`fold_scheduled`."""
    pipe.zcard(key)
    pipe.zcount(key, "-inf", now)
    pipe.zrange(key, 0, 0, withscores=True)
    pipe.zrange(key, f"({now}", "+inf", byscore=True, offset=0, num=1, withscores=True)
    return SCHEDULED_READS


def fold_scheduled(st, what: str, reply: Any, now: int) -> None:
    """Add the reply named ``what`` (one of :data:`SCHEDULED_READS`) of
    :func:`read_scheduled` to ``st`` (a :class:`~jobctl.model.QueueStatus`),
    summed over shards: ``scheduled`` and ``scheduled_overdue`` add up,
    ``next_due_ms`` is the earliest due time after ``now`` and
    ``scheduled_overdue_max_age_ms`` how long ago the earliest overdue job
    came due (ms), over every shard folded in."""
    if what == "scheduled":
        st.scheduled += reply
    elif what == "overdue":
        st.scheduled_overdue += reply
    elif what == "first_due":
        if reply and reply[0][1] <= now:
            age = max(0, now - score_ms(reply[0][1]))
            old = st.scheduled_overdue_max_age_ms
            st.scheduled_overdue_max_age_ms = age if old is None else max(old, age)
    elif what == "next_due":
        if reply:
            due = score_ms(reply[0][1])
            st.next_due_ms = due if st.next_due_ms is None else min(st.next_due_ms, due)


def fold_count(st, what: str, reply: int) -> bool:
    """Add ``reply`` to ``st``'s field ``what`` when ``what`` is one of
    :data:`COUNTED_READS` (summed over shards); False for any other read."""
    if what not in COUNTED_READS:
        return False
    setattr(st, what, getattr(st, what) + reply)
    return True
