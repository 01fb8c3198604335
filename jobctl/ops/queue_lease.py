"""The queue's lease for the operations that do not walk a dead list:
pause, resume and hold cycles of the reliable-list layout.

They take the same per-shard lease as the window engine (``queue:{t}:jobctl:lease``,
:mod:`.lease`, ``lease.lua``), every shard of the queue in shard order, so a
pause, a resume, a hold cycle and a redrive of one queue never interleave.
Unlike the window engine, a taker waits a little for the lease
(:data:`WAIT_S`: a hold cycle holds it for milliseconds) before it is
refused with :class:`~jobctl.errors.Busy` (exit 11, nothing changed).  The
lease's TTL is renewed while it is held (:meth:`QueueLease.renew_if_due`,
called between script calls).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import Busy
from .lease import LEASE_TTL_MS, acquire, lease_value, release

__all__ = ["QueueLease", "WAIT_S", "RETRY_S"]

#: How long a taker waits for a lease another operation holds (seconds).
WAIT_S = 2.0
#: Between two tries while waiting (seconds).
RETRY_S = 0.02


@dataclass(frozen=True)
class _Shard:
    """What :func:`jobctl.ops.lease.acquire` reads of a source: its client,
    lease and walk keys, and the key named in a refusal."""

    client: Any
    lease: str
    walk: str
    dead: str


class QueueLease:
    """The lease of every shard of ``layout`` (a layout with ``shards`` of
    :class:`~jobctl.keys.ReliableListKeys`) for the operation ``op_id``.

    Use as a context manager: entering takes every shard's lease (waiting
    up to ``wait_s`` seconds for each; raises :class:`Busy` after giving
    back those it took), leaving gives them back.  Re-entering for the same
    ``op_id`` in this process renews them."""

    def __init__(self, layout: Any, op_id: str, *, wait_s: float | None = None) -> None:
        self.queue = layout.queue_name
        self.value = lease_value(op_id)
        self.wait_s = WAIT_S if wait_s is None else wait_s
        self.shards = [_Shard(layout.client, k.lease, k.walk, k.lease.rsplit(":jobctl:", 1)[0])
                       for k in layout.shards]
        self._taken: list[_Shard] = []
        self._renewed = 0.0

    def __enter__(self) -> "QueueLease":
        deadline = time.monotonic() + self.wait_s
        try:
            for shard in self.shards:
                self._take(shard, deadline)
        except BaseException:
            self.__exit__()
            raise
        self._renewed = time.monotonic()
        return self

    def _take(self, shard: _Shard, deadline: float) -> None:
        while True:
            try:
                acquire(shard, self.value, self.queue)
                self._taken.append(shard)
                return
            except Busy:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(RETRY_S)

    def renew_if_due(self) -> None:
        """Renew the TTL of every lease taken once a third of it has passed
        (one script call a shard); a lease lost meanwhile raises :class:`Busy`."""
        if time.monotonic() - self._renewed < LEASE_TTL_MS / 3000:
            return
        for shard in self._taken:
            acquire(shard, self.value, self.queue)
        self._renewed = time.monotonic()

    def __exit__(self, *exc: Any) -> None:
        taken, self._taken = self._taken, []
        for shard in taken:
            try:
                release(shard, self.value)
            except Exception:  # noqa: BLE001 - it expires (TTL), or a rerun here takes it over
                pass
