"""Queue layouts: one package per design of ``../shared/design/layouts.md``.

The registry: layout name -> ``"module:Class"``.  :func:`layout_for` builds
the :class:`~jobctl.layouts.base.Layout` of a catalogue entry,
:func:`layout_class` gives a layout's class (its declarations:
:class:`~jobctl.layouts.facts.LayoutFacts`).  Layout modules are imported
lazily so that ``jobctl --help`` stays fast.  Adding a layout: one package
plus one line here (or :func:`register`, e.g. from a test);
``docs/architecture.md`` states the steps.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

    from ..config import QueueConfig
    from .base import Layout

__all__ = ["known_layouts", "layout_for", "layout_class", "layout_classes", "register", "unregister",
           "DEFAULT_LAYOUT"]

#: The layout of a catalogue entry that names none (and of a session without a catalogue).
DEFAULT_LAYOUT = "reliable-list"

# layout name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "reliable-list": "jobctl.layouts.reliable_list.layout:ReliableList",
    "stream-group": "jobctl.layouts.stream_group.layout:StreamGroup",
    "delayed-events": "jobctl.layouts.delayed_events.layout:DelayedEvents",
    "redisson-delayed-queue": "jobctl.layouts.redisson_delayed_queue.layout:RedissonDelayedQueue",
    "delay-zset": "jobctl.layouts.delay_zset.layout:DelayZset",  # after Redisson's: discovery order
    "hash-job": "jobctl.layouts.hash_job.layout:HashJob",
    "json-list": "jobctl.layouts.json_list.layout:JsonList",
    "rq": "jobctl.layouts.rq.layout:Rq",
    "bullmq": "jobctl.layouts.bullmq.layout:BullMQ",
    "celery": "jobctl.layouts.celery.layout:Celery",
    "sidekiq": "jobctl.layouts.sidekiq.layout:Sidekiq",
}


def known_layouts() -> frozenset[str]:
    """Names accepted as ``layout = "..."`` in the config."""
    return frozenset(_REGISTRY)


def register(name: str, target: str) -> None:
    """Add (or replace) the layout ``name``, implemented by ``target``
    (``"package.module:Class"``, imported when first used)."""
    if ":" not in target:
        raise ValueError(f"layout target must be 'module:Class', got {target!r}")
    _REGISTRY[name] = target


def unregister(name: str) -> None:
    """Remove the layout ``name`` (a no-op when unknown)."""
    _REGISTRY.pop(name, None)


def layout_class(name: str) -> "type[Layout]":
    """The class of the layout ``name``.  Raises :class:`KeyError` for an
    unknown name, :class:`ImportError` when its module cannot be imported."""
    module, cls = _REGISTRY[name].split(":")
    return getattr(import_module(module), cls)


def layout_classes() -> "list[type[Layout]]":
    """Every registered layout's class, in registry order (imports them all)."""
    return [layout_class(name) for name in _REGISTRY]


def layout_for(client: "redis.Redis", queue: "QueueConfig") -> "Layout":
    """The layout object for ``queue`` on ``client``.

    Raises :class:`~jobctl.errors.ConfigError` for an unknown layout name.
    """
    if queue.layout not in _REGISTRY:
        from ..errors import ConfigError

        raise ConfigError(f"queue {queue.name}: unknown layout {queue.layout!r}")
    return layout_class(queue.layout)(client, queue)
