"""A filtered dead-list plan's windows as its tail walk meets them
(:mod:`.tail`): the plan (:class:`~jobctl.ops.plan.PredicateRange`)
keeps, per window of ``plan_window`` tail positions, ``(digest, match
bitmap, matched ids joined by \\n)``; the digest is the SHA1 of the window's
payload keys joined by ``\\n`` as the plan read them.  The walk reads each
window's ids again (``LRANGE``) just before its calls, compares them with
the digest, and only the matches of a window still as planned move.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

__all__ = ["PlanWindows"]


class PlanWindows:
    """The plan's windows ``planned`` (a sequence of ``(digest hex, bitmap,
    ids)``) of ``plan_window`` positions each, over a walk of ``total``
    positions whose payload keys are ``prefix + id``.  Keeps the ids of the
    windows read ahead (until the walk has passed them) and whether each
    window is unchanged since the plan (until no reply can ask)."""

    def __init__(self, planned: Sequence[tuple[str, bytes, bytes]], plan_window: int, prefix: bytes,
                 total: int) -> None:
        self.planned, self.size, self.prefix, self.total = planned, plan_window, prefix, total
        self.same: dict[int, bool] = {}  # window -> unchanged since the plan (its digest)
        self.ids: dict[int, list[bytes]] = {}  # window -> its ids as read, tail first
        self._pruned = 0  # no flag kept before this window

    def is_match(self, p: int) -> bool:
        """Whether the plan matched the job at walk position ``p``."""
        w, i = divmod(p, self.size)
        return w < len(self.planned) and bool(self.planned[w][1][i // 8] & (128 >> (i % 8)))

    def unchanged(self, w: int) -> bool:
        """Whether window ``w`` was read as the plan saw it."""
        return self.same.get(w, False)

    def extra(self, lo: int, hi: int) -> list:
        """ARGV[16..17] of ``rl_tail.lua`` for the entries [lo, hi): their
        match bitmap and "1" when their plan windows are unchanged."""
        w0, w1 = lo // self.size, (hi - 1) // self.size
        flag = "1" if all(self.unchanged(w) for w in range(w0, w1 + 1)) else "0"
        if lo % self.size == 0 and w0 == w1:
            return [self.planned[w0][1], flag]  # the plan's window as it is
        out = bytearray((hi - lo + 7) // 8)
        for p in range(lo, hi):
            if self.is_match(p):
                out[(p - lo) // 8] |= 128 >> ((p - lo) % 8)
        return [bytes(out), flag]

    def plan_id(self, p: int) -> bytes:
        """The id of the plan's match at position ``p``."""
        w, i = divmod(p, self.size)
        bitmap = self.planned[w][1]
        before = sum(bin(b).count("1") for b in bitmap[:i // 8]) + bin(bitmap[i // 8] >> (8 - i % 8)).count("1")
        return self.planned[w][2].split(b"\n")[before]

    def keep(self, a: int, got: list[bytes], windows: Sequence[int] | None = None) -> None:
        """Keep the ids ``got`` (tail first) of the whole windows from
        position ``a`` on (``windows``, default: those ``got`` reaches), each
        checked against the plan's digest."""
        for w in windows if windows is not None else range(a // self.size, (a + len(got) - 1) // self.size + 1):
            ws = w * self.size
            self.ids[w] = window_ids = got[ws - a:ws - a + self.size]
            digest = (hashlib.sha1(self.prefix + (b"\n" + self.prefix).join(window_ids)).hexdigest()
                      if window_ids else "")
            self.same[w] = w < len(self.planned) and digest == self.planned[w][0]

    def read(self, g0: int, count: int, lrange: Callable[[int, int], list[bytes]]) -> list[bytes]:
        """The ids at walk positions [g0, g0 + count), tail first (the tail
        is at position g0), read by whole windows: those not kept yet in one
        ``lrange(start, stop)`` (``LRANGE`` indexes of the dead list)."""
        wins = range(g0 // self.size, (g0 + count - 1) // self.size + 1)
        todo = [w for w in wins if w not in self.ids]  # the last ones: one LRANGE for all of them
        if todo:
            first = todo[0] * self.size
            self.keep(first, lrange(-(min((todo[-1] + 1) * self.size, self.total) - g0),
                                    -(first - g0 + 1))[::-1], todo)
        out: list[bytes] = []
        for w in wins:
            ws = w * self.size
            out += self.ids[w][max(g0, ws) - ws:min(g0 + count, ws + self.size) - ws]
        for w in [w for w in self.ids if (w + 1) * self.size <= g0]:
            del self.ids[w]
        return out

    def forget_from(self, g: int) -> None:
        """Drop what was read of the windows from position ``g`` on (read
        too early: read them again)."""
        for w in [w for w in self.ids if w * self.size >= g]:
            del self.ids[w]
            self.same.pop(w, None)

    def passed(self, g: int) -> None:
        """The walk's replies start at position ``g`` from now on: drop the
        flags of the windows before it."""
        while self._pruned < g // self.size:
            self.same.pop(self._pruned, None)
            self._pruned += 1
