"""A walk over a list that workers change while it is read.

A ready (or processing, or paused) list changes under a read: workers pop
at its served end (the tail, on the right) and remove acknowledged ids from
anywhere (``LREM``), retries push at either end.  Plain windows by index
then skip the elements a pop shifts past the next window, or read an
element twice when a push shifts it back.  :func:`walk_live_list` instead
continues each window right after the last element it read (its anchor),
found again within a bounded range around where it was, so that:

* no element is read twice (what lies tail-ward of the anchor was read);
* none that stays in the list is skipped (the next window starts at the
  anchor's place now, wherever a pop, a push or an ``LREM`` moved it);
* a popped anchor means every element read before it was popped too: the
  walk goes on from the tail, all of it unread.

Every read is one ``LRANGE`` of at most ``batch + 2 * slack`` elements
(:data:`MAX_SLACK` bounds the widening).  Positions count from the tail,
as they are when read.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import DataError

__all__ = ["walk_live_list", "MAX_SLACK", "still_listed"]

#: The widest search for a moved anchor on either side (elements); past it
#: the list changes too fast between two windows to be read consistently.
MAX_SLACK = 65_536


def _fetch(client, key: str, lo: int, hi: int) -> list[bytes]:
    """Elements at tail distances ``lo..hi`` (inclusive), tail first."""
    return list(reversed(client.lrange(key, -(hi + 1), -(lo + 1))))


def _after_anchor(client, key: str, anchor: bytes, at: int, batch: int, slack: int
                  ) -> tuple[int, list[bytes]] | None:
    """``(distance of the first element after the anchor, up to batch
    elements)`` when ``anchor`` lies within ``slack`` of tail distance
    ``at``; ``(0, [])`` when the range reached the list's tail and does not
    hold it (popped); ``None`` when it must be searched wider."""
    lo = max(0, at - slack)
    got = _fetch(client, key, lo, at + batch + slack)
    for i in range(min(len(got), at + slack - lo + 1)):
        if got[i] == anchor:
            return lo + i + 1, got[i + 1:i + 1 + batch]
    if lo == 0 and anchor not in got:
        return 0, []
    return None


def walk_live_list(client, key: str, *, batch: int) -> Iterator[tuple[int, list[bytes]]]:
    """``(tail distance of the first element, elements tail first)`` windows
    of the list ``key`` as the module docstring says, until its head.

    Raises :class:`~jobctl.errors.DataError` when an anchor moved further
    than :data:`MAX_SLACK` between two windows (run it again)."""
    start, chunk = 0, _fetch(client, key, 0, batch - 1)
    while chunk:
        yield start, chunk
        if len(chunk) < batch:  # the head was reached
            return
        anchor, at = chunk[-1], start + len(chunk) - 1
        found, slack = None, batch
        while found is None:
            if slack > MAX_SLACK:
                raise DataError(f"{key} changed faster than it could be read consistently; run it again")
            found = _after_anchor(client, key, anchor, at, batch, slack)
            slack *= 2
        start, chunk = found
        if start == 0:  # the anchor was popped, and everything read before it: go on from the tail
            chunk = _fetch(client, key, 0, batch - 1)


def still_listed(client, key: str, start: int, ids: list[bytes], slack: int) -> set[bytes]:
    """Which of ``ids`` (read at tail distances from ``start``) the list
    still holds within ``slack`` of where they were: one bounded
    ``LRANGE``.  An id read whose payload was gone by the next read and that
    the list no longer holds was taken meanwhile, not dangling."""
    got = set(_fetch(client, key, max(0, start - slack), start + len(ids) + slack))
    return {i for i in ids if i in got}
