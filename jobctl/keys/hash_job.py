"""Key names of the hash-job layout (layouts.md section 3)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import glob_escape

__all__ = ["HASH_JOB_KEY_RE", "HASH_JOB_LIST_SUFFIXES", "HashJobKeys"]

#: Parses a hash-job key ``queue:<name>:<suffix>``; group 1 is the queue
#: name, group 2 the state list (``pending``...) or ``job:<id>``.
HASH_JOB_KEY_RE = re.compile(r"^queue:(.+?):(pending|processing|completed|failed|job:.+)$")
#: The state lists of a hash-job queue (``queue:<name>:<suffix>``, lists).
HASH_JOB_LIST_SUFFIXES = ("pending", "processing", "completed", "failed")


@dataclass(frozen=True)
class HashJobKeys:
    """Key names of one hash-job queue (layouts.md section 3; seed 001).

    ``name`` is the queue name of ``queue:<name>:...`` (the seed's
    ``queueName``, ``"jobs"`` in its examples).  The seed puts no hash tag in
    its keys; on Redis Cluster, jobctl's per-job scripts need a name that is
    one (e.g. ``{jobs}``).
    """

    name: str

    # -- keys written by the queue's producers and workers -----------------
    @property
    def pending(self) -> str:
        """List of job ids; producers LPUSH, workers BLMOVE RIGHT LEFT."""
        return f"queue:{self.name}:pending"

    @property
    def processing(self) -> str:
        """List of claimed job ids (claims land at the head)."""
        return f"queue:{self.name}:processing"

    @property
    def completed(self) -> str:
        """List of recently completed ids, newest at the head, LTRIM-capped."""
        return f"queue:{self.name}:completed"

    @property
    def failed(self) -> str:
        """List of terminally failed ids (the DLQ), newest at the head, LTRIM-capped."""
        return f"queue:{self.name}:failed"

    @property
    def events(self) -> str:
        """Pub/sub channel of completion notifications (never written by jobctl)."""
        return f"queue:{self.name}:events"

    def job(self, job_id: str) -> str:
        """Hash of the job's metadata: id, payload, status, attempts, *_at_ms..."""
        return f"queue:{self.name}:job:{job_id}"

    @property
    def job_prefix(self) -> str:
        """Prefix of every job hash of this queue."""
        return f"queue:{self.name}:job:"

    @property
    def job_pattern(self) -> str:
        """SCAN MATCH pattern for this queue's job hashes."""
        return f"queue:{glob_escape(self.name)}:job:*"

    # -- keys owned by jobctl ----------------------------------------------
    @property
    def suppressed(self) -> str:
        """jobctl's zset: suppressed job id -> suppressed-at (epoch ms)."""
        return f"queue:{self.name}:jobctl:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's hash: suppressed job id -> JSON {by, at_ms, reason, operation, ttl_ms}."""
        return f"queue:{self.name}:jobctl:suppressed:info"

    @property
    def journal(self) -> str:
        """jobctl's capped audit stream for this queue."""
        return f"queue:{self.name}:jobctl:journal"

    @property
    def hold(self) -> str:
        """jobctl's hold list: failed ids a window-engine walk set aside,
        counted as dead by every read (restored to the failed list's tail)."""
        return f"queue:{self.name}:jobctl:hold"

    @property
    def walk(self) -> str:
        """jobctl's hash of the running failed-list walk: op, total, popped."""
        return f"queue:{self.name}:jobctl:walk"

    @property
    def lease(self) -> str:
        """jobctl's lease string (``<op id> <host> <pid>``, PX TTL)."""
        return f"queue:{self.name}:jobctl:lease"

    @property
    def state_lists(self) -> tuple[str, ...]:
        """The four state lists, in a stable order."""
        return (self.pending, self.processing, self.completed, self.failed)
