"""The window engine: one bulk data path for list sources.

A :class:`ListSource` is one dead list of one shard (reliable-list and
stream-group: ids, tail at the right; json-list: JSON strings, tail at the
left; hash-job's failed list: ids, tail at the right, kind ``"hj"``).  Applying a
plan on it (:func:`drive`) is, per source:

1. take the lease (:mod:`.lease`, ``lease.lua``: ``<op id> <host> <pid>``,
   PX :data:`LEASE_TTL_MS`, renewed by every window call); another live
   operation holding it -> :class:`~jobctl.errors.Busy` (exit 11), nothing
   changed.  A lease left by a dead process of this host is taken over;
2. finish any hold a crashed or interrupted run left (``list_restore.lua``),
   so every job is back in the dead list in its order;
3. record the walk in the walk hash (op, total tail positions the plan
   covers, popped = 0);
4. window calls (``list_window.lua``), each popping up to ``batch`` tail
   positions: planned jobs whose fence holds move (one ``redis.pcall``-guarded
   step per job, target written first), the rest go to the hold list in
   order.  The calls carry their own bounds (``upto``) and the popped count
   lives server-side, so :data:`DEPTH` calls go in one pipelined round trip;
5. restore calls put the hold back at the tail, in the original order
   (also when the run stops early or a call fails); the lease is released.

An unfiltered plan (:class:`~jobctl.ops.plan.TailRange`) runs the same steps
in the script's tail mode (:mod:`.window_tail`): no per-job data from the
plan, each round trip's ids read by one ``LRANGE`` just before it.

Every read of the layout counts the hold as dead, so at every instant each
job is in exactly one state.  Stopping (Ctrl-C, ``stop()``) happens between
round trips: results of one round trip carry ``more=True`` except the last.

The fence is identity + position: a planned job matches an element with its
identity (an id; json-list: the SHA1 of the string) met at a
tail position within ``[p - SLACK, p]`` of the position ``p`` the plan saw
it at.  It is sound because workers only push at the dead list's other end
and no second jobctl operation can walk it (the lease); see docs/layouts.md.
Hash-job adds the SHA1 of the job hash's fence fields (the field list in
ARGV, :attr:`ListSource.fence_fields`), computed server-side: workers
rewrite that hash in place.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Busy, DataError, JobctlError
from ..ops.plan import JobColumns, Plan, PlannedJob, PredicateRange, TailRange
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .lease import LEASE_TTL_MS, acquire, lease_value, release
from .lost_replies import mark
from .pipeline import _bulk, _packed, drain, pipelined, read_replies  # noqa: F401 - _bulk, _packed: for the tests
from .redrive_record import EXPIRE_AFTER_MS


def _lost_connection() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


#: What a dropped connection raises while replies are read.
LOST_CONNECTION = _lost_connection()

#: The operations the window engine drives (from a dead list); every other
#: operation from dead (transform, migrate...) is applied by its layout.
WINDOW_OPERATIONS = frozenset({Operation.REDRIVE, Operation.SUPPRESS, Operation.PURGE})


def drives(spec: OpSpec) -> bool:
    """Whether the window engine drives ``spec`` (an operation in
    :data:`WINDOW_OPERATIONS` from a dead list)."""
    from ..model import State

    return spec.source is State.DEAD and spec.operation in WINDOW_OPERATIONS


__all__ = ["ListSource", "drive", "drives", "WINDOW_OPERATIONS", "finish_hold", "lease_value",
           "LEASE_TTL_MS", "SLACK", "DEPTH", "ROUND_TRIP_POSITIONS", "MAX_TAIL_DEPTH", "TAIL_AHEAD", "tail_depth", "WINDOW", "TAIL_WINDOW", "RESTORE_MAX"]

#: How many positions a planned job may have shifted towards the tail (jobs
#: below it removed by others) and still match.
SLACK = 64
#: Window calls per pipelined round trip of a per-job walk (:data:`WINDOW`
#: positions a call, ~0.3-0.9 ms): Redis runs one client's pipelined
#: commands back to back, so another client's command (a worker's BRPOPLPUSH,
#: a PING) waits behind a whole round trip; one call keeps that wait near
#: one call's time.  Measured at 100k with a pinned server (bench/
#: bulk_compare.py --pin): PING p99 3.0 ms at 8 calls a round trip, 1.4 at 2,
#: 1.1 at 1, at the same throughput within noise.
DEPTH = 1
#: Tail positions per pipelined round trip in tail mode and for a
#: :class:`~jobctl.ops.plan.PredicateRange` plan's windows (about 1-1.5 µs of
#: server time a position, so ~0.15-0.25 ms a round trip): the calls a round
#: trip carries are this over the call's width, at least one.  With one round
#: trip at a time (before :data:`TAIL_AHEAD`), measured at 100k, pinned: PING
#: p99 1.15 ms at 400 positions a round trip, 0.8 at 300; at 1M 0.9-1.07 ms
#: at 240.  Two in flight may queue two round trips in front of another
#: client, so they are half as wide: at 1M (isolated server CPU, a loaded
#: client CPU) PING p99 2.4 ms at 2 x 240 against 1.16 at 2 x 120 and 1.34
#: at 1 x 240, with the apply 1.6x faster than 1 x 240.  Narrower again
#: (2026-11-25, 1M redrive, three interleaved pairs, isolated): 2 x 60 gave
#: PING p99 0.44-0.50 ms against 0.72-0.78 at 2 x 120, but 365-402k jobs/s
#: against 448-481k, too close to BullMQ's retryJobs (245-302k) for issue 11.
ROUND_TRIP_POSITIONS = 120
#: At most this many calls a round trip whatever ``--batch``: a call costs
#: ~20 µs of its own, so 240 calls of one position would hold the server
#: ~5 ms.
MAX_TAIL_DEPTH = 8
#: Tail positions one window call of a per-job walk pops when ``--batch``
#: sets none: ~0.15-0.45 ms of server time per call (about 4-5 µs of server
#: CPU a moved job, ~1.5 µs a held one).  Two round trips are in flight
#: (:data:`TAIL_AHEAD`), so calls are half as wide as with one (128), as in
#: tail mode (:data:`ROUND_TRIP_POSITIONS`).
WINDOW = 64
#: Tail positions one window call of an unfiltered plan (tail mode) pops when
#: ``--batch`` sets none: ~0.25-0.4 ms of server time per call on an idle
#: server (about 1-1.5 µs a moved job on the bulk path: its share of one RPOP,
#: one EXISTS, one LPUSH and the redrive record's HMGET/HSET/PEXPIRE; purge:
#: UNLINK).
#: One call a round trip (:data:`ROUND_TRIP_POSITIONS`).
TAIL_WINDOW = 120
#: Round trips in flight in tail mode: the client packs the next one while
#: the server runs this one (each reads the ids of a later group); a stop
#: lands one round trip later.  See :data:`ROUND_TRIP_POSITIONS` for the
#: wait of other clients.
TAIL_AHEAD = 2
#: Elements one restore call moves back.
RESTORE_MAX = 2000


def by_job_id(job: PlannedJob) -> str:
    """The default identity a window call matches a planned job by: its id."""
    return job.job_id


@dataclass
class ListSource:
    """One dead list the window engine walks (a :class:`~jobctl.layouts.base.WindowSource`).

    ``kind`` ``"rl"`` (elements are ids, payload at ``payload_key(id)``:
    reliable-list, stream-group), ``"jl"`` (elements are the JSON
    strings; ``raw``/``attempts``/``errors`` hashes keyed by job id) or
    ``"hj"`` (hash-job failed list: ids, job hash at ``payload_key(id)``,
    fenced by the SHA1 of ``fence_fields``; modes ``ready``,
    ``suppressed``, ``purge``).
    ``mode`` is the window script's mode (``ready``: LMOVE to a list,
    ``stream``: XADD jobId <id>, ``scheduled``, ``suppressed``, ``purge``);
    ``target`` its target key; ``shard`` the index of the plan's shard it
    walks.
    """

    client: Any
    kind: str
    tag: str
    shard: int
    dead: str
    hold: str
    walk: str
    lease: str
    redriven: str
    info_hash: str
    target: str
    mode: str
    #: run when the walk begins: the upkeep of jobctl's redrive record
    #: (:func:`jobctl.ops.redrive_record.upkeep`); ``None`` for none
    record_upkeep: Callable[[], None] | None = None
    raw: str | None = None
    attempts: str | None = None
    errors: str | None = None
    payload_key: Callable[[str], str] | None = None
    #: added to now for a zset target's score (redrive to scheduled: the delay, ms)
    delay_ms: int = 0
    #: redrive with ``--reset-attempts`` (json-list: the attempts entry goes)
    reset_attempts: bool = False
    #: the identity the window script matches a planned job by
    ident: Callable[[PlannedJob], str] = by_job_id
    #: ``(jobs, now) -> {id: (new payload, SHA1 of the payload it replaces)}``
    #: for the jobs of one round trip (reliable-list ``--reset-attempts``)
    new_payloads: Callable[[list[PlannedJob], int], dict[str, tuple[bytes, str]]] | None = None
    #: ``now -> suppressed-info JSON`` (suppress)
    info: Callable[[int], bytes] | None = None
    #: kind ``"hj"`` (hash-job failed list): the job-hash fields whose SHA1 is
    #: the fence (:data:`jobctl.layouts.hash_job.layout.FENCE_FIELDS`), passed as ARGV
    fence_fields: tuple[str, ...] = ()
    #: tail positions per window call when ``--batch`` sets none (0: :data:`WINDOW`,
    #: tail mode :data:`TAIL_WINDOW`)
    window: int = 0
    #: server time of a position relative to a reliable-list one: a tail
    #: round trip carries :data:`ROUND_TRIP_POSITIONS` over it
    cost: int = 1

    def fixed_keys(self) -> list[str]:
        """KEYS[1..10] of ``list_window.lua``."""
        extra = [self.raw, self.attempts, self.errors] if self.kind == "jl" else [self.dead] * 3
        return [self.dead, self.hold, self.walk, self.lease, self.target, self.redriven, self.info_hash, *extra]


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def _call_error(exc: Exception, src: ListSource) -> JobctlError:
    """An error reply of one of the engine's scripts as a one-line error."""
    msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    if msg.startswith("LEASE") or msg.startswith("WALK"):
        return Busy(f"{msg}: another jobctl operation took over; nothing of this call moved")
    if msg.upper().startswith("WRONGTYPE"):
        return DataError(f"{msg}: nothing moved in that call; every job is in one state")
    if isinstance(exc, JobctlError):
        return exc
    import redis

    if isinstance(exc, redis.ResponseError):
        return DataError(f"{src.dead}: {msg}")
    raise exc


