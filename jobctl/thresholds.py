"""One threshold set that colours every front end: for each measure of a
queue's status the ``warn``/``breach`` bounds, the :class:`Level` a value
reaches, and the rich style of each level.

The CLI's ``status`` table, the TUI's dashboard rows and its queue header
all colour a cell through :func:`cell_levels` and :func:`style`, so one
queue reads the same everywhere.  A queue's config may replace any default
bound (``[queues.<name>.slo]``, parsed by :mod:`jobctl.dashboard.slo`).

Units: counts are jobs, durations milliseconds, ``dead_growth`` dead jobs per
minute.  Nothing here talks to Redis or imports a front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping

__all__ = ["Level", "Threshold", "MEASURES", "DEFAULTS", "STYLES", "level", "worst", "style",
           "cell_levels", "CELLS", "OUTCOME_STYLES"]


class Level(str, Enum):
    """How a measure stands against its bounds: ``ok``, ``warn`` or ``breach``."""

    OK = "ok"
    WARN = "warn"
    BREACH = "breach"


#: measure name -> kind (``count`` of jobs, ``duration`` in ms, ``rate`` per minute).
MEASURES: dict[str, str] = {
    "ready": "count",
    "scheduled": "count",
    "scheduled_overdue": "count",
    "processing": "count",
    "stuck": "count",
    "dead": "count",
    "suppressed": "count",
    "oldest_ready_age": "duration",
    "scheduled_overdue_max_age": "duration",
    "dead_growth": "rate",
}


@dataclass(frozen=True)
class Threshold:
    """``warn``/``breach`` bounds (the measure's unit), each reached at ``>=``; ``None``: unset."""

    warn: float | None = None
    breach: float | None = None

    def level(self, value: float | None) -> Level:
        """:class:`Level` of ``value`` (``None``, i.e. unknown, is OK)."""
        if value is None:
            return Level.OK
        if self.breach is not None and value >= self.breach:
            return Level.BREACH
        if self.warn is not None and value >= self.warn:
            return Level.WARN
        return Level.OK


#: The bounds every queue has unless its config replaces them (measure by measure).
DEFAULTS: dict[str, Threshold] = {
    "dead": Threshold(warn=1, breach=1_000),                 # any dead job deserves a look
    "dead_growth": Threshold(warn=1, breach=60),             # dead jobs per minute
    "oldest_ready_age": Threshold(warn=60_000, breach=600_000),  # 1 min, 10 min waiting
    "stuck": Threshold(breach=1),                            # past its visibility deadline
    "scheduled_overdue_max_age": Threshold(warn=60_000, breach=600_000),  # scheduler lag
}

#: rich style of each level (CLI markup and TUI cells alike).
STYLES: dict[Level, str] = {Level.OK: "", Level.WARN: "bold yellow", Level.BREACH: "bold white on red"}

#: rich style of an operation's result word (:func:`jobctl.humanize.outcome`), CLI journal and TUI alike.
OUTCOME_STYLES: dict[str, str] = {"ok": "green", "interrupted": STYLES[Level.WARN], "failed": "bold red"}

_RANK = {Level.OK: 0, Level.WARN: 1, Level.BREACH: 2}

#: display cell -> the measures whose worst level colours it (the overdue
#: cell shows a count and the oldest overdue age).
CELLS: dict[str, tuple[str, ...]] = {
    **{m: (m,) for m in MEASURES if m not in ("scheduled_overdue", "scheduled_overdue_max_age")},
    "overdue": ("scheduled_overdue", "scheduled_overdue_max_age"),
}


def level(measure: str, value: float | None, thresholds: Mapping[str, Threshold] | None = None) -> Level:
    """The :class:`Level` of ``value`` for ``measure`` against ``thresholds``
    (default :data:`DEFAULTS`); a measure without bounds is OK.

    Raises ``KeyError`` for a name not in :data:`MEASURES`.
    """
    MEASURES[measure]  # noqa: B018 - an unknown measure is a programming error
    th = (DEFAULTS if thresholds is None else thresholds).get(measure)
    return Level.OK if th is None else th.level(value)


def worst(*levels: Level | None) -> Level:
    """The most severe of ``levels`` (``None`` counts as OK)."""
    return max((lv or Level.OK for lv in levels), key=_RANK.__getitem__, default=Level.OK)


def style(lv: Level | None) -> str:
    """The rich style of ``lv`` (``""`` for OK or ``None``)."""
    return STYLES[lv or Level.OK]


def cell_levels(levels: Mapping[str, Level]) -> dict[str, Level]:
    """Per display cell of :data:`CELLS`, the worst level of its measures
    (``levels``: measure -> :class:`Level`, e.g. ``Slo.evaluate``'s)."""
    return {cell: worst(*(levels.get(m) for m in ms)) for cell, ms in CELLS.items()}
