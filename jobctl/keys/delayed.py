"""Key names of the delayed layouts: delayed-events (layouts.md section 5),
delay-zset and Redisson's delayed queue (section 6)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import JobctlKeys, SuppressionKeys

__all__ = ["DELAYED_EVENTS_SEPARATOR", "DELAYED_EVENTS_ZSET", "DelayedEventsKeys", "simple_class_name",
           "delayed_event_member", "split_delayed_event_member", "DelayZsetKeys", "REDISSON_DELAY_KEY_RE",
           "RedissonDelayedKeys"]

#: Separator of a delayed-events member ``<event class>###<event id>``.
DELAYED_EVENTS_SEPARATOR = "###"
#: Name (after the data-set prefix) of the delayed-events zset.
DELAYED_EVENTS_ZSET = "delayed_events"


@dataclass(frozen=True)
class DelayedEventsKeys(SuppressionKeys):
    """Key names of one delayed-events service (layouts.md section 5).

    ``prefix`` is the library's data-set prefix ("" in the article; some
    versions default to ``"de_"``): every key of the service starts with it.
    """

    prefix: str = ""

    @property
    def jobctl_base(self) -> str:
        return f"{self.prefix}{DELAYED_EVENTS_ZSET}"

    @property
    def zset(self) -> str:
        """Zset member ``<class>###<id>`` -> next attempt time (epoch ms)."""
        return f"{self.prefix}{DELAYED_EVENTS_ZSET}"

    @property
    def events(self) -> str:
        """Hash member -> envelope JSON {type, payload, attempt, logContext}."""
        return f"{self.prefix}events"

    @property
    def lock(self) -> str:
        """The dispatcher's lock (SET NX EX)."""
        return f"{self.prefix}delayed_events_lock"

    def type_list(self, event_class: str) -> str:
        """List of envelopes dispatched for handling: the lowercase simple
        class name of ``event_class`` (``com.acme.PaymentCheck`` -> ``paymentcheck``)."""
        return f"{self.prefix}{simple_class_name(event_class).lower()}"


def simple_class_name(event_class: str) -> str:
    """Java's ``getSimpleName`` of a binary class name: the part after the
    last ``.`` and ``$``."""
    return event_class.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def delayed_event_member(event_class: str, event_id: str) -> str:
    """``<event class>###<event id>``: the zset member and hash field."""
    return f"{event_class}{DELAYED_EVENTS_SEPARATOR}{event_id}"


def split_delayed_event_member(member: str) -> tuple[str, str] | None:
    """``("com.acme.X", "42")`` from ``"com.acme.X###42"``; ``None`` if malformed."""
    cls, sep, event_id = member.partition(DELAYED_EVENTS_SEPARATOR)
    return (cls, event_id) if sep and cls and event_id else None


# -- delay-zset and Redisson's delayed queue (layouts.md section 6; seed 004) --

@dataclass(frozen=True)
class DelayZsetKeys(JobctlKeys):
    """The single zset of a delay-zset queue (e.g. ``delay_queue``)."""

    key: str

    @property
    def zset(self) -> str:
        """Zset member (job id or small payload) -> due time (epoch ms)."""
        return self.key

    @property
    def jobctl_base(self) -> str:
        return self.key


#: Parses Redisson's ``redisson_delay_queue_timeout:{name}`` / ``redisson_delay_queue:{name}``.
REDISSON_DELAY_KEY_RE = re.compile(r"^redisson_delay_queue(_timeout)?:\{(.+)\}$")


@dataclass(frozen=True)
class RedissonDelayedKeys(JobctlKeys):
    """Key names of one Redisson ``RDelayedQueue`` whose destination queue is ``name``."""

    name: str

    @property
    def timeout(self) -> str:
        """Zset packed member -> due time (epoch ms)."""
        return f"redisson_delay_queue_timeout:{{{self.name}}}"

    @property
    def order(self) -> str:
        """List of the same packed members, in insertion order."""
        return f"redisson_delay_queue:{{{self.name}}}"

    @property
    def destination(self) -> str:
        """The destination list (an ``RQueue``): due values, codec bytes only."""
        return self.name

    @property
    def jobctl_base(self) -> str:
        """Its journal is never written: the layout is read-only in jobctl."""
        return f"redisson_delay_queue:{{{self.name}}}"
