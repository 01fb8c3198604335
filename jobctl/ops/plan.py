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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
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

    Past :data:`~jobctl.ops.spill.JOB_SPILL_AT` jobs the columns go to an
    anonymous temporary file in chunks of :data:`~jobctl.ops.spill.JOB_CHUNK`
    jobs (:mod:`jobctl.ops.spill`): memory then holds the chunk being filled
    and the last chunks read back, whatever the plan's size.  Reading in
    order costs one file read a chunk; any index still works.  Raises
    :class:`OSError` when the spill file cannot be written or read.
    """

    __slots__ = ("_ids", "_ends", "_shard", "_pos", "_score", "_sha", "_other", "_base", "_chunk", "_limit",
                 "_file")
    _NONE = -1 << 62

    def __init__(self) -> None:
        from . import spill

        self._ids = bytearray()  # the columns of the jobs not spilled (from ``_base`` on)
        self._ends = array("q")  # end of each id in ``_ids``
        self._shard = array("q")
        self._pos = array("q")
        self._score = array("q")
        self._sha = bytearray()
        self._other: dict[int, PlannedJob] = {}
        self._base = 0  # jobs in the spill file (whole chunks)
        self._chunk = max(1, spill.JOB_CHUNK)
        self._limit = max(spill.JOB_SPILL_AT, self._chunk)
        self._file = spill.ChunkFile()

    @property
    def spilled(self) -> int:
        """Jobs kept in the spill file (0: all in memory)."""
        return self._base

    def append(self, job: PlannedJob) -> None:
        n = len(self)
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
        if len(self._ends) >= self._limit:
            self._spill()

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
        if len(self._ends) >= self._limit:
            self._spill()

    def _spill(self) -> None:
        """Move every whole chunk of the in-memory columns to the spill file."""
        from .spill import encode_job_chunk

        c = self._chunk
        full = len(self._ends) // c * c
        for lo in range(0, full, c):
            self._file.append(encode_job_chunk(self._ids, self._ends, self._shard, self._pos, self._score,
                                               self._sha, lo, lo + c))
        cut = self._ends[full - 1] if full else 0
        del self._ids[:cut]
        self._ends = array("q", [e - cut for e in self._ends[full:]])
        del self._shard[:full], self._pos[:full], self._score[:full], self._sha[:20 * full]
        self._base += full
        self._limit = c

    def _cols(self, n: int) -> tuple[tuple, int]:
        """The columns holding job ``n`` (``(ids, ends, shard, pos, score,
        sha)``, in memory or a chunk read back) and its index there."""
        if n < 0:
            n += len(self)
        if n >= self._base:
            return (self._ids, self._ends, self._shard, self._pos, self._score, self._sha), n - self._base
        if n < 0:
            raise IndexError(n)
        from .spill import decode_job_chunk

        return self._file.get(n // self._chunk, decode_job_chunk), n % self._chunk

    def __len__(self) -> int:
        return self._base + len(self._ends)

    def job_id(self, n: int) -> str:
        """The id of the ``n``-th job (no :class:`PlannedJob` built)."""
        if n >= self._base:
            i, ids, ends = n - self._base, self._ids, self._ends
        else:
            (ids, ends, *_), i = self._cols(n)
        start = ends[i - 1] if i else 0
        return ids[start:ends[i]].decode("utf-8", "surrogateescape")

    def position(self, n: int) -> int | None:
        if n >= self._base:
            p = self._pos[n - self._base]
        else:
            cols, i = self._cols(n)
            p = cols[3][i]
        return None if p == self._NONE else p

    def shard(self, n: int) -> int:
        if n >= self._base:
            return self._shard[n - self._base]
        cols, i = self._cols(n)
        return cols[2][i]

    def sha1(self, n: int) -> str:
        """The fence SHA1 (hex, ``""`` for none) of the ``n``-th job (no
        :class:`PlannedJob` built)."""
        other = self._other.get(n)
        if other is not None:
            return other.sha1
        if n >= self._base:
            i, sha = n - self._base, self._sha
        else:
            cols, i = self._cols(n)
            sha = cols[5]
        digest = sha[20 * i:20 * i + 20]
        return "" if digest == _NO_SHA else digest.hex()

    def _item(self, n: int) -> PlannedJob:
        other = self._other.get(n)
        if other is not None:
            return other
        (ids, ends, shard, pos, score, sha), i = self._cols(n)
        start = ends[i - 1] if i else 0
        p, s = pos[i], score[i]
        digest = bytes(sha[20 * i:20 * i + 20])
        return PlannedJob(job_id=ids[start:ends[i]].decode("utf-8", "surrogateescape"), shard=shard[i],
                          position=None if p == self._NONE else p, score=None if s == self._NONE else s,
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
