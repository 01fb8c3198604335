"""Plans: what an operation will touch, computed before anything moves.

A :class:`Plan` lists the matched jobs with their *fence*: what the plan saw
(payload SHA1, zset score or visibility deadline, tail position in the dead
list).  Applying is fenced to it: a job that changed or moved since is
skipped, a job that arrived since is never touched.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from .columns import JobColumns, PlannedJob  # re-exported: the planned jobs' store
from .spec import OpSpec

__all__ = ["PlannedJob", "Plan", "JobColumns", "TailRange", "PredicateRange", "payload_sha1"]


def payload_sha1(raw: bytes | None) -> str:
    """Hex SHA1 of a payload value, as Lua's ``redis.sha1hex`` computes it."""
    return hashlib.sha1(raw or b"").hexdigest()


class TailRange:
    """The planned jobs of an unfiltered dead-list plan: the ``W`` tail
    positions of each shard's dead list (``walked``: shard index -> ``W``),
    no column per job, so its memory does not grow with the DLQ.  The window
    engine reads the ids of each window just before moving it (identity by
    position: workers only push at the head).  ``len`` is the sum of the
    ``W``, less the ``excluded`` positions (jobs the walk leaves where they
    are, e.g. dangling ids, that the plan's sample saw); ``sample`` holds a
    few ids from the bounded envelope sample (:attr:`Plan.breakdown_sampled`).
    Indexing and iteration are refused (``TypeError``): no per-job data is kept.
    """

    __slots__ = ("walked", "sample", "excluded")

    def __init__(self, walked: dict[int, int], sample: list[str] | None = None, excluded: int = 0) -> None:
        self.walked = dict(walked)
        self.sample = list(sample or [])
        self.excluded = excluded

    def __len__(self) -> int:
        return sum(self.walked.values()) - self.excluded

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(len(self))
            if start == 0:  # a sample's head (plan.sample_ids)
                return [PlannedJob(job_id=i, shard=0, position=None, score=None, sha1="")
                        for i in self.sample[:stop]]
        raise TypeError("an unfiltered dead-list plan keeps no per-job data (TailRange)")

    def __iter__(self) -> Iterator[PlannedJob]:
        raise TypeError("an unfiltered dead-list plan keeps no per-job data (TailRange)")



