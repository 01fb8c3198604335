"""Text helpers of the TUI: numbers, times, sparklines, SLO styles.

Pure functions (no widgets, no Redis).  Times are epoch milliseconds; clock
times are shown in UTC (``10:04:05Z``) so that every operator on a bridge
call reads the same time.
"""

from __future__ import annotations


from rich.text import Text

from jobctl import humanize, thresholds
from jobctl.thresholds import Level

__all__ = ["count", "age", "rel", "ago", "progress_words", "clock", "stamp", "sparkline", "level_style", "styled", "rate",
           "BARS"]

#: Eight block heights, lowest first.
BARS = "▁▂▃▄▅▆▇█"


def count(n: int | None) -> str:
    """``1,234``; ``-`` for None."""
    return humanize.count(n)


def age(ms: int | None) -> str:
    """A duration (``5 m 17 s``, :func:`jobctl.humanize.duration`); ``-`` for None."""
    return humanize.duration(ms)


def rel(now: int, when: int | None) -> str:
    """A time that may lie ahead: ``in 5 m`` / ``3 m 12 s ago``; ``-`` for None."""
    return humanize.rel(now, when)


def ago(now: int, when: int | None) -> str:
    """A past event: ``3 m 12 s ago``, ``now`` under clock skew; ``-`` for None."""
    return humanize.ago(now, when)


def progress_words(done: int, total: int, elapsed_ms: int) -> str:
    """``959 of 2,157 done · 412 jobs/s · elapsed 2.33 s · ETA 2.90 s``; the
    rate and times only once some time has passed."""
    text = f"{humanize.count(done)} of {humanize.count(total)} done"
    if elapsed_ms <= 0:
        return text
    per_s = done * 1000 / elapsed_ms
    eta = humanize.duration((total - done) / per_s * 1000) if per_s > 0 else "-"
    return f"{text} · {humanize.rate(per_s)} · elapsed {humanize.duration(elapsed_ms)} · ETA {eta}"


def clock(ms: int | None) -> str:
    """``10:04:05Z`` (UTC); ``-`` for None."""
    return humanize.clock(ms)


def stamp(ms: int | None) -> str:
    """``2026-11-21 10:04:05.123Z`` (UTC); ``-`` for None."""
    return humanize.stamp(ms)


def rate(per_min: float | None) -> str:
    """DLQ growth: ``+12.0/min``, ``-3.5/min``, ``0/min``; ``-`` when unknown."""
    if per_min is None:
        return "-"
    if abs(per_min) < 0.05:
        return "0/min"
    return f"{per_min:+,.1f}/min"


def sparkline(values: list[int | None], width: int = 16) -> str:
    """The last ``width`` values as block characters scaled min..max;
    ``None`` is a blank.  A flat series is drawn at the lowest height (or
    the middle one when it is not zero)."""
    vals = values[-width:]
    known = [v for v in vals if v is not None]
    if not known:
        return " " * len(vals)
    lo, hi = min(known), max(known)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        elif hi == lo:
            out.append(BARS[0] if hi == 0 else BARS[3])
        else:
            out.append(BARS[round((v - lo) * (len(BARS) - 1) / (hi - lo))])
    return "".join(out)


def level_style(level: Level | None) -> str:
    """The rich style of ``level`` (:func:`jobctl.thresholds.style`, as the CLI's)."""
    return thresholds.style(level)


def styled(text: str, level: Level | None = None, *, justify: str = "right") -> Text:
    """A table cell coloured by its SLO level."""
    return Text(text, style=level_style(level), justify=justify)  # type: ignore[arg-type]


def bar(n: int, total: int, width: int = 20) -> str:
    """A horizontal bar of ``n`` out of ``total`` in ``width`` cells."""
    if total <= 0 or n <= 0:
        return ""
    cells = n * width / total
    full = int(cells)
    out = "█" * full
    if cells - full >= 0.5 and full < width:
        out += "▌"
    return out or "▏"
