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
* an anchor a worker removed from the middle (``LREM`` on ack) is replaced
  by the next older element read (of the last :data:`ANCHOR_WINDOWS`
  windows);
* when none of those is left and the range reached the tail, every element
  read before was popped too: the walk goes on from the tail, all of it
  unread.

Every read is one ``LRANGE`` of at most ``batch + 2 * slack`` elements
(:data:`MAX_SLACK` bounds the widening).  Positions count from the tail,
as they are when read.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import DataError

__all__ = ["walk_live_list", "MAX_SLACK", "still_listed"]

#: Windows whose elements may serve as the anchor (the newest one left
#: within the search range): removals in the middle of the list rarely take
#: every one of them.
ANCHOR_WINDOWS = 4

#: The widest search for a moved anchor on either side (elements); past it
#: the list changes too fast between two windows to be read consistently.
MAX_SLACK = 65_536


def _fetch(client, key: str, lo: int, hi: int) -> list[bytes]:
    """Elements at tail distances ``lo..hi`` (inclusive), tail first."""
    return list(reversed(client.lrange(key, -(hi + 1), -(lo + 1))))


def _after_anchor(client, key: str, last: list[bytes], at: int, batch: int, slack: int
                  ) -> tuple[int, list[bytes]] | None:
    """``(tail distance of the first element after the anchor, up to batch
    unread elements)``: the anchor is the newest element of ``last`` (the
    elements just read, the newest at tail distance ``at``) still within
    ``slack`` of where it was, an older one of them when workers removed
    the newer (``LREM`` on ack); the elements of ``last`` found after it are
    skipped (read already).  A list may hold an id twice: the copy nearest
    where it was is the one read.  ``(0, [])`` when the range reaches the
    list's tail and holds none of them (all popped); ``None`` when it must
    be searched wider."""
    lo = max(0, at - slack)
    got = _fetch(client, key, lo, at + batch + slack)
    where: dict[bytes, list[int]] = {}
    for i in range(min(len(got), at + slack - lo + 1)):
        where.setdefault(got[i], []).append(i)
    for k in range(len(last) - 1, -1, -1):
        found = where.get(last[k])
        if found:
            want = at - (len(last) - 1 - k) - lo
            i = min(found, key=lambda j: abs(j - want))
            read = set(last[k + 1:])
            return lo + i + 1, [e for e in got[i + 1:] if e not in read][:batch]
    if lo == 0 and set(got).isdisjoint(last):  # none of them anywhere in the range: popped
        return 0, []
    return None


def walk_live_list(client, key: str, *, batch: int) -> Iterator[tuple[int, list[bytes]]]:
    """``(tail distance of the first element, elements tail first)`` windows
    of the list ``key`` as the module docstring says, until its head.

    Raises :class:`~jobctl.errors.DataError` when an anchor moved further
    than :data:`MAX_SLACK` between two windows (run it again)."""
    start, chunk = 0, _fetch(client, key, 0, batch - 1)
    recent: list[bytes] = []  # the last ANCHOR_WINDOWS windows read, oldest first: the anchor's candidates
    while chunk:
        yield start, chunk
        if len(chunk) < batch:  # the head was reached
            return
        recent = (recent + chunk)[-ANCHOR_WINDOWS * batch:]
        at = start + len(chunk) - 1
        found, slack = None, batch
        while found is None:
            if slack > MAX_SLACK:
                raise DataError(f"{key} changed faster than it could be read consistently; run it again")
            found = _after_anchor(client, key, recent, at, batch, slack)
            slack *= 2
        start, chunk = found
        if start == 0:  # every element of the last window was popped, and all before it: go on from the tail
            chunk = _fetch(client, key, 0, batch - 1)


def still_listed(client, key: str, start: int, ids: list[bytes], slack: int) -> set[bytes]:
    """Which of ``ids`` (read at tail distances from ``start``) the list
    still holds within ``slack`` of where they were: one bounded
    ``LRANGE``.  An id read whose payload was gone by the next read and that
    the list no longer holds was taken meanwhile, not dangling."""
    got = set(_fetch(client, key, max(0, start - slack), start + len(ids) + slack))
    return {i for i in ids if i in got}
