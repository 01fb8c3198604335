"""One way to write times and numbers for people, shared by the CLI and the TUI.

Pure functions, no Redis, no rich.  Durations are ``int`` milliseconds, times
are epoch milliseconds (as everywhere in jobctl).

Durations keep about three significant figures and at most two units, the
rest truncated (an age is never overstated):

==============  ============
milliseconds    shown
==============  ============
0               ``0 ms``
715             ``715 ms``
2_070           ``2.07 s``
29_400          ``29 s``
317_000         ``5 m 17 s``
16_860_000      ``4 h 41 m``
266_400_000     ``3 d 2 h``
==============  ============

A past event read from a clock slightly ahead of ours (negative age) is
``now``, never ``in 715 ms``.  Counts have thousands separators (``28,417``).
What an operator types (``--older-than 5m``) is parsed by
:mod:`jobctl.durations`, whose compact ``format_duration`` stays for messages
that quote a value to type back.
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["duration", "ago", "rel", "count", "rate", "took", "stamp", "clock", "ms_field", "target_words",
           "outcome", "EPOCH_MIN_MS"]

_S, _M, _H, _D = 1_000, 60_000, 3_600_000, 86_400_000

#: Epoch ms from which an ``*_ms`` value reads as a time rather than a
#: duration (2001-09-09): no queue holds a duration of 31 years.
EPOCH_MIN_MS = 1_000_000_000_000

#: Epoch ms at or beyond which a time is a zset's +inf/-inf.
_NEVER_MS = 2 ** 53


def duration(ms: int | float | None) -> str:
    """``ms`` milliseconds as ``715 ms``, ``2.07 s``, ``29 s``, ``5 m 17 s``,
    ``4 h 41 m``, ``3 d 2 h``; ``-`` for None; negative is ``0 ms``."""
    if ms is None:
        return "-"
    ms = max(0, int(ms))
    if ms < _S:
        return f"{ms} ms"
    if ms < 10 * _S:
        return f"{ms // 10 / 100:.2f} s"  # truncated to 10 ms: 2.07 s
    if ms < _M:
        return f"{ms // _S} s"
    for big, small, bu, su in ((_D, _H, "d", "h"), (_H, _M, "h", "m"), (_M, _S, "m", "s")):
        if ms >= big:
            first, rest = divmod(ms, big)
            second = rest // small
            return f"{first:,} {bu}" + (f" {second} {su}" if second else "")
    raise AssertionError("unreachable")  # pragma: no cover


def ago(now_ms: int, when_ms: int | None) -> str:
    """A past event: ``5 m 17 s ago``; ``now`` when ``when_ms`` is at or
    after ``now_ms`` (clock skew between hosts); ``-`` for None."""
    if when_ms is None:
        return "-"
    if abs(when_ms) >= _NEVER_MS:
        return "never" if when_ms > 0 else "always"
    delta = now_ms - when_ms
    return "now" if delta <= 0 else f"{duration(delta)} ago"


def rel(now_ms: int, when_ms: int | None) -> str:
    """A time that may lie ahead (a due time, a deadline): ``in 4 h 41 m``
    or ``5 m 17 s ago``; ``now`` within the same millisecond; ``never`` /
    ``always`` for a zset's +inf / -inf; ``-`` for None."""
    if when_ms is None:
        return "-"
    if abs(when_ms) >= _NEVER_MS:
        return "never" if when_ms > 0 else "always"
    delta = when_ms - now_ms
    if delta == 0:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def count(n: int | None) -> str:
    """``28,417``; ``-`` for None."""
    return "-" if n is None else f"{int(n):,}"


def rate(per_s: float | None, unit: str = "jobs/s") -> str:
    """A rate with three significant figures: ``1,230 jobs/s``, ``12.3
    jobs/s``, ``0.05 jobs/s``; ``-`` when unknown."""
    if per_s is None:
        return "-"
    return f"{_sig3(per_s)} {unit}"


def took(jobs: int, ms: float | None) -> str:
    """`` in 4.21 s (512 jobs/s)``: how long ``jobs`` took over ``ms``
    milliseconds, and their rate; ``""`` when the time is unknown or not
    positive (the end of a one-line summary)."""
    if not ms or ms <= 0:
        return ""
    return f" in {duration(ms)} ({rate(jobs * 1000 / ms)})"


def _sig3(x: float) -> str:
    """``x`` to three significant figures, with separators (``1,230``)."""
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 100:
        return f"{round(x, -len(str(int(a))) + 3):,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def stamp(epoch_ms: int | None) -> str:
    """``2026-11-21 10:04:05.123Z`` (UTC); ``-`` for None."""
    if epoch_ms is None:
        return "-"
    try:
        dt = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    except (OverflowError, ValueError, OSError):
        return f"{epoch_ms} ms (out of calendar range)"
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def clock(epoch_ms: int | None) -> str:
    """``10:04:05Z`` (UTC); ``-`` for None."""
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime("%H:%M:%SZ")


#: Words in an ``*_ms`` field's name that say its time may lie ahead.
_AHEAD = ("deadline", "due", "until", "expire", "next")


def ms_field(key: str, value: object, now_ms: int) -> str | None:
    """The readable form of a record's ``*_ms`` field ``key``, shown beside
    the raw number: a time (``2026-11-21 10:04:05.123Z, 5 m 17 s ago``) from
    :data:`EPOCH_MIN_MS` on, else a duration (``2.07 s``); None when
    ``value`` is not an int.  A time is read as past (:func:`ago`) unless
    the name says it may lie ahead (``deadline_ms``: :func:`rel`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if value >= EPOCH_MIN_MS:
        ahead = any(w in key for w in _AHEAD)
        return f"{stamp(value)}, {(rel if ahead else ago)(now_ms, value)}"
    return duration(value)


def target_words(queue: str, server: str, environment: str | None) -> str:
    """What a confirmation names: ``queue email on redis://h:6379/0
    (PRODUCTION)``; ``server`` must already be without its password
    (:attr:`jobctl.connection.Target.display`); no environment, no brackets."""
    env = f" ({environment.strip().upper()})" if environment and environment.strip() else ""
    return f"queue {queue} on {server}{env}"


def outcome(entry: dict) -> str:
    """A journal entry's result in one word: ``failed`` (an error ended it,
    or jobs failed), ``interrupted`` (Ctrl-C or Stop: a rerun finishes
    it), else ``ok``."""
    if entry.get("error") or (entry.get("failed") or 0) > 0:
        return "failed"
    return "interrupted" if entry.get("interrupted") else "ok"
