"""The tail walk of one source (:class:`TailWalk`): the apply of an
unfiltered dead-list plan (:class:`~jobctl.ops.plan.TailRange`), or of a
filtered one's windows (:class:`~jobctl.ops.plan.PredicateRange`).

Every tail position the plan saw is planned, so no per-job data comes from
the plan: before each round trip one ``LRANGE`` reads the ids of its
windows, and each ``rl_tail.lua`` call (width 0) carries only their
payload keys; the script expects entry ``i`` at tail position
``first + i - 1`` and holds any other element.  Lease, hold, walk hash,
restore and stopping are the driver's (:func:`~.driver.drive`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..lease import LEASE_TTL_MS
from ..lost_replies import mark
from ..result import BatchResult
from .flight import Flight, Trip
from .lifecycle import begin_walk
from .plan_windows import PlanWindows
from .source import LOST_CONNECTION, SLACK, ListSource, call_error, record_code
from .wire import Wire, bulk, bulks, command_blob, key_blob, pairs_blob, text, texts

__all__ = ["TailWalk"]


class _RoundTrip(Trip):
    """One round trip of a tail walk: its group's ids (tail first) from
    position ``g0``, its calls' ``bounds``, the ``now`` they carry, and the
    positions ``read`` ahead by its ``LRANGE`` (None: none, or read too
    early: a NOSCRIPT replay popped after it)."""

    __slots__ = ("g0", "g1", "tail", "names", "bounds", "now", "info", "read")

    def __init__(self, g0: int, tail: list[bytes], batch: int, now: int, read: tuple[int, int] | None) -> None:
        super().__init__()
        self.g0, self.tail, self.now, self.read = g0, tail, now, read
        self.g1 = g0 + len(tail)
        self.bounds = [(lo, min(lo + batch, self.g1)) for lo in range(g0, self.g1, batch)]
        self.info = b""
        self.names: list[str] = []  # the job id of each of ``tail`` ("" for one the plan excludes)


class TailWalk:
    """The window calls of one source's ``total`` tail positions, ``batch``
    a call, ``depth`` calls a round trip, ``ahead`` round trips in flight
    (on a client with its own connection: each carries the ``LRANGE`` of a
    later group, so the client packs the next round trip while the server
    runs this one).  ``planned`` (a filtered plan of ``plan_window``
    positions a window): per window ``(digest, match bitmap, ids)``; only
    the matches of a window still as planned move, the others stay dead
    uncounted.  A round trip's last result has ``more`` set while another
    is in flight; ``stop()`` is polled before each round trip sent behind
    another."""

    def __init__(self, src: ListSource, value: str, total: int, batch: int, depth: int, now_fn,
                 planned: list[tuple[str, bytes, bytes]] | None = None, plan_window: int = 1,
                 stop: Callable[[], bool] | None = None, ahead: int = 1) -> None:
        self.src, self.value, self.total, self.batch, self.now_fn = src, value, total, batch, now_fn
        self.stop, self.plan_window = stop, plan_window
        # json-list (``src.element_id``): the elements are the job strings, the tail at the left
        self.name = src.element_id or text
        self.left = src.element_id is not None
        self.prefix_s = "" if self.left else src.payload_key("")
        self.prefix = self.prefix_s.encode("utf-8", "surrogateescape")
        self.wire = Wire(src.client)
        self.fixed = src.fixed_keys()
        self.group = batch * depth
        self.pw = PlanWindows(planned, plan_window, self.prefix, total) if planned is not None else None
        # a filtered plan's read-ahead covers whole plan windows
        aligned = planned is None or (batch % plan_window == 0 and self.group % plan_window == 0)
        self.readahead = self.wire.own and aligned
        self.ahead = max(1, ahead) if self.readahead else 1
        self.tails: dict[int, list[bytes]] = {}
        self.want = total  # the first position whose ids no round trip has read ahead yet
        self.next_g = self.covered = 0
        self.ended = False
        self.met_late: set[int] = set()  # a filtered plan's positions coded by calls after the list ran out

    def __iter__(self) -> Iterator[BatchResult]:
        src = self.src
        window = begin_walk(src, self.value, self.total, tail=True)
        # the parts of every call that do not change: EVALSHA <sha>, the fixed KEYS, ARGV[1..5]
        self.head = bulk("EVALSHA") + bulk(window.sha)
        self.fixed_blob = b"".join(map(bulk, self.fixed))
        self.argv_head = b"".join(map(bulk, (src.kind, src.mode, self.value.split(" ")[0], self.value,
                                             LEASE_TTL_MS)))
        self.flight = flight = Flight(self.wire, window, self.ahead, self.stop, self.on_replay)
        self._first_reads()
        try:
            yield from self._trips(flight)
        except LOST_CONNECTION as exc:  # calls in flight may have run: their jobs are re-read (lost_replies)
            mark(exc, src, [i for x in flight.unread() for lo, hi in x.bounds
                            for i in x.names[lo - x.g0:hi - x.g0] if i or not self.left])
            raise
        finally:
            flight.drain()  # stopped early: the connection clean for the restore
        yield from self._unmet()

    # -- reading ids ------------------------------------------------------------------------------

    def lrange(self, a: int, b: int) -> list[bytes]:
        try:
            return self.src.client.lrange(self.src.dead, a, b)
        except Exception as exc:  # noqa: BLE001 - one-line error
            raise call_error(exc, self.src) from None

    def read_tail(self, g0: int, count: int) -> list[bytes]:
        """The ids at walk positions [g0, g0 + count), tail first (the tail is
        at position g0: the calls before popped everything before it); a
        filtered plan's by whole plan windows (:meth:`PlanWindows.read`)."""
        if count <= 0:
            return []
        if self.pw is None:
            return self.lrange(0, count - 1) if self.left else self.lrange(-count, -1)[::-1]
        return self.pw.read(g0, count, self.lrange)

    def gsize(self, g: int) -> int:
        return min(self.group, self.total - g)

    def _first_reads(self) -> None:
        group, total = self.group, self.total
        first = self.read_tail(0, min(group * self.ahead, total))
        for g in range(0, len(first), group):
            self.tails[g] = first[g:g + group]
        if self.readahead and len(first) == min(group * self.ahead, total):
            self.want = len(first)

    def took(self, a: int, got: list[bytes]) -> None:
        """Keep the ids read ahead for the group at ``a`` (a filtered plan's
        as whole plan windows, each checked against the plan's digest)."""
        if self.pw is not None:
            self.pw.keep(a, got)
            got = self.read_tail(a, len(got))
        self.tails[a] = got

    def on_replay(self, trips: list[Trip]) -> None:
        """Refused calls ran again (NOSCRIPT): every id read ahead was read
        before they popped; read them again when nothing is in flight."""
        for x in trips:
            x.read = None  # type: ignore[attr-defined]
        self.tails.clear()
        self.want = self.total
        if self.pw is not None:
            self.pw.forget_from(self.next_g)

    # -- round trips ------------------------------------------------------------------------------

    def pack(self, g0: int, tail: list[bytes], read: tuple[int, int] | None) -> _RoundTrip:
        """One round trip: the window calls over ``tail`` (positions ``g0``
        on), then, when ``read`` = ``(a, b)``, the ``LRANGE`` of the ids at
        positions [a, b) (relative to the tail these calls leave)."""
        src, pw = self.src, self.pw
        rt = _RoundTrip(g0, tail, self.batch, self.now_fn(), read)
        rt.info = src.info(rt.now) if src.info else b""
        rt.names = list(map(self.name, tail))
        nfixed, nextra = len(self.fixed), 2 if pw is not None else 0
        for lo, hi in rt.bounds:
            n = hi - lo
            strings, names = tail[lo - g0:hi - g0], rt.names[lo - g0:hi - g0]
            extra = pw.extra(lo, hi) if pw is not None else []
            if not self.wire.own:
                if self.left:  # json-list: each entry's string and id in ARGV, no key per entry
                    extra = [v for pair in zip(strings, names) for v in pair]
                keys = [] if self.left else [self.prefix_s + text(x) for x in strings]
                rt.calls.append((self.fixed + keys,
                                 [src.kind, src.mode, self.value.split(" ")[0], self.value, LEASE_TTL_MS, hi,
                                  rt.now, rt.now + src.delay_ms, "0", rt.info, SLACK, n, 0, lo, self.prefix_s,
                                  *extra]))
                continue
            tail_args = b"".join(map(bulk, (hi, rt.now, rt.now + src.delay_ms, "0", rt.info, SLACK, n, 0, lo,
                                            self.prefix)))
            nkeys = nfixed + (0 if self.left else n)
            per_key = b"" if self.left else key_blob(self.prefix, strings)
            # json-list: each entry's string and id in ARGV, packed a pair at a time
            entries, nargs = (pairs_blob(strings, names), 2 * n) if self.left else (bulks(extra), len(extra))
            rt.packed.append(b"".join([b"*%d\r\n" % (3 + nkeys + 15 + nargs), self.head, bulk(nkeys),
                                       self.fixed_blob, per_key, self.argv_head, tail_args, entries]))
        if read and self.left:
            rt.after.append(command_blob("LRANGE", src.dead, read[0] - rt.g1, read[1] - rt.g1 - 1))
            rt.reads.append("LRANGE")
        elif read:
            rt.after.append(command_blob("LRANGE", src.dead, -(read[1] - rt.g1), -(read[0] - rt.g1 + 1)))
            rt.reads.append("LRANGE")
        return rt

    def _send_more(self, flight: Flight) -> None:
        """Send round trips while there is room and their ids are known."""
        while not self.ended and self.next_g in self.tails and flight.room():
            tail = self.tails.pop(self.next_g)
            if not tail:
                return
            read = None
            if self.want < self.total and len(tail) == self.gsize(self.next_g):
                read = (self.want, self.want + self.gsize(self.want))
                self.want = read[1]
            flight.send(self.pack(self.next_g, tail, read))
            self.next_g += len(tail)

    def _read_next_ids(self) -> bool:
        """Nothing in flight: read the next group's ids (not read ahead);
        False when the walk is over."""
        if self.ended or self.next_g >= self.total:
            return False
        ids = self.read_tail(self.next_g, self.gsize(self.next_g))
        if not ids:
            return False
        self.tails[self.next_g] = ids
        full = self.readahead and len(ids) == self.gsize(self.next_g)
        self.want = self.next_g + len(ids) if full else self.total
        return True

    def _trips(self, flight: Flight) -> Iterator[BatchResult]:
        while True:
            self._send_more(flight)
            rt = flight.next()
            if rt is None:
                if not self._read_next_ids():
                    return
                continue
            if rt.read is not None:
                got = rt.read_back[0]
                if isinstance(got, Exception):
                    raise call_error(got, self.src)
                self.took(rt.read[0], got if self.left else got[::-1])
            for k, (reply, bounds) in enumerate(zip(rt.replies, rt.bounds)):  # type: ignore[arg-type]
                if isinstance(reply, Exception):
                    raise call_error(reply, self.src)
                # the round trip's last result ends the caller's stop-free run
                # unless another round trip is in flight
                br = BatchResult(more=k < len(rt.replies) - 1 or bool(flight.inflight))  # type: ignore[arg-type]
                self._count(br, rt, reply, *bounds)
                yield br
            if not self.ended and not flight.inflight and self.next_g >= self.total:
                self.covered = self.total
            if self.pw is not None:  # the windows behind this round trip: no later reply reads their flag
                self.pw.passed(rt.g0)

    # -- counting replies -------------------------------------------------------------------------

    def _count(self, br: BatchResult, rt: _RoundTrip, reply: list, lo: int, hi: int) -> None:
        """Count the codes of one call's ``reply`` (entries [lo, hi)) in ``br``."""
        # the walk positions this call popped: [start, end); after an earlier
        # call ran out (the list was empty, then workers pushed new jobs) a
        # call in flight starts before its own entries and holds, uncoded,
        # what it pops there
        start, end = int(reply[1]) - int(reply[0]), int(reply[1])
        a, b = max(start, lo), min(end, hi)
        names = rt.names[a - rt.g0:b - rt.g0] if b > a else []
        late = self.ended  # an earlier call ran out: codes for positions past covered
        # a refused call (NOSCRIPT) run again after a later call ran (another
        # client loaded the script meanwhile): that call held this one's
        # entries, uncoded; they stay dead
        passed = not self.ended and int(reply[0]) == 0 and end >= hi > lo
        if not self.ended:
            self.covered = lo + int(reply[0])
        self.ended = self.ended or bool(int(reply[2]))
        if passed:
            for p in range(lo, hi):
                if self.pw is None:
                    if rt.names[p - rt.g0] or not self.left:
                        record_code(br, rt.names[p - rt.g0], "not at its planned position")
                elif self.pw.is_match(p):
                    record_code(br, text(self.pw.plan_id(p)), "not at its planned position")
        elif self.pw is not None:
            self._count_planned(br, reply, lo, hi, a, b, rt.tail[a - rt.g0:b - rt.g0] if b > a else [], late)
        elif len(reply) == 5:  # the common case: every popped entry moved (but those the plan excludes)
            br.moved = [i for i in names if i] if self.left else names
        else:
            codes = {int(reply[m]): text(reply[m + 1]) for m in range(5, len(reply), 2)}
            for n, job_id in enumerate(names, a - lo + 1):
                if job_id or not self.left:  # json-list: "" is an element the plan excludes
                    record_code(br, job_id, codes.get(n, "moved"))

    def _count_planned(self, br: BatchResult, reply: list, lo: int, hi: int, a: int, b: int, ids: list[bytes],
                       late: bool) -> None:
        """A filtered plan's call: a pair for each match, "moved" included;
        the rest stay dead uncounted."""
        pw, size = self.pw, self.plan_window
        w = lo // size
        if (not late and a == lo and pw.unchanged(w) and w == (hi - 1) // size  # type: ignore[union-attr]
                and all(c == b"moved" for c in reply[6::2])):
            # the common case: one unchanged plan window, every match moved
            br.moved = texts([ids[int(i) - 1] for i in reply[5::2]])
            return
        for m in range(5, len(reply), 2):
            p = lo + int(reply[m]) - 1
            if late:
                self.met_late.add(p)  # counted here: not "gone" below
            # a window that changed: the match the plan saw there, by its id
            job_id = ids[p - a] if pw.unchanged(p // size) and a <= p < b else pw.plan_id(p)  # type: ignore[union-attr]
            record_code(br, text(job_id), text(reply[m + 1]))

    def _unmet(self) -> Iterator[BatchResult]:
        """A filtered plan's matches the walk never reached: the list ran out (gone)."""
        if self.pw is None:
            return
        unmet = BatchResult()
        for p in range(self.covered, self.total):
            if p not in self.met_late and self.pw.is_match(p):
                record_code(unmet, text(self.pw.plan_id(p)), "gone")
        if unmet.skipped:
            yield unmet
