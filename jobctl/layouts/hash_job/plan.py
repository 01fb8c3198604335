"""Lean unfiltered plans of a hash-job failed list (seed 001): no
:class:`~jobctl.model.JobRecord` or :class:`~jobctl.model.Envelope` per
scanned job.  Without ``--reset-attempts`` the plan is a tail range
(:func:`plan_failed_tail`: the list's length and a sample, walked by
``hj_tail.lua``); with it, one fence per job (:func:`plan_failed_lean`).

The walk is the one every dead read does (jobctl's hold first, then the
failed list, positions counted from the tail: the window engine's
positions), one ``LRANGE`` and one pipelined ``HMGET`` of
:data:`~.hash_job.FENCE_FIELDS` + ``last_error`` per window of
:data:`~.walks.WINDOW` ids, packed by jobctl (at 200k, isolated: plan 1.65
-> 0.91 s against redis-py's pipeline, 2026-11-25), read ahead in a
background thread (:func:`~.walks.prefetched`).  Per id: the fence (the
SHA1 of the fence fields, as :func:`~.hash_job.fence_of`), the payload parsed once with orjson
for the breakdown's job type; an id without a payload (hash expired) is
dangling and a payload that is not JSON is malformed, set aside exactly as
:func:`~.planning.plan_from_walk` does for full records.  The plan keeps
:class:`~jobctl.ops.plan.JobColumns` (id, position and the fence's 20-byte
digest, ~65 bytes a job), spilled to an anonymous temporary file past
:data:`~jobctl.ops.spill.JOB_SPILL_AT` jobs (:mod:`jobctl.ops.spill`), so its
memory does not grow with the DLQ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import orjson

from jobctl.model import State
from jobctl.ops.catalog import GROUP_MESSAGE_CHARS
from jobctl.ops.plan import JobColumns, Plan, TailRange
from jobctl.ops.walk.wire import Wire, per_key_blob
from jobctl.ops.spec import OpSpec
from jobctl.layouts.common import text
from jobctl.layouts.hash_job.layout import is_wrongtype
from jobctl.layouts.walks import WINDOW, prefetched

if TYPE_CHECKING:
    from jobctl.layouts.hash_job.layout import HashJob

__all__ = ["lean_failed_plan", "plan_failed_lean", "tail_failed_plan", "plan_failed_tail", "HashJobTailRange",
           "TailPlan", "WRONG_TYPE", "TAIL_SAMPLE"]

#: The reply :func:`_windows` gives for a job key of the wrong type.
WRONG_TYPE = object()
#: Tail positions whose job hashes a tail plan reads: its breakdown, and
#: the dangling and malformed ids it sets aside.
TAIL_SAMPLE = 1000



def lean_failed_plan(spec: OpSpec) -> bool:
    """Whether ``spec`` plans through :func:`plan_failed_lean`: from dead
    (the failed list), no filter, no ``--ids``, no fence file."""
    return (spec.source is State.DEAD and spec.filter.is_match_all and not spec.ids and spec.fence is None
            and not spec.stuck_only)


def _windows(layout: "HashJob", names: tuple[str, ...],
             upto: int | None = None) -> Iterator[tuple[int, list[str], list[list]]]:
    """``(tail position of the first, ids, HMGET replies)`` windows.  On a
    client that is not a cluster client the HMGETs of a window are packed
    by the walk driver (one RESP blob: redis-py's pipeline encoder cost more than the
    server's work on a job), sent on one connection (the client's own, or
    one of its pool for the walk) and read with ``read_response`` (no
    per-reply callback).  A job key of the wrong type is that job's reply,
    :data:`WRONG_TYPE` (it holds only its own job); any other error reply
    raises ``ResponseError`` after the window's replies are read, as a
    pipeline does.  ``upto``: the first ``upto`` tail positions only (None: all)."""
    from jobctl.cluster import is_cluster

    k = layout.keys
    client = layout.client
    if is_cluster(client):
        for start, chunk in _dead_windows(layout, upto):
            ids = [text(x) for x in chunk]
            pipe = client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hmget(k.job(job_id), *names)
            yield start, ids, _per_job(pipe.execute(raise_on_error=False))
        return
    import redis

    prefix = k.job("").encode("utf-8", "surrogateescape")
    wire = Wire(client)
    single = None
    if not wire.own:  # one connection of the pool for the whole walk
        single = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
        wire = Wire(single)
    try:
        for start, chunk in _dead_windows(layout, upto):
            if not chunk:
                continue
            try:
                wire.send([per_key_blob("HMGET", prefix, chunk, names)])
                replies = wire.raw_replies(len(chunk))
            except BaseException:
                wire.disconnect()  # replies may be unread
                raise
            yield start, [text(x) for x in chunk], _per_job(replies)
    finally:
        if single is not None:
            single.close()


def _dead_windows(layout: "HashJob", upto: int | None) -> Iterator[tuple[int, list[bytes]]]:
    """``layout.dead_windows`` up to tail position ``upto`` (None: all)."""
    for start, chunk in layout.dead_windows(WINDOW if upto is None else min(WINDOW, max(1, upto))):
        if upto is not None and start >= upto:
            return
        yield start, chunk if upto is None else chunk[:upto - start]


def _per_job(replies: list) -> list:
    """A window's ``replies`` (error replies as exceptions, in place) with
    each WRONGTYPE error as :data:`WRONG_TYPE`; any other error is raised."""
    for n, reply in enumerate(replies):
        if is_wrongtype(reply):
            replies[n] = WRONG_TYPE
        elif isinstance(reply, Exception):
            raise reply
    return replies


def plan_failed_lean(layout: "HashJob", plan: Plan) -> Plan:
    """Fill ``plan`` (an unfiltered dead ``plan.spec``, see
    :func:`lean_failed_plan`) from the failed list and return it: the same
    plan :func:`~.planning.plan_from_walk` makes from full records (dangling
    and malformed ids set aside, the breakdown by job type and last error,
    ``walked``, ``--limit``); a job whose key is not a hash is planned (under
    :data:`~.hash_job.WRONGTYPE_BREAKDOWN`) so that the apply fails it alone."""
    plan.jobs = JobColumns()
    _scan(layout, plan, prefetched(_windows(layout, _names()), depth=2))
    return plan


def tail_failed_plan(spec: OpSpec) -> bool:
    """Whether ``spec`` plans through :func:`plan_failed_tail`: an unfiltered
    dead plan (:func:`lean_failed_plan`) without ``--reset-attempts``."""
    return lean_failed_plan(spec) and not spec.reset_attempts


class HashJobTailRange(TailRange):
    """The :class:`~jobctl.ops.plan.TailRange` of a hash-job plan; its
    ``excluded`` positions are the dangling ids and a redrive's malformed
    payloads the plan's sample saw."""

    __slots__ = ()


