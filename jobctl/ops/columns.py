"""The planned jobs of a plan: :class:`PlannedJob` (one matched job and its
fence) and :class:`JobColumns`, a list-like of them kept column-wise, spilled
to a temporary file past a threshold (:mod:`jobctl.ops.spill`).  Both are
re-exported by :mod:`jobctl.ops.plan`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from . import spill
from .spill import decode_job_chunk, encode_job_chunk

__all__ = ["PlannedJob", "JobColumns"]


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
                 "_file", "_lo", "_mlen", "_mids", "_mends", "_mshard", "_mpos", "_msha")
    _NONE = -1 << 62

    def __init__(self) -> None:
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
        self._lo = self._mlen = 0  # once spilled: the columns looked up last (_SpilledColumns)
        self._mids = self._msha = b""
        self._mends = self._mshard = self._mpos = self._ends

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

    def add_many(self, ids: bytes, ends: array, shard: int, positions: array, digests: bytes | None = None) -> None:
        """Append jobs of one shard from columns (no call per job): ``ids``
        their ids end to end (UTF-8, surrogate-escaped), ``ends[i]`` where
        the i-th ends in ``ids``, ``positions`` theirs, ``digests`` their
        20-byte fence SHA1s end to end (``None``: none); no score."""
        n, base = len(positions), len(self._ids)
        if len(ends) != n or (n and ends[-1] != len(ids)) or (digests is not None and len(digests) != 20 * n):
            raise ValueError(f"columns of {n} jobs do not match: {len(ends)} ends, {len(ids)} id bytes, "
                             f"{'no' if digests is None else len(digests)} digest bytes")
        self._ids += ids
        self._ends.extend(array("q", [e + base for e in ends]) if base else ends)
        self._shard.extend(array("q", [shard]) * n)
        self._pos.extend(positions)
        self._score.extend(array("q", [self._NONE]) * n)
        self._sha += digests if digests is not None else _NO_SHA * n
        if len(self._ends) >= self._limit:
            self._spill()

    def _spill(self) -> None:
        """Move every whole chunk of the in-memory columns to the spill file."""
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
        self._mlen = 0  # the in-memory columns moved: look up again
        if full and type(self) is JobColumns:
            self.__class__ = _SpilledColumns  # the accessors that read the spill file

    def _cols(self, n: int) -> tuple[tuple, int]:
        """The columns holding job ``n`` (``(ids, ends, shard, pos, score,
        sha)``, in memory or a chunk read back) and its index there."""
        if n < 0:
            n += len(self)
        if n >= self._base:
            return (self._ids, self._ends, self._shard, self._pos, self._score, self._sha), n - self._base
        if n < 0:
            raise IndexError(n)
        return self._file.get(n // self._chunk, decode_job_chunk), n % self._chunk

    def __len__(self) -> int:
        return self._base + len(self._ends)

    def job_id(self, n: int) -> str:
        """The id of the ``n``-th job (no :class:`PlannedJob` built)."""
        start = self._ends[n - 1] if n else 0
        return self._ids[start:self._ends[n]].decode("utf-8", "surrogateescape")

    def position(self, n: int) -> int | None:
        p = self._pos[n]
        return None if p == self._NONE else p

    def shard_position_chunks(self) -> Iterator[tuple[array, array]]:
        """Every job's shard and position (0 for none), in plan order, a
        chunk at a time (the spilled chunks read back one by one, then the
        in-memory columns): memory bounded by a chunk whatever the plan."""
        for k in range(self._base // self._chunk):
            cols = self._file.get(k, decode_job_chunk)
            yield cols[2], self._known(cols[3])
        yield self._shard, self._known(self._pos)

    @classmethod
    def _known(cls, positions: array) -> array:
        """``positions`` with 0 for none (a new array only when there is one)."""
        if cls._NONE not in positions:
            return positions
        return array("q", [0 if p == cls._NONE else p for p in positions])

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


class _SpilledColumns(JobColumns):
    """A :class:`JobColumns` that has spilled (its class from the first
    spill on): the accessors read the columns last looked up (a spilled
    chunk or the in-memory ones, ``_m*``: jobs ``[_lo, _lo + _mlen)``), else
    find the right ones first (:meth:`_seek`).  Until it spills a plan pays
    nothing for spilling."""

    __slots__ = ()

    def _seek(self, n: int) -> int:
        """Look up the columns holding job ``n`` (``0 <= n < len``) and
        return its index there."""
        if n < 0 or n >= len(self):
            raise IndexError(n)
        if n >= self._base:
            self._lo, cols = self._base, (self._ids, self._ends, self._shard, self._pos, self._score, self._sha)
        else:
            k = n // self._chunk
            self._lo, cols = k * self._chunk, self._file.get(k, decode_job_chunk)
        self._mids, self._mends, self._mshard, self._mpos, _, self._msha = cols
        self._mlen = len(cols[1])
        return n - self._lo

    def job_id(self, n: int) -> str:
        i = n - self._lo
        if not 0 <= i < self._mlen:
            i = self._seek(n)
        ends = self._mends
        start = ends[i - 1] if i else 0
        return self._mids[start:ends[i]].decode("utf-8", "surrogateescape")

    def position(self, n: int) -> int | None:
        i = n - self._lo
        if not 0 <= i < self._mlen:
            i = self._seek(n)  # before reading ``_mpos``: it changes it
        p = self._mpos[i]
        return None if p == self._NONE else p

    def shard(self, n: int) -> int:
        i = n - self._lo
        if not 0 <= i < self._mlen:
            i = self._seek(n)
        return self._mshard[i]

    def sha1(self, n: int) -> str:
        other = self._other.get(n)
        if other is not None:
            return other.sha1
        i = n - self._lo
        if not 0 <= i < self._mlen:
            i = self._seek(n)
        digest = self._msha[20 * i:20 * i + 20]
        return "" if digest == _NO_SHA else digest.hex()
