"""SLO thresholds of the live dashboard: per-queue levels read from the
config's ``[queues.<name>.slo]`` (no schema change: they ride in
:attr:`~jobctl.config.QueueConfig.options`) and evaluated into a
:class:`Level` per metric.  SLO config::

    [queues.email.slo]
    oldest_ready_age = "5m"                  # breach at >= 5 minutes
    dead = { warn = 100, breach = 1000 }     # warn and breach levels
    dead_growth = 50                         # dead jobs per minute
    stuck = 1

Metrics: ``ready``, ``scheduled``, ``scheduled_overdue``, ``processing``,
``stuck``, ``dead``, ``suppressed`` (job counts), ``oldest_ready_age``,
``scheduled_overdue_max_age`` (durations: ``"5m"``, or a number of seconds)
and ``dead_growth`` (dead jobs per minute).  A bare value is the breach
level; a table gives ``warn`` and/or ``breach``.  Without configuration a
queue gets :data:`DEFAULT_SLO` (:data:`jobctl.thresholds.DEFAULTS`: any
dead job warns, any stuck job breaches, a ready job waiting or a scheduled
job overdue a minute warns...); configured metrics replace those defaults
one by one.  Durations are milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from ..model import QueueStatus
from ..thresholds import DEFAULTS, MEASURES, Level, Threshold

if TYPE_CHECKING:
    from ..config import QueueConfig

__all__ = ["Level", "Threshold", "Slo", "SLO_METRICS", "DEFAULT_SLO", "slo_for", "slo_values"]


#: Measure name -> kind, and the default bounds: one set for every front end (:mod:`jobctl.thresholds`).
SLO_METRICS = MEASURES
DEFAULT_SLO = DEFAULTS


def _slo_value(where: str, metric: str, value: Any) -> float:
    kind = SLO_METRICS[metric]
    if kind == "duration" and isinstance(value, str):
        from ..durations import parse_duration

        try:
            return float(parse_duration(value))
        except UsageError as exc:
            raise ConfigError(f"{where}: {metric}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        want = "a duration like \"5m\" or seconds" if kind == "duration" else "a number >= 0"
        raise ConfigError(f"{where}: {metric} must be {want}, got {value!r}")
    return float(value) * (1000 if kind == "duration" else 1)


@dataclass(frozen=True)
class Slo:
    """The thresholds of one queue: metric name -> :class:`Threshold`."""

    thresholds: dict[str, Threshold] = field(default_factory=lambda: dict(DEFAULT_SLO))

    @classmethod
    def from_options(cls, options: dict[str, Any], *, where: str = "slo") -> "Slo":
        """Parse ``options["slo"]`` (see the module docstring) over the defaults.

        Raises :class:`~jobctl.errors.ConfigError` naming ``where`` for an
        unknown metric or a bad value.
        """
        raw = options.get("slo")
        merged = dict(DEFAULT_SLO)
        if raw is None:
            return cls(merged)
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table")
        for metric, value in raw.items():
            if metric not in SLO_METRICS:
                known = ", ".join(SLO_METRICS)
                raise ConfigError(f"{where}: unknown metric {metric!r} (known: {known})")
            if isinstance(value, dict):
                unknown = set(value) - {"warn", "breach"}
                if unknown:
                    raise ConfigError(f"{where}: {metric}: unknown key {sorted(unknown)[0]!r} "
                                      "(use warn and breach)")
                th = Threshold(
                    warn=None if value.get("warn") is None else _slo_value(where, metric, value["warn"]),
                    breach=None if value.get("breach") is None else _slo_value(where, metric, value["breach"]))
            else:
                th = Threshold(breach=_slo_value(where, metric, value))
            merged[metric] = th
        return cls(merged)

    def evaluate(self, values: dict[str, float | None]) -> dict[str, Level]:
        """``{metric: Level}`` for every metric in ``values`` with a threshold."""
        return {m: th.level(values.get(m)) for m, th in self.thresholds.items() if m in values}


def slo_for(queue: "QueueConfig", path: Any = None) -> Slo:
    """The :class:`Slo` of a catalogue entry (``[queues.<name>.slo]``)."""
    where = f"config {path}: [queues.{queue.name}.slo]" if path else f"[queues.{queue.name}.slo]"
    return Slo.from_options(queue.options, where=where)


def slo_values(status: QueueStatus, dead_growth: float | None) -> dict[str, float | None]:
    """The SLO metric values of one status sample."""
    return {
        "ready": status.ready, "scheduled": status.scheduled,
        "scheduled_overdue": status.scheduled_overdue, "processing": status.processing,
        "stuck": status.stuck, "dead": status.dead, "suppressed": status.suppressed,
        "oldest_ready_age": status.oldest_ready_age_ms,
        "scheduled_overdue_max_age": status.scheduled_overdue_max_age_ms,
        "dead_growth": dead_growth,
    }
