"""The bounds of a replay (``jobctl replay --from/--to``; the TUI's replay
prompt): an operator's time or entry id as an XRANGE bound of a stream.

Accepted: a stream entry id (``1700000000000-0``), epoch milliseconds, an
ISO-8601 time or a duration ago (``2h``).  Source: the Redis ``XRANGE``
command (an id ``ms-seq``; a time stands for every entry of that ms).
"""

from __future__ import annotations

import re
import time
from datetime import datetime

from ..durations import parse_duration
from ..errors import UsageError

__all__ = ["stream_bound", "replay_range"]

_MAX_SEQ = 18446744073709551615


def stream_bound(value: str, what: str, *, end: bool, now_ms: int | None = None) -> str:
    """``value`` as an XRANGE bound: an entry id as it is, a time as
    ``ms-0`` (``end``: ``ms-<max seq>``).  ``now_ms``: "now" for a duration
    ago (default: the local clock).  Raises :class:`UsageError` naming
    ``what`` (``--from``) on anything else."""
    value = value.strip()
    if re.fullmatch(r"\d+-\d+", value):
        return value
    if re.fullmatch(r"\d+", value):
        ms = int(value)
    else:
        try:
            ms = (int(time.time() * 1000) if now_ms is None else now_ms) - parse_duration(value)
        except UsageError:
            try:
                ms = int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                raise UsageError(f"{what}: {value!r} is no entry id, epoch ms, ISO-8601 time or duration ago") \
                    from None
    return f"{ms}-{_MAX_SEQ if end else 0}"


def replay_range(from_text: str, to_text: str | None, *, now_ms: int | None = None) -> tuple[str, str]:
    """``(start, end)`` XRANGE bounds of ``--from`` and ``--to`` (``None`` or
    empty: ``+``, the newest entry).  Raises :class:`UsageError`."""
    if not (from_text or "").strip():
        raise UsageError("replay needs --from")
    start = stream_bound(from_text, "--from", end=False, now_ms=now_ms)
    end = stream_bound(to_text, "--to", end=True, now_ms=now_ms) if (to_text or "").strip() else "+"
    return start, end
