"""Key names of one BullMQ queue (``<prefix>:<queue>:<kind>``, one hash
per job ``<prefix>:<queue>:<id>``), plus jobctl's journal for it.

BullMQ's Cluster story is a hash tag in the prefix (``{bull}``): every key
of a queue then shares a slot, which
:meth:`~jobctl.layouts.base.KeyedLayout.slot_keys` sees from these names."""

from __future__ import annotations

import re

__all__ = ["BullKeys", "DEFAULT_PREFIX", "STATE_KINDS", "KEY_RE"]

#: BullMQ's default prefix (``QueueBase`` ``opts.prefix``).
DEFAULT_PREFIX = "bull"
#: Per-queue BullMQ keys recognised by discovery: kind -> Redis type.
STATE_KINDS = {"wait": b"list", "paused": b"list", "active": b"list", "prioritized": b"zset", "delayed": b"zset",
               "failed": b"zset", "completed": b"zset", "waiting-children": b"zset", "marker": b"zset",
               "meta": b"hash", "events": b"stream", "id": b"string", "pc": b"string"}
#: ``<prefix>:<queue>:<kind>`` (a queue name never holds ``:``: BullMQ refuses one).
KEY_RE = re.compile(r"^(.+):([^:]+):(" + "|".join(re.escape(k) for k in STATE_KINDS) + r")$")


class BullKeys:
    """The keys of the BullMQ queue ``name`` under ``prefix``."""

    def __init__(self, prefix: str, name: str) -> None:
        self.prefix = prefix
        self.name = name
        self.base = f"{prefix}:{name}:"

    def _k(self, kind: str) -> str:
        return self.base + kind

    @property
    def wait(self) -> str:
        """LIST of waiting ids: producers LPUSH (lifo: RPUSH), workers take from the right."""
        return self._k("wait")

    @property
    def paused(self) -> str:
        """Legacy LIST of a paused queue (before v5); BullMQ 6 moves it back on resume."""
        return self._k("paused")

    @property
    def prioritized(self) -> str:
        """ZSET id -> ``priority * 2^32 + (pc counter mod 2^32)``."""
        return self._k("prioritized")

    @property
    def pc(self) -> str:
        """The priority counter (a string incremented per prioritized add)."""
        return self._k("pc")

    @property
    def delayed(self) -> str:
        """ZSET id -> ``due_ms * 0x1000 + sequence``."""
        return self._k("delayed")

    @property
    def active(self) -> str:
        """LIST of the ids workers hold (with a ``<id>:lock`` key each)."""
        return self._k("active")

    @property
    def failed(self) -> str:
        """ZSET id -> finishedOn (ms)."""
        return self._k("failed")

    @property
    def completed(self) -> str:
        """ZSET id -> finishedOn (ms)."""
        return self._k("completed")

    @property
    def waiting_children(self) -> str:
        """ZSET of flow parents waiting for their children."""
        return self._k("waiting-children")

    @property
    def marker(self) -> str:
        """ZSET the workers block on (``BZPOPMIN``): the wake-up signal."""
        return self._k("marker")

    @property
    def meta(self) -> str:
        """HASH: ``version``, ``paused``, ``concurrency``, ``opts.maxLenEvents``."""
        return self._k("meta")

    @property
    def events(self) -> str:
        """The events STREAM (``MAXLEN ~ opts.maxLenEvents``)."""
        return self._k("events")

    @property
    def journal(self) -> str:
        """jobctl's audit stream of this queue (outside BullMQ's names)."""
        return f"jobctl:bullmq:{self.prefix}:{self.name}:journal"

    def job(self, job_id: str) -> str:
        """The job's HASH."""
        return self.base + job_id

    def job_side_keys(self, job_id: str) -> list[str]:
        """The keys BullMQ deletes with a job besides its hash (``removeJobKeys``)."""
        job = self.job(job_id)
        return [f"{job}:{s}" for s in ("logs", "dependencies", "processed", "failed", "unsuccessful")]

    def dedup(self, dedup_id: str) -> str:
        """The deduplication key of ``deid``, holding the job id it points at."""
        return self._k(f"de:{dedup_id}")
