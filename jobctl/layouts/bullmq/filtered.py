"""The filtered plan of a BullMQ redrive of failed jobs, without a job
record per scanned job.

``failed`` is walked in raw ``ZRANGE`` windows (:func:`~.lean.raw_windows`);
each window's job hashes are read by ``jobctl/lua/bullmq_read.lua``:
``HMGET`` of the fields the fence needs plus those the filter names
(:data:`FILTER_FIELDS`; ``data`` only for a ``payload`` filter), several
bounded calls in one round trip, the next window read ahead while this one
is filtered.  The compiled filter is evaluated on a :class:`FailedJob`, a
view of those values with the attributes the filter's getters and the
breakdown read, valued as a :class:`~jobctl.model.JobRecord` of the same
hash would be (:meth:`~.job.BullJobs.envelope_of`).  A match keeps its id
and failed score as stored, and its fence: the SHA1 the move recomputes
(``jobctl/lua/prelude/bullmq_fence.lua``), computed here from the very
values the filter saw, so the move is fenced to what the plan saw.  Jobs
that fail the filter leave nothing behind.  Matches go to a
:class:`~.columns.FencedColumns` (moved by ``bullmq_redrive.lua``); a flow
child (its parent's keys go in the move's ``KEYS``) is planned whole at its
place, as ``bullmq_move.lua`` needs it.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from jobctl.layouts.bullmq.columns import FencedColumns
from jobctl.layouts.bullmq.job import int_field, json_value
from jobctl.layouts.planning import breakdown_key
from jobctl.layouts.walks import prefetched
from jobctl.model import State
from jobctl.ops.plan import Plan, PlannedJob

__all__ = ["BASE_FIELDS", "FILTER_FIELDS", "FailedJob", "read_fields", "plan_filtered"]

#: Hash fields read for every job: the fence's (finishedOn, failedReason,
#: parentKey, deid, in this order) and ``name`` (the breakdown's type).
BASE_FIELDS = ("finishedOn", "failedReason", "parentKey", "deid", "name")
#: Filter field -> the hash fields it reads besides :data:`BASE_FIELDS` (a
#: field BullMQ has no counterpart of reads nothing: it is missing, as on a record).
FILTER_FIELDS: dict[str, tuple[str, ...]] = {
    "id": (), "state": (), "overdue_for": (), "version": (), "tenant": (), "idempotency_key": (), "trace": (),
    "correlation": (), "type": (), "error": (), "message": (), "attempts": ("atm",),
    "max_attempts": ("opts",), "age": ("timestamp",), "created": ("timestamp",), "dead_for": ("processedOn",),
    "payload": ("data",)}
_EXTRA = ("atm", "opts", "timestamp", "processedOn", "data")


def read_fields(flt) -> tuple[str, ...] | None:
    """The hash fields to read for the compiled filter ``flt``: :data:`BASE_FIELDS`
    then those its fields need; ``None`` when it names a field not in :data:`FILTER_FIELDS`."""
    if not flt.fields <= FILTER_FIELDS.keys():
        return None
    extra = {f for name in flt.fields for f in FILTER_FIELDS[name]}
    return BASE_FIELDS + tuple(f for f in _EXTRA if f in extra)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class FailedJob:
    """One failed job as the filter and the breakdown see it: the record
    and its envelope in one object (``envelope`` is itself), a view of the
    job's values in a ``bullmq_read.lua`` reply (``flat`` from offset ``o``;
    ``raw_id`` the id as stored).  A subclass made by :func:`_job_class`
    names where each extra field is (``None``: not read, never asked for)."""

    __slots__ = ("raw_id", "flat", "o")
    state = State.DEAD
    score = meta = None
    problems: tuple = ()
    job_version = tenant_id = idempotency_key = trace_id = correlation_id = None
    ATM = OPTS = TIMESTAMP = PROCESSED = DATA = None

    @property
    def envelope(self) -> FailedJob:
        return self

    def _at(self, i: int | None) -> bytes | None:
        return None if i is None else self.flat[self.o + i]

    @property
    def job_id(self) -> str:
        return _text(self.raw_id)

    @property
    def job_type(self) -> str | None:
        name = self.flat[self.o + 4]
        return None if name is None else _text(name)

    @property
    def last_error_code(self) -> str | None:
        reason = self.flat[self.o + 1]
        return _text(reason) if reason else None

    last_error_message = last_error_code

    @property
    def attempt(self) -> int:
        return int_field(self._at(self.ATM)) or 0

    @property
    def max_attempts(self) -> int | None:
        opts = json_value(self._at(self.OPTS))
        return opts["attempts"] if isinstance(opts, dict) and isinstance(opts.get("attempts"), int) else None

    @property
    def created_ms(self) -> int | None:
        return int_field(self._at(self.TIMESTAMP))

    @property
    def last_attempt_ms(self) -> int | None:
        return int_field(self.flat[self.o]) or int_field(self._at(self.PROCESSED))

    @property
    def payload(self):
        return json_value(self._at(self.DATA))


def _job_class(fields: tuple[str, ...]) -> type[FailedJob]:
    """A :class:`FailedJob` subclass for replies of ``fields`` (:func:`read_fields`)."""
    ix = {f: n for n, f in enumerate(fields)}
    return type("FailedJob", (FailedJob,), {"__slots__": (), "ATM": ix.get("atm"), "OPTS": ix.get("opts"),
                                            "TIMESTAMP": ix.get("timestamp"), "PROCESSED": ix.get("processedOn"),
                                            "DATA": ix.get("data")})


def _windows(layout, fields: tuple[str, ...]):
    """``(first rank, ids, scores, values, child opts)`` per window of
    ``failed``: ids and scores as ``ZRANGE`` returned them, ``values`` the
    ``bullmq_read.lua`` reply of ``fields`` (per job its values, then 1 when
    its hash exists), ``child opts`` the ``opts`` of each flow child, by place."""
    from jobctl.layouts.bullmq.calls import read_calls
    from jobctl.layouts.bullmq.lean import READ_BATCH, raw_windows

    client, base, step, start = layout.client, layout.keys.job("").encode(), len(fields) + 1, 0
    for ids, scores in raw_windows(client, layout.keys.failed, client.zcard(layout.keys.failed)):
        keys = [base + i for i in ids]
        flat = read_calls(client, "bullmq_read", [keys[n:n + READ_BATCH] for n in range(0, len(keys), READ_BATCH)],
                          list(fields))
        children = [n for n, parent in enumerate(flat[2::step]) if parent]
        opts = read_calls(client, "bullmq_read", [[keys[n] for n in children]], ["opts"]) if children else []
        yield start, ids, scores, flat, dict(zip(children, opts[0::2]))
        start += len(ids)


#: Filter fields whose value is a function of a few low-cardinality hash
#: fields (name, failedReason, atm, opts) or constant: their filter result is memoised.
_MEMO_FIELDS = {"type": "name", "error": "failedReason", "message": "failedReason", "attempts": "atm",
                "max_attempts": "opts", "state": None, "overdue_for": None, "version": None, "tenant": None,
                "idempotency_key": None, "trace": None, "correlation": None}
#: Distinct memo keys kept at most (past it, every job is evaluated: the values do not repeat enough).
MEMO_CAP = 4096


def _memo_key(flt, fields: tuple[str, ...]):
    """``key(flat, o)``: the values a job's filter result depends on, when
    ``flt`` reads only :data:`_MEMO_FIELDS`; else ``None``."""
    if not flt.fields <= _MEMO_FIELDS.keys():
        return None
    ix = sorted({fields.index(_MEMO_FIELDS[f]) for f in flt.fields if _MEMO_FIELDS[f]})
    if len(ix) == 1:
        i = ix[0]
        return lambda flat, o: flat[o + i]
    return lambda flat, o: tuple(flat[o + i] for i in ix)


def _scan(plan: Plan, job: FailedJob, ids: list[bytes], flat: list, step: int, room: int | None,
          memo: dict | None, key) -> tuple[list, int]:
    """Filter one window (``job.flat`` is its reply): the places of its
    matches (at most ``room``, when given) and how many jobs were scanned;
    dangling ids are listed in ``plan``.  With ``key`` (:func:`_memo_key`),
    results are memoised in ``memo`` by it (at most :data:`MEMO_CAP` keys)."""
    matches, now = plan.spec.filter.matches, plan.now_ms
    hits: list[int] = []
    o = -step
    for n, raw in enumerate(ids):
        o += step
        if not flat[o + step - 1]:
            plan.dangling.append(_text(raw))  # no hash (or not a hash): the move would skip it
            continue
        if memo is not None:
            k = key(flat, o)
            hit = memo.get(k)
            if hit is None:
                job.raw_id, job.o = raw, o
                hit = matches(job, now)  # type: ignore[arg-type]
                if len(memo) < MEMO_CAP:
                    memo[k] = hit
        else:
            job.raw_id, job.o = raw, o
            hit = matches(job, now)  # type: ignore[arg-type]
        if hit:
            hits.append(n)
            if room is not None and len(hits) >= room:
                return hits, n + 1
    return hits, len(ids)


def _fence(fin: bytes | None, reason: bytes | None, parent: bytes | None, deid: bytes | None) -> bytes:
    """``jc_bull_fence`` of ``jobctl/lua/prelude/bullmq_fence.lua`` (40 hex digits)."""
    joined = b"%s\0%s\0%s\0%s" % (fin or b"", parent or b"", deid or b"", reason or b"")
    return hashlib.sha1(joined).hexdigest().encode("ascii")


def _count(plan: Plan, flat: list, offsets: list[int], types: dict) -> None:
    """Count the matches at ``offsets`` in ``plan.breakdown`` (``types``:
    (name, failedReason) as stored -> its breakdown key, filled as met)."""
    pairs = Counter(zip([flat[o + 4] for o in offsets], [flat[o + 1] for o in offsets]))
    for pair, count in pairs.items():
        key = types.get(pair)
        if key is None:
            view = FailedJob()
            view.flat, view.o = [None, pair[1], None, None, pair[0]], 0
            key = types[pair] = breakdown_key(view)  # type: ignore[arg-type]
        plan.breakdown[key] += count


def _child(window: tuple, n: int, step: int):
    """The flow child at place ``n`` of ``window`` as the move of a child needs it."""
    from jobctl.layouts.bullmq.ops import BullPlannedJob, plan_fields

    _, ids, scores, flat, child_opts = window
    doc = {name: _text(value) for name, value in zip(BASE_FIELDS, flat[n * step:n * step + 4]) if value is not None}
    if child_opts.get(n) is not None:
        doc["opts"] = _text(child_opts[n])
    planned = PlannedJob(_text(ids[n]), 0, None, None, scores[n].decode("ascii"))
    return BullPlannedJob(planned, plan_fields(doc))


def _plain(cols: FencedColumns, window: tuple, run: list[int], step: int) -> None:
    """Add the matches at places ``run`` of ``window`` (no flow child) with their fences."""
    _, ids, scores, flat, _ = window
    offsets = [n * step for n in run]
    cols.extend([ids[n] for n in run], [scores[n] for n in run],
                [_fence(flat[o], flat[o + 1], flat[o + 2], flat[o + 3]) for o in offsets])


def _keep(plan: Plan, cols: FencedColumns, window: tuple, hits: list[int], step: int, types: dict) -> None:
    """Add one window's matches (places ``hits``) to ``cols`` in order, a
    flow child whole at its place, and count them in ``plan.breakdown``."""
    start, ids, _, flat, children = window
    if not hits:
        return
    _count(plan, flat, [n * step for n in hits], types)
    plan.walked[0] = start + hits[-1] + 1
    if not children or children.keys().isdisjoint(hits):
        _plain(cols, window, hits, step)
        return
    run: list[int] = []
    for n in hits:
        if n in children:
            _plain(cols, window, run, step)
            run = []
            cols.add_child(ids[n], _child(window, n, step))
        else:
            run.append(n)
    _plain(cols, window, run, step)


def plan_filtered(layout, plan: Plan, fields: tuple[str, ...]) -> Plan:
    """Fill ``plan`` (a filtered redrive of failed jobs: no ids, no fence
    file; ``fields`` from :func:`read_fields`) and return it: the jobs
    :func:`~jobctl.layouts.planning.plan_from_walk` would plan from full
    records (dangling ids set aside, the breakdown, ``walked``, ``--limit``),
    kept column-wise."""
    cols = plan.jobs = FencedColumns()
    job = _job_class(fields)()
    limit, step, types = plan.spec.limit, len(fields) + 1, {}
    key = _memo_key(plan.spec.filter, fields)
    memo = None if key is None else {}
    for window in prefetched(_windows(layout, fields), depth=2):
        job.flat = window[3]
        room = None if limit is None else limit - len(cols)
        hits, scanned = _scan(plan, job, window[1], window[3], step, room, memo, key)
        plan.scanned += scanned
        _keep(plan, cols, window, hits, step, types)
        if limit is not None and len(cols) >= limit:
            plan.truncated = True
            break
    return plan
