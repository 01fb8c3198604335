"""Queue layouts: one class per design of ``../shared/design/layouts.md``.

:func:`layout_for` builds the :class:`~jobctl.layouts.base.Layout` of a
catalogue entry.  Layout modules are imported lazily so that ``jobctl --help``
stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

    from ..config import QueueConfig
    from .base import Layout

__all__ = ["known_layouts", "layout_for"]

# layout name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "reliable-list": "jobctl.layouts.reliable_list.layout:ReliableList",
    "stream-group": "jobctl.layouts.stream_group.layout:StreamGroup",
    "delayed-events": "jobctl.layouts.delayed_events.layout:DelayedEvents",
    "delay-zset": "jobctl.layouts.delay_zset.layout:DelayZset",
    "redisson-delayed-queue": "jobctl.layouts.redisson_delayed_queue.layout:RedissonDelayedQueue",
    "hash-job": "jobctl.layouts.hash_job.layout:HashJob",
    "json-list": "jobctl.layouts.json_list.layout:JsonList",
}


def known_layouts() -> frozenset[str]:
    """Names accepted as ``layout = "..."`` in the config."""
    return frozenset(_REGISTRY)


def layout_for(client: "redis.Redis", queue: "QueueConfig") -> "Layout":
    """The layout object for ``queue`` on ``client``.

    Raises :class:`~jobctl.errors.ConfigError` for an unknown layout name.
    """
    try:
        target = _REGISTRY[queue.layout]
    except KeyError:
        from ..errors import ConfigError

        raise ConfigError(f"queue {queue.name}: unknown layout {queue.layout!r}") from None
    module, cls = target.split(":")
    return getattr(import_module(module), cls)(client, queue)