def finish_hold(client, kind: str, dead: str, hold: str, walk: str) -> int:
    """Put everything in the hold list ``hold`` back at the tail of ``dead``
    in order (bounded restore calls) and drop the walk hash; returns how
    many elements moved back.  Raises :class:`DataError` for a key of the
    wrong type."""
    restore = script(client, "list_restore")
    total = 0
    while True:
        try:
            moved, left = restore(keys=[dead, hold, walk], args=[kind, RESTORE_MAX])
        except Exception as exc:  # noqa: BLE001 - one-line error
            if str(exc).upper().startswith("WRONGTYPE"):
                raise DataError(str(exc).splitlines()[0]) from None
            raise
        total += int(moved)
        if int(left) == 0:
            return total


class _Jobs:
    """Read access to a plan's jobs by index without building a
    :class:`PlannedJob` per job when they are a :class:`JobColumns`."""

    def __init__(self, jobs) -> None:
        self.jobs = jobs
        self.columns = isinstance(jobs, JobColumns)

    def __len__(self) -> int:
        return len(self.jobs)

    def shard(self, n: int) -> int:
        return self.jobs.shard(n) if self.columns else self.jobs[n].shard

    def position(self, n: int) -> int:
        p = self.jobs.position(n) if self.columns else self.jobs[n].position
        return p or 0

    def job_id(self, n: int) -> str:
        return self.jobs.job_id(n) if self.columns else self.jobs[n].job_id

    def sha1(self, n: int) -> str:
        return self.jobs.sha1(n) if self.columns else self.jobs[n].sha1

    def job(self, n: int) -> PlannedJob:
        return self.jobs[n]


