"""One source's lease and hold lifecycle around its walk: finish a hold a
crash left (:func:`finish_hold`), take the walk (:func:`begin_walk`), renew
the leases while shards wait (:func:`renewing`), give the hold back and
release the lease however the walk ends (:func:`give_back`,
:func:`done_with`)."""

from __future__ import annotations

from collections.abc import Iterator
from time import monotonic

from ...errors import Busy, DataError
from ...scripts import script
from ..lease import LEASE_TTL_MS, release
from ..redrive_record import EXPIRE_AFTER_MS
from ..result import BatchResult
from .source import RESTORE_MAX, ListSource, call_error
from .wire import text

__all__ = ["finish_hold", "begin_walk", "give_back", "Renewal", "renewing", "done_with"]


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


class Renewal:
    """When the leases of the shards still waiting were last renewed: one per
    run, shared by every shard's walk, so a run of many short shard walks
    renews them as one long walk would."""

    def __init__(self) -> None:
        self.last = monotonic()
        self.side = None

    def due(self) -> bool:
        """About a third of :data:`LEASE_TTL_MS` passed since the last renewal."""
        return monotonic() - self.last >= LEASE_TTL_MS / 3000

    def renew(self, taken: list[ListSource], value: str) -> None:
        """Renew every lease ``taken`` holds, on a connection of its own."""
        self.side = self.side or _side_client(taken[0].client)
        for src in taken:
            script(self.side, "lease")(keys=[src.lease, src.walk], args=["acquire", value, LEASE_TTL_MS, ""])
        self.last = monotonic()


def renewing(results: Iterator[BatchResult], taken: list[ListSource], value: str,
             renewal: Renewal | None = None) -> Iterator[BatchResult]:
    """``results`` (one shard's walk), renewing every lease ``taken`` holds
    about every third of :data:`LEASE_TTL_MS` (``renewal``: the run's, shared
    by its shards' walks; a new one when ``None``) on a connection of its own
    (the walk's has replies in flight): a shard that waits for its walk, or
    whose hold waits to be given back, never looks abandoned."""
    renewal = renewal or Renewal()
    for br in results:
        yield br
        if taken and renewal.due():
            renewal.renew(taken, value)


def _side_client(client):
    """A client on a connection other than ``client``'s own (the same one
    for a client without a pinned connection)."""
    import redis

    if getattr(client, "connection", None) is None:
        return client
    return redis.Redis(connection_pool=client.connection_pool)


def done_with(src: ListSource, taken: list[ListSource], value: str, back=give_back) -> None:
    """A shard's walk ended: its hold goes back (``back``) and its lease is
    released now, not when every shard is done."""
    if src in taken:
        taken.remove(src)
        back([src], value)


def begin_walk(src: ListSource, value: str, total: int, tail: bool = False):
    """Start one source's walk: finish a hold a crash left, take the walk
    (``lease.lua begin``) and load the source's window script
    (:meth:`ListSource.window_script`, ``tail``: a tail walk's) so the round
    trips send EVALSHA; returns the window script.  Raises :class:`Busy` when
    another operation's walk is still recorded, or its lease was lost."""
    import redis

    finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
    try:
        begun = script(src.client, "lease")(keys=[src.lease, src.walk],
                                            args=["begin", value, value.split(" ")[0], total, EXPIRE_AFTER_MS])
    except redis.exceptions.ResponseError as exc:  # LEASE: lost to another operation meanwhile (exit 11)
        raise call_error(exc, src) from None
    if int(begun[0]) != 1:
        raise Busy(f"walk of operation {text(begun[1])} still recorded in {src.walk}")
    if src.record_upkeep is not None:  # only once the walk is this operation's
        src.record_upkeep(src.client)
    window = script(src.client, src.window_script(tail))
    src.client.script_load(window.script)
    return window
