"""Walking a Sidekiq sorted set by score, not by rank.

Sidekiq adds deaths and retries (new scores) and trims the dead set from
its oldest end while jobctl reads; a walk by rank would then see a member
twice or skip one.  :func:`walk_by_score` pages with ``ZRANGE ... BYSCORE
LIMIT``, each window starting at the last score seen (skipping the members
of that score already read), so members added or removed elsewhere never
shift it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jobctl.layouts.walks import WINDOW

__all__ = ["walk_by_score"]


def walk_by_score(client, key: str, *, desc: bool, batch: int = WINDOW
                  ) -> Iterator[tuple[int, list[tuple[bytes, float]]]]:
    """``(position, [(member, score), ...])`` windows of the zset ``key``,
    highest score first when ``desc``; at most ``batch`` members each, one
    ``ZRANGE`` a window."""
    bound: Any = None
    skip = pos = 0
    while True:
        if desc:
            hi = "+inf" if bound is None else bound
            pairs = client.zrange(key, hi, "-inf", desc=True, byscore=True, offset=skip, num=batch, withscores=True)
        else:
            lo = "-inf" if bound is None else bound
            pairs = client.zrange(key, lo, "+inf", byscore=True, offset=skip, num=batch, withscores=True)
        if not pairs:
            return
        yield pos, pairs
        pos += len(pairs)
        if len(pairs) < batch:
            return
        last = pairs[-1][1]
        same = sum(1 for _, s in pairs if s == last)
        skip = skip + len(pairs) if same == len(pairs) and bound == last else same
        bound = last
