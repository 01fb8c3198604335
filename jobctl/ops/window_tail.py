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

import hashlib
from collections.abc import Iterator

from ..ops.result import BatchResult
from .lease import LEASE_TTL_MS, acquire
from .pipeline import _bulk, pipelined
from .window import SLACK, ListSource, _call_error, _text, begin_walk, give_back, record_code

__all__ = ["drive_tail"]


def drive_tail(sources: list[ListSource], walked: dict[int, int], value: str, queue: str, batch: int,
                depth: int, now_fn, windows: dict[int, list[tuple[str, bytes, bytes]]] | None = None,
                plan_window: int = 1) -> Iterator[BatchResult]:
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
    uncounted."""
    todo = [s for s in sources if walked.get(s.shard)]
    taken: list[ListSource] = []
    try:
        for src in todo:
            acquire(src, value, queue)
            taken.append(src)
        for src in todo:
            yield from _walk_tail(src, value, walked[src.shard], batch, depth, now_fn,
                                  windows[src.shard] if windows is not None else None, plan_window)
    finally:
        give_back(taken, value)


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
               planned: list[tuple[str, bytes, bytes]] | None = None, plan_window: int = 1) -> Iterator[BatchResult]:
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
    same: dict[int, bool] = {}  # a filtered plan's windows: unchanged since the plan (their digest)
    wbuf: dict[int, list[bytes]] = {}  # a filtered plan: the ids of the plan windows read, tail first

    def extra(lo: int, hi: int) -> list:
        """A filtered plan's ARGV[16..17] for the entries [lo, hi): their match
        bitmap and "1" when their plan windows are unchanged."""
        if planned is None:
            return []
        w0, w1 = lo // plan_window, (hi - 1) // plan_window
        flag = "1" if all(same.get(w, False) for w in range(w0, w1 + 1)) else "0"
        if lo % plan_window == 0 and w0 == w1:
            return [planned[w0][1], flag]  # the plan's window as it is
        out = bytearray((hi - lo + 7) // 8)
        for p in range(lo, hi):
            w, i = divmod(p, plan_window)
            if planned[w][1][i // 8] & (128 >> (i % 8)):
                out[(p - lo) // 8] |= 128 >> ((p - lo) % 8)
        return [bytes(out), flag]

    def plan_id(p: int) -> bytes:
        """The id of the plan's match at position ``p``."""
        w, i = divmod(p, plan_window)
        bitmap = planned[w][1]
        before = sum(bin(b).count("1") for b in bitmap[:i // 8]) + bin(bitmap[i // 8] >> (8 - i % 8)).count("1")
        return planned[w][2].split(b"\n")[before]

    def check(ws: int, ids: list[bytes]) -> None:
        """Compare the plan window at ``ws`` (its ids, tail first) with the
        plan's digest (SHA1 of its payload keys joined by \\n)."""
        w = ws // plan_window
        digest = hashlib.sha1(prefix + (b"\n" + prefix).join(ids)).hexdigest() if ids else ""
        same[w] = w < len(planned) and digest == planned[w][0]

    def lrange(a: int, b: int) -> list[bytes]:
        try:
            return src.client.lrange(src.dead, a, b)
        except Exception as exc:  # noqa: BLE001 - one-line error
            raise _call_error(exc, src) from None

    def read_tail(g0: int, count: int) -> list[bytes]:
        """The ids at walk positions [g0, g0 + count), tail first (the tail is
        at position g0: the calls before popped everything before it).  A
        filtered plan's are read by whole plan windows, each checked against
        the plan's digest once and kept until the walk has passed it."""
        if count <= 0:
            return []
        if planned is None:
            return lrange(-count, -1)[::-1]
        out: list[bytes] = []
        wins = range(g0 // plan_window, (g0 + count - 1) // plan_window + 1)
        todo = [w for w in wins if w not in wbuf]  # the last ones: one LRANGE for all of them
        if todo:
            first = todo[0] * plan_window
            got = lrange(-(min((todo[-1] + 1) * plan_window, total) - g0), -(first - g0 + 1))[::-1]
            for w in todo:
                wbuf[w] = got[w * plan_window - first:(w + 1) * plan_window - first]
                check(w * plan_window, wbuf[w])
        for w in wins:
            ws = w * plan_window
            a, b = max(g0, ws) - ws, min(g0 + count, ws + plan_window) - ws
            out += wbuf[w][a:b]
        for w in [w for w in wbuf if (w + 1) * plan_window <= g0]:
            del wbuf[w]
        return out

    tail = read_tail(0, min(group, total))
    g0 = covered = 0
    while tail:
        g1 = g0 + len(tail)
        now = now_fn()
        info = src.info(now) if src.info else b""
        bounds = [(lo, min(lo + batch, g1)) for lo in range(g0, g1, batch)]
        # the next group's ids ride in this round trip; a filtered plan's
        # too when its calls cover whole plan windows (then they fill wbuf)
        aligned = planned is None or (batch % plan_window == 0 and g1 % plan_window == 0)
        nxt = min(g1 + group, total) - g1 if len(tail) == min(group, total - g0) and aligned else 0

        def args_of(lo: int, hi: int) -> list:
            return [src.kind, src.mode, spec_op, value, LEASE_TTL_MS, hi, now, now + src.delay_ms, "0", info, SLACK,
                    hi - lo, 0, lo, prefix_s, *extra(lo, hi)]

        if conn is not None:
            # one round trip: the window calls, then the LRANGE of the next
            # group's ids (the tail once these calls have popped theirs)
            out = []
            for lo, hi in bounds:
                n = hi - lo
                tail_args = b"".join(_bulk(a) for a in (hi, now, now + src.delay_ms, "0", info, SLACK, n, 0, lo,
                                                         prefix))
                out += [b"*%d\r\n" % (3 + len(fixed) + n + 15 + nextra), head, _bulk(len(fixed) + n), fixed_blob,
                        _key_blob(prefix, tail[lo - g0:hi - g0]), argv_head, tail_args,
                        *(_bulk(a) for a in extra(lo, hi))]
            if nxt:
                out.append(b"*4\r\n" + _bulk("LRANGE") + _bulk(src.dead) + _bulk(-nxt) + _bulk(-1))
            conn.send_packed_command([b"".join(out)], check_health=False)
            replies: list = []
            for _ in bounds:
                try:
                    replies.append(src.client.parse_response(conn, "EVALSHA"))
                except redis.exceptions.ResponseError as exc:
                    replies.append(exc)
            nxt_tail = None
            if nxt:
                try:
                    nxt_tail = src.client.parse_response(conn, "LRANGE")[::-1]
                except redis.exceptions.ResponseError as exc:
                    raise _call_error(exc, src) from None
                if planned is not None:  # whole plan windows: checked against their digests as read_tail does
                    for ws in range(g1, g1 + len(nxt_tail), plan_window):
                        wbuf[ws // plan_window] = nxt_tail[ws - g1:ws - g1 + plan_window]
                        check(ws, wbuf[ws // plan_window])
                    nxt_tail = None  # read_tail assembles the group from wbuf
            for k, reply in enumerate(replies):
                if isinstance(reply, redis.exceptions.NoScriptError):  # the script cache was flushed
                    src.client.script_load(window.script)
                    calls = [(fixed + [prefix_s + _text(x) for x in tail[lo - g0:hi - g0]], args_of(lo, hi))
                             for lo, hi in bounds[k:]]
                    replies[k:] = pipelined(src.client, window, calls)
                    nxt_tail = None  # read again below: these calls popped after it
                    for w in [w for w in wbuf if w * plan_window >= g1]:  # so were the windows read ahead
                        del wbuf[w]
                        same.pop(w, None)
                    break
        else:
            calls = [(fixed + [prefix_s + _text(x) for x in tail[lo - g0:hi - g0]], args_of(lo, hi))
                     for lo, hi in bounds]
            replies = pipelined(src.client, window, calls)
            nxt_tail = None
        ended = False
        for k, (reply, (lo, hi)) in enumerate(zip(replies, bounds)):
            if isinstance(reply, Exception):
                raise _call_error(reply, src)
            br = BatchResult(more=k < len(replies) - 1)
            ended = ended or bool(int(reply[2]))
            ids = tail[lo - g0:lo - g0 + int(reply[0])]
            covered = lo + int(reply[0])
            if planned is not None:  # a pair for each match, "moved" included; the rest stay dead uncounted
                for m in range(5, len(reply), 2):
                    p = lo + int(reply[m]) - 1
                    # a window that changed: the match the plan saw there, by its id
                    job_id = ids[int(reply[m]) - 1] if same.get(p // plan_window) else plan_id(p)
                    record_code(br, _text(job_id), _text(reply[m + 1]))
                yield br
                continue
            if len(reply) == 5:  # the common case: every popped entry moved
                br.moved = _texts(ids)
                yield br
                continue
            codes = {int(reply[m]): _text(reply[m + 1]) for m in range(5, len(reply), 2)}
            for n, job_id in enumerate(ids, 1):
                record_code(br, _text(job_id), codes.get(n, "moved"))
            yield br
        if ended or g1 >= total:
            break
        g0 = g1
        covered = g1
        tail = nxt_tail if nxt_tail is not None else read_tail(g0, min(group, total - g0))
    if planned is not None:  # the plan's matches the walk never reached: the list ran out (gone)
        unmet = BatchResult()
        for p in range(covered, total):
            w, i = divmod(p, plan_window)
            if w < len(planned) and planned[w][1][i // 8] & (128 >> (i % 8)):
                record_code(unmet, _text(plan_id(p)), "gone")
        if unmet.skipped:
            yield unmet
