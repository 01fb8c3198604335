"""``report.md``: the triage report as readable Markdown tables.

Rendered from the ``report.json`` document (:func:`jobctl.analyze.job.analyse`);
needs no Spark.  Times are UTC; durations human-readable.
"""

from __future__ import annotations

from typing import Any

from ..durations import format_duration
from ..export.rows import iso_ms

__all__ = ["render_markdown"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("`", "'")
    return text if len(text) <= 120 else text[:117] + "..."


def _when(ms: int | None) -> str:
    return "-" if ms is None else iso_ms(ms).replace("T", " ")


def _dur(ms: int | None) -> str:
    if ms is None:
        return "-"
    return ("-" if ms < 0 else "") + format_duration(abs(int(ms)))


def _duplicates(by_state: dict[str, int]) -> str:
    if not by_state:
        return ""
    where = ", ".join(f"{n:,} in {s}" for s, n in by_state.items())
    return f"; duplicate entries (an id held twice; planned once): {sum(by_state.values()):,} ({where})"


def _share(jobs: int, rows: int) -> str:
    return f"{100 * jobs / rows:.1f}%" if rows else "-"


def _more(rows: list[dict], total: int, more_jobs: int, top: int, file: str | None = None) -> list[str]:
    """The line under a table cut at ``top`` rows (report.md) or at its cap
    (report.json): how many rows and jobs are not shown, exactly, and the
    Parquet ``file`` that holds a capped table whole."""
    shown = min(top, len(rows))
    if total <= shown:
        return []
    beyond = sum(r["jobs"] for r in rows[shown:]) + more_jobs
    text = f"({total - shown:,} more row(s) holding {beyond:,} job(s) not shown here"
    if len(rows) > shown:
        text += f"; report.json lists {len(rows) - shown:,} of them"
    if total > len(rows):
        text += (f"; {total - len(rows):,} row(s) holding {more_jobs:,} job(s) are beyond the cap of "
                 f"{len(rows):,}" + (f": the whole table is {file} (Parquet)" if file else " and listed nowhere"))
    return [text + ")", ""]


def _spike_line(spike: dict[str, Any] | None) -> list[str]:
    """The header bullet naming the busiest hour and the group that led it."""
    if not spike:
        return []
    lead = (f"; {spike['job_type']} x {spike['error_code']} made {spike['group_jobs']:,} of them"
            if spike.get("group_jobs") else "")
    return [f"- busiest hour: {_when(spike['hour_ms'])[:16]} UTC, {spike['jobs']:,} deaths{lead}"]


def _trend(trend: list[dict[str, Any]]) -> list[str]:
    """Per top job type x error code group: its deaths in the trend and its peak hour."""
    if not trend:
        return []
    groups: dict[tuple, list[dict]] = {}
    for t in trend:
        groups.setdefault((t["job_type"], t["error_code"]), []).append(t)
    rows = []
    for (jt, code), ts in groups.items():
        peak = max(ts, key=lambda t: (t["jobs"], t["hour_ms"]))
        rows.append([_cell(jt), _cell(code), _cell(sum(t["jobs"] for t in ts)), _when(peak["hour_ms"])[:16],
                     _cell(peak["jobs"]), _cell(len(ts))])
    return ["## Which group made the spike", "", "Deaths per hour of the top job type x error code groups "
            "(report.json `group_trend`; charted in report.html).", ""] + \
        _table(["job type", "error code", "jobs", "peak hour", "peak deaths", "hours with deaths"], rows,
               right={2, 4, 5})


def _table(headers: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _rollups(report: dict[str, Any], top: int) -> list[str]:
    """The headline (job type x error code) and per-tenant tables."""
    rows = report["rows"]
    tc, tn = report["by_type_code"], report["by_tenant"]
    lines = ["## Jobs by job type x error code", ""]
    lines += _table(["job type", "error code", "jobs", "share", "tenants", "first death", "last death"],
                    [[_cell(g["job_type"]), _cell(g["error_code"]), _cell(g["jobs"]), _share(g["jobs"], rows),
                      _cell(g["tenants"]), _when(g["first_death_ms"]), _when(g["last_death_ms"])]
                     for g in tc["rows"][:top]], right={2, 3, 4})
    lines += _more(tc["rows"], tc["total"], tc["more_jobs"], top, tc.get("file"))
    lines += ["## Jobs by tenant", ""]
    lines += _table(["tenant", "jobs", "share", "job types", "first death", "last death"],
                    [[_cell(g["tenant"]), _cell(g["jobs"]), _share(g["jobs"], rows), _cell(g["job_types"]),
                      _when(g["first_death_ms"]), _when(g["last_death_ms"])] for g in tn["rows"][:top]],
                    right={1, 2, 3})
    return lines + _more(tn["rows"], tn["total"], tn["more_jobs"], top, tn.get("file"))


def render_markdown(report: dict[str, Any], top: int = 50) -> str:
    """The Markdown report; tables show at most ``top`` rows (and say so)."""
    exp = report["export"]
    lines = [f"# DLQ triage: {exp['queue']}", ""]
    states = ", ".join(f"{s}: {n:,}" for s, n in report["by_state"].items()) or "none"
    lines += [
        f"- export: `{exp['directory']}` ({exp['format']}, {exp['parts']} part(s)), states "
        f"{', '.join(exp['states'] or [])}" + (f", filter `{exp['filter']}`" if exp.get("filter") else ""),
        f"- snapshot: {_when(exp['snapshot_ms'])} UTC, server {exp['server'] or '-'}",
        f"- jobs: {report['rows']:,} ({states}); malformed: {report['malformed']:,}; "
        f"attempts exhausted: {report['attempts_exhausted']:,}"
        + _duplicates(report.get("duplicate_entries_by_state") or {}),
        f"- rules: {report['rules']['source']}; Spark {report['spark']['version']} on {report['spark']['master']}",
        *_spike_line(report.get("spike")),
        "",
    ]

    def more(rows: list[dict], total: int, more_jobs: int, file: str | None = None) -> None:
        lines.extend(_more(rows, total, more_jobs, top, file))

    lines += _rollups(report, top)
    lines += _trend(report.get("group_trend") or [])

    lines += ["## Classification", ""]
    lines += _table(["class", "rule", "redrive", "jobs", "why"],
                    [[c["class"], _cell(c["rule"]), _cell(c["redrive"]), _cell(c["jobs"]), _cell(c["description"])]
                     for c in report["classes"]], right={3})
    plan = report["redrive"]
    lines += ["## Redrive plan", "",
              f"{plan['planned']:,} dead job(s) judged safe to redrive are listed in `{plan['file']}`, each with "
              "the rule that chose it and its payload_sha1 as exported.  Apply it (only jobs still dead and "
              "unchanged since the export move; the rest are reported as skipped):", "",
              f"    {plan['command']}", ""]

    groups = report["groups"]
    lines += ["## Drill-down: job type x error code x tenant x job version", ""]
    lines += _table(["job type", "error code", "tenant", "version", "jobs", "first death", "last death"],
                    [[_cell(g["job_type"]), _cell(g["error_code"]), _cell(g["tenant"]), _cell(g["job_version"]),
                      _cell(g["jobs"]), _when(g["first_death_ms"]), _when(g["last_death_ms"])]
                     for g in groups[:top]], right={3, 4})
    more(groups, report["groups_total"], report["groups_more_jobs"], report.get("groups_file"))

    lines += ["## Error message fingerprints", "",
              "Durations and sizes (with their units), numbers, ids, hex, UUIDs, e-mail and IP addresses "
              "normalised away.", ""]
    lines += _table(["fingerprint", "pattern", "jobs", "codes", "first seen", "last seen", "samples"],
                    [[f["fingerprint"] or "-", _cell(f["pattern"] if f["pattern"] is not None else "(no message)"),
                      _cell(f["jobs"]), _cell(f["error_codes"]), _when(f["first_seen_ms"]), _when(f["last_seen_ms"]),
                      _cell(", ".join(x for x in dict.fromkeys([f["first_id"], f["last_id"]]) if x))]
                     for f in report["fingerprints"][:top]], right={2})
    more(report["fingerprints"], report["fingerprints_total"], report["fingerprints_more_jobs"],
         report.get("fingerprints_file"))

    lines += ["## Attempts", ""]
    lines += _table(["attempts", "jobs"], [[_cell(a["attempt"]), _cell(a["jobs"])] for a in report["attempts"]],
                    right={0, 1})

    age = report["age_at_death"]
    lines += ["## Age at death", "", "Time from createdAt to the last attempt.", ""]
    lines += _table(["age", "jobs"], [[b["bucket"], _cell(b["jobs"])] for b in age["buckets"]], right={1})
    lines += [f"min {_dur(age['min_ms'])}, median {_dur(age['p50_ms'])}, p90 {_dur(age['p90_ms'])}, "
              f"p99 {_dur(age['p99_ms'])}, max {_dur(age['max_ms'])} (over {age['known']:,} job(s) with both "
              "times; percentiles approximate)", ""]

    lines += ["## Deaths per hour (UTC)", ""]
    hours = report["deaths_per_hour"]
    lines += _table(["hour", "jobs"], [[_when(h["hour_ms"])[:16], _cell(h["jobs"])] for h in hours[-48:]],
                    right={1})
    if len(hours) > 48:
        lines += [f"(the last 48 hours with deaths; {len(hours) - 48:,} earlier hour(s) holding "
                  f"{sum(h['jobs'] for h in hours[:-48]):,} job(s) are in report.json)", ""]
    return "\n".join(lines)
