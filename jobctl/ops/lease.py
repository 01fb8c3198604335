"""The lease of a queue shard's sources.

Lease: ``queue:{t}:jobctl:lease`` (json-list: ``<prefix>:jobctl:lease``)
holds ``<op id> <host> <pid>`` with a PX TTL (:data:`LEASE_TTL_MS`) that
every window call renews (the window scripts (``rl_window.lua``, ``rl_tail.lua``, ...)); ``lease.lua`` takes, gives
back and starts a walk under it.  A second operation on the same source is
refused with :class:`~jobctl.errors.Busy` (exit 11).  A lease held by a
process of this host that no longer runs (kill -9) is taken over.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import Busy
from ..scripts import script

if TYPE_CHECKING:
    from .walk import ListSource

__all__ = ["LEASE_TTL_MS", "lease_value", "acquire", "release", "holder_gone", "forked_walker",
           "held_by_walkers"]

#: Lease time to live (ms); every window call renews it.
LEASE_TTL_MS = 30_000


def lease_value(op_id: str) -> str:
    """``<op id> <host> <pid>``: who holds a lease."""
    return f"{op_id} {socket.gethostname()} {os.getpid()}"


#: Lease values this process holds now, with how many leases (shards) each
#: holds (an operation in progress here).
_HELD: Counter[str] = Counter()
#: Guards :data:`_HELD`: the shards of a cluster queue are walked in threads.
_HELD_LOCK = threading.Lock()
#: In a walker process jobctl forked (:mod:`jobctl.ops.walk.processes`): the
#: pid of the process that forked it, whose lease values it holds as its own
#: (:data:`_HELD` is inherited).
_FORKED_FROM: int | None = None


def forked_walker() -> None:
    """Called first in a forked walker process: the lock anew (another
    thread may have held it at the fork), the forking process's leases its
    own."""
    global _HELD_LOCK, _FORKED_FROM
    _HELD_LOCK = threading.Lock()
    _FORKED_FROM = os.getppid()


@contextlib.contextmanager
def held_by_walkers(value: str) -> Iterator[None]:
    """Within: ``value``'s leases count as held by this process while its
    forked walkers hold them (its own :func:`holder_gone` must not call them
    gone)."""
    with _HELD_LOCK:
        _HELD[value] += 1
    try:
        yield
    finally:
        with _HELD_LOCK:
            _HELD[value] -= 1
            if _HELD[value] <= 0:
                _HELD.pop(value, None)


def holder_gone(holder: str) -> bool:
    """Whether the lease value ``holder`` names a process of this host that
    no longer runs, or this very process while no operation of it holds the
    lease (an earlier run here ended on a lost connection before it could
    give the lease back): its lease may be taken over."""
    parts = holder.split(" ")
    if len(parts) != 3 or parts[1] != socket.gethostname() or not parts[2].isdigit():
        return False
    if int(parts[2]) in (os.getpid(), _FORKED_FROM):
        return _HELD[holder] <= 0
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def acquire(src: "ListSource", value: str, queue: str) -> None:
    """Take ``src``'s lease for ``value``; raises :class:`Busy` when a live
    operation holds it."""
    lease = script(src.client, "lease")
    res = lease(keys=[src.lease, src.walk], args=["acquire", value, LEASE_TTL_MS, ""])
    if int(res[0]) == 1:
        with _HELD_LOCK:
            _HELD[value] += 1
        return
    holder = _text(res[1])
    if holder_gone(holder):
        res = lease(keys=[src.lease, src.walk], args=["acquire", value, LEASE_TTL_MS, holder])
        if int(res[0]) == 1:
            with _HELD_LOCK:
                _HELD[value] += 1
            return
        holder = _text(res[1])
    op = holder.split(" ")[0]
    raise Busy(f"queue {queue}: operation {op} is running on {src.dead} (lease {src.lease}); "
               "nothing was changed: run this again when it has finished")


def release(src: "ListSource", value: str) -> None:
    """Give ``src``'s lease back (only if ``value`` still holds it)."""
    with _HELD_LOCK:
        if _HELD[value] > 1:
            _HELD[value] -= 1
        else:
            _HELD.pop(value, None)
    script(src.client, "lease")(keys=[src.lease, src.walk], args=["release", value, "", ""])
