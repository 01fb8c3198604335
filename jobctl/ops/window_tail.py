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

from collections.abc import Iterator

from ..errors import Busy
from ..ops.result import BatchResult
from ..scripts import script
from .lease import LEASE_TTL_MS, acquire
from .window import SLACK, ListSource, _call_error, _text, finish_hold, give_back, pipelined, record_code

__all__ = ["drive_tail"]


def drive_tail(sources: list[ListSource], walked: dict[int, int], value: str, queue: str, batch: int,
                depth: int, now_fn) -> Iterator[BatchResult]:
    """:func:`~.window.drive` of a :class:`~jobctl.ops.plan.TailRange` plan: each
    source's ``walked[shard]`` tail positions, every one of them planned.
    Before each round trip one ``LRANGE`` reads the ids of its windows (the
    tail of the dead list: earlier calls popped everything before), so the
    calls still carry each id with its position and payload key (KEYS) and
    the script checks them as for any plan; memory is one round trip's ids."""
    todo = [s for s in sources if walked.get(s.shard)]
    taken: list[ListSource] = []
    try:
        for src in todo:
            acquire(src, value, queue)
            taken.append(src)
        for src in todo:
            yield from _walk_tail(src, value, walked[src.shard], batch, depth, now_fn)
    finally:
        give_back(taken, value)


def _bulk(value) -> bytes:
    """One RESP bulk string of ``value`` (bytes, str or int)."""
    b = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
    return b"$%d\r\n%b\r\n" % (len(b), b)


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


def _walk_tail(src: ListSource, value: str, total: int, batch: int, depth: int, now_fn) -> Iterator[BatchResult]:
    import redis

    spec_op = value.split(" ")[0]
    finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
    begun = script(src.client, "lease")(keys=[src.lease, src.walk], args=["begin", value, spec_op, total])
    if int(begun[0]) != 1:
        raise Busy(f"walk of operation {_text(begun[1])} still recorded in {src.walk}")
    window = script(src.client, "list_window")
    src.client.script_load(window.script)
    prefix_s = src.payload_key("")
    prefix = prefix_s.encode("utf-8", "surrogateescape")
    conn = getattr(src.client, "connection", None)
    fixed = src.fixed_keys()
    # the parts of every call that do not change: EVALSHA <sha>, the fixed
    # KEYS, and ARGV[1..5]
    head = _bulk("EVALSHA") + _bulk(window.sha)
    fixed_blob = b"".join(_bulk(k) for k in fixed)
    argv_head = b"".join(_bulk(a) for a in (src.kind, src.mode, spec_op, value, LEASE_TTL_MS))
    group = batch * depth

    def read_tail(count: int) -> list[bytes]:
        try:
            return src.client.lrange(src.dead, -count, -1) if count > 0 else []
        except Exception as exc:  # noqa: BLE001 - one-line error
            raise _call_error(exc, src) from None

    tail = read_tail(min(group, total))
    g0 = 0
    while tail:
        tail.reverse()  # tail first: tail[k] is at walk position g0 + k
        g1 = g0 + len(tail)
        now = now_fn()
        info = src.info(now) if src.info else b""
        bounds = [(lo, min(lo + batch, g1)) for lo in range(g0, g1, batch)]
        nxt = min(g1 + group, total) - g1 if len(tail) == min(group, total - g0) else 0

        def args_of(lo: int, hi: int) -> list:
            return [src.kind, src.mode, spec_op, value, LEASE_TTL_MS, hi, now, now + src.delay_ms, "0", info, SLACK,
                    hi - lo, 0, lo, prefix_s]

        if conn is not None:
            # one round trip: the window calls, then the LRANGE of the next
            # group's ids (the tail once these calls have popped theirs)
            out = []
            for lo, hi in bounds:
                n = hi - lo
                tail_args = b"".join(_bulk(a) for a in (hi, now, now + src.delay_ms, "0", info, SLACK, n, 0, lo,
                                                         prefix))
                out += [b"*%d\r\n" % (3 + len(fixed) + n + 15), head, _bulk(len(fixed) + n), fixed_blob,
                        _key_blob(prefix, tail[lo - g0:hi - g0]), argv_head, tail_args]
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
                    nxt_tail = src.client.parse_response(conn, "LRANGE")
                except redis.exceptions.ResponseError as exc:
                    raise _call_error(exc, src) from None
            for k, reply in enumerate(replies):
                if isinstance(reply, redis.exceptions.NoScriptError):  # the script cache was flushed
                    src.client.script_load(window.script)
                    calls = [(fixed + [prefix_s + _text(x) for x in tail[lo - g0:hi - g0]], args_of(lo, hi))
                             for lo, hi in bounds[k:]]
                    replies[k:] = pipelined(src.client, window, calls)
                    nxt_tail = None  # read again below: these calls popped after it
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
            if len(reply) == 5:  # the common case: every popped entry moved
                br.moved = _texts(ids)
                yield br
                continue
            codes = {int(reply[m]): _text(reply[m + 1]) for m in range(5, len(reply), 2)}
            for n, job_id in enumerate(ids, 1):
                record_code(br, _text(job_id), codes.get(n, "moved"))
            yield br
        if ended or g1 >= total:
            return
        g0 = g1
        tail = nxt_tail if nxt_tail is not None else read_tail(min(group, total - g0))
