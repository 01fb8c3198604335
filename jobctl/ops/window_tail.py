"""The window engine's tail mode (:mod:`jobctl.ops.window`): the apply of an
unfiltered dead-list plan (:class:`~jobctl.ops.plan.TailRange`).

Every tail position the plan saw is planned, so no per-job data comes from
the plan: before each round trip one ``LRANGE`` reads the ids of its
windows, and each ``list_window.lua`` call (width 0) carries only their
payload keys; the script expects entry ``i`` at tail position
``first + i - 1`` and holds any other element.  Lease, hold, walk hash,
restore and stopping are the engine's (:func:`~.window.drive`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

from ..ops.result import BatchResult
from .lease import LEASE_TTL_MS, acquire
from .pipeline import _bulk, drain, pipelined, read_replies
from .plan_windows import PlanWindows
from .lost_replies import mark
from .window import (LOST_CONNECTION, SLACK, ListSource, _call_error, _text, begin_walk, done_with, give_back,
                     record_code, renewing)

__all__ = ["drive_tail"]


def drive_tail(sources: list[ListSource], walked: dict[int, int], value: str, queue: str, batch: int,
                depth: int, now_fn, windows: dict[int, list[tuple[str, bytes, bytes]]] | None = None,
                plan_window: int = 1, stop: Callable[[], bool] | None = None, ahead: int = 1) -> Iterator[BatchResult]:
    """:func:`~.window.drive` of a :class:`~jobctl.ops.plan.TailRange` plan: each
    source's ``walked[shard]`` tail positions, every one of them planned.
    Before each round trip one ``LRANGE`` reads the ids of its windows (the
    tail of the dead list: earlier calls popped everything before), so the
    calls still carry each id with its position and payload key (KEYS) and
    the script checks them as for any plan; memory is one round trip's ids.
    ``windows`` (a :class:`~jobctl.ops.plan.PredicateRange` of
    ``plan_window`` positions a window): per shard each window's ``(digest,
    match bitmap)``; each round trip reads whole plan windows and compares
    their digests; only the matches of a window still as planned move (each
    tail element checked against its expected id), the others stay dead
    uncounted.

    ``ahead`` round trips are in flight at once (on a client with its own
    connection): each carries the ``LRANGE`` of a later group, so the client
    packs the next round trip while the server runs this one.  A round
    trip's last result has ``more`` set while another is in flight, and
    ``stop()`` is polled before each round trip sent behind another: once
    it is true nothing more is sent and the last result in flight ends the
    run (every call that ran is counted)."""
    todo = [s for s in sources if walked.get(s.shard)]
    taken: list[ListSource] = []
    try:
        for src in todo:
            acquire(src, value, queue)
            taken.append(src)
        for src in todo:
            yield from renewing(_walk_tail(src, value, walked[src.shard], batch, depth, now_fn,
                                           windows[src.shard] if windows is not None else None, plan_window, stop,
                                           ahead), taken, value)
            done_with(src, taken, value)
    finally:
        give_back(taken, value)


class _RoundTrip:
    """One round trip of a tail walk: its group's ids (tail first) from
    position ``g0``, its calls' ``bounds``, the ``now`` they carry, the
    positions ``read`` ahead by its ``LRANGE``, and once read its
    ``replies`` and the ids it ``got``."""

    __slots__ = ("g0", "g1", "tail", "bounds", "now", "info", "read", "replies", "got")

    def __init__(self, g0: int, tail: list[bytes], batch: int, now: int, read: tuple[int, int] | None) -> None:
        self.g0, self.tail, self.now, self.read = g0, tail, now, read
        self.g1 = g0 + len(tail)
        self.bounds = [(lo, min(lo + batch, self.g1)) for lo in range(g0, self.g1, batch)]
        self.info = b""
        self.replies: list | None = None
        self.got: list[bytes] | None = None


def _key_blob(prefix: bytes, ids: list[bytes]) -> bytes:
    """The RESP bulk strings of ``prefix + id`` for each id, built at C speed
    (one join when every id has the same length, as generated ids do)."""
    pl = len(prefix)
    lengths = set(map(len, ids))
    if len(lengths) == 1:
        size = pl + lengths.pop()
        return b"$%d\r\n%b" % (size, prefix) + (b"\r\n$%d\r\n%b" % (size, prefix)).join(ids) + b"\r\n"
    return b"".join([b"$%d\r\n%b%b\r\n" % (pl + len(x), prefix, x) for x in ids])


def _texts(ids: list[bytes]) -> list[str]:
    """``ids`` decoded (surrogate-escaped), in one join/decode/split when no
    id holds a newline."""
    if not ids:
        return []
    blob = b"\n".join(ids)
    if blob.count(b"\n") == len(ids) - 1:
        return blob.decode("utf-8", "surrogateescape").split("\n")
    return [_text(x) for x in ids]


def _walk_tail(src: ListSource, value: str, total: int, batch: int, depth: int, now_fn,
               planned: list[tuple[str, bytes, bytes]] | None = None, plan_window: int = 1,
               stop: Callable[[], bool] | None = None, ahead: int = 1) -> Iterator[BatchResult]:
    import redis

    spec_op = value.split(" ")[0]
    window = begin_walk(src, value, total)
    prefix_s = src.payload_key("")
    prefix = prefix_s.encode("utf-8", "surrogateescape")
    conn = getattr(src.client, "connection", None)
    fixed = src.fixed_keys()
    # the parts of every call that do not change: EVALSHA <sha>, the fixed
    # KEYS, and ARGV[1..5]
    head = _bulk("EVALSHA") + _bulk(window.sha)
    fixed_blob = b"".join(_bulk(k) for k in fixed)
    argv_head = b"".join(_bulk(a) for a in (src.kind, src.mode, spec_op, value, LEASE_TTL_MS))
    nextra = 2 if planned is not None else 0
    group = batch * depth
    pw = PlanWindows(planned, plan_window, prefix, total) if planned is not None else None

    def extra(lo: int, hi: int) -> list:
        return pw.extra(lo, hi) if pw is not None else []

    def lrange(a: int, b: int) -> list[bytes]:
        try:
            return src.client.lrange(src.dead, a, b)
        except Exception as exc:  # noqa: BLE001 - one-line error
            raise _call_error(exc, src) from None

    def read_tail(g0: int, count: int) -> list[bytes]:
        """The ids at walk positions [g0, g0 + count), tail first (the tail is
        at position g0: the calls before popped everything before it); a
        filtered plan's by whole plan windows (:meth:`PlanWindows.read`)."""
        if count <= 0:
            return []
        if pw is None:
            return lrange(-count, -1)[::-1]
        return pw.read(g0, count, lrange)

    def gsize(g: int) -> int:
        return min(group, total - g)

    def send_rt(g0: int, tail: list[bytes], read: tuple[int, int] | None) -> _RoundTrip:
        """Pack and send one round trip: the window calls over ``tail``
        (positions ``g0`` on), then, when ``read`` = ``(a, b)``, the
        ``LRANGE`` of the ids at positions [a, b) (relative to the tail these
        calls leave)."""
        rt = _RoundTrip(g0, tail, batch, now_fn(), read)
        rt.info = src.info(rt.now) if src.info else b""
        out = []
        for lo, hi in rt.bounds:
            n = hi - lo
            tail_args = b"".join(_bulk(a) for a in (hi, rt.now, rt.now + src.delay_ms, "0", rt.info, SLACK, n, 0, lo,
                                                     prefix))
            out += [b"*%d\r\n" % (3 + len(fixed) + n + 15 + nextra), head, _bulk(len(fixed) + n), fixed_blob,
                    _key_blob(prefix, tail[lo - g0:hi - g0]), argv_head, tail_args,
                    *(_bulk(a) for a in extra(lo, hi))]
        if read:
            out.append(b"*4\r\n" + _bulk("LRANGE") + _bulk(src.dead) + _bulk(-(read[1] - rt.g1))
                       + _bulk(-(read[0] - rt.g1 + 1)))
        conn.send_packed_command([b"".join(out)], check_health=False)
        return rt

    def recv_rt(rt: _RoundTrip) -> None:
        """Read the replies of ``rt`` (an error reply as its exception)."""
        rt.replies = read_replies(src.client, conn, len(rt.bounds))
        if rt.read:
            try:
                rt.got = src.client.parse_response(conn, "LRANGE")[::-1]
            except redis.exceptions.ResponseError as exc:
                raise _call_error(exc, src) from None

    def calls_of(rt: _RoundTrip, k: int) -> list:
        return [(fixed + [prefix_s + _text(x) for x in rt.tail[lo - rt.g0:hi - rt.g0]],
                 [src.kind, src.mode, spec_op, value, LEASE_TTL_MS, hi, rt.now, rt.now + src.delay_ms, "0", rt.info,
                  SLACK, hi - lo, 0, lo, prefix_s, *extra(lo, hi)])
                for lo, hi in rt.bounds[k:]]

    def took(a: int, got: list[bytes]) -> None:
        """Keep the ids read ahead for the group at ``a`` (a filtered plan's
        as whole plan windows, each checked against the plan's digest)."""
        if pw is not None:
            pw.keep(a, got)
            got = read_tail(a, len(got))
        tails[a] = got

    # ``ahead`` round trips in flight: each carries the LRANGE of the first
    # group whose ids are not known yet, so the client packs the next round
    # trip while the server runs this one.  A filtered plan's read-ahead
    # covers whole plan windows (``aligned``).
    aligned = planned is None or (batch % plan_window == 0 and group % plan_window == 0)
    readahead = conn is not None and aligned
    ahead = max(1, ahead) if readahead else 1
    tails: dict[int, list[bytes]] = {}
    first = read_tail(0, min(group * ahead, total))
    for g in range(0, len(first), group):
        tails[g] = first[g:g + group]
    # the first position whose ids no round trip has read ahead yet
    want = len(first) if readahead and len(first) == min(group * ahead, total) else total
    inflight: deque[_RoundTrip] = deque()
    next_g = covered = 0
    ended = False
    met_late: set[int] = set()  # a filtered plan's positions coded by calls after the list ran out
    current: _RoundTrip | None = None  # the round trip whose replies are read
    try:
        while True:
            while not ended and len(inflight) < ahead and next_g in tails:
                if inflight and stop is not None and stop():
                    ahead = 1  # finish what is in flight; the caller polls stop() at its last result
                    break
                tail = tails.pop(next_g)
                if not tail:
                    break
                read = None
                if want < total and len(tail) == gsize(next_g):
                    read = (want, want + gsize(want))
                    want = read[1]
                if conn is not None:
                    inflight.append(send_rt(next_g, tail, read))
                else:  # no connection of its own (a cluster client): one round trip at a time
                    rt = _RoundTrip(next_g, tail, batch, now_fn(), None)
                    rt.info = src.info(rt.now) if src.info else b""
                    rt.replies = pipelined(src.client, window, calls_of(rt, 0))
                    inflight.append(rt)
                next_g += len(tail)
            if not inflight:
                if ended or next_g >= total:
                    break
                ids = read_tail(next_g, gsize(next_g))  # not read ahead (nothing is in flight)
                if not ids:
                    break
                tails[next_g] = ids
                want = next_g + len(ids) if readahead and len(ids) == gsize(next_g) else total
                continue
            rt = current = inflight.popleft()
            if rt.replies is None:
                recv_rt(rt)
            if any(isinstance(r, redis.exceptions.NoScriptError) for r in rt.replies):
                # the script cache was flushed: these calls and those after
                # them (in flight too, unless another client loaded it) did
                # not run; load it, run them again in order, and read again
                # every id read ahead (it was read before they popped)
                for other in inflight:
                    if other.replies is None:
                        recv_rt(other)
                src.client.script_load(window.script)
                for x in (rt, *inflight):
                    # only the refused calls: one that ran (the script loaded
                    # again by another client meanwhile) keeps its reply
                    refused = [i for i, r in enumerate(x.replies) if isinstance(r, redis.exceptions.NoScriptError)]
                    if refused:
                        calls = calls_of(x, 0)
                        for i, r in zip(refused, pipelined(src.client, window, [calls[i] for i in refused])):
                            x.replies[i] = r
                    x.got = None
                tails.clear()
                want = total  # ids from here on: read when nothing is in flight
                if pw is not None:
                    pw.forget_from(next_g)
            if rt.got is not None:
                took(rt.read[0], rt.got)
            g0 = rt.g0
            for k, (reply, (lo, hi)) in enumerate(zip(rt.replies, rt.bounds)):
                if isinstance(reply, Exception):
                    raise _call_error(reply, src)
                # the round trip's last result ends the caller's stop-free run
                # unless another round trip is in flight
                br = BatchResult(more=k < len(rt.replies) - 1 or bool(inflight))
                # the walk positions this call popped: [start, end); after an
                # earlier call ran out (the list was empty, then workers pushed
                # new jobs) a call in flight starts before its own entries and
                # holds, uncoded, what it pops there
                start, end = int(reply[1]) - int(reply[0]), int(reply[1])
                a, b = max(start, lo), min(end, hi)
                ids = rt.tail[a - g0:b - g0] if b > a else []
                late = ended  # an earlier call ran out: codes for positions past covered
                # a refused call (NOSCRIPT) run again after a later call ran
                # (another client loaded the script meanwhile): that call
                # held this one's entries, uncoded; they stay dead
                passed = not ended and int(reply[0]) == 0 and end >= hi > lo
                if not ended:
                    covered = lo + int(reply[0])
                ended = ended or bool(int(reply[2]))
                if passed:
                    for p in range(lo, hi):
                        if pw is None:
                            record_code(br, _text(rt.tail[p - g0]), "not at its planned position")
                        elif pw.is_match(p):
                            record_code(br, _text(pw.plan_id(p)), "not at its planned position")
                    yield br
                    continue
                if pw is not None:  # a pair for each match, "moved" included; the rest stay dead uncounted
                    w = lo // plan_window
                    if (not late and a == lo and pw.unchanged(w) and w == (hi - 1) // plan_window
                            and all(c == b"moved" for c in reply[6::2])):
                        # the common case: one unchanged plan window, every match moved
                        br.moved = _texts([ids[int(i) - 1] for i in reply[5::2]])
                        yield br
                        continue
                    for m in range(5, len(reply), 2):
                        p = lo + int(reply[m]) - 1
                        if late:
                            met_late.add(p)  # counted here: not "gone" below
                        # a window that changed: the match the plan saw there, by its id
                        job_id = ids[p - a] if pw.unchanged(p // plan_window) and a <= p < b else pw.plan_id(p)
                        record_code(br, _text(job_id), _text(reply[m + 1]))
                    yield br
                    continue
                if len(reply) == 5:  # the common case: every popped entry moved
                    br.moved = _texts(ids)
                    yield br
                    continue
                codes = {int(reply[m]): _text(reply[m + 1]) for m in range(5, len(reply), 2)}
                for n, job_id in enumerate(ids, a - lo + 1):
                    record_code(br, _text(job_id), codes.get(n, "moved"))
                yield br
            if not ended and not inflight and next_g >= total:
                covered = total
            if pw is not None:  # the windows behind this round trip: no later reply reads their flag
                pw.passed(rt.g0)
    except LOST_CONNECTION as exc:  # calls in flight may have run: their jobs are re-read (lost_replies)
        unread = [x for x in (current, *inflight) if x is not None and x.replies is None]
        mark(exc, src, [_text(i) for x in unread for lo, hi in x.bounds for i in x.tail[lo - x.g0:hi - x.g0]])
        raise
    finally:
        drain(inflight, recv_rt, conn)  # stopped early: the connection clean for the restore
    if pw is not None:  # the plan's matches the walk never reached: the list ran out (gone)
        unmet = BatchResult()
        for p in range(covered, total):
            if p not in met_late and pw.is_match(p):
                record_code(unmet, _text(pw.plan_id(p)), "gone")
        if unmet.skipped:
            yield unmet
