"""The per-job walk of one source (:class:`PerJobWalk`): the apply of a
plan that lists its jobs (:class:`~jobctl.ops.plan.JobColumns` or planned
jobs), each call carrying the jobs planned in its window with their
positions, identities and fences."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any

from ..lease import LEASE_TTL_MS
from ..lost_replies import mark
from ..plan import JobColumns, PlannedJob
from ..result import BatchResult
from .flight import Flight, Trip
from .lifecycle import begin_walk
from .source import LOST_CONNECTION, SLACK, ListSource, by_job_id, call_error, record_code
from .wire import Wire, bulk, job_blob, text

__all__ = ["Jobs", "shard_orders", "PerJobWalk"]


class Jobs:
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

    def shard_position_chunks(self) -> Iterator[tuple[Sequence[int], Sequence[int]]]:
        """Every job's shard and position (0 for none), in plan order, a
        chunk at a time (:meth:`JobColumns.shard_position_chunks`)."""
        if self.columns:
            yield from self.jobs.shard_position_chunks()
        else:
            yield [j.shard for j in self.jobs], [j.position or 0 for j in self.jobs]


def shard_orders(jobs: Jobs) -> dict[int, Sequence[int]]:
    """Per shard, the indexes of its jobs sorted by position (a plan lists
    them in walk order already: sorting is then skipped).  One shard whose
    jobs are in position order (every single-server plan of a dead list) is
    ``range(len(jobs))``: no per-job memory.  The plan's columns are read a
    chunk at a time."""
    n = len(jobs)
    if not n:
        return {}
    if _one_shard_in_order(jobs):
        return {jobs.shard(0): range(n)}
    orders: dict[int, array] = {}
    last: dict[int, int] = {}
    unsorted: set[int] = set()
    i = 0
    for shards, positions in jobs.shard_position_chunks():
        for shard, position in zip(shards, positions):
            order = orders.get(shard)
            if order is None:
                order = orders[shard] = array("q")
            elif position < last[shard]:
                unsorted.add(shard)
            last[shard] = position
            order.append(i)
            i += 1
    for shard in unsorted:
        orders[shard] = array("q", sorted(orders[shard], key=jobs.position))
    return orders  # type: ignore[return-value]


def _one_shard_in_order(jobs: Jobs) -> bool:
    """Whether every job is on one shard, listed in position order."""
    first = prev = None
    for shards, positions in jobs.shard_position_chunks():
        if not len(shards):
            continue
        first = shards[0] if first is None else first
        if shards.count(first) != len(shards) or (prev is not None and positions[0] < prev):
            return False
        if not all(a <= b for a, b in zip(positions, islice(positions, 1, None))):
            return False
        prev = positions[-1]
    return True


def _entries_for(jobs: Jobs, order: Sequence[int], lo: int, hi: int, start: int) -> tuple[int, int]:
    """Indexes ``[a, b)`` of ``order`` (sorted by position, searched from
    ``start``) whose position is in ``[lo, hi)``."""
    a = start
    while a < len(order) and jobs.position(order[a]) < lo:
        a += 1
    b = a
    while b < len(order) and jobs.position(order[b]) < hi:
        b += 1
    return a, b


class _PerJobTrip(Trip):
    """A per-job round trip: also the order indexes each call sent."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[int]] = []


