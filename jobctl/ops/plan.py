"""Plans: what an operation will touch, computed before anything moves.

A :class:`Plan` lists the matched jobs with their *fence*: what the plan saw
(payload SHA1, zset score or visibility deadline, tail position in the dead
list).  Applying is fenced to it: a job that changed or moved since is
skipped, a job that arrived since is never touched.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .spec import OpSpec

__all__ = ["PlannedJob", "Plan", "payload_sha1"]


def payload_sha1(raw: bytes | None) -> str:
    """Hex SHA1 of a payload value, as Lua's ``redis.sha1hex`` computes it."""
    return hashlib.sha1(raw or b"").hexdigest()


@dataclass(slots=True)
class PlannedJob:
    """One matched job: ``shard`` index into the layout's shards, ``position``
    from the served end at plan time (dead list: from the tail), ``score``
    (zset score or visibility deadline, epoch ms; ``None`` when none),
    ``sha1`` of the payload the plan saw."""

    job_id: str
    shard: int
    position: int | None
    score: int | None
    sha1: str


@dataclass
class Plan:
    """The result of planning ``spec`` at ``now_ms``.

    ``scanned`` counts jobs examined; ``breakdown`` counts matched jobs by
    ``(job type, last error code)``; ``malformed`` lists ids excluded because
    their envelope did not parse; ``dangling`` ids whose payload is missing.
    ``walked`` maps shard index to how many tail positions of the source list
    the apply must walk (dead-list operations).
    """

    spec: OpSpec
    now_ms: int
    jobs: list[PlannedJob] = field(default_factory=list)
    scanned: int = 0
    breakdown: Counter = field(default_factory=Counter)
    malformed: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    walked: dict[int, int] = field(default_factory=dict)
    truncated: bool = False
    #: fenced ids (``spec.fence``) not planned: id -> "changed since export" | "no longer <state>"
    fence_skipped: dict[str, str] = field(default_factory=dict)

    @property
    def planned(self) -> int:
        return len(self.jobs)

    def sample_ids(self, n: int = 10) -> list[str]:
        return [j.job_id for j in self.jobs[:n]]

    def describe(self) -> str:
        """One sentence: what would change."""
        s = self.spec
        src = s.source.value
        if s.target is None:
            what = f"delete {self.planned:,} {src} job(s) (index entry and payload)"
        else:
            dst = s.target.value
            if s.delay_ms and s.target.value == "scheduled":
                from ..durations import format_duration

                dst += f" (due in {format_duration(s.delay_ms)})"
            what = f"move {self.planned:,} job(s) from {src} to {dst}"
        if s.operation.value == "transform" and s.transform is not None:
            what = f"rewrite {self.planned:,} {src} envelope(s) in place: {s.transform.describe()}"
        elif s.operation.value == "migrate" and s.destination is not None:
            what = f"move {self.planned:,} {src} job(s) to queue {s.destination.queue_name}, payloads with them"
        if s.operation.value == "redrive":
            what += "; envelopes get redrivenAtEpochMs, redriveOperation and redriveCount"
            what += ", attempt reset to 0" if s.reset_attempts else ", attempt kept"
        return f"{s.operation.value} {s.queue}: {what}"

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.spec.operation.value,
            "operation_id": self.spec.op_id,
            "queue": self.spec.queue,
            "source": self.spec.source.value,
            "target": self.spec.target.value if self.spec.target else None,
            "filter": self.spec.filter.text,
            "now_ms": self.now_ms,
            "scanned": self.scanned,
            "planned": self.planned,
            "truncated": self.truncated,
            "breakdown": [{"type": t, "error": e, "count": c} for (t, e), c in self.breakdown.most_common()],
            "sample_ids": self.sample_ids(),
            "malformed": len(self.malformed),
            "malformed_sample": self.malformed[:10],
            "dangling": len(self.dangling),
            "dangling_sample": self.dangling[:10],
            "fence_skipped": len(self.fence_skipped),
            "fence_skipped_reasons": dict(Counter(self.fence_skipped.values())),
            "fence_skipped_sample": list(self.fence_skipped)[:10],
            "change": self.describe(),
        }