class TailPlan(Plan):
    """The :class:`~jobctl.ops.plan.Plan` of :func:`plan_failed_tail`, in its own words."""

    def describe(self) -> str:
        text_ = super().describe()
        if not isinstance(self.jobs, HashJobTailRange):
            return text_
        text_ = text_.split(f"; the {self.planned:,} oldest dead job(s) by position")[0]
        return (text_ + f"; the {self.planned:,} oldest dead job(s) by position, each moved only while its id is "
                f"the one read just before and its hash's status is failed (breakdown from a sample of "
                f"{self.breakdown_sampled:,}); ids without a payload"
                + (" and malformed payloads" if self.spec.skips_malformed else "") + " stay dead, not counted")


def plan_failed_tail(layout: "HashJob", plan: Plan) -> Plan:
    """Fill ``plan`` (see :func:`tail_failed_plan`) without reading every job
    hash: ``W`` = ``LLEN`` of the failed list plus jobctl's hold; the job
    hashes of the :data:`TAIL_SAMPLE` oldest positions give the breakdown
    (``plan.breakdown_sampled``) and the ids set aside there (dangling, a
    redrive's malformed: ``plan.dangling``, ``plan.malformed``), walked but
    not planned; ``--limit`` counts planned jobs (``plan.truncated``).  The
    apply (``hj_tail.lua``) fences each job as it pops it: its id at its
    position, its hash's status ``failed``; it sets aside dangling and
    malformed ids beyond the sample the same way (a rerun plans none)."""
    k, spec = layout.keys, plan.spec
    pipe = layout.client.pipeline(transaction=False)
    pipe.llen(k.failed)
    pipe.llen(k.hold)
    total = sum(pipe.execute())
    sample = Plan(spec=spec, now_ms=plan.now_ms, jobs=JobColumns())
    if total:
        _scan(layout, sample, _windows(layout, _names(), min(total, TAIL_SAMPLE)))
    aside = len(sample.dangling) + len(sample.malformed)
    w = total
    if sample.truncated:  # --limit reached within the sample
        w, plan.truncated = sample.walked[0], True
    elif spec.limit is not None and total - aside > spec.limit:
        w, plan.truncated = spec.limit + aside, True
    plan.breakdown, plan.breakdown_sampled = sample.breakdown, sample.scanned
    plan.dangling, plan.malformed = sample.dangling, sample.malformed
    ids = [sample.jobs.job_id(n) for n in range(min(10, len(sample.jobs)))]
    plan.jobs = HashJobTailRange({0: w} if w else {}, ids, aside)
    plan.walked = {0: w} if w else {}
    plan.scanned = w
    return plan


