"""Plan state spilled to an anonymous temporary file, so that a plan's memory
does not grow with the DLQ (issue 11: "peak RSS must not grow with the DLQ").

A plan that keeps something per planned job (:class:`~jobctl.ops.plan.JobColumns`:
id, position, fence digest) or per plan window
(:class:`~jobctl.ops.plan.PredicateRange`'s windows, a :class:`SpillList`)
keeps it in memory up to a threshold; past it, whole chunks of a fixed size
go to a :func:`tempfile.TemporaryFile` (unlinked at once on Linux, so it is
gone when the process exits, however it exits) and memory holds only the
chunk being filled, a small index (offset and length of each chunk) and the
last :data:`CACHED_CHUNKS` chunks read back.  The apply reads a plan in
order, one chunk read (one ``pread``) per chunk; any other access still
works, a chunk read each time it leaves the cache.  Below the threshold
nothing is written to disk.

The thresholds are module constants, read when a container is created (tests
lower them with ``monkeypatch``): :data:`JOB_CHUNK`/:data:`JOB_SPILL_AT` for
jobs, :data:`ITEM_CHUNK`/:data:`ITEM_SPILL_AT` for a :class:`SpillList`'s
items.  Disk use: about 60 bytes a planned job (hash-job: ~120 MB at 2M) in
the system's temporary directory (``TMPDIR``); a write that fails (disk
full) raises :class:`OSError` at plan time, before anything moved.
"""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["JOB_CHUNK", "JOB_SPILL_AT", "ITEM_CHUNK", "ITEM_SPILL_AT", "CACHED_CHUNKS", "ChunkFile", "SpillList",
           "encode_job_chunk", "decode_job_chunk"]

#: Jobs per spilled chunk of a :class:`~jobctl.ops.plan.JobColumns` (~4 MB).
JOB_CHUNK = 65_536
#: Jobs a :class:`~jobctl.ops.plan.JobColumns` keeps in memory before its
#: first spill (~8 MB; a multiple of :data:`JOB_CHUNK`).
JOB_SPILL_AT = 131_072
#: Items per spilled chunk of a :class:`SpillList` (a filtered plan's
#: windows of 120 positions: ~0.5 MB at 20 % match).
ITEM_CHUNK = 512
#: Items a :class:`SpillList` keeps in memory before its first spill.
ITEM_SPILL_AT = 1024
#: Chunks read back kept decoded (the apply's current one and the one before).
CACHED_CHUNKS = 2

T = TypeVar("T")


class ChunkFile:
    """Numbered chunks (bytes) in an anonymous temporary file, created at
    the first :meth:`append`: ``len`` is the number of chunks; :meth:`get`
    decodes chunk ``k`` with ``decode`` and keeps the last
    :data:`CACHED_CHUNKS` decoded.  Raises :class:`OSError` when the file
    cannot be written or read."""

    __slots__ = ("_file", "_fd", "_index", "_end", "_cache", "_cached")

    def __init__(self) -> None:
        self._file = None
        self._fd = -1
        self._index: list[tuple[int, int]] = []  # (offset, length) per chunk
        self._end = 0
        self._cache: dict[int, Any] = {}
        self._cached = max(1, CACHED_CHUNKS)

    def __len__(self) -> int:
        return len(self._index)

    def _write(self, blob: bytes) -> tuple[int, int]:
        if self._file is None:
            import tempfile  # only a plan that spills needs it (CLI start-up)

            self._file = tempfile.TemporaryFile(prefix="jobctl-plan-")
            self._fd = self._file.fileno()
        at, view = self._end, memoryview(blob)
        while view:
            n = os.pwrite(self._fd, view, self._end)
            self._end += n
            view = view[n:]
        return at, len(blob)

    def append(self, blob: bytes) -> None:
        """Write one more chunk at the end."""
        self._index.append(self._write(blob))

    def replace(self, k: int, blob: bytes) -> None:
        """Chunk ``k`` becomes ``blob`` (written anew at the file's end)."""
        self._index[k] = self._write(blob)
        self._cache.pop(k, None)

    def truncate(self, k: int) -> None:
        """Forget the chunks from ``k`` on (their bytes stay in the file)."""
        del self._index[k:]
        for c in [c for c in self._cache if c >= k]:
            del self._cache[c]

    def read(self, k: int) -> bytes:
        """The bytes of chunk ``k``."""
        at, size = self._index[k]
        out = os.pread(self._fd, size, at)
        while len(out) < size:  # a short read: the rest
            more = os.pread(self._fd, size - len(out), at + len(out))
            if not more:
                raise OSError(f"jobctl plan spill file: chunk {k} truncated")
            out += more
        return out

    def get(self, k: int, decode: Callable[[bytes], Any]) -> Any:
        """Chunk ``k`` decoded (from the cache when it is there)."""
        got = self._cache.get(k)
        if got is None:
            got = decode(self.read(k))
            while len(self._cache) >= self._cached:  # the oldest read leaves (safe if another thread reads too)
                try:
                    self._cache.pop(next(iter(self._cache)), None)
                except (StopIteration, RuntimeError):
                    break
            self._cache[k] = got
        return got

    def close(self) -> None:
        """Close (and so delete) the file; the chunks are gone."""
        if self._file is not None:
            self._file.close()
            self._file, self._fd = None, -1
        self._index.clear()
        self._cache.clear()
        self._end = 0