def _shard_orders(jobs: _Jobs) -> dict[int, Sequence[int]]:
    """Per shard, the indexes of its jobs sorted by position (a plan lists
    them in walk order already: sorting is then skipped).  One shard whose
    jobs are in position order (every single-server plan of a dead list) is
    ``range(len(jobs))``: no per-job memory."""
    n = len(jobs)
    if all(jobs.shard(i) == jobs.shard(0) for i in range(n)):
        if all(jobs.position(i) <= jobs.position(i + 1) for i in range(n - 1)):
            return {jobs.shard(0): range(n)} if n else {}
        return {jobs.shard(0): array("q", sorted(range(n), key=jobs.position))}
    orders: dict[int, Sequence[int]] = {}
    for i in range(n):
        orders.setdefault(jobs.shard(i), array("q")).append(i)  # type: ignore[attr-defined]
    for shard, order in orders.items():
        if any(jobs.position(order[i]) > jobs.position(order[i + 1]) for i in range(len(order) - 1)):
            orders[shard] = array("q", sorted(order, key=jobs.position))
    return orders


def _entries_for(jobs: _Jobs, order: Sequence[int], lo: int, hi: int, start: int) -> tuple[int, int]:
    """Indexes ``[a, b)`` of ``order`` (sorted by position, searched from
    ``start``) whose position is in ``[lo, hi)``."""
    a = start
    while a < len(order) and jobs.position(order[a]) < lo:
        a += 1
    b = a
    while b < len(order) and jobs.position(order[b]) < hi:
        b += 1
    return a, b


