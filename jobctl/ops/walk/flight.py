"""The walk driver's round trips in flight: send, read ahead, poll for stop,
replay after a flushed script cache, drain on error (:class:`Flight`).

A walker (per-job, tail, the filtered plan's scan) packs each round trip as
a :class:`Trip`: its script calls (``EVALSHA``, one RESP blob each, which
may be sent again) and the plain commands that follow them (``LRANGE``,
``MGET``). The flight keeps up to ``ahead`` round trips on the wire.

NOSCRIPT policy (one, for every walker): a call refused with ``NOSCRIPT``
did not run, and neither did the calls sent after it unless another client
loaded the script meanwhile. The flight reads every round trip in flight,
loads the script once, and sends the refused calls again, in their order, in
one write; a call refused again keeps its ``NoScriptError`` reply, which the
walker raises as a one-line error (:func:`~.source.call_error`) after
counting what ran. The walker is told (``on_replay``) so it can drop what a
read-ahead saw before the replayed calls ran.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .wire import Wire

__all__ = ["Trip", "Flight", "pipelined", "is_noscript"]


def is_noscript(reply: Any) -> bool:
    """Whether ``reply`` is a ``NOSCRIPT`` error reply."""
    import redis

    return isinstance(reply, redis.exceptions.NoScriptError)


class Trip:
    """One round trip: ``packed`` (one ``EVALSHA`` blob a call), ``calls``
    (the same as ``(keys, args)``, for a client without a connection of its
    own), ``after`` (plain commands sent behind the calls, their reply
    commands in ``reads``); once read, ``replies`` (one a call, an error
    reply as its exception) and ``read_back`` (one per ``reads``)."""

    __slots__ = ("packed", "calls", "after", "reads", "replies", "read_back")

    def __init__(self) -> None:
        self.packed: list[bytes] = []
        self.calls: list[tuple[list, list]] = []
        self.after: list[bytes] = []
        self.reads: list[str] = []
        self.replies: list[Any] | None = None
        self.read_back: list[Any] = []


def pipelined(client, script, calls: list[tuple[list, list]]) -> list[Any]:
    """Run ``script`` once per ``(keys, args)`` of ``calls`` in one round
    trip on a client without a connection of its own (a cluster client);
    each reply, or the error reply as an exception. Refused calls
    (``NOSCRIPT``) run once more after the script is loaded again."""
    import redis

    if len(calls) == 1:  # one call per round trip (--rate, layout.apply)
        keys, args = calls[0]
        try:
            out = [script(keys=keys, args=args)]
        except redis.exceptions.ResponseError as exc:
            out = [exc]
    else:
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            script(keys=keys, args=args, client=pipe)
        out = pipe.execute(raise_on_error=False)
    refused = [i for i, r in enumerate(out) if is_noscript(r)]
    if refused:
        client.script_load(script.script)
        pipe = client.pipeline(transaction=False)
        for i in refused:
            pipe.evalsha(script.sha, len(calls[i][0]), *calls[i][0], *calls[i][1])
        for i, r in zip(refused, pipe.execute(raise_on_error=False)):
            out[i] = r
    return out


class Flight:
    """Round trips in flight on ``wire`` for ``script``: at most ``ahead``
    (one on a client without a connection of its own). ``stop()`` is polled
    before a round trip is sent behind another; once true, ``ahead`` drops
    to 1 (the caller stops at the last result in flight).
    ``on_replay(trips)`` is told which round trips had calls sent again
    after a ``NOSCRIPT``."""

    def __init__(self, wire: Wire, script, ahead: int = 1, stop: Callable[[], bool] | None = None,
                 on_replay: Callable[[list[Trip]], None] | None = None) -> None:
        self.wire, self.script, self.stop, self.on_replay = wire, script, stop, on_replay
        self.ahead = max(1, ahead) if wire.own else 1
        self.inflight: deque[Trip] = deque()
        self.current: Trip | None = None  # the round trip whose replies are being read

    def room(self) -> bool:
        """Whether another round trip may be sent now."""
        if len(self.inflight) >= self.ahead:
            return False
        if self.inflight and self.stop is not None and self.stop():
            self.ahead = 1  # finish what is in flight; the caller polls stop() at its last result
            return False
        return True

    def send(self, trip: Trip) -> Trip:
        """Send ``trip`` (on a client without a connection of its own: run it
        now, its calls only) and keep it in flight."""
        if self.wire.own:
            self.wire.send(trip.packed + trip.after)
        else:
            trip.replies = pipelined(self.wire.client, self.script, trip.calls)
        self.inflight.append(trip)
        return trip

    def next(self) -> Trip | None:
        """The oldest round trip in flight with its replies read (refused
        calls sent again, see the module), or None when none is in flight."""
        if not self.inflight:
            return None
        trip = self.current = self.inflight.popleft()
        self.read(trip)
        if any(map(is_noscript, trip.replies)):  # type: ignore[arg-type]
            self.replay([trip, *self.inflight])
        return trip

    def read(self, trip: Trip) -> None:
        """Read ``trip``'s replies unless read already."""
        if trip.replies is not None:
            return
        trip.replies = self.wire.replies(len(trip.packed))
        trip.read_back = [self.wire.replies(1, cmd)[0] for cmd in trip.reads]

    def replay(self, trips: list[Trip]) -> None:
        """The script cache was flushed: load the script once and send every
        refused call of ``trips`` again, in order, in one write."""
        for trip in trips:
            self.read(trip)
        refused = [(t, i) for t in trips for i, r in enumerate(t.replies) if is_noscript(r)]  # type: ignore[arg-type]
        self.wire.client.script_load(self.script.script)
        if self.wire.own:
            self.wire.send([t.packed[i] for t, i in refused])
            again = self.wire.replies(len(refused))
        else:
            again = pipelined(self.wire.client, self.script, [t.calls[i] for t, i in refused])
        for (t, i), r in zip(refused, again):
            t.replies[i] = r  # type: ignore[index]
        if self.on_replay is not None:
            self.on_replay(trips)

    def unread(self) -> list[Trip]:
        """The round trips sent whose replies were not read (a lost connection:
        their calls may have run)."""
        return [t for t in (self.current, *self.inflight) if t is not None and t.replies is None]

    def drain(self) -> None:
        """The walk stopped early (an error, or its caller closed it): read
        the replies still in flight so the connection is clean for the
        restore; if a read fails, disconnect (the restore reconnects)."""
        while self.inflight:
            trip = self.inflight.popleft()
            try:
                self.read(trip)
            except Exception:  # noqa: BLE001 - the restore reconnects
                self.wire.disconnect()
                break

