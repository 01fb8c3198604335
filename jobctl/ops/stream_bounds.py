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
#: The largest part (milliseconds or sequence) of a stream entry id: 2**64 - 1.
_MAX_PART = _MAX_SEQ


def stream_bound(value: str, what: str, *, end: bool, now_ms: int | None = None) -> str:
    """``value`` as an XRANGE bound: an entry id as it is, a time as
    ``ms-0`` (``end``: ``ms-<max seq>``).  ``now_ms``: "now" for a duration
    ago (default: the local clock).  Raises :class:`UsageError` naming
    ``what`` (``--from``) on anything else, and on an id or a time outside
    ``0-0`` .. ``18446744073709551615-18446744073709551615`` (a time
    before 1970, a part over 2**64 - 1)."""
    value = value.strip()
    if re.fullmatch(r"[0-9]+-[0-9]+", value):
        if any(int(part) > _MAX_PART for part in value.split("-")):
            raise UsageError(f"{what}: {value!r} is no stream entry id (each part is at most {_MAX_PART})")
        return value
    if re.fullmatch(r"[0-9]+", value):
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
    if not 0 <= ms <= _MAX_PART:
        raise UsageError(f"{what}: {value!r} is outside a stream's ids (epoch ms 0 .. {_MAX_PART})")
    return f"{ms}-{_MAX_SEQ if end else 0}"


def _id_key(bound: str) -> tuple[int, int]:
    ms, seq = bound.split("-", 1)
    return int(ms), int(seq)


def replay_range(from_text: str, to_text: str | None, *, now_ms: int | None = None) -> tuple[str, str]:
    """``(start, end)`` XRANGE bounds of ``--from`` and ``--to`` (``None`` or
    empty: ``+``, the newest entry).  Raises :class:`UsageError` on a bad
    bound and when ``--to`` is before ``--from``."""
    if not (from_text or "").strip():
        raise UsageError("replay needs --from")
    if now_ms is None:
        now_ms = int(time.time() * 1000)  # one "now" for both bounds
    start = stream_bound(from_text, "--from", end=False, now_ms=now_ms)
    end = stream_bound(to_text, "--to", end=True, now_ms=now_ms) if (to_text or "").strip() else "+"
    if end != "+" and _id_key(end) < _id_key(start):
        raise UsageError(f"--to {_said(to_text, end)} is before --from {_said(from_text, start)}: nothing to replay")
    return start, end


def _said(text: str, bound: str) -> str:
    text = text.strip()
    return text if text == bound else f"{text} ({bound})"
