"""What every layout's key names share: shard hash tags, the day of a
day-keyed key, SCAN glob escaping, the journal cap, and the base classes of
jobctl's own keys beside a queue's (same hash tag)."""

from __future__ import annotations

import re
import time

__all__ = ["JOURNAL_STREAM_MAXLEN", "utc_day", "shard_tags", "split_shard_tag", "glob_escape", "JobctlKeys",
           "SuppressionKeys", "WindowKeys", "fixed_key_names"]

#: Approximate cap (XADD MAXLEN ~) of the per-queue audit journal stream.
JOURNAL_STREAM_MAXLEN = 10_000

_SHARD_RE = re.compile(r"^(.+):(\d{2,})$")


def fixed_key_names(keys) -> list[str]:
    """Every key name a key-names object (of :mod:`jobctl.keys`) holds as a
    public property, patterns (``*``) left out, in property-name order."""
    props = (n for n in dir(type(keys)) if not n.startswith("_") and isinstance(getattr(type(keys), n), property))
    return [v for v in (getattr(keys, n) for n in props) if isinstance(v, str) and "*" not in v]


def utc_day(epoch_ms: int) -> str:
    """The UTC day ``YYYY-MM-DD`` of ``epoch_ms``: the last part of a
    day-keyed jobctl key (:meth:`WindowKeys.redriven`)."""
    return time.strftime("%Y-%m-%d", time.gmtime(epoch_ms // 1000))


def shard_tags(tag: str, shards: int | None) -> list[str]:
    """The hash tags of one logical queue.

    ``shards=None`` (or 0) means unsharded: ``[tag]``.  Otherwise tags are
    ``<tag>:00`` .. ``<tag>:<shards-1>``, zero-padded to at least two digits
    (seed 000 section 20: ``{email:00}`` .. ``{email:63}``).
    """
    if not shards:
        return [tag]
    width = max(2, len(str(shards - 1)))
    return [f"{tag}:{i:0{width}d}" for i in range(shards)]


def split_shard_tag(tag: str) -> tuple[str, int] | None:
    """``"email:07"`` -> ``("email", 7)``; ``None`` when the tag is no shard."""
    m = _SHARD_RE.match(tag)
    if not m:
        return None
    return m.group(1), int(m.group(2))


def glob_escape(text: str) -> str:
    """``text`` with the SCAN MATCH glob characters ``* ? [ ] \\`` escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


# -- jobctl's own keys, beside each queue's (same hash tag) ---------------------

class JobctlKeys:
    """jobctl's keys of one queue (or shard): ``<jobctl_base>:jobctl:<name>``,
    where ``jobctl_base`` names the queue in the layout's own key style (so
    they share its hash tag)."""

    @property
    def jobctl_base(self) -> str:
        raise NotImplementedError

    @property
    def journal(self) -> str:
        """jobctl's capped audit stream for this queue (or shard)."""
        return f"{self.jobctl_base}:jobctl:journal"


class SuppressionKeys(JobctlKeys):
    """jobctl's suppressed state: a zset and an info hash."""

    @property
    def suppressed(self) -> str:
        """jobctl's zset: suppressed job id -> suppressed-at (epoch ms)."""
        return f"{self.jobctl_base}:jobctl:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's hash: suppressed job id -> JSON {by, at_ms, reason, operation}
        plus what the layout needs to put the job back (docs/layouts.md)."""
        return f"{self.jobctl_base}:jobctl:suppressed:info"


class WindowKeys(SuppressionKeys):
    """The keys of the window engine's dead-list walks (:mod:`jobctl.ops.walk`)."""

    @property
    def hold(self) -> str:
        """jobctl's hold list: dead jobs a window-engine walk set aside,
        counted as dead by every read (put back where they were taken from)."""
        return f"{self.jobctl_base}:jobctl:hold"

    @property
    def walk(self) -> str:
        """jobctl's hash of the running dead-list walk: op, total, popped."""
        return f"{self.jobctl_base}:jobctl:walk"

    @property
    def lease(self) -> str:
        """jobctl's lease string: the operation that owns this queue's (or
        shard's) sources (``<op id> <host> <pid>``, PX TTL renewed by the runner)."""
        return f"{self.jobctl_base}:jobctl:lease"

    @property
    def redriven_undated(self) -> str:
        """jobctl's redrive record before it was kept by day (one hash for all
        time, written by jobctl until 2026-11-27): renamed into today's by
        the next walk (:func:`jobctl.ops.redrive_record.upkeep`)."""
        return f"{self.jobctl_base}:jobctl:redriven"

    def redriven(self, day: str) -> str:
        """jobctl's redrive record of one UTC day ``YYYY-MM-DD``
        (:func:`utc_day`), a hash: job id -> JSON [op id, redriven at
        (epoch ms), count] (:mod:`jobctl.ops.redrive_record`)."""
        return f"{self.jobctl_base}:jobctl:redriven:{day}"
