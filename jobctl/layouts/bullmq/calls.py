"""Script calls of a BullMQ redrive or purge, sent several to a round trip.

Each call is bounded on its own (:data:`jobctl.layouts.bullmq.ops.DEFAULT_BATCH`
jobs at most); :data:`DEPTH` of them go in one pipelined round trip, and the
engine gets one :class:`~jobctl.ops.result.BatchResult` per call (``more``
set on all but the last of a round trip: those calls already ran).

A call is ``(script name, keys, args, ids)``: ``ids`` ``None`` for a script
that answers ``{id1, code1, ...}`` per job (``bullmq_move.lua``), else the
call's job ids in ARGV order for one that names only the jobs it did not
move, by place (``bullmq_redrive.lua``: ``{i1, code1, ...}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any
from weakref import WeakKeyDictionary

from jobctl.cluster import is_cluster
from jobctl.layouts.common import text
from jobctl.layouts.moves import count_code, move_error, move_result
from jobctl.ops.result import BatchResult
from jobctl.ops.walk.flight import is_noscript
from jobctl.scripts import script

__all__ = ["DEPTH", "run_calls", "read_calls", "read_trips", "short_result"]

#: Script calls per round trip: several bounded calls back to back keep the
#: server busy without one long call (another client waits at most one call).
DEPTH = 12


def _checked(name: str, reply: Any) -> Any:
    """``reply`` of ``jobctl/lua/<name>.lua``, or the jobctl error an error reply
    stands for raised (:func:`jobctl.layouts.moves.move_error`)."""
    if not isinstance(reply, Exception):
        return reply
    raise move_error(name, reply)


#: client -> the script names this module has loaded on it (each is loaded
#: before its first round trip, so a call refused NOSCRIPT ahead of calls
#: that then run is left to a server whose scripts were flushed meanwhile)
_LOADED: WeakKeyDictionary = WeakKeyDictionary()


def _send(client, calls: list[tuple]) -> list[Any]:
    """One round trip of ``calls`` (``(script name, keys, args, ...)``); each reply
    or error.  A call refused with ``NOSCRIPT`` did not run: it is sent again,
    in order, once its script is loaded."""
    cluster = is_cluster(client)
    if not cluster:
        loaded = _LOADED.setdefault(client, set())
        for name in {c[0] for c in calls} - loaded:
            client.script_load(script(client, name).script)
            loaded.add(name)
    pipe = client.pipeline(transaction=False)
    for name, keys, args, *_ in calls:
        s = script(client, name)
        if cluster:
            s(keys=keys, args=args, client=pipe)  # a raw EVAL, routed by slot
        else:
            pipe.evalsha(s.sha, len(keys), *keys, *args)
    out = pipe.execute(raise_on_error=False)
    refused = [i for i, r in enumerate(out) if is_noscript(r)]
    if refused:
        pipe = client.pipeline(transaction=False)
        for name in {calls[i][0] for i in refused}:
            client.script_load(script(client, name).script)
        for i in refused:
            name, keys, args = calls[i][:3]
            pipe.evalsha(script(client, name).sha, len(keys), *keys, *args)
        for i, r in zip(refused, pipe.execute(raise_on_error=False)):
            out[i] = r
    return out


def short_result(ids: list[bytes], reply: list) -> BatchResult:
    """A ``{i1, code1, ...}`` reply (1-based places in ``ids`` of the jobs not
    moved) as a :class:`BatchResult`: every other id moved, in order."""
    if not reply:
        return BatchResult(moved=[i.decode("utf-8", "surrogateescape") for i in ids])
    codes = {int(reply[n]) - 1: text(reply[n + 1]) for n in range(0, len(reply), 2)}
    out = BatchResult()
    for n, raw in enumerate(ids):
        count_code(out, raw.decode("utf-8", "surrogateescape"), codes.get(n, "moved"))
    return out


def run_calls(client, calls: Iterable[tuple[str, list, list, Any]]) -> Iterator[BatchResult]:
    """Run ``calls`` :data:`DEPTH` to a round trip; one :class:`BatchResult`
    per call, in order.  Raises :class:`DataError` / :class:`JobctlError`
    for a ``WRONGTYPE`` / ``BADARG`` reply (that call wrote nothing), after
    the results of the calls before it."""
    calls = iter(calls)
    while True:
        trip = list(islice(calls, DEPTH))
        if not trip:
            return
        replies = _send(client, trip)
        for n, ((name, _, _, ids), reply) in enumerate(zip(trip, replies)):
            reply = _checked(name, reply)
            res = move_result(reply) if ids is None else short_result(ids, reply)
            res.more = n < len(trip) - 1
            yield res


def read_calls(client, name: str, key_lists: list[list[str]], args: list) -> list[Any]:
    """The read-only script ``jobctl/lua/<name>.lua`` once per list of
    ``key_lists`` (with ``args``), :data:`DEPTH` calls a round trip; the
    replies joined in order.  An error reply is raised."""
    out: list[Any] = []
    for replies in read_trips(client, name, [(keys, args) for keys in key_lists]):
        for reply in replies:
            out += reply
    return out


def read_trips(client, name: str, calls: Iterable[tuple[list, list]]) -> Iterator[list[Any]]:
    """The read-only script ``jobctl/lua/<name>.lua`` once per ``(keys,
    args)`` of ``calls``, :data:`DEPTH` calls a round trip: each round trip's
    replies, in order.  An error reply is raised."""
    calls = iter(calls)
    while True:
        trip = list(islice(calls, DEPTH))
        if not trip:
            return
        yield [_checked(name, r) for r in _send(client, [(name, keys, args) for keys, args in trip])]
