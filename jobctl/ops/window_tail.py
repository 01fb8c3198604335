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


def _walk_tail(src: ListSource, value: str, total: int, batch: int, depth: int, now_fn) -> Iterator[BatchResult]:
    spec_op = value.split(" ")[0]
    finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
    begun = script(src.client, "lease")(keys=[src.lease, src.walk], args=["begin", value, spec_op, total])
    if int(begun[0]) != 1:
        raise Busy(f"walk of operation {_text(begun[1])} still recorded in {src.walk}")
    window = script(src.client, "list_window")
    src.client.script_load(window.script)
    prefix = src.payload_key("")
    for g0 in range(0, total, batch * depth):
        g1 = min(g0 + batch * depth, total)
        try:
            tail = src.client.lrange(src.dead, -(g1 - g0), -1)
        except Exception as exc:  # noqa: BLE001 - one-line error
            raise _call_error(exc, src) from None
        tail.reverse()  # tail first: tail[k] is at walk position g0 + k
        if not tail:
            return
        now = now_fn()
        info = src.info(now) if src.info else b""
        calls: list[tuple[list[str], list]] = []
        sent: list[list[str]] = []
        for lo in range(g0, g0 + len(tail), batch):
            hi = min(lo + batch, g0 + len(tail))
            ids = [_text(x) for x in tail[lo - g0:hi - g0]]
            sent.append(ids)
            keys = src.fixed_keys()
            keys += [prefix + job_id for job_id in ids]  # payload keys; the script strips the prefix
            args: list = [src.kind, src.mode, spec_op, value, LEASE_TTL_MS, hi, now, now + src.delay_ms, "0",
                          info, SLACK, len(ids), 0, lo, prefix]
            calls.append((keys, args))
        replies = pipelined(src.client, window, calls)
        ended = False
        for k, (reply, ids) in enumerate(zip(replies, sent)):
            if isinstance(reply, Exception):
                raise _call_error(reply, src)
            br = BatchResult(more=k < len(replies) - 1)
            ended = ended or bool(int(reply[2]))
            if len(reply) == 5:  # the common case: every popped entry moved
                br.moved = ids[:int(reply[0])]
                yield br
                continue
            codes = {int(reply[m]): _text(reply[m + 1]) for m in range(5, len(reply), 2)}
            for n, job_id in enumerate(ids[:int(reply[0])], 1):
                record_code(br, job_id, codes.get(n, "moved"))
            yield br
        if ended:
            return
