"""Lean filtered plans of a reliable-list dead list: the filter evaluated on
``orjson.loads(raw)`` dicts, no full :class:`~jobctl.model.Envelope` or
:class:`~jobctl.model.JobRecord` per scanned job.

The walk is the one every dead-list read does (jobctl's hold first, then the
dead list, positions counted from the tail; ``LRANGE`` windows of
:data:`~.walks.WINDOW` ids and one ``MGET`` of their payloads, read ahead in
a background thread by :func:`~.walks.prefetched`).  Each envelope is
parsed once with orjson and checked for the problems
:func:`~jobctl.model.parse_envelope` reports (bad JSON or UTF-8, not an
object, a field of the wrong type, a required field missing): a clean one
is read through :class:`DocEnvelope`, a view of the dict; anything else goes
through ``parse_envelope`` itself, so malformed envelopes are set aside
exactly as :func:`~.planning.plan_from_walk` does.  Only matches become plan
columns (:class:`~jobctl.ops.plan.JobColumns`).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

import orjson

from jobctl.model import INT_FIELDS, STR_FIELDS, ENVELOPE_FIELDS, State, parse_envelope
from jobctl.ops.plan import JobColumns, Plan, payload_sha1
from jobctl.ops.spec import OpSpec
from jobctl.layouts.common import text
from jobctl.layouts.planning import breakdown_key
from jobctl.layouts.walks import WINDOW, prefetched, walk_list

__all__ = ["DocEnvelope", "doc_envelope", "plan_dead_filtered"]

_INTS = tuple(sorted(INT_FIELDS))
_STRS = tuple(sorted(STR_FIELDS))
_REQUIRED = ("jobId", "jobType", "createdAtEpochMs")
_INT_OK = frozenset({int, type(None)})
_STR_OK = frozenset({str, type(None)})


class DocEnvelope:
    """The :class:`~jobctl.model.Envelope` attributes the filter and the
    breakdown read (``job_type``, ``tenant_id``, ``attempt``, ``payload``,
    ...), taken from a parsed envelope dict that has no problems (one
    property per envelope field, ``None`` when absent)."""

    __slots__ = ("document",)
    problems: list[str] = []

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document


def _field(key: str) -> property:
    return property(lambda self: self.document.get(key))


for _key, _attr in ENVELOPE_FIELDS.items():
    setattr(DocEnvelope, _attr, _field(_key))


def doc_envelope(raw: bytes) -> DocEnvelope | None:
    """A :class:`DocEnvelope` of ``raw`` when ``parse_envelope(raw)`` would
    report no problem and convert no value; else ``None`` (the caller falls
    back to ``parse_envelope``)."""
    try:
        doc = orjson.loads(raw)  # rejects invalid UTF-8 too
    except orjson.JSONDecodeError:
        return None
    if type(doc) is not dict:
        return None
    get = doc.get
    if not (_INT_OK.issuperset(map(type, map(get, _INTS))) and _STR_OK.issuperset(map(type, map(get, _STRS)))):
        return None
    if None in map(get, _REQUIRED):
        return None
    return DocEnvelope(doc)


class _Lean:
    """What the filter's getters read of a :class:`~jobctl.model.JobRecord`."""

    __slots__ = ("job_id", "envelope", "position", "shard")
    state = State.DEAD
    score = None
    meta = None

    def __init__(self, job_id: str, envelope: Any, position: int, shard: str) -> None:
        self.job_id = job_id
        self.envelope = envelope
        self.position = position
        self.shard = shard


def _windows(client, keys) -> Iterator[tuple[int, list[str], list[bytes | None]]]:
    """``(tail position of the first, ids, payloads)`` windows: the hold,
    then the dead list (positions counted on from the hold's)."""
    base = 0
    for key in (keys.hold, keys.dead):
        length = 0
        for start, chunk in walk_list(client, key, from_right=True, batch=WINDOW):
            ids = [text(x) for x in chunk]
            yield base + start, ids, client.mget([keys.job(i) for i in ids])
            length = start + len(chunk)
        base += length


def plan_dead_filtered(layout, spec: OpSpec, now: int) -> Plan:
    """The plan of a filtered dead-list ``spec`` (no ``--ids``, no fence
    file) on the reliable-list ``layout``: the same plan
    :func:`~.planning.plan_from_walk` makes from full records (dangling and
    malformed ids set aside, the breakdown, ``walked``, ``--limit``), with
    the payload SHA1 kept only for ``--reset-attempts``.  On a Redis Cluster
    whose shards live on several primaries (and no ``--limit``), each
    primary's shards are read and filtered in a process of their own
    (:func:`~jobctl.ops.walk.parallel.plan_in_parallel`); the plan then lists
    jobs in the order they arrive."""
    from jobctl.ops.walk.parallel import plan_in_parallel

    plan = Plan(spec=spec, now_ms=now, redrive_record="hash", jobs=JobColumns())
    shards = list(enumerate(layout.shards))
    if spec.limit is None:
        parts = plan_in_parallel(layout.client, [(keys.dead, (n, keys)) for n, keys in shards],
                                 lambda client, mine, halted: _as_columns(_scan_shards(client, mine, spec, now,
                                                                                        halted), spec.reset_attempts))
        if parts is not None:
            for part in parts:
                _merge_columns(plan, *part)
            return plan
    for part in _scan_shards(layout.client, shards, spec, now):
        if _merge(plan, *part):
            break
    return plan


