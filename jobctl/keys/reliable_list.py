"""Key names of the reliable-list layout (layouts.md section 1)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import WindowKeys

__all__ = ["ReliableListKeys", "RELIABLE_LIST_SCAN_PATTERN", "RELIABLE_LIST_KEY_RE", "OWNER_SUFFIX",
           "RELIABLE_LIST_SUFFIX_TYPES", "RELIABLE_LIST_PRIORITY_SUFFIX_RE"]

#: SCAN MATCH pattern that finds the keys of every reliable-list queue.
RELIABLE_LIST_SCAN_PATTERN = "queue:{*}:*"

#: Parses ``queue:{tag}:<suffix>``; group 1 is the tag, group 2 the suffix.
RELIABLE_LIST_KEY_RE = re.compile(r"^queue:\{([^{}]+)\}:(.+)$")
#: Suffix of a reliable-list key (after ``queue:{tag}:``) -> the Redis type it
#: must have (discovery recognises a shard by them; layouts.md section 1).
RELIABLE_LIST_SUFFIX_TYPES: dict[str, bytes] = {
    "ready": b"list",
    "processing": b"list",
    "processing:deadline": b"zset",
    "scheduled": b"zset",
    "dead": b"list",
    "jobctl:suppressed": b"zset",
    "jobctl:paused": b"list",  # a queue whose every job is paused is still a queue
    "jobctl:migrating": b"list",
}
#: Suffix of a priority ready list (``ready:p<N>``, a list; seed 000 s.18).
RELIABLE_LIST_PRIORITY_SUFFIX_RE = re.compile(r"^ready:p(\d+)$")

#: Suffix of the owner-lease key ``job:{tag}:<id>:owner`` (seed 000 section 7);
#: such keys are not payloads.
OWNER_SUFFIX = ":owner"

@dataclass(frozen=True)
class ReliableListKeys(WindowKeys):
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

    # -- keys owned by jobctl (and :class:`WindowKeys`) -------------------
    @property
    def jobctl_base(self) -> str:
        return f"queue:{{{self.tag}}}"

    @property
    def paused(self) -> str:
        """jobctl's list of paused job ids (``jobctl pause``), in ready order:
        head newest, tail the next one a worker would have taken."""
        return f"queue:{{{self.tag}}}:jobctl:paused"

    @property
    def paused_info(self) -> str:
        """jobctl's hash: paused job id -> JSON {by, at_ms, reason, operation, from, score}."""
        return f"queue:{{{self.tag}}}:jobctl:paused:info"

    @property
    def migrating(self) -> str:
        """jobctl's list of jobs taken out of this shard by ``jobctl migrate``
        and not yet deleted here (the crash journal of a copy-then-delete
        move; served end: the tail)."""
        return f"queue:{{{self.tag}}}:jobctl:migrating"

    @property
    def migrating_info(self) -> str:
        """jobctl's hash: migrating job id -> JSON {dst, from, score, sha1, operation, by, at_ms}."""
        return f"queue:{{{self.tag}}}:jobctl:migrating:info"

    @property
    def migrated_in(self) -> str:
        """jobctl's hash on a destination shard: job id copied in by ``jobctl migrate`` -> payload SHA1,
        until the source copy is deleted (a rerun then never copies it twice)."""
        return f"queue:{{{self.tag}}}:jobctl:migrated-in"

    @property
    def envelopes_before(self) -> str:
        """jobctl's hash: job id -> the envelopes ``jobctl migrate --transform``
        replaced, a stack of layers newest first (format: ``jobctl/lua/rl_transform.lua``;
        ``--rollback OPERATION`` pops OPERATION's layer back into the job)."""
        return f"queue:{{{self.tag}}}:jobctl:envelopes-before"

    @property
    def holds(self) -> str:
        """jobctl's hash: hold id -> JSON {filter, reason, by, since_ms} (``pause --hold``)."""
        return f"queue:{{{self.tag}}}:jobctl:holds"

    @property
    def fixed_keys(self) -> tuple[str, ...]:
        """The non-priority state keys, in a stable order."""
        return (self.ready, self.processing, self.deadline, self.scheduled,
                self.dead, self.suppressed)
