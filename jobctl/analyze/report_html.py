"""``report.html``: the triage report as one self-contained page (inline
CSS and SVG charts, no script, nothing fetched when it is opened).

Rendered from the ``report.json`` document (:func:`jobctl.analyze.job.analyse`);
needs no Spark.  Times are UTC.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..export.rows import iso_ms

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:72em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#666}
.spike{background:#fff4e5;border-left:4px solid #e8590c;padding:.6em 1em}
svg text{font-size:11px;fill:#444}.bar{fill:#4263eb}.line{fill:none;stroke:#e8590c;stroke-width:1.5}
"""


def _when(ms: int | None) -> str:
    return "-" if ms is None else iso_ms(ms).replace("T", " ")[:16]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def _table(headers: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    """An HTML table; columns ``numeric`` right-aligned."""
    head = "".join(f'<th class="{"n" if i in numeric else ""}">{escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"n" if i in numeric else ""}">{_cell(v)}</td>'
                                    for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _bars(points: list[tuple[str, int]], width: int = 860, height: int = 180) -> str:
    """A bar chart (SVG) of ``(label, value)``; the first, middle and last
    labels on the x axis, the maximum on the y axis."""
    if not points:
        return '<p class="note">nothing to chart</p>'
    top = max(v for _, v in points) or 1
    step = (width - 60) / len(points)
    bars = "".join(f'<rect class="bar" x="{50 + i * step:.1f}" y="{height - 25 - (height - 40) * v / top:.1f}" '
                   f'width="{max(step - 1, 1):.1f}" height="{(height - 40) * v / top:.1f}">'
                   f"<title>{escape(label)}: {v:,}</title></rect>" for i, (label, v) in enumerate(points))
    ticks = "".join(f'<text x="{50 + i * step:.1f}" y="{height - 8}">{escape(points[i][0])}</text>'
                    for i in sorted({0, len(points) // 2, len(points) - 1}))
    axis = (f'<text x="0" y="20">{top:,}</text><text x="0" y="{height - 25}">0</text>'
            f'<line x1="48" y1="10" x2="48" y2="{height - 25}" stroke="#999"/>')
    return f'<svg width="{width}" height="{height}" role="img">{axis}{bars}{ticks}</svg>'


def _line(points: list[tuple[int, int]], hours: list[int], width: int = 420, height: int = 90) -> str:
    """A line chart (SVG) of ``(hour_ms, jobs)`` over the report's ``hours``
    (an hour without a point is zero)."""
    if not hours:
        return ""
    by_hour = dict(points)
    top = max(by_hour.values(), default=0) or 1
    step = (width - 50) / max(len(hours) - 1, 1)
    xy = " ".join(f"{40 + i * step:.1f},{height - 15 - (height - 25) * by_hour.get(h, 0) / top:.1f}"
                  for i, h in enumerate(hours))
    return (f'<svg width="{width}" height="{height}" role="img"><polyline class="line" points="{xy}"/>'
            f'<text x="0" y="14">{top:,}</text><text x="0" y="{height - 15}">0</text></svg>')


def _spike(report: dict[str, Any]) -> str:
    s = report.get("spike")
    if not s:
        return ""
    lead = (f"; <b>{escape(str(s['job_type']))} x {escape(str(s['error_code']))}</b> made {s['group_jobs']:,} "
            f"of them" if s.get("job_type") is not None or s.get("error_code") is not None else "")
    return (f'<p class="spike">The busiest hour, {_when(s["hour_ms"])} UTC, saw {s["jobs"]:,} deaths'
            f"{lead}.</p>")


def _trend(report: dict[str, Any]) -> str:
    """Deaths per hour of each top job type x error code group, one small chart each."""
    hours = [h["hour_ms"] for h in report["deaths_per_hour"]]
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for t in report.get("group_trend", []):
        groups.setdefault((t["job_type"], t["error_code"]), []).append((t["hour_ms"], t["jobs"]))
    rows = "".join(f"<tr><td>{_cell(jt)} x {_cell(code)}</td><td class='n'>{sum(j for _, j in pts):,}</td>"
                   f"<td>{_line(pts, hours)}</td></tr>" for (jt, code), pts in groups.items())
    return f"<table><tr><th>group</th><th class='n'>jobs</th><th>deaths per hour</th></tr>{rows}</table>"


def _capped(table: dict[str, Any]) -> str:
    """The line under a table that lists fewer rows than it has."""
    left = table["total"] - len(table["rows"])
    if left <= 0:
        return ""
    where = f"; the whole table is <code>{escape(table['file'])}</code>" if table.get("file") else ""
    return f'<p class="note">{left:,} more row(s) holding {table["more_jobs"]:,} job(s) not listed{where}.</p>'


def _rollup_sections(report: dict[str, Any], top: int) -> list[str]:
    tc, tenants = report["by_type_code"], report["by_tenant"]
    rows = report["rows"] or 1
    return [
        "<h2>Job type x error code</h2>",
        _table(["job type", "error code", "jobs", "share", "tenants", "first death", "last death"],
               [[r["job_type"], r["error_code"], r["jobs"], f"{100 * r['jobs'] / rows:.1f} %", r["tenants"],
                 _when(r["first_death_ms"]), _when(r["last_death_ms"])] for r in tc["rows"][:top]], {2, 3, 4}),
        _capped({**tc, "rows": tc["rows"][:top]}),
        "<h2>Which group made the spike</h2>", _spike(report), _trend(report),
        "<h2>Tenants</h2>",
        _table(["tenant", "jobs", "job types", "first death", "last death"],
               [[r["tenant"], r["jobs"], r["job_types"], _when(r["first_death_ms"]), _when(r["last_death_ms"])]
                for r in tenants["rows"][:top]], {1, 2}),
        _capped({**tenants, "rows": tenants["rows"][:top]}),
    ]


def _detail_sections(report: dict[str, Any], top: int) -> list[str]:
    fps = {"rows": report["fingerprints"], "total": report["fingerprints_total"],
           "more_jobs": report["fingerprints_more_jobs"]}
    plan = report["redrive"]
    return [
        "<h2>Classification</h2>",
        _table(["class", "rule", "redrive", "jobs", "why"],
               [[c["class"], c["rule"], c["redrive"], c["jobs"], c["description"]] for c in report["classes"]], {3}),
        f"<p>{plan['planned']:,} dead job(s) judged safe to redrive are in <code>{escape(plan['file'])}</code>: "
        f"<code>{escape(plan['command'])}</code></p>",
        "<h2>Error message fingerprints</h2>",
        _table(["pattern", "jobs", "codes", "first seen", "last seen"],
               [[f["pattern"] if f["pattern"] is not None else "(no message)", f["jobs"], f["error_codes"],
                 _when(f["first_seen_ms"]), _when(f["last_seen_ms"])] for f in report["fingerprints"][:top]], {1}),
        _capped({**fps, "rows": fps["rows"][:top], "file": report.get("fingerprints_file")}),
        "<h2>Attempts</h2>",
        _bars([(str(a["attempt"]), a["jobs"]) for a in report["attempts"]], width=420, height=140),
    ]


def render_html(report: dict[str, Any], top: int = 50) -> str:
    """The HTML report; tables show at most ``top`` rows (and say so)."""
    exp = report["export"]
    states = ", ".join(f"{escape(s)}: {n:,}" for s, n in report["by_state"].items()) or "none"
    hours = report["deaths_per_hour"]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>DLQ triage: {escape(exp['queue'])}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>DLQ triage: {escape(exp['queue'])}</h1>",
        f"<p>{report['rows']:,} job(s) ({states}); {report['malformed']:,} malformed; snapshot "
        f"{_when(exp['snapshot_ms'])} UTC from {escape(str(exp['server'] or '-'))}; Spark "
        f"{escape(str(report['spark']['version']))} on {escape(str(report['spark']['master']))}</p>",
        _spike(report),
        "<h2>Deaths per hour (UTC)</h2>",
        _bars([(_when(h["hour_ms"]), h["jobs"]) for h in hours]),
        *_rollup_sections(report, top),
        *_detail_sections(report, top),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
