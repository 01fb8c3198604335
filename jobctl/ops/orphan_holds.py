"""Dead jobs a killed operation left in jobctl's hold lists.

A window walk (:mod:`jobctl.ops.walk`) sets aside, in the hold list of each
shard it walks, the dead jobs it pops and does not move, and puts them back
when it ends.  A process killed before that leaves them there: still dead
(every read counts the hold as dead), but out of the dead list a later
plan walks.  :func:`find` names every such hold whose lease no live
operation holds (none, or one of a process of this host that no longer
runs); :func:`give_back` puts each back at the tail of its dead list, in
order, under the shard's lease (``lease.lua``, ``list_restore.lua``).

Every operation gives them back before it plans (:mod:`jobctl.ops.core`),
``check`` reports them (``--repair`` gives them back) and ``status`` counts
them (``held``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Busy
from ..model import State
from .lease import acquire, holder_gone, lease_value, release
from .spec import Operation, OpSpec

if TYPE_CHECKING:
    from .walk import ListSource

__all__ = ["OrphanedHold", "hold_sources", "find", "give_back", "summary"]


@dataclass(frozen=True)
class OrphanedHold:
    """``jobs`` dead jobs in the hold list ``hold`` of shard ``tag`` (its
    dead list ``dead``), left by ``holder`` (the lease value, ``None`` when
    the lease expired)."""

    tag: str
    hold: str
    dead: str
    jobs: int
    holder: str | None

    def describe(self) -> str:
        """One line for a warning or a finding."""
        who = f"operation {self.holder.split(' ')[0]}" if self.holder else "an operation"
        return f"{self.jobs:,} dead job(s) held in {self.hold} by {who} that no longer runs"


def summary(orphans: list[OrphanedHold]) -> str:
    """One line for several holds: ``N dead job(s) in jobctl's hold lists of S shard(s)``."""
    return (f"{sum(o.jobs for o in orphans):,} dead job(s) in jobctl's hold lists of {len(orphans)} shard(s), "
            "left by an operation that no longer runs")


def hold_sources(layout: Any) -> "list[ListSource]":
    """The window-engine sources of ``layout``'s dead lists (one per shard;
    ``[]`` for a layout without one): their hold, walk and lease keys."""
    if State.DEAD not in layout.states:
        return []
    spec = OpSpec(Operation.PURGE, layout.queue_name, State.DEAD, None, op_id="orphan-holds")
    return layout.sources(spec)


def _orphans(sources: "list[ListSource]") -> "list[tuple[ListSource, OrphanedHold]]":
    if not sources:
        return []
    pipe = sources[0].client.pipeline(transaction=False)
    for src in sources:
        pipe.llen(src.hold)
        pipe.get(src.lease)
    replies = pipe.execute()
    out = []
    for n, src in enumerate(sources):
        jobs, holder = int(replies[2 * n]), replies[2 * n + 1]
        holder = holder.decode("utf-8", "surrogateescape") if isinstance(holder, bytes) else holder
        if jobs and (holder is None or holder_gone(holder)):
            out.append((src, OrphanedHold(src.tag, src.hold, src.dead, jobs, holder)))
    return out


def find(layout: Any) -> list[OrphanedHold]:
    """Every hold of ``layout`` that holds jobs while no live operation
    holds its shard's lease.  One pipelined round trip (LLEN + GET a shard).
    Reads only."""
    return [o for _, o in _orphans(hold_sources(layout))]


def give_back(layout: Any, op_id: str, tags: "set[str] | None" = None) -> list[OrphanedHold]:
    """Put every orphaned hold of ``layout`` (``tags``: only those of these
    shard tags, e.g. the findings an operator confirmed) back at the tail
    of its dead list, in order, each under its shard's lease taken for
    ``op_id`` (a lease a live operation took meanwhile: left to that
    operation).  Returns the holds given back.  Raises
    :class:`~jobctl.errors.DataError` for a key of the wrong type."""
    from .walk import finish_hold

    value = lease_value(op_id)
    done = []
    for src, orphan in _orphans(hold_sources(layout)):
        if tags is not None and src.tag not in tags:
            continue
        try:
            acquire(src, value, layout.queue_name)
        except Busy:
            continue  # a live operation took the shard since: its walk gives the hold back
        try:
            finish_hold(src.client, src.kind, src.dead, src.hold, src.walk)
            done.append(orphan)
        finally:
            release(src, value)
    return done