def drive(sources: list[ListSource], plan: Plan, *, batch: int | None = None, depth: int | None = None,
          now_fn: Callable[[], int] | None = None, stop: Callable[[], bool] | None = None,
          ahead: int | None = None) -> Iterator[BatchResult]:
    """Apply ``plan`` on ``sources`` (one per shard with planned jobs);
    yields one :class:`BatchResult` per window call.

    ``batch`` tail positions per call (default :data:`WINDOW`), ``depth``
    calls per round trip (default: :data:`DEPTH` for a per-job walk,
    :data:`ROUND_TRIP_POSITIONS` over ``batch`` in tail mode), ``ahead``
    round trips in flight in tail mode (default :data:`TAIL_AHEAD`; the walk
    then polls ``stop()`` before each one it sends behind another).  Memory: a few bytes per planned job beyond the
    plan's own (no object per job when the plan keeps
    :class:`~jobctl.ops.plan.JobColumns`).  Raises :class:`Busy` (lease
    held) or :class:`DataError` (a key of the wrong type: that call wrote
    nothing), after restoring the hold.
    """
    from ..clock import now_ms

    now_fn = now_fn or now_ms
    spec = plan.spec
    value = lease_value(spec.op_id)
    if isinstance(plan.jobs, TailRange):
        from .window_tail import drive_tail

        if isinstance(plan.jobs, PredicateRange):  # the plan's windows: its digests and match bitmaps
            batch = max(1, min(batch or plan.jobs.window, 1000))  # a call takes <= 1,000 (one RPOP)
            yield from drive_tail(sources, plan.jobs.walked, value, spec.queue, batch,
                                  tail_depth(depth, batch, max(s.cost for s in sources)), now_fn,
                                  windows=plan.jobs.windows, plan_window=plan.jobs.window, stop=stop,
                                  ahead=ahead or TAIL_AHEAD)
            return
        batch = max(1, batch or min([s.window for s in sources if s.window] or [TAIL_WINDOW]))
        yield from drive_tail(sources, plan.jobs.walked, value, spec.queue, batch,
                              tail_depth(depth, batch, max(s.cost for s in sources)), now_fn, stop=stop,
                              ahead=ahead or TAIL_AHEAD)
        return
    depth = max(1, depth or DEPTH)
    batch = max(1, batch or min([s.window for s in sources if s.window] or [WINDOW]))
    jobs = _Jobs(plan.jobs)
    orders = _shard_orders(jobs)
    met = bytearray(len(jobs))
    todo = [s for s in sources if s.shard in orders]
    taken: list[ListSource] = []
    try:
        for src in todo:
            acquire(src, value, spec.queue)
            taken.append(src)
        for src in todo:
            yield from renewing(_walk(src, value, jobs, orders[src.shard], met, plan.walked.get(src.shard, 0),
                                      batch, depth, now_fn, stop, ahead or TAIL_AHEAD), taken, value)
            done_with(src, taken, value)
    finally:
        give_back(taken, value)


