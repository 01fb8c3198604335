"""The dashboard's history chart (:class:`HistoryChart`): one metric of
every queue over the samples this TUI has taken since it opened, drawn by
textual-plotext with axes (minutes before now, the metric's unit) and the
time window in its title.  ``c`` on the dashboard cycles the metric.

Nothing here reads Redis: the samples come from the core's
:class:`jobctl.dashboard.QueueHistory`, filled by the app's refresh worker.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot

from . import format as fmt

__all__ = ["HistoryChart", "METRICS", "chart_points"]

#: metric -> (title, y-axis label)
METRICS = {
    "dead": ("dead jobs", "jobs"),
    "ready": ("ready depth", "jobs"),
    "growth": ("DLQ growth", "jobs/min"),
    "age": ("oldest-ready age", "minutes"),
}


def chart_points(samples: list, metric: str, now_ms: int) -> tuple[list[float], list[float]]:
    """``(xs, ys)`` of one queue: x in minutes before ``now_ms`` (<= 0), y the
    metric.  ``samples`` are :class:`jobctl.dashboard.Sample` oldest first;
    DLQ growth is the dead-depth change per minute between consecutive
    samples (none between samples at the same instant); oldest-ready age is
    in minutes (none while nothing is ready)."""
    xs: list[float] = []
    ys: list[float] = []
    if metric == "growth":
        for a, b in zip(samples, samples[1:]):
            if b.at_ms > a.at_ms:
                xs.append((b.at_ms - now_ms) / 60_000)
                ys.append((b.dead - a.dead) * 60_000 / (b.at_ms - a.at_ms))
        return xs, ys
    for s in samples:
        value = _value(s, metric)
        if value is not None:  # no ready job: no age
            xs.append((s.at_ms - now_ms) / 60_000)
            ys.append(float(value))
    return xs, ys


def _value(sample, metric: str) -> float | None:
    if metric == "age":
        age = sample.oldest_ready_age_ms
        return None if age is None else age / 60_000
    return float(getattr(sample, metric))


class HistoryChart(PlotextPlot):
    """Line chart of :attr:`metric` per queue; :attr:`points` holds what it
    draws (queue -> ``(xs, ys)``)."""

    DEFAULT_CSS = "HistoryChart { height: 1fr; min-height: 8; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.metric = "dead"
        self.points: dict[str, tuple[list[float], list[float]]] = {}
        self.window_ms = 0
        self._samples: dict[str, list] = {}
        self._now_ms = 0
        #: Where the samples come from, named in the title.
        self.source = "this TUI"

    def on_mount(self) -> None:
        super().on_mount()
        self._replot()

    def show_history(self, samples: dict[str, list], now_ms: int) -> None:
        """Redraw from ``samples`` (queue -> its samples, oldest first) at ``now_ms``."""
        self._samples, self._now_ms = samples, now_ms
        firsts = [s[0].at_ms for s in samples.values() if s]
        self.window_ms = max(0, now_ms - min(firsts)) if firsts else 0
        self.points = {q: chart_points(s, self.metric, now_ms) for q, s in samples.items()}
        self._replot()

    def cycle_metric(self) -> str:
        """Show the next metric of :data:`METRICS`; returns its name."""
        names = list(METRICS)
        self.metric = names[(names.index(self.metric) + 1) % len(names)]
        self.show_history(self._samples, self._now_ms)
        return self.metric

    def _replot(self) -> None:
        plt = self.plt
        plt.clear_figure()
        title, unit = METRICS[self.metric]
        window = (f"last {fmt.age(self.window_ms)}" if self.window_ms
                  else "one sample so far" if self.points else "no sample yet")
        seen = "seen by this TUI" if self.source == "this TUI" else f"from {self.source}"
        plt.title(f"{title} per queue · {window} {seen} · c: next chart")
        plt.xlabel("minutes before now")
        plt.ylabel(unit)
        for queue, (xs, ys) in self.points.items():
            if xs:
                plt.plot(xs, ys, label=queue, marker="braille")
        self.refresh()