def _names() -> tuple[str, ...]:
    """The fields read per job: the fence fields, then payload and last_error."""
    from jobctl.layouts.hash_job.layout import FENCE_FIELDS

    return tuple(dict.fromkeys((*FENCE_FIELDS, "payload", "last_error")))


def _scan(layout: "HashJob", plan: Plan, windows) -> None:
    """Plan the jobs of ``windows`` (:func:`_windows`) into ``plan.jobs`` (a
    :class:`JobColumns`): dangling and malformed ids set aside, the
    breakdown, ``walked``, ``--limit`` (``plan.truncated``)."""
    from jobctl.layouts.hash_job.layout import FENCE_FIELDS, WRONGTYPE_BREAKDOWN

    spec = plan.spec
    jobs = plan.jobs
    names = _names()
    nf, pay, err_at = len(FENCE_FIELDS), names.index("payload"), names.index("last_error")
    type_field = layout.type_field
    skip_bad = spec.skips_malformed
    walked = 0
    sha1 = hashlib.sha1
    wrong_fence = sha1(b"\x1f" * (nf - 1)).digest()  # any fence: the apply's HMGET fails first
    for start, ids, replies in windows:
        for n, (job_id, vals) in enumerate(zip(ids, replies)):
            plan.scanned += 1
            if vals is WRONG_TYPE:  # planned: the apply fails it alone (wrongtype), the others move
                jobs.add(job_id, 0, start + n, wrong_fence)
                plan.breakdown[WRONGTYPE_BREAKDOWN] += 1
            else:
                raw = vals[pay]
                if raw is None:
                    plan.dangling.append(job_id)
                    continue
                try:
                    doc = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    if skip_bad:
                        plan.malformed.append(job_id)
                        continue
                    doc = None
                job_type = doc.get(type_field) if type(doc) is dict else None
                err = vals[err_at]
                err = text(err)[:GROUP_MESSAGE_CHARS] if err else None
                jobs.add(job_id, 0, start + n,
                         sha1(b"\x1f".join([v if v is not None else b"" for v in vals[:nf]])).digest())
                plan.breakdown[(job_type if isinstance(job_type, str) else "?", err or "-")] += 1
            walked = start + n + 1
            if spec.limit is not None and plan.planned >= spec.limit:
                plan.truncated = True
                plan.walked[0] = walked
                return
    if walked:
        plan.walked[0] = walked
