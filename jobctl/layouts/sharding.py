"""The shard a job id belongs to, by the rule a sharded queue's producers
use (seed 000 section 20: one logical queue over ``<tag>:00..`` hash tags).

The rule is a fact of the catalogue: ``shard_rule = "<name>"`` in the
queue's config.  Known rules:

* ``java-hashcode-floormod``: ``Math.floorMod(jobId.hashCode(), shards)``
  (Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` in signed
  32-bit arithmetic, over UTF-16 code units: a character outside the Basic
  Multilingual Plane counts as its two surrogates, as in Java).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..config import QueueConfig
    from .base import Layout

__all__ = ["SHARD_RULES", "shard_rule", "java_hashcode_floormod", "java_string_hash", "utf16_code_units",
           "reshard_destination"]

# UTF-16 in this machine's byte order, so the code units read back as "H" items.
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def utf16_code_units(text: str):
    """The UTF-16 code units of ``text`` (an iterable of ints 0..0xFFFF), as
    a Java ``String`` holds them: a character above U+FFFF gives its two
    surrogates; a lone surrogate in ``text`` is kept as one unit."""
    if text.isascii():
        return map(ord, text)
    return memoryview(text.encode(_UTF16, "surrogatepass")).cast("H")


def java_string_hash(text: str) -> int:
    """Java's ``text.hashCode()``: a signed 32-bit int (``s[0]*31^(n-1) +
    ... + s[n-1]`` over UTF-16 code units, with int overflow)."""
    h = 0
    for unit in utf16_code_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hashcode_floormod(job_id: str, shards: int) -> int:
    """``Math.floorMod(jobId.hashCode(), shards)``: the shard index in
    ``0..shards-1`` (``shards`` >= 1) that a Java producer picks."""
    return java_string_hash(job_id) % shards  # Python's % is floorMod


#: Rule name -> ``fn(job_id, shards) -> shard index``.
SHARD_RULES: dict[str, Callable[[str, int], int]] = {"java-hashcode-floormod": java_hashcode_floormod}


def shard_rule(queue) -> Callable[[str, int], int]:
    """The rule of ``queue`` (a :class:`~jobctl.config.QueueConfig`); raises
    :class:`UsageError` when the catalogue names none or an unknown one."""
    name = (queue.options or {}).get("shard_rule")
    if name is None:
        raise UsageError(f"queue {queue.name} is sharded: set shard_rule (one of {', '.join(SHARD_RULES)}) in its "
                         "catalogue entry, the rule its producers use to pick a shard")
    rule = SHARD_RULES.get(str(name))
    if rule is None:
        raise UsageError(f"queue {queue.name}: unknown shard_rule {name!r} (known: {', '.join(SHARD_RULES)})")
    return rule


def reshard_destination(layout: "Layout", shards: int) -> "QueueConfig":
    """The destination of ``jobctl reshard QUEUE --shards N`` (CLI and
    TUI, checked once): the queue ``layout`` with ``shards`` shards (the
    migrate request's ``destination``).  Raises :class:`UsageError`: a layout not ``reshardable``, no
    (or an unknown) ``shard_rule``, ``shards`` outside 1..1024, or the
    number of shards it already has."""
    import dataclasses

    if not layout.reshardable:
        from . import layout_classes

        names = " or ".join(cls.name for cls in layout_classes() if cls.reshardable)
        raise UsageError(f"reshard is for the {names} layout; {layout.queue_name} is {layout.name}")
    if not 1 <= shards <= 1024:
        raise UsageError(f"--shards: {shards} is not in 1..1024")
    shard_rule(layout.queue)
    if len(layout.shards) == shards:
        raise UsageError(f"{layout.queue_name} already has {shards} shard(s)")
    return dataclasses.replace(layout.queue, shards=shards)