class PerJobWalk:
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

    def __init__(self, src: ListSource, value: str, jobs: Jobs, order: Sequence[int], met: bytearray, total: int,
                 batch: int, depth: int, now_fn, stop: Callable[[], bool] | None = None, ahead: int = 1) -> None:
        self.src, self.value, self.jobs, self.order, self.met = src, value, jobs, order, met
        self.total, self.batch, self.depth, self.now_fn = total, batch, depth, now_fn
        self.stop, self.ahead = stop, ahead
        self.spec_op = value.split(" ")[0]
        self.by_id = src.kind == "rl" or src.ident is by_job_id
        self.fixed = src.fixed_keys()
        self.wire = Wire(src.client)
        # order index -> (position, key, arguments) of the jobs the calls of the
        # next round trip may carry: as RESP blobs on a connection of its own
        self.frags: dict[int, tuple[int, Any, Any]] = {}
        # the common case, packed in one format a job (:meth:`_blob_frag`)
        self.blobs = self.wire.own and self.by_id and src.kind != "jl" and self.jobs.columns
        self.ended = False
        self.start = 0
        self.failed: list[Exception] = []  # the first error reply of a call

    def __iter__(self) -> Iterator[BatchResult]:
        src = self.src
        window = begin_walk(src, self.value, self.total)
        self.head = bulk("EVALSHA") + bulk(window.sha)
        self.fixed_blob = b"".join(map(bulk, self.fixed))
        self.fence_blob = b"".join(map(bulk, src.fence_fields))
        # new payloads are read on the same connection while packing: nothing
        # may be in flight then
        ahead = self.ahead if src.new_payloads is None else 1
        self.flight = flight = Flight(self.wire, window, ahead, self.stop)
        try:
            yield from self._trips(flight)
        except LOST_CONNECTION as exc:  # calls in flight may have run: their jobs are re-read (lost_replies)
            met, jobs = self.met, self.jobs
            mark(exc, src, [jobs.job_id(n) for x in flight.unread() for idx in x.sent for n in idx if not met[n]])
            raise
        finally:
            flight.drain()  # stopped early: the connection clean for the restore
        if not (self.stop and self.stop()):  # halted: the jobs not met are not reached, not gone
            yield from self._unmet()

    def _trips(self, flight: Flight) -> Iterator[BatchResult]:
        starts = iter(range(0, self.total, self.batch * self.depth))
        while True:
            while not self.ended and flight.room():
                g0 = next(starts, None)
                if g0 is None:
                    break
                flight.send(self.pack(g0))
            rt = flight.next()
            if rt is None:
                return
            yield from self.results(rt)
            if self.failed:
                # a call refused (a key of the wrong type: it wrote nothing):
                # count what the round trips in flight did, then stop
                while (rt := flight.next()) is not None:
                    yield from self.results(rt)
                raise call_error(self.failed[0], self.src)

    def frag(self, i: int, payloads: dict) -> tuple[int, Any, Any]:
        """Job ``order[i]``'s position, payload key and arguments (RESP on a
        connection of its own), packed once."""
        got = self.frags.get(i)
        if got is not None:
            return got
        if self.blobs and not payloads:
            got = self.frags[i] = self._blob_frag(self.order[i])
            return got
        src, jobs = self.src, self.jobs
        n = self.order[i]
        job_id = jobs.job_id(n)
        ident = job_id if self.by_id else src.ident(jobs.job(n))
        pos = jobs.position(n)
        parts = [ident, pos, "" if ident == job_id else job_id]
        if payloads:
            parts += payloads.get(job_id, (b"", ""))
        elif src.fence_fields:
            parts.append(jobs.sha1(n))
        key = [src.payload_key(job_id)] if src.kind != "jl" else []
        got = (pos, b"".join(map(bulk, key)), b"".join(map(bulk, parts))) if self.wire.own else (pos, key, parts)
        self.frags[i] = got
        return got

    def _blob_frag(self, n: int) -> tuple[int, bytes, bytes]:
        """:meth:`frag` of plan job ``n`` whose id is its identity, on a
        connection of its own, with no new payload: its parts packed in one
        format each (:func:`~.wire.job_blob`; about a third of the client's
        time a job went to packing them part by part)."""
        columns = self.jobs.jobs
        job_id = columns.job_id(n)
        pos = columns.position(n) or 0
        sha = columns.sha1(n).encode("utf-8", "surrogateescape") if self.src.fence_fields else None
        key, args = job_blob(self.src.payload_key(job_id).encode("utf-8", "surrogateescape"),
                             job_id.encode("utf-8", "surrogateescape"), pos, sha)
        return pos, key, args

    def pack(self, g0: int) -> _PerJobTrip:
        """The calls of the round trip from tail position ``g0``: up to
        ``depth`` windows of ``batch`` positions."""
        src, jobs, order, frags, batch, total = self.src, self.jobs, self.order, self.frags, self.batch, self.total
        g1 = min(g0 + batch * self.depth, total)
        now = self.now_fn()
        info = src.info(now) if src.info else b""
        a, b = _entries_for(jobs, order, g0, g1 + SLACK, self.start)
        payloads: dict[str, tuple[bytes, str]] = {}
        if src.new_payloads:
            payloads = src.new_payloads([jobs.job(order[i]) for i in range(a, b)], now, src.client)
            frags.clear()  # a job's new payload is this round trip's
        fmt = 5 if payloads else (4 if src.fence_fields else 3)  # arguments a job
        positions = [self.frag(i, payloads)[0] for i in range(a, b)]
        rt = _PerJobTrip()
        for lo in range(g0, g1, batch):
            hi = min(lo + batch, total)
            wa, wb = a + bisect_left(positions, lo), a + bisect_left(positions, hi + SLACK)
            idx = [i for i in range(wa, wb) if not self.met[order[i]]]
            rt.sent.append([order[i] for i in idx])
            head_args = [src.kind, src.mode, self.spec_op, self.value, LEASE_TTL_MS, hi, now, now + src.delay_ms,
                         "1" if src.reset_attempts else "0", info, SLACK, len(idx), fmt]
            self._add_call(rt, idx, head_args, fmt)
        new_start = a + bisect_left(positions, g1)
        for i in range(self.start, new_start):
            frags.pop(i, None)
        self.start = new_start
        return rt

    def _add_call(self, rt: _PerJobTrip, idx: list[int], head_args: list, fmt: int) -> None:
        """Add the call carrying the jobs ``idx`` (order indexes) to ``rt``."""
        src, frags = self.src, self.frags
        if not self.wire.own:
            keys, args = list(self.fixed), list(head_args)
            for i in idx:
                keys += frags[i][1]
                args += frags[i][2]
            rt.calls.append((keys, args + list(src.fence_fields)))
            return
        nkeys = len(self.fixed) + (len(idx) if src.kind != "jl" else 0)
        nargs = len(head_args) + fmt * len(idx) + len(src.fence_fields)
        rt.packed.append(b"".join([b"*%d\r\n" % (3 + nkeys + nargs), self.head, bulk(nkeys), self.fixed_blob,
                                   *[frags[i][1] for i in idx], *map(bulk, head_args),
                                   *[frags[i][2] for i in idx], self.fence_blob]))

    def results(self, rt: _PerJobTrip) -> Iterator[BatchResult]:
        """One result per call of ``rt`` that ran; an error reply goes to
        ``failed``."""
        met, jobs = self.met, self.jobs
        for k, (reply, idx) in enumerate(zip(rt.replies, rt.sent)):  # type: ignore[arg-type]
            if isinstance(reply, Exception):
                self.failed.append(reply)
                continue
            # after a refused call every result says more: the caller pulls
            # on to the error instead of stopping at the last one
            br = BatchResult(more=k < len(rt.replies) - 1 or bool(self.flight.inflight)  # type: ignore[arg-type]
                             or bool(self.failed))
            if int(reply[2]):
                self.ended = True
            for m in range(5, len(reply), 2):
                n = idx[int(reply[m]) - 1]
                if met[n]:
                    continue
                met[n] = 1
                record_code(br, jobs.job_id(n), text(reply[m + 1]))
            yield br

    def _unmet(self) -> Iterator[BatchResult]:
        unmet = BatchResult()
        for n in self.order:
            if not self.met[n]:
                job_id = self.jobs.job_id(n)
                unmet.skipped.append(job_id)
                unmet.reasons[job_id] = "gone" if self.ended else "not at its planned position"
        if unmet.skipped:
            yield unmet
