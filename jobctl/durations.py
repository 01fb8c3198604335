"""Durations as operators type them (``30s``, ``5m``, ``1h30m``) and as jobctl prints them.

Every duration inside jobctl is an ``int`` number of **milliseconds**.

Accepted spellings (:func:`parse_duration`)
-------------------------------------------

* one or more ``<number><unit>`` parts, written without spaces, largest unit
  first, each unit at most once: ``500ms``, ``30s``, ``5m``, ``2h``, ``7d``,
  ``2w``, ``1h30m``, ``1d12h``, ``2m30s500ms``;
* units (lower case only; ``M`` is not minutes): ``w`` (7 days), ``d``, ``h``,
  ``m``, ``s``, ``ms``;
* a part may have a decimal fraction: ``1.5h`` = ``1h30m``, ``0.5s`` = ``500ms``;
  the total is rounded to the nearest millisecond;
* a **plain number means seconds** (``30`` = ``30s``, ``0.5`` = ``500ms``), as
  with ``sleep`` and ``watch -n``.  This is what ``--delay``, ``--older-than``
  and ``--watch`` accept.  The filter language turns this off
  (``bare_seconds=False``): there a plain number is a number, and duration
  fields need an explicit unit.

Negative durations are not accepted.  Errors are :class:`DurationError`, a
:class:`~jobctl.errors.UsageError` with a one-line message.

Printing (:func:`format_duration`)
----------------------------------

At most the two most significant *adjacent* units, truncated (not rounded):
``3m12s``, ``2h``, ``4d3h``, ``1s500ms``, ``0s``.  The output is always
accepted by :func:`parse_duration`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    from decimal import Decimal

__all__ = ["UNIT_MS", "DurationError", "parse_duration", "format_duration"]


class DurationError(UsageError):
    """A duration that does not parse.

    ``str(err)`` is ``"<problem> (<hint>)"``, one line; ``problem`` and
    ``hint`` are also available separately (the filter language puts the
    column between them).
    """

    def __init__(self, problem: str, hint: str) -> None:
        super().__init__(f"{problem} ({hint})")
        self.problem = problem
        self.hint = hint

#: Milliseconds per unit, largest first (the order parts must be written in).
UNIT_MS: dict[str, int] = {
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}

_NUM = r"\d+(?:\.\d+)?"
# One optional group per unit, in UNIT_MS order; "m" must not eat the "m" of "ms".
_UNITS_RE = re.compile(
    "".join(
        rf"(?:(?P<{'u_' + unit}>{_NUM}){unit}{'(?!s)' if unit == 'm' else ''})?"
        for unit in UNIT_MS
    )
)
_PLAIN_RE = re.compile(_NUM)
_SHAPE_RE = re.compile(rf"(?:{_NUM}(?:ms|[wdhms]))+")

_EXAMPLES = "e.g. 30s, 5m, 2h, 7d, 500ms, 1h30m"


def parse_duration(text: str, *, bare_seconds: bool = True) -> int:
    """Parse an operator-typed duration into milliseconds.

    Args:
        text: e.g. ``"30s"``, ``"1h30m"``, ``"500ms"``, ``"1.5h"``; surrounding
            whitespace is ignored.
        bare_seconds: when true (the default, used by CLI options) a plain
            number such as ``"30"`` or ``"0.5"`` means seconds; when false it
            is rejected.

    Returns:
        The duration in whole milliseconds (``int``, >= 0).

    Raises:
        DurationError: a :class:`~jobctl.errors.UsageError` (exit code 2) with
            a one-line message, e.g. ``invalid duration '5x' (e.g. 30s, 5m, ...)``.
    """
    if not isinstance(text, str):
        raise DurationError(f"invalid duration {text!r}", "expected text such as 30s")
    from decimal import Decimal  # late: start-up without a duration does not pay for decimal

    s = text.strip()
    shown = _show(s)
    if not s:
        raise DurationError("empty duration", _EXAMPLES)
    if _PLAIN_RE.fullmatch(s):
        if not bare_seconds:
            raise DurationError(f"duration {shown} needs a unit", _EXAMPLES)
        return _to_ms(Decimal(s), UNIT_MS["s"])
    m = _UNITS_RE.fullmatch(s)
    if m is None or not any(m.groupdict().values()):
        if _SHAPE_RE.fullmatch(s):
            hint = "units go largest first, each at most once, e.g. 1h30m"
        else:
            hint = _EXAMPLES + ("; a plain number means seconds" if bare_seconds else "")
        raise DurationError(f"invalid duration {shown}", hint)
    total = Decimal(0)
    for unit, per in UNIT_MS.items():
        part = m.group("u_" + unit)
        if part is not None:
            total += Decimal(part) * per
    return _to_ms(total, 1)


def _to_ms(amount: Decimal, per: int) -> int:
    from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

    try:
        return int((amount * per).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    except InvalidOperation:  # absurdly many digits
        raise DurationError("duration is too large", "at most 28 significant digits") from None


def _show(s: str) -> str:
    s = s if len(s) <= 40 else s[:37] + "..."
    return "'" + s + "'"


_FORMAT_UNITS = [(u, UNIT_MS[u]) for u in ("d", "h", "m", "s", "ms")]


def format_duration(ms: int) -> str:
    """Format milliseconds as a short human duration.

    Shows at most the two most significant adjacent units, truncating the
    rest: ``192000 -> "3m12s"``, ``7200000 -> "2h"``, ``370800000 -> "4d7h"``,
    ``1500 -> "1s500ms"``, ``0 -> "0s"``.  Days are the largest unit
    (``400d``).  Negative input gets a leading ``-`` (``-5m``).  Floats are
    truncated to whole milliseconds.  The result parses with
    :func:`parse_duration` (except the ``-`` sign).
    """
    ms = int(ms)
    if ms < 0:
        return "-" + format_duration(-ms)
    if ms == 0:
        return "0s"
    for i, (unit, per) in enumerate(_FORMAT_UNITS):
        if ms >= per:
            first, rest = divmod(ms, per)
            out = f"{first}{unit}"
            if i + 1 < len(_FORMAT_UNITS):
                next_unit, next_per = _FORMAT_UNITS[i + 1]
                second = rest // next_per
                if second:
                    out += f"{second}{next_unit}"
            return out
    raise AssertionError("unreachable")  # pragma: no cover
