"""The rq layout's script calls, several a round trip (:func:`pipelined_moves`).

The calls are packed by the walk driver's wire (:mod:`jobctl.ops.walk.wire`:
hiredis's packer, not redis-py's per-argument encoder) and sent through its
flight (:class:`~jobctl.ops.walk.flight.Flight`: the NOSCRIPT replay, a
client without a connection of its own).  One round trip is in flight at a
time: each call's result but a round trip's last says ``more``, so a stop
(Ctrl-C) lands between round trips and every call that ran is counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from jobctl.layouts.moves import move_error
from jobctl.ops.result import BatchResult
from jobctl.ops.walk.flight import Flight, Trip
from jobctl.ops.walk.wire import Wire, packed_evalsha, texts
from jobctl.scripts import script

__all__ = ["CALLS_PER_TRIP", "pipelined_moves", "reply_result"]

#: Script calls sent in one round trip (each bounded on its own by its job count).
CALLS_PER_TRIP = 16


def reply_result(reply: list[Any]) -> BatchResult:
    """A ``{id1, code1, ...}`` reply as a :class:`BatchResult` (the same as
    :func:`jobctl.layouts.moves.move_result`, one decode when every job moved)."""
    codes = reply[1::2]
    if codes.count(b"moved") == len(codes):
        return BatchResult(moved=texts(reply[0::2]))
    from jobctl.layouts.moves import move_result

    return move_result(reply)


def pipelined_moves(client, name: str, calls: Iterable[tuple[list, list]],
                    per_trip: int = CALLS_PER_TRIP) -> Iterator[BatchResult]:
    """Run the move script ``name`` once per ``(keys, args)`` of ``calls``,
    ``per_trip`` calls a round trip; one :class:`BatchResult` a call, in
    order.  An error reply is raised (:func:`jobctl.layouts.moves.move_error`) after the results
    of the other calls of its round trip (they ran) have been yielded."""
    s = script(client, name)
    flight = Flight(Wire(client), s)
    it = iter(calls)
    while group := list(islice(it, per_trip)):
        trip = Trip()
        trip.calls = group
        trip.packed = packed_evalsha(s.sha, group) if flight.wire.own else []
        flight.send(trip)
        done = flight.next()
        replies = done.replies if done is not None else []
        errors = [r for r in replies if isinstance(r, Exception)]
        last = len(replies) - 1
        for i, reply in enumerate(replies):
            if not isinstance(reply, Exception):
                br = reply_result(reply)
                br.more = bool(errors) or i < last
                yield br
        if errors:
            raise move_error(name, errors[0])
