"""``jobctl reshard QUEUE --shards N`` (and the TUI's reshard prompt): the
destination of a reshard, checked once for both front ends.

A reshard is a migrate (:data:`~jobctl.ops.spec.Operation.MIGRATE`) whose
destination is the same queue with ``N`` shards: each job moves to the
shard its id hashes to by the producers' rule (``shard_rule`` in the
catalogue; seed 000 section 20), copy-then-delete with the migrate's crash
journal.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..config import QueueConfig
    from ..layouts.base import Layout

__all__ = ["reshard_destination"]


def reshard_destination(layout: "Layout", shards: int) -> "QueueConfig":
    """The queue ``layout`` with ``shards`` shards (a request's
    ``destination``).  Raises :class:`UsageError`: not reliable-list, no
    (or an unknown) ``shard_rule``, ``shards`` outside 1..1024, or the
    number of shards it already has."""
    from ..layouts.sharding import shard_rule

    if layout.name != "reliable-list":
        raise UsageError(f"reshard is for the reliable-list layout; {layout.queue_name} is {layout.name}")
    if not 1 <= shards <= 1024:
        raise UsageError(f"--shards: {shards} is not in 1..1024")
    shard_rule(layout.queue)
    if len(layout.shards) == shards:
        raise UsageError(f"{layout.queue_name} already has {shards} shard(s)")
    return dataclasses.replace(layout.queue, shards=shards)
