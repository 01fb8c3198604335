"""Plans: what an operation will touch, computed before anything moves.

A :class:`Plan` lists the matched jobs with their *fence*: what the plan saw
(payload SHA1, zset score or visibility deadline, tail position in the dead
list).  Applying is fenced to it: a job that changed or moved since is
skipped, a job that arrived since is never touched.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .spec import OpSpec

__all__ = ["PlannedJob", "Plan", "JobColumns", "TailRange", "PredicateRange", "payload_sha1"]


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


_NO_SHA = bytes(20)


class JobColumns:
    """Planned jobs kept column-wise: a list-like of :class:`PlannedJob`
    that stores ~60-90 bytes a job instead of a Python object each (ids
    joined in one ``bytearray`` with ``array('q')`` offsets, shard,
    position and score in ``array('q')`` (``-1``: ``None``), the SHA1 as
    its 20-byte digest; ``""``, no SHA1, as 20 zero bytes).  Items are
    built on access.  Supports ``append``, ``len``, iteration, indexing and
    slicing (a slice is a ``list``).  A job whose ``sha1`` is neither 40 hex
    digits nor ``""``, or a subclass of :class:`PlannedJob`, is kept as is
    (a side table).
    """

    __slots__ = ("_ids", "_ends", "_shard", "_pos", "_score", "_sha", "_other")
    _NONE = -1 << 62

    def __init__(self) -> None:
        self._ids = bytearray()
        self._ends = array("q")
        self._shard = array("q")
        self._pos = array("q")
        self._score = array("q")
        self._sha = bytearray()
        self._other: dict[int, PlannedJob] = {}

    def append(self, job: PlannedJob) -> None:
        n = len(self._ends)
        compact = type(job) is PlannedJob and len(job.sha1) in (0, 40)
        digest = _NO_SHA
        if compact and job.sha1:
            try:
                digest = bytes.fromhex(job.sha1)
            except ValueError:
                compact = False
        if not compact:
            self._other[n] = job
            digest = _NO_SHA
        self._ids += job.job_id.encode("utf-8", "surrogateescape")
        self._ends.append(len(self._ids))
        self._shard.append(job.shard)
        self._pos.append(self._NONE if job.position is None else job.position)
        self._score.append(self._NONE if job.score is None else job.score)
        self._sha += digest

    def add(self, job_id: str, shard: int, position: int | None, digest: bytes = _NO_SHA) -> None:
        """Append one job from its parts (no :class:`PlannedJob` built):
        ``digest`` the fence's 20-byte SHA1 digest (none: 20 zero bytes);
        no score."""
        self._ids += job_id.encode("utf-8", "surrogateescape")
        self._ends.append(len(self._ids))
        self._shard.append(shard)
        self._pos.append(self._NONE if position is None else position)
        self._score.append(self._NONE)
        self._sha += digest

    def __len__(self) -> int:
        return len(self._ends)

    def job_id(self, n: int) -> str:
        """The id of the ``n``-th job (no :class:`PlannedJob` built)."""
        start = self._ends[n - 1] if n else 0
        return self._ids[start:self._ends[n]].decode("utf-8", "surrogateescape")

    def position(self, n: int) -> int | None:
        p = self._pos[n]
        return None if p == self._NONE else p

    def shard(self, n: int) -> int:
        return self._shard[n]

    def sha1(self, n: int) -> str:
        """The fence SHA1 (hex, ``""`` for none) of the ``n``-th job (no
        :class:`PlannedJob` built)."""
        other = self._other.get(n)
        if other is not None:
            return other.sha1
        digest = self._sha[20 * n:20 * n + 20]
        return "" if digest == _NO_SHA else digest.hex()

    def _item(self, n: int) -> PlannedJob:
        other = self._other.get(n)
        if other is not None:
            return other
        score = self._score[n]
        digest = bytes(self._sha[20 * n:20 * n + 20])
        return PlannedJob(job_id=self.job_id(n), shard=self._shard[n], position=self.position(n),
                          score=None if score == self._NONE else score,
                          sha1="" if digest == _NO_SHA else digest.hex())

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self._item(n) for n in range(*key.indices(len(self)))]
        n = key + len(self) if key < 0 else key
        if not 0 <= n < len(self):
            raise IndexError(key)
        return self._item(n)

    def __iter__(self) -> Iterator[PlannedJob]:
        return (self._item(n) for n in range(len(self)))


class TailRange:
    """The planned jobs of an unfiltered dead-list plan: the ``W`` tail
    positions of each shard's dead list (``walked``: shard index -> ``W``),
    no column per job, so its memory does not grow with the DLQ.  The window
    engine reads the ids of each window just before moving it (identity by
    position: workers only push at the head).  ``len`` is the sum of the
    ``W``; ``sample`` holds a few ids from the bounded envelope sample
    (:attr:`Plan.breakdown_sampled`).  Indexing and iteration are refused
    (``TypeError``): no per-job data is kept.
    """

    __slots__ = ("walked", "sample")

    def __init__(self, walked: dict[int, int], sample: list[str] | None = None) -> None:
        self.walked = dict(walked)
        self.sample = list(sample or [])

    def __len__(self) -> int:
        return sum(self.walked.values())

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
    server-side (:mod:`jobctl.layouts.predicate_plan`): per shard the
    ``walked`` tail positions in windows of ``window`` positions, and per
    window ``(digest, bitmap, ids)``: the SHA1 of the window's payload keys
    joined by ``"\n"`` (its fence: the window engine moves nothing of a window
    that changed), the matches, one bit per position (bit ``7 - i % 8`` of
    byte ``i // 8``), and the matches' ids joined by ``"\n"`` (bytes, to name
    them when their window changed).  ``count`` matches in all; one bit per
    walked position plus the matches' ids, no object per job; ``sample``
    holds the first matches' ids."""

    __slots__ = ("count", "window", "windows")

    def __init__(self, walked: dict[int, int], count: int, window: int,
                 windows: dict[int, list[tuple[str, bytes, bytes]]], sample: list[str] | None = None) -> None:
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
                from ..durations import format_duration

                dst += f" (due in {format_duration(s.delay_ms)})"
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