_HEAD = struct.Struct("<qq")  # jobs in the chunk, bytes of their ids


def encode_job_chunk(ids: bytearray, ends: array, shard: array, pos: array, score: array, sha: bytearray,
                     lo: int, hi: int) -> bytes:
    """Jobs ``[lo, hi)`` of :class:`~jobctl.ops.plan.JobColumns`' in-memory
    columns as one chunk: a header (count, id bytes), the ids, the ends
    (relative to the chunk's first id), shard, position, score (``int64``
    each) and the 20-byte digests."""
    first = ends[lo - 1] if lo else 0
    last = ends[hi - 1]
    rel = array("q", ends[lo:hi])
    if first:
        rel = array("q", [e - first for e in rel])
    return b"".join((_HEAD.pack(hi - lo, last - first), ids[first:last], rel.tobytes(), shard[lo:hi].tobytes(),
                     pos[lo:hi].tobytes(), score[lo:hi].tobytes(), sha[20 * lo:20 * hi]))


def decode_job_chunk(blob: bytes) -> tuple[bytes, array, array, array, array, bytes]:
    """``(ids, ends, shard, position, score, digests)`` of a chunk written by
    :func:`encode_job_chunk` (the layout of the in-memory columns)."""
    n, nid = _HEAD.unpack_from(blob)
    view = memoryview(blob)
    at = _HEAD.size
    ids = bytes(view[at:at + nid])
    at += nid
    cols = []
    for _ in range(4):
        col = array("q")
        col.frombytes(view[at:at + 8 * n])
        cols.append(col)
        at += 8 * n
    return ids, cols[0], cols[1], cols[2], cols[3], bytes(view[at:at + 20 * n])


def _unpickle(blob: bytes) -> list:
    import pickle

    return pickle.loads(blob)


def _pickle(items: list) -> bytes:
    import pickle  # only a plan that spills needs it (CLI start-up)

    return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)


class SpillList(Generic[T]):
    """A list-like of picklable items (a filtered plan's windows) that keeps
    at most about :data:`ITEM_SPILL_AT` of them in memory: past it, chunks of
    :data:`ITEM_CHUNK` items go to a :class:`ChunkFile` (pickled).  Supports
    ``append``, ``extend``, ``len``, iteration, indexing (negative too),
    slicing (a ``list``), item assignment and ``del x[n:]``; ``==`` with a
    list compares the items.  Raises :class:`IndexError` as a list does and
    :class:`OSError` when the spill file fails."""

    __slots__ = ("_tail", "_base", "_chunk", "_limit", "_file")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._tail: list[T] = []
        self._base = 0  # items in spilled chunks
        self._chunk = max(1, ITEM_CHUNK)
        self._limit = max(ITEM_SPILL_AT, self._chunk)
        self._file = ChunkFile()
        self.extend(items)

    @property
    def spilled(self) -> int:
        """Items kept in the spill file (0: all in memory)."""
        return self._base

    def append(self, item: T) -> None:
        self._tail.append(item)
        if len(self._tail) >= self._limit:
            self._spill()

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def _spill(self) -> None:
        c, tail = self._chunk, self._tail
        full = len(tail) // c * c
        for lo in range(0, full, c):
            self._file.append(_pickle(tail[lo:lo + c]))
        del tail[:full]
        self._base += full
        self._limit = c

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def _index(self, key: int) -> int:
        n = key + len(self) if key < 0 else key
        if not 0 <= n < len(self):
            raise IndexError(key)
        return n

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self[n] for n in range(*key.indices(len(self)))]
        n = key
        if n >= self._base:
            return self._tail[n - self._base]  # IndexError past the end, as a list's
        n = self._index(key)
        if n >= self._base:
            return self._tail[n - self._base]
        return self._file.get(n // self._chunk, _unpickle)[n % self._chunk]

    def __setitem__(self, key: int, item: T) -> None:
        n = self._index(key)
        if n >= self._base:
            self._tail[n - self._base] = item
            return
        k = n // self._chunk
        items = list(self._file.get(k, _unpickle))
        items[n % self._chunk] = item
        self._file.replace(k, _pickle(items))

    def __delitem__(self, key) -> None:
        if not isinstance(key, slice) or key.step not in (None, 1) or key.stop is not None:
            raise TypeError("a SpillList deletes only its end (del x[n:])")
        start = key.indices(len(self))[0]
        if start >= self._base:
            del self._tail[start - self._base:]
            return
        k = start // self._chunk
        keep = list(self._file.get(k, _unpickle))[:start % self._chunk] if start % self._chunk else []
        self._file.truncate(k)
        self._base = k * self._chunk
        self._tail = keep
        if not self._base:
            self._limit = max(ITEM_SPILL_AT, self._chunk)

    def __iter__(self) -> Iterator[T]:
        for k in range(len(self._file)):
            yield from self._file.get(k, _unpickle)
        yield from list(self._tail)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, SpillList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpillList(len={len(self)}, spilled={self._base})"

    def close(self) -> None:
        """Drop every item and the spill file."""
        self._file.close()
        self._tail, self._base = [], 0
