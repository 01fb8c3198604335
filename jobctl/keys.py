"""Every Redis key name jobctl reads or writes, in one place.

The queues belong to other teams' producers and workers; their key names come
from ``../shared/design/layouts.md`` (reliable-list: seed 000 sections 7-9, 18
and 20).  jobctl adds a few keys of its own (suppressed set, audit journal);
they carry the queue's hash tag too, so that every key of one queue lives in
one Redis Cluster slot and one Lua script may touch them all.

Nothing else in the package formats a key name: layouts, scripts, fixtures and
tests all ask this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ReliableListKeys",
    "shard_tags",
    "split_shard_tag",
    "RELIABLE_LIST_SCAN_PATTERN",
    "RELIABLE_LIST_KEY_RE",
    "JOURNAL_STREAM_MAXLEN",
    "OWNER_SUFFIX",
]

#: SCAN MATCH pattern that finds the keys of every reliable-list queue.
RELIABLE_LIST_SCAN_PATTERN = "queue:{*}:*"

#: Parses ``queue:{tag}:<suffix>``; group 1 is the tag, group 2 the suffix.
RELIABLE_LIST_KEY_RE = re.compile(r"^queue:\{([^{}]+)\}:(.+)$")

#: Suffix of the owner-lease key ``job:{tag}:<id>:owner`` (seed 000 section 7);
#: such keys are not payloads.
OWNER_SUFFIX = ":owner"

#: Approximate cap (XADD MAXLEN ~) of the per-queue audit journal stream.
JOURNAL_STREAM_MAXLEN = 10_000

_SHARD_RE = re.compile(r"^(.+):(\d{2,})$")


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


@dataclass(frozen=True)
class ReliableListKeys:
    """Key names of one reliable-list shard (layouts.md section 1).

    ``tag`` is the Redis Cluster hash tag without braces, e.g. ``"email"`` or
    ``"email:07"``.
    """

    tag: str

    # -- keys written by the queue's producers and workers -----------------
    @property
    def ready(self) -> str:
        """List of job ids; producers LPUSH, workers BLMOVE RIGHT LEFT."""
        return f"queue:{{{self.tag}}}:ready"

    def ready_priority(self, priority: int) -> str:
        """Priority ready list ``ready:p<N>`` (p0 highest; seed 000 s.18)."""
        return f"queue:{{{self.tag}}}:ready:p{priority}"

    @property
    def ready_priority_pattern(self) -> str:
        """SCAN MATCH pattern for this shard's priority ready lists."""
        return f"queue:{{{self.tag}}}:ready:p*"

    @property
    def processing(self) -> str:
        """List of claimed job ids."""
        return f"queue:{{{self.tag}}}:processing"

    @property
    def deadline(self) -> str:
        """Zset job id -> visibility deadline (epoch ms)."""
        return f"queue:{{{self.tag}}}:processing:deadline"

    @property
    def scheduled(self) -> str:
        """Zset job id -> due time (epoch ms): delayed jobs and retries."""
        return f"queue:{{{self.tag}}}:scheduled"

    @property
    def dead(self) -> str:
        """List of dead-lettered job ids (the DLQ); workers LPUSH."""
        return f"queue:{{{self.tag}}}:dead"

    def job(self, job_id: str) -> str:
        """String key holding the JSON envelope of ``job_id``."""
        return f"job:{{{self.tag}}}:{job_id}"

    @property
    def job_prefix(self) -> str:
        """Prefix of every payload key of this shard."""
        return f"job:{{{self.tag}}}:"

    @property
    def job_pattern(self) -> str:
        """SCAN MATCH pattern for this shard's payload keys."""
        return f"job:{{{self.tag}}}:*"

    @property
    def queue_pattern(self) -> str:
        """SCAN MATCH pattern for every ``queue:{tag}:*`` key of this shard."""
        return f"queue:{{{self.tag}}}:*"

    # -- keys owned by jobctl ----------------------------------------------
    @property
    def suppressed(self) -> str:
        """jobctl's zset: suppressed job id -> suppressed-at (epoch ms)."""
        return f"queue:{{{self.tag}}}:jobctl:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's hash: suppressed job id -> JSON {by, at_ms, reason, operation}."""
        return f"queue:{{{self.tag}}}:jobctl:suppressed:info"

    @property
    def journal(self) -> str:
        """jobctl's capped audit stream for this shard."""
        return f"queue:{{{self.tag}}}:jobctl:journal"

    @property
    def fixed_keys(self) -> tuple[str, ...]:
        """The non-priority state keys, in a stable order."""
        return (self.ready, self.processing, self.deadline, self.scheduled,
                self.dead, self.suppressed)
