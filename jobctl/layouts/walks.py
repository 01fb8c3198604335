"""Bounded walks over Redis lists and zsets, for layouts' ``iter_batches``,
plans and checks.

Every read here is one ``LRANGE``/``ZRANGE`` of at most ``size`` elements:
walking a whole key costs ``ceil(length / size)`` commands, never one
unbounded read.  Lists are walked from the end they are served from, with
indexes counted from that end (negative indexes from the right, so that
pushes at the other end during the walk do not shift them).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

__all__ = ["window_starts", "list_window", "walk_list", "walk_zset", "keys_exist", "key_types", "WINDOW", "lrem_chunk",
           "LREM_BUDGET", "prefetched"]

#: Elements per window of a full walk (check, plan).
WINDOW = 1000

#: Element comparisons one script call may spend in ``LREM``s (a list of one
#: million short strings takes ~5-10 ms to scan); see :func:`lrem_chunk`.
LREM_BUDGET = 1_000_000


def window_starts(length: int, batch: int, sample: tuple[int, int] | None) -> tuple[list[int], int]:
    """``(start offsets, window size)`` of a walk over ``length`` elements.

    Without ``sample``: every ``batch``-th offset.  With ``sample=(windows,
    size)``: that many windows of ``min(size, batch)`` elements (fewer when
    the key holds fewer whole windows), ``[0]`` when the key is no longer
    than one window.  Sampled windows never overlap, so a sampled count sees
    each element at most once: they are distinct slots of a grid of whole
    windows, shifted by a random phase (``0..length % size``) so that the
    elements past the last whole slot can be sampled too.  Sorted.
    """
    if length <= 0:
        return [], batch
    if sample is None:
        return list(range(0, length, batch)), batch
    windows, size = sample
    size = max(1, min(size, batch))
    if length <= size:
        return [0], size
    slots = length // size
    phase = random.randint(0, length - slots * size)
    return sorted(phase + slot * size for slot in random.sample(range(slots), min(windows, slots))), size


def list_window(client, key: str, start: int, size: int, *, from_right: bool) -> list[bytes]:
    """The ``size`` elements at positions ``start..`` counted from one end of
    the list ``key``, in walk order (nearest to that end first)."""
    if from_right:
        return list(reversed(client.lrange(key, -(start + size), -(start + 1))))
    return client.lrange(key, start, start + size - 1)


def walk_list(client, key: str, *, from_right: bool, batch: int = WINDOW,
              sample: tuple[int, int] | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """``(start position, elements)`` windows of the list ``key`` (see
    :func:`window_starts`); the length is read once, at the start."""
    starts, size = window_starts(client.llen(key), batch, sample)
    for start in starts:
        chunk = list_window(client, key, start, size, from_right=from_right)
        if chunk:
            yield start, chunk


def walk_zset(client, key: str, *, desc: bool = False, batch: int = WINDOW,
              sample: tuple[int, int] | None = None) -> Iterator[tuple[int, list[tuple[bytes, float]]]]:
    """``(start rank, [(member, score), ...])`` windows of the zset ``key``."""
    starts, size = window_starts(client.zcard(key), batch, sample)
    for start in starts:
        pairs: list[tuple[Any, float]] = client.zrange(key, start, start + size - 1, desc=desc, withscores=True)
        if pairs:
            yield start, pairs


def keys_exist(client, names: list[str]) -> list[bool]:
    """``EXISTS`` of each key in ``names``, in order: one pipelined round
    trip per :data:`WINDOW` names."""
    out: list[bool] = []
    for i in range(0, len(names), WINDOW):
        pipe = client.pipeline(transaction=False)
        for name in names[i:i + WINDOW]:
            pipe.exists(name)
        out.extend(bool(n) for n in pipe.execute())
    return out


def key_types(client, names: list[str]) -> list[bytes]:
    """``TYPE`` of each key in ``names``, in order (``b"none"`` when it
    does not exist): one pipelined round trip per :data:`WINDOW` names."""
    out: list[bytes] = []
    for i in range(0, len(names), WINDOW):
        pipe = client.pipeline(transaction=False)
        for name in names[i:i + WINDOW]:
            pipe.type(name)
        out.extend(t.encode() if isinstance(t, str) else t for t in pipe.execute())
    return out


def lrem_chunk(batch: int, list_length: int) -> int:
    """Jobs per script call when each job costs one ``LREM`` over a list of
    ``list_length`` elements: ``batch``, lowered so that a call scans at most
    :data:`LREM_BUDGET` elements (never below 1)."""
    return max(1, min(batch, LREM_BUDGET // max(1, list_length)))


_DONE = object()


def prefetched(batches: Iterator[Any], depth: int = 1) -> Iterator[Any]:
    """The items of ``batches``, read ahead by up to ``depth`` items in a
    background thread: the next window's round trips (and parsing) overlap
    with the caller's work on the current one (plans, exports).

    Exceptions of ``batches`` are raised here, in order.  Closing this
    generator early stops the reader after at most one more item.  The
    caller must not use the same single-connection client meanwhile.
    """
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for item in batches:
                if not put((None, item)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put((exc, None))
            return
        put((None, _DONE))

    reader = threading.Thread(target=read, name="jobctl-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            exc, item = q.get()
            if exc is not None:
                raise exc
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        reader.join(timeout=5)