class PredicateRange(TailRange):
    """The planned jobs of a filtered dead-list plan whose filter ran
    server-side (:mod:`jobctl.layouts.reliable_list.predicate_plan`): per shard the
    ``walked`` tail positions in windows of ``window`` positions, and per
    window ``(digest, bitmap, ids)``: the SHA1 of the window's payload keys
    joined by ``"\n"`` (its fence: the window engine moves nothing of a window
    that changed), the matches, one bit per position (bit ``7 - i % 8`` of
    byte ``i // 8``), and the matches' ids joined by ``"\n"`` (bytes, to name
    them when their window changed).  ``count`` matches in all; one bit per
    walked position plus the matches' ids, no object per job; ``sample``
    holds the first matches' ids.  Each shard's windows are a ``list`` or a
    :class:`~jobctl.ops.spill.SpillList` (the planner's: past a threshold
    they live in a temporary file, read back in order by the apply)."""

    __slots__ = ("count", "window", "windows")

    def __init__(self, walked: dict[int, int], count: int, window: int,
                 windows: dict[int, Sequence[tuple[str, bytes, bytes]]], sample: list[str] | None = None) -> None:
        super().__init__(walked, sample)
        self.count = count
        self.window = window
        self.windows = windows

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[PlannedJob]:
        """The matches in walk order (built from the bitmaps: for tests and
        small plans; the window engine never iterates)."""
        for shard, wins in sorted(self.windows.items()):
            for w, (_digest, bitmap, ids) in enumerate(wins):
                names = iter(ids.split(b"\n"))
                for i in range(len(bitmap) * 8):
                    if bitmap[i // 8] & (128 >> (i % 8)):
                        job_id = next(names).decode("utf-8", "surrogateescape")
                        yield PlannedJob(job_id=job_id, shard=shard, position=w * self.window + i, score=None,
                                         sha1="")

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self.count)
            if step > 0:  # a head or a range: no more PlannedJob built than it holds
                return list(islice(self, start, stop, step))
            return list(self)[key]
        raise TypeError("a server-side filtered plan keeps no per-job columns (PredicateRange)")

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
    #: a ``list`` or a :class:`JobColumns` (the window engine's layouts)
    jobs: list[PlannedJob] | JobColumns = field(default_factory=list)
    scanned: int = 0
    breakdown: Counter = field(default_factory=Counter)
    malformed: list[str] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)
    walked: dict[int, int] = field(default_factory=dict)
    truncated: bool = False
    #: fenced ids (``spec.fence``) not planned: id -> "changed since export" | "no longer <state>"
    fence_skipped: dict[str, str] = field(default_factory=dict)
    #: where a redrive is recorded: ``"envelope"`` (redrivenAtEpochMs,
    #: redriveOperation, redriveCount written into it) or ``"hash"``
    #: (jobctl's redriven hash; the envelope is rewritten only with
    #: ``--reset-attempts``: the window engine's layouts)
    redrive_record: str = "envelope"
    #: what a redrive writes, in the layout's own words, when neither of the
    #: above says it (hash-job's job hash fields, delayed-events' attempt)
    redrive_note: str | None = None
    #: envelopes read for ``breakdown`` when it comes from a bounded sample
    #: (an unfiltered dead-list plan, ``jobs`` a :class:`TailRange`); 0: every
    #: planned job was read
    breakdown_sampled: int = 0

    @property
    def planned(self) -> int:
        return len(self.jobs)

    def sample_ids(self, n: int = 10) -> list[str]:
        if isinstance(self.jobs, TailRange):
            return self.jobs.sample[:n]
        return [j.job_id for j in self.jobs[:n]]

    def job_ids(self) -> Iterator[str]:
        """The planned ids, in plan order."""
        if isinstance(self.jobs, JobColumns):
            return (self.jobs.job_id(n) for n in range(len(self.jobs)))
        if isinstance(self.jobs, PredicateRange):
            return (j.job_id for j in self.jobs)
        if isinstance(self.jobs, TailRange):
            raise TypeError("an unfiltered dead-list plan keeps no per-job data (TailRange)")
        return (j.job_id for j in self.jobs)

    def describe(self) -> str:
        """One sentence: what would change."""
        s = self.spec
        src = s.source.value
        if s.target is None:
            what = f"delete {self.planned:,} {src} job(s) (index entry and payload)"
        else:
            dst = s.target.value
            if s.delay_ms and s.target.value == "scheduled":
                from ..humanize import duration

                dst += f" (due in {duration(s.delay_ms)})"
            what = f"move {self.planned:,} job(s) from {src} to {dst}"
        if s.operation.value == "transform" and s.transform is not None:
            what = f"rewrite {self.planned:,} {src} envelope(s) in place: {s.transform.describe()}"
        elif s.operation.value == "drain":
            what = (f"remove {self.planned:,} {src} job(s) from the queue (index entry and payload), each only "
                    f"as the export in {s.destination} holds it")
        elif s.operation.value == "migrate" and s.destination is not None:
            what = f"move {self.planned:,} {src} job(s) to queue {s.destination.queue_name}, payloads with them"
        if s.operation.value == "redrive" and self.redrive_note:
            what += f"; {self.redrive_note}"
        elif s.operation.value == "redrive" and self.redrive_record == "hash":
            what += "; each redrive recorded in jobctl's redriven hash (operation, time, count)"
            what += ("; envelopes rewritten with attempt 0 and the redrive record" if s.reset_attempts
                     else ", envelopes untouched (attempt kept)")
        elif s.operation.value == "redrive":
            what += "; envelopes get redrivenAtEpochMs, redriveOperation and redriveCount"
            what += ", attempt reset to 0" if s.reset_attempts else ", attempt kept"
        if isinstance(self.jobs, PredicateRange):
            pass  # the very plan the client-side evaluation makes: the same words
        elif isinstance(self.jobs, TailRange):
            what += (f"; the {self.planned:,} oldest dead job(s) by position, envelopes not read"
                     f" (breakdown from a sample of {self.breakdown_sampled:,}); ids without a payload"
                     " stay dead (gone)")
            if s.operation.value != "purge":
                what += "; malformed envelopes move too (give a --filter to exclude them)"
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
            "breakdown_sampled": bool(self.breakdown_sampled),
            "breakdown_sample": self.breakdown_sampled,
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