def tail_depth(depth: int | None, batch: int, cost: int = 1) -> int:
    """Calls per round trip in tail mode: ``depth`` when given, else
    :data:`ROUND_TRIP_POSITIONS` over ``batch`` times the sources' relative
    ``cost``, at least 1 and at most :data:`MAX_TAIL_DEPTH`."""
    return max(1, depth if depth else min(ROUND_TRIP_POSITIONS // (batch * max(1, cost)), MAX_TAIL_DEPTH))


def record_code(br: BatchResult, job_id: str, code: str) -> None:
    """Count one job's code from a window call's reply in ``br``: ``moved``;
    failed for ``error:...`` (a write the server refused, undone) and
    ``wrongtype`` (its payload key); any other code is a skip reason."""
    if code == "moved":
        br.moved.append(job_id)
    elif code.startswith("error:") or code == "wrongtype":
        br.failed.append(job_id)
        br.reasons[job_id] = code
    else:
        br.skipped.append(job_id)
        br.reasons[job_id] = code


def give_back(taken: list[ListSource], value: str) -> None:
    """End of a walk, however it ends: put each source's hold back in order
    and release its lease, each as far as the server lets it (a failure is
    not raised: the next operation finishes the hold, and a lost lease
    expires or is taken over by a rerun in this process)."""
    for src in taken:
        try:
            finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
        except Exception:  # noqa: BLE001 - the next operation finishes the hold
            pass
        try:
            release(src, value)
        except Exception:  # noqa: BLE001 - the lease expires, or a rerun here takes it over
            pass


def renewing(results: Iterator[BatchResult], taken: list[ListSource], value: str) -> Iterator[BatchResult]:
    """``results`` (one shard's walk), renewing every lease ``taken`` holds
    about every third of :data:`LEASE_TTL_MS` on a connection of its own
    (the walk's has replies in flight): a shard that waits for its walk, or
    whose hold waits to be given back, never looks abandoned."""
    import time

    every, last, side = LEASE_TTL_MS / 3000, time.monotonic(), None
    for br in results:
        yield br
        if taken and time.monotonic() - last >= every:
            side = side or _side_client(taken[0].client)
            for src in taken:
                script(side, "lease")(keys=[src.lease, src.walk], args=["acquire", value, LEASE_TTL_MS, ""])
            last = time.monotonic()


def _side_client(client):
    """A client on a connection other than ``client``'s own (the same one
    for a client without a pinned connection)."""
    import redis

    if getattr(client, "connection", None) is None:
        return client
    return redis.Redis(connection_pool=client.connection_pool)


def done_with(src: ListSource, taken: list[ListSource], value: str) -> None:
    """A shard's walk ended: its hold goes back and its lease is released
    now, not when every shard is done."""
    if src in taken:
        taken.remove(src)
        give_back([src], value)


def begin_walk(src: ListSource, value: str, total: int):
    """Start one source's walk: finish a hold a crash left, take the walk
    (``lease.lua begin``) and load ``list_window.lua`` so the round trips
    send EVALSHA; returns the window script.  Raises :class:`Busy` when
    another operation's walk is still recorded, or its lease was lost."""
    import redis

    finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
    try:
        begun = script(src.client, "lease")(keys=[src.lease, src.walk],
                                            args=["begin", value, value.split(" ")[0], total, EXPIRE_AFTER_MS])
    except redis.exceptions.ResponseError as exc:  # LEASE: lost to another operation meanwhile (exit 11)
        raise _call_error(exc, src) from None
    if int(begun[0]) != 1:
        raise Busy(f"walk of operation {_text(begun[1])} still recorded in {src.walk}")
    if src.record_upkeep is not None:  # only once the walk is this operation's
        src.record_upkeep()
    window = script(src.client, "list_window")
    src.client.script_load(window.script)
    return window


class _PerJobTrip:
    """One round trip of a per-job walk: its calls packed (one RESP blob
    each), the order indexes each call sent, and the replies once read."""

    __slots__ = ("packed", "calls", "sent", "replies")

    def __init__(self) -> None:
        self.packed: list[bytes] = []
        self.calls: list[tuple[list, list]] = []  # on a client without a connection of its own
        self.sent: list[list[int]] = []
        self.replies: list[Any] | None = None


def _walk(src: ListSource, value: str, jobs: _Jobs, order: Sequence[int], met: bytearray, total: int, batch: int,
          depth: int, now_fn, stop: Callable[[], bool] | None = None, ahead: int = 1) -> Iterator[BatchResult]:
    """The window calls of one source, then one result for the planned jobs
    never met (``gone`` when the list ran out, else ``not at its planned
    position``).

    ``ahead`` round trips in flight on a client with its own connection (one
    otherwise): a call's jobs are those planned in ``[lo, hi + SLACK)``
    whatever the replies in flight say, so round trip k+1 is packed while
    the server runs k; a job two calls both carry is counted once (``met``),
    by the call that met it.  ``stop()`` is polled before a round trip is
    sent behind another; a result has ``more`` set while another round trip
    is in flight.  Each job's part of a call (its key and arguments) is
    packed once and reused by the calls that carry it again."""
    import redis

    spec_op = value.split(" ")[0]
    window = begin_walk(src, value, total)
    conn = getattr(src.client, "connection", None)
    # new payloads are read on the same connection while packing: nothing
    # may be in flight then
    ahead = max(1, ahead) if conn is not None and src.new_payloads is None else 1
    by_id = src.kind == "rl" or src.ident is by_job_id
    fixed = src.fixed_keys()
    head = _bulk("EVALSHA") + _bulk(window.sha)
    fixed_blob = b"".join(map(_bulk, fixed))
    fence_blob = b"".join(map(_bulk, src.fence_fields))
    # order index -> (position, key, arguments) of the jobs the calls of the
    # next round trip may carry: as RESP blobs on a connection of its own
    frags: dict[int, tuple[int, Any, Any]] = {}
    ended = False
    start = 0

    def frag(i: int, payloads: dict) -> tuple[int, Any, Any]:
        got = frags.get(i)
        if got is not None:
            return got
        n = order[i]
        job_id = jobs.job_id(n)
        ident = job_id if by_id else src.ident(jobs.job(n))
        pos = jobs.position(n)
        parts = [ident, pos, "" if ident == job_id else job_id]
        if payloads:
            parts += payloads.get(job_id, (b"", ""))
        elif src.fence_fields:
            parts.append(jobs.sha1(n))
        key = [src.payload_key(job_id)] if src.kind != "jl" else []
        got = (pos, b"".join(map(_bulk, key)), b"".join(map(_bulk, parts))) if conn is not None else (pos, key, parts)
        frags[i] = got
        return got

    def pack(g0: int) -> _PerJobTrip:
        """The calls of the round trip from tail position ``g0``: up to
        ``depth`` windows of ``batch`` positions."""
        nonlocal start
        g1 = min(g0 + batch * depth, total)
        now = now_fn()
        info = src.info(now) if src.info else b""
        a, b = _entries_for(jobs, order, g0, g1 + SLACK, start)
        payloads: dict[str, tuple[bytes, str]] = {}
        if src.new_payloads:
            payloads = src.new_payloads([jobs.job(order[i]) for i in range(a, b)], now)
            frags.clear()  # a job's new payload is this round trip's
        fmt = 5 if payloads else (4 if src.fence_fields else 3)  # arguments a job
        positions = [frag(i, payloads)[0] for i in range(a, b)]
        rt = _PerJobTrip()
        for lo in range(g0, g1, batch):
            hi = min(lo + batch, total)
            wa, wb = a + bisect_left(positions, lo), a + bisect_left(positions, hi + SLACK)
            idx = [i for i in range(wa, wb) if not met[order[i]]]
            rt.sent.append([order[i] for i in idx])
            head_args = [src.kind, src.mode, spec_op, value, LEASE_TTL_MS, hi, now, now + src.delay_ms,
                         "1" if src.reset_attempts else "0", info, SLACK, len(idx), fmt]
            if conn is None:
                keys, args = list(fixed), list(head_args)
                for i in idx:
                    keys += frags[i][1]
                    args += frags[i][2]
                rt.calls.append((keys, args + list(src.fence_fields)))
                continue
            nkeys = len(fixed) + (len(idx) if src.kind != "jl" else 0)
            nargs = len(head_args) + fmt * len(idx) + len(src.fence_fields)
            rt.packed.append(b"".join([b"*%d\r\n" % (3 + nkeys + nargs), head, _bulk(nkeys), fixed_blob,
                                       *[frags[i][1] for i in idx], *map(_bulk, head_args),
                                       *[frags[i][2] for i in idx], fence_blob]))
        new_start = a + bisect_left(positions, g1)
        for i in range(start, new_start):
            frags.pop(i, None)
        start = new_start
        return rt

    def recv(rt: _PerJobTrip) -> None:
        rt.replies = read_replies(src.client, conn, len(rt.packed))

    def run(rt: _PerJobTrip, which: list[int]) -> list[Any]:
        """Run the calls ``which`` of ``rt`` now, in order (after a NOSCRIPT)."""
        if conn is None:
            return pipelined(src.client, window, [rt.calls[i] for i in which])
        src.client.script_load(window.script)
        again = _PerJobTrip()
        again.packed = [rt.packed[i] for i in which]
        conn.send_packed_command([b"".join(again.packed)], check_health=False)
        recv(again)
        return again.replies  # type: ignore[return-value]

    failed: list[Exception] = []  # the first error reply of a call

    def results(rt: _PerJobTrip) -> Iterator[BatchResult]:
        """One result per call of ``rt`` that ran; an error reply goes to
        ``failed``."""
        nonlocal ended
        for k, (reply, idx) in enumerate(zip(rt.replies, rt.sent)):  # type: ignore[arg-type]
            if isinstance(reply, Exception):
                failed.append(reply)
                continue
            # after a refused call every result says more: the caller pulls
            # on to the error instead of stopping at the last one
            br = BatchResult(more=k < len(rt.replies) - 1 or bool(inflight) or bool(failed))  # type: ignore[arg-type]
            if int(reply[2]):
                ended = True
            for m in range(5, len(reply), 2):
                n = idx[int(reply[m]) - 1]
                if met[n]:
                    continue
                met[n] = 1
                record_code(br, jobs.job_id(n), _text(reply[m + 1]))
            yield br

    inflight: deque[_PerJobTrip] = deque()
    starts = iter(range(0, total, batch * depth))
    current: _PerJobTrip | None = None  # the round trip whose replies are read
    try:
        while True:
            while not ended and len(inflight) < ahead:
                if inflight and stop is not None and stop():
                    ahead = 1  # finish what is in flight; the caller polls stop() at its last result
                    break
                g0 = next(starts, None)
                if g0 is None:
                    break
                rt = pack(g0)
                if conn is not None:
                    conn.send_packed_command([b"".join(rt.packed)], check_health=False)
                else:  # no connection of its own (a cluster client): one round trip at a time
                    rt.replies = pipelined(src.client, window, rt.calls)
                inflight.append(rt)
            if not inflight:
                break
            rt = current = inflight.popleft()
            if rt.replies is None:
                recv(rt)
            for _ in range(3):
                if not any(isinstance(r, redis.exceptions.NoScriptError) for r in rt.replies):  # type: ignore[union-attr]
                    break
                # the script cache was flushed: these calls and those after
                # them (in flight too, unless another client loaded it) did
                # not run; run the refused ones again, in order
                for other in inflight:
                    if other.replies is None:
                        recv(other)
                for x in (rt, *inflight):
                    refused = [i for i, r in enumerate(x.replies) if isinstance(r, redis.exceptions.NoScriptError)]
                    if refused:
                        for i, r in zip(refused, run(x, refused)):
                            x.replies[i] = r  # type: ignore[index]
            yield from results(rt)
            if failed:
                # a call refused (a key of the wrong type: it wrote nothing):
                # count what the round trips in flight did, then stop
                while inflight:
                    rt = inflight.popleft()
                    if rt.replies is None:
                        recv(rt)
                    yield from results(rt)
                raise _call_error(failed[0], src)
    except LOST_CONNECTION as exc:  # calls in flight may have run: their jobs are re-read (lost_replies)
        unread = [x for x in (current, *inflight) if x is not None and x.replies is None]
        mark(exc, src, [jobs.job_id(n) for x in unread for idx in x.sent for n in idx if not met[n]])
        raise
    finally:
        drain(inflight, recv, conn)  # stopped early: the connection clean for the restore
    unmet = BatchResult()
    for n in order:
        if not met[n]:
            job_id = jobs.job_id(n)
            unmet.skipped.append(job_id)
            unmet.reasons[job_id] = "gone" if ended else "not at its planned position"
    if unmet.skipped:
        yield unmet

