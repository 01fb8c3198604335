"""The last hours of the dashboard's history, read back from Prometheus.

When a profile names ``prometheus_url`` (a Prometheus-compatible server
that scrapes ``jobctl metrics``), :func:`load_history` asks its
``/api/v1/query_range`` for the exporter's own queue gauges
(``redis_job_*_depth``, ``redis_job_oldest_ready_age_ms``: the names of
:data:`jobctl.metrics.families.STATUS_GAUGES`) over the last
:data:`DEFAULT_WINDOW_MS`, one point every window / :data:`MAX_POINTS`, and
turns the matrix reply into :class:`~jobctl.dashboard.history.Sample` lists
(:func:`parse_matrix`), so the dashboard's chart is full when it opens.

One HTTP GET (urllib, ``timeout_s``); every failure raises
:class:`PrometheusError` with a one-line message.  Times are epoch ms.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from ..errors import JobctlError, UsageError
from .history import Sample

__all__ = ["PrometheusError", "DEFAULT_WINDOW_MS", "MAX_POINTS", "SERIES", "range_query", "check_url", "query_url",
           "parse_matrix", "load_history"]

#: How far back the history goes by default (ms): three hours.
DEFAULT_WINDOW_MS = 3 * 3_600_000
#: At most about this many points per series (the step is window / MAX_POINTS, whole seconds).
MAX_POINTS = 300
#: Largest reply read (bytes): a misdirected URL must not fill memory.
MAX_REPLY_BYTES = 32 * 1024 * 1024


class PrometheusError(JobctlError):
    """The Prometheus server could not be read, or its reply is not a range matrix."""


def _series() -> dict[str, str]:
    """metric name -> :class:`Sample` field, for the gauges a sample holds."""
    from ..metrics.families import STATUS_GAUGES  # late: prometheus_client only when used

    names = {f.name for f in fields(Sample)}
    return {metric: attr for metric, attr, _ in STATUS_GAUGES if attr in names}


#: metric name -> :class:`Sample` field (ready, scheduled, processing, stuck, dead, oldest-ready age).
SERIES: dict[str, str] = _series()


def _label_value(text: str) -> str:
    """``text`` as a regex alternative inside a quoted PromQL label matcher."""
    special = "\\.^$*+?()[]{}|"
    escaped = "".join("\\" + c if c in special else c for c in text)
    return escaped.replace("\\", "\\\\").replace('"', '\\"')


def range_query(queues: Iterable[str]) -> str:
    """The PromQL selector of :data:`SERIES` for ``queues``, e.g.
    ``{__name__=~"redis_job_ready_depth|...",queue=~"email|billing"}``."""
    names = "|".join(sorted(SERIES))
    wanted = "|".join(_label_value(q) for q in sorted(set(queues)))
    return f'{{__name__=~"{names}",queue=~"{wanted}"}}'


def check_url(base: str) -> str:
    """``base`` if it is an ``http(s)://host[:port][/path]`` URL; raises
    :class:`~jobctl.errors.UsageError` (exit 2) otherwise."""
    try:
        parts = urllib.parse.urlsplit(base)
        parts.port  # noqa: B018 - a port that is not a number raises ValueError
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"prometheus_url {base!r}: expected http://host:port or https://...")
    return base


def query_url(base: str, queues: Iterable[str], *, now_ms: int, window_ms: int = DEFAULT_WINDOW_MS) -> str:
    """The ``/api/v1/query_range`` URL for ``queues`` over ``window_ms`` up
    to ``now_ms`` (step: whole seconds, at most :data:`MAX_POINTS` points).
    Raises :class:`~jobctl.errors.UsageError` for a URL that is not http(s)."""
    check_url(base)
    step_s = max(1, math.ceil(window_ms / 1000 / MAX_POINTS))
    end_s = now_ms / 1000
    query = urllib.parse.urlencode({"query": range_query(queues), "start": f"{end_s - window_ms / 1000:.3f}",
                                    "end": f"{end_s:.3f}", "step": f"{step_s}s"})
    return f"{base.rstrip('/')}/api/v1/query_range?{query}"


def _fail(what: str) -> PrometheusError:
    return PrometheusError(f"Prometheus history: {what}")


def _matrix(reply: Any) -> list:
    """The ``data.result`` list of a successful matrix reply; raises :class:`PrometheusError`."""
    if not isinstance(reply, dict):
        raise _fail("the reply is not a JSON object")
    if reply.get("status") != "success":
        raise _fail(f"status {reply.get('status')!r}: {str(reply.get('error') or '')[:200]}")
    data = reply.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise _fail("the reply holds no range matrix (data.resultType must be \"matrix\")")
    return data["result"]


def _points(series: Any) -> tuple[str, str, list[tuple[int, float]]]:
    """``(metric name, queue, [(epoch ms, value)])`` of one matrix series."""
    metric = series.get("metric") if isinstance(series, dict) else None
    values = series.get("values") if isinstance(series, dict) else None
    if not isinstance(metric, dict) or not isinstance(values, list):
        raise _fail("a series lacks its metric labels or values")
    out = []
    for point in values:
        try:
            ts, raw = point
            value = float(raw)
            at_ms = round(float(ts) * 1000)
        except (TypeError, ValueError):
            raise _fail(f"a point is not [time, \"value\"]: {str(point)[:80]}") from None
        if math.isfinite(value):  # NaN / Inf (a stale series) carries nothing to draw
            out.append((at_ms, value))
    return str(metric.get("__name__", "")), str(metric.get("queue", "")), out


def parse_matrix(reply: Any, queues: Iterable[str]) -> dict[str, list[Sample]]:
    """Samples per queue (oldest first) from a ``query_range`` reply
    (parsed JSON).  Series of other metrics or queues are ignored; a field a
    point in time lacks is 0 (the oldest-ready age ``None`` when nothing is
    ready).  Raises :class:`PrometheusError` for an error or non-matrix reply."""
    wanted = set(queues)
    table: dict[str, dict[int, dict[str, float]]] = {}
    for series in _matrix(reply):
        name, queue, points = _points(series)
        attr = SERIES.get(name)
        if attr is None or queue not in wanted:
            continue
        by_time = table.setdefault(queue, {})
        for at_ms, value in points:
            by_time.setdefault(at_ms, {})[attr] = value
    return {q: [_sample(at, vals) for at, vals in sorted(by_time.items())] for q, by_time in table.items()}


def _sample(at_ms: int, vals: dict[str, float]) -> Sample:
    ready = int(vals.get("ready", 0))
    age = vals.get("oldest_ready_age_ms")
    return Sample(at_ms=at_ms, ready=ready, scheduled=int(vals.get("scheduled", 0)),
                  processing=int(vals.get("processing", 0)), stuck=int(vals.get("stuck", 0)),
                  dead=int(vals.get("dead", 0)), oldest_ready_age_ms=int(age) if age is not None and ready else None)


def load_history(base: str, queues: Iterable[str], *, now_ms: int, window_ms: int = DEFAULT_WINDOW_MS,
                 timeout_s: float = 5.0) -> dict[str, list[Sample]]:
    """GET the range of :data:`SERIES` for ``queues`` from the Prometheus at
    ``base`` and parse it (:func:`parse_matrix`).  Raises
    :class:`PrometheusError` (one line) when the server is unreachable,
    answers other than 200, or sends something else than a range matrix."""
    queues = list(queues)
    url = query_url(base, queues, now_ms=now_ms, window_ms=window_ms)
    where = urllib.parse.urlsplit(base).netloc
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - http(s) checked above
            body = resp.read(MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise _fail(f"{where} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise _fail(f"{where} unreachable ({str(reason)[:120]})") from None
    if len(body) > MAX_REPLY_BYTES:
        raise _fail(f"{where}: reply larger than {MAX_REPLY_BYTES:,} bytes")
    try:
        reply = json.loads(body)
    except ValueError:
        raise _fail(f"{where}: the reply is not JSON") from None
    return parse_matrix(reply, queues)
