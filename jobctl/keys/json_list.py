"""Key names of the json-list layout (layouts.md section 4)."""

from __future__ import annotations

from dataclasses import dataclass

from .common import WindowKeys

__all__ = ["JSON_LIST_DEFAULT_PREFIX", "JSON_LIST_SUFFIX_TYPES", "JsonListKeys"]

#: Key prefix of a json-list queue when the config names none (seed 002).
JSON_LIST_DEFAULT_PREFIX = "jobs"
#: Suffix of a json-list key (after ``<prefix>``) -> the Redis type it must
#: have (discovery recognises a queue by them; layouts.md).
JSON_LIST_SUFFIX_TYPES: dict[str, bytes] = {
    ":pending": b"list", ":processing": b"list", ":dead": b"list",
    ":processing:times": b"zset", ":attempts": b"hash", ":errors": b"hash",
}


@dataclass(frozen=True)
class JsonListKeys(WindowKeys):
    """Key names of one json-list queue (layouts.md section 4; seed 002).

    ``prefix`` replaces the seed's fixed ``jobs`` so that several queues can
    share a server (``jobs:pending``, ``jobs:processing``...).
    """

    prefix: str = JSON_LIST_DEFAULT_PREFIX

    # -- keys written by the queue's producers and workers -----------------
    @property
    def pending(self) -> str:
        """List of whole job JSON strings; producers LPUSH, workers BLMOVE RIGHT LEFT
        (a retry RPUSHes, so it is claimed next)."""
        return f"{self.prefix}:pending"

    @property
    def processing(self) -> str:
        """List of the claimed JSON strings (claims land at the head)."""
        return f"{self.prefix}:processing"

    @property
    def processing_times(self) -> str:
        """Zset job id -> claim time in epoch *seconds* (float)."""
        return f"{self.prefix}:processing:times"

    @property
    def attempts(self) -> str:
        """Hash job id -> failed attempts so far (HINCRBY on each failure)."""
        return f"{self.prefix}:attempts"

    @property
    def dead(self) -> str:
        """List of dead JSON strings, newest at the tail (workers RPUSH)."""
        return f"{self.prefix}:dead"

    @property
    def errors(self) -> str:
        """Hash job id -> last error message (written when a job dies)."""
        return f"{self.prefix}:errors"

    # -- keys owned by jobctl (and :class:`WindowKeys`) -------------------
    @property
    def jobctl_base(self) -> str:
        return self.prefix

    @property
    def suppressed_raw(self) -> str:
        """jobctl's hash: suppressed job id -> the job's JSON string, byte for byte."""
        return f"{self.prefix}:jobctl:suppressed:raw"