def _merge(plan: Plan, shard: int, start: int, count: int, set_aside: list[tuple[int, str, bool]],
           matched: list[tuple[str, int, str, tuple]]) -> bool:
    """One window's part of the plan (:func:`_scan_shards`) added to
    ``plan``; ``True`` once ``--limit`` is reached (``truncated`` set: the
    window counts up to the job that reached it)."""
    limit, end = plan.spec.limit, start + count
    add, breakdown = plan.jobs.add, plan.breakdown  # type: ignore[union-attr]
    for job_id, position, sha1, group in matched:
        if sha1:
            add(job_id, shard, position, bytes.fromhex(sha1))
        else:
            add(job_id, shard, position)
        breakdown[group] += 1
        plan.walked[shard] = position + 1
        if limit is not None and plan.planned >= limit:
            plan.truncated, end = True, position + 1
            break
    plan.scanned += end - start
    for position, job_id, dangling in set_aside:
        if position < end:
            (plan.dangling if dangling else plan.malformed).append(job_id)
    return plan.truncated


def _as_columns(parts: Iterator[tuple], sha: bool) -> Iterator[tuple]:
    """Each part of :func:`_scan_shards` with its matches as columns (ids
    end to end, their ends, positions, SHA1 digests (``sha``: a plan with
    ``--reset-attempts``, else ``None``), a Counter of breakdown keys): what
    a forked plan sends back, a few objects a window instead of a tuple a
    job to pickle and add one by one."""
    for shard, start, count, set_aside, matched in parts:
        ids = [job_id.encode("utf-8", "surrogateescape") for job_id, _, _, _ in matched]
        digests = b"".join(bytes.fromhex(sha1) for _, _, sha1, _ in matched) if sha else None
        yield shard, start, count, set_aside, (b"".join(ids), array("q", accumulate(map(len, ids))),
                                               array("q", [m[1] for m in matched]), digests,
                                               Counter(m[3] for m in matched))


def _merge_columns(plan: Plan, shard: int, start: int, count: int, set_aside: list[tuple[int, str, bool]],
                   columns: tuple) -> None:
    """:func:`_merge` of an :func:`_as_columns` part (no ``--limit``)."""
    ids, ends, positions, digests, groups = columns
    if positions:
        plan.jobs.add_many(ids, ends, shard, positions, digests)  # type: ignore[union-attr]
        plan.breakdown.update(groups)
        plan.walked[shard] = positions[-1] + 1
    plan.scanned += count
    for _, job_id, dangling in set_aside:
        (plan.dangling if dangling else plan.malformed).append(job_id)


def _scan_shards(client, shards: list[tuple[int, Any]], spec: OpSpec, now: int,
                 halted: Callable[[], bool] = lambda: False) -> Iterator[tuple]:
    """Per window of each ``(shard index, keys)``: ``(shard, tail position
    of its first id, ids read, [(position, id, dangling?)] of the ids set
    aside (dangling, or malformed), [(job id, position, payload SHA1 or "",
    breakdown key)] of the jobs that match)``; ends early once ``halted()``."""
    flt = spec.filter
    skip_bad = spec.skips_malformed or flt.needs_payload
    sha = spec.reset_attempts
    for shard, keys in shards:
        for start, ids, raws in prefetched(_windows(client, keys), depth=2):
            if halted():
                return
            set_aside: list[tuple[int, str, bool]] = []
            matched: list[tuple[str, int, str, tuple]] = []
            for n, (job_id, raw) in enumerate(zip(ids, raws), start):
                if raw is None:
                    set_aside.append((n, job_id, True))
                    continue
                env = doc_envelope(raw)
                if env is None:
                    full = parse_envelope(raw)
                    if full.problems and skip_bad:
                        set_aside.append((n, job_id, False))
                        continue
                    env = full
                rec = _Lean(job_id, env, n, keys.tag)
                if flt.matches(rec, now):  # type: ignore[arg-type]
                    matched.append((job_id, n, payload_sha1(raw) if sha else "", breakdown_key(rec)))  # type: ignore[arg-type]
            yield shard, start, len(ids), set_aside, matched
