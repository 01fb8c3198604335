"""What the queue screen's tables and notes show, as pure functions of the
dashboard's data (:class:`~.queue_screen.QueueScreen` puts them in its
widgets): rows are ``(key, cells)`` for :meth:`VimTable.replace_rows`, notes
are :class:`rich.text.Text`.  Times are epoch ms (``now``)."""

from __future__ import annotations

from rich.text import Text

from jobctl.dashboard import JobPage, Level, QueueDetail, Triage
from jobctl import thresholds
from jobctl.filter import Filter
from jobctl.humanize import outcome
from jobctl.model import JobRecord

from . import format as fmt

__all__ = ["job_cells", "processing_cells", "right", "summary_text", "filter_text", "due_rows",
           "processing_view", "hist_view", "triage_view", "jobs_view", "journal_view", "PALETTE_OPS"]


#: The palette's queue operations: (action_op's operation, title with ``{queue}``, help).
PALETTE_OPS = (
    ("migrate", "Migrate / drain {queue} to another queue (M)",
     "The ready jobs that pass the / filter (jobs tab: the listed state); asks which queue"),
    ("drain", "Drain {queue} into an export (D)",
     "Every ready job (jobs tab: the listed state); asks the directory, exports first"),
    ("replay", "Replay {queue}'s history (Y)",
     "Send its history again once: stream-group entries (asks --from/--to), Celery failed tasks (opt-in)"),
    ("transform", "Migrate {queue}'s envelopes (T)",
     "Asks a transformation file (or an operation id to roll back); shows a sample diff"),
)


def job_cells(r: JobRecord, now: int, selected: bool) -> tuple:
    """Cells of the job list."""
    e = r.envelope
    st = r.state.value if r.state else None
    if st == "scheduled":
        when = "due " + fmt.rel(now, r.score)
    elif st == "processing":
        when = "deadline " + fmt.rel(now, r.deadline_ms) if r.deadline_ms is not None else "no deadline"
    elif st == "suppressed":
        when = "suppressed " + fmt.ago(now, r.score)
    elif st == "dead":
        when = "dead " + fmt.ago(now, r.meta.get("dead_since_ms", e.last_attempt_ms))
    else:
        when = "ready " + fmt.ago(now, e.ready_since_ms)
    attempt = "-" if e.attempt is None else f"{e.attempt}/{e.max_attempts if e.max_attempts is not None else '?'}"
    err = Text(e.last_error_code or "")
    if e.problems:
        err = Text(f"malformed: {e.problems[0]}", style="red")
    mark = Text("●", style="bold yellow") if selected else Text(" ")
    return (mark, r.job_id, e.job_type or "-", e.tenant_id or "-", Text(attempt, justify="right"),
            fmt.ago(now, e.created_ms), when, err)


def processing_cells(r: JobRecord, now: int, selected: bool) -> tuple:
    """Cells of the processing list; a stuck job (deadline passed) in red."""
    e = r.envelope
    left = None if r.deadline_ms is None else r.deadline_ms - now
    if left is None:
        when = Text("no deadline", style="bold red")
    elif left < 0:
        when = Text(f"STUCK {fmt.age(-left)} past", style="bold white on red")
    else:
        when = Text(f"{fmt.age(left)} left", style="yellow" if left < 60_000 else "")
    attempt = "-" if e.attempt is None else f"{e.attempt}/{e.max_attempts if e.max_attempts is not None else '?'}"
    mark = Text("●", style="bold yellow") if selected else Text(" ")
    return (mark, r.job_id, e.job_type or "-", e.tenant_id or "-", Text(attempt, justify="right"), when,
            r.shard, e.last_error_code or "")


def right(label: str) -> Text:
    """A right-justified column header."""
    return Text(label, justify="right")


def summary_text(row, flt: Filter, selection: set[str]) -> Text:
    """The summary line of a dashboard ``row`` (counts with their alert
    levels, holds), then the ``/`` filter and the selection."""
    st = row.status
    out = Text()
    if st is None:
        out.append(row.error or "status unreadable", style="red")
    else:
        _status_parts(out, row)
    if not flt.is_match_all:
        out.append("\nfilter: ", style="bold")
        out.append(flt.text, style="cyan")
    if selection:
        out.append(f"\nselected: {len(selection):,} job(s) (space toggles, c clears)", style="yellow")
    return out


def _status_parts(out: Text, row) -> None:
    """Appends ``label value`` parts of ``row.status`` to ``out``, each
    styled by its alert level, then the active holds with their age."""
    st, lv = row.status, thresholds.cell_levels(row.levels)

    def part(label: str, value: str, level: Level | None = None) -> None:
        if out:
            out.append(" · ")
        out.append(f"{label} ")
        out.append(value, style=fmt.level_style(level) or "bold")

    part("ready", fmt.count(st.ready), lv.get("ready"))
    part("oldest ready", fmt.age(st.oldest_ready_age_ms), lv.get("oldest_ready_age"))
    part("scheduled", f"{st.scheduled:,} ({st.scheduled_overdue:,} overdue)", lv.get("overdue"))
    part("processing", f"{st.processing:,} ({st.stuck:,} stuck)", lv.get("stuck"))
    part("dead", fmt.count(st.dead), lv.get("dead"))
    part("DLQ growth", fmt.rate(row.dead_growth_per_min), lv.get("dead_growth"))
    part("suppressed", fmt.count(st.suppressed))
    if st.paused or st.held_filters:
        part("paused", fmt.count(st.paused))
    for h in st.held_filters:  # jobctl pause --hold: the active holds with their age
        out.append("\nheld: ", style="bold yellow")
        out.append(h.get("filter") or "every job", style="cyan")
        out.append(f" for {fmt.age(h.get('age_ms'))}"
                   + (f" ({h['reason']})" if h.get("reason") else ""))


def filter_text(flt: Filter) -> Text:
    """The summary without a status row: the ``/`` filter only."""
    text = Text()
    if not flt.is_match_all:
        text.append(f"filter: {flt.text}")
    return text


def due_rows(detail: QueueDetail) -> list:
    """Rows of the scheduled due-time distribution (overdue in red)."""
    total = detail.due.total
    rows = []
    for label, n in detail.due.counts:
        style = "bold red" if label == "overdue" and n else ""
        rows.append((label, (Text(label, style=style), Text(f"{n:,}", justify="right", style=style),
                             Text(fmt.bar(n, total, 24), style="red" if label == "overdue" else "cyan"))))
    return rows


def processing_view(d: QueueDetail, flt: Filter, selection: set[str]) -> tuple[list, Text]:
    """Rows and note of the processing list: the jobs that pass ``flt``,
    least time left first; the stuck ones counted in the note."""
    recs = [r for r in d.processing if flt.matches(r, d.now_ms)]
    rows = [(r.job_id, processing_cells(r, d.now_ms, r.job_id in selection)) for r in recs]
    stuck = sum(1 for r in recs if r.deadline_ms is not None and r.deadline_ms < d.now_ms)
    note = Text(f"{d.status.processing:,} processing, {d.status.stuck:,} stuck; showing the "
                f"{len(recs):,} with the least time left to their visibility deadline")
    if not flt.is_match_all:
        note.append(" (filtered)")
    if stuck:
        note.append(f"  ·  {stuck:,} stuck shown in red: U requeues them", style="bold red")
    note.append(f"  ·  as of {fmt.clock(d.now_ms)}", style="dim")
    return rows, note


def hist_view(hists: dict) -> tuple[list, str]:
    """Rows and title of the attempt histogram (``hists``: state name ->
    histogram), one row per attempt, ``unknown`` last."""
    states = ("ready", "scheduled", "processing", "dead")
    attempts = sorted({a for h in hists.values() for a in h.counts})
    totals = {a: sum(hists[s].counts.get(a, 0) for s in states if s in hists) for a in attempts}
    biggest = max(totals.values(), default=0)
    rows = []
    for a in attempts:
        cells = [Text(str(a), justify="right")]
        cells += [Text(f"{hists[s].counts.get(a, 0):,}", justify="right") if s in hists else "-"
                  for s in states]
        cells.append(Text(f"{fmt.bar(totals[a], biggest, 16)} {totals[a]:,}", style="cyan"))
        rows.append((str(a), tuple(cells)))
    unknown = {s: hists[s].unknown for s in states if s in hists}
    if any(unknown.values()):
        rows.append(("unknown", (Text("?", justify="right"),
                                 *[Text(f"{unknown.get(s, 0):,}", justify="right") for s in states],
                                 Text(""))))
    sampled = [s for s in states if s in hists and hists[s].sampled]
    title = "attempt histogram (envelope attempt, by state)"
    if sampled:
        title += f" — sampled: {', '.join(sampled)}"
    return rows, title


def triage_view(tri: Triage, header_ms: int | None = None) -> tuple[list, Text]:
    """Rows (one per job type x error code group) and note of the triage tab.

    The note says when the figures were computed (``tri.now_ms``, the
    header's clock and format); when the header's last refresh
    (``header_ms``, epoch ms) is later, it says by how much they lag and
    that ``r`` recomputes them."""
    rows = []
    for g in tri.groups:
        share = f"{g.count * 100 / tri.matched:.0f}%" if tri.matched else "-"
        tenants = ", ".join(f"{t} {n * 100 / max(1, sum(g.tenants.values())):.0f}%"
                            for t, n in g.top_tenants(2))
        rows.append((g.key, (Text(g.job_type or "(none)", style="bold"), g.error or "(none)",
                             Text(f"{g.count:,}", justify="right"), Text(share, justify="right"),
                             fmt.ago(tri.now_ms, g.first_seen_ms), fmt.ago(tri.now_ms, g.last_seen_ms),
                             tenants)))
    note = Text(f"{tri.depth:,} dead · {len(tri.groups)} group(s) by job type × error code")
    if tri.sampled:
        note.append(f" · sampled {tri.read:,} and scaled", style="yellow")
    if tri.malformed:
        note.append(f" · {tri.malformed:,} malformed (not redrivable)", style="yellow")
    if tri.filter_text:
        note.append(f" · {tri.matched:,} match the filter", style="cyan")
    note.append(f" · as of {fmt.clock(tri.now_ms)}", style="dim")
    if header_ms is not None and header_ms > tri.now_ms:
        note.append(f" · stale: {fmt.age(header_ms - tri.now_ms)} older than the header "
                    f"({fmt.clock(header_ms)}) · r recomputes", style="bold yellow")
    note.append("\nenter: the group's jobs · R redrive / S suppress / X purge the highlighted group · "
                "Z/W pause/resume the ready jobs of its job type or a tenant", style="dim")
    return rows, note


def jobs_view(page: JobPage, selection: set[str]) -> tuple[list, Text]:
    """Rows and note of the job list (``selection`` marked)."""
    rows = [(r.job_id, job_cells(r, page.now_ms, r.job_id in selection)) for r in page.records]
    note = Text()
    note.append(f"{page.state}", style="bold")
    note.append(f" jobs: {len(page.records):,} shown")
    if page.filter_text:
        note.append(f" matching the filter ({page.scanned:,} examined"
                    f"{', more may match' if not page.complete else ''})")
    elif not page.complete:
        note.append(" (the first ones in serving order)")
    note.append(f" · as of {fmt.clock(page.now_ms)}", style="dim")
    note.append("\ns: next state · space: select · enter: inspect · / filter · "
                "actions apply to the selection, else to the filter", style="dim")
    return rows, note


#: Table id -> the columns a narrow terminal leaves out first (indexes, in order): last error,
#: shard, tenant, type, created... keeping the job id and the numbers.
DROP_ORDER = {"proc": (7, 6, 3, 2), "groups": (6, 4, 3), "jobs-table": (7, 3, 5, 2), "journal-table": (8, 3, 2)}


#: Colours of a journal entry's result (:func:`jobctl.humanize.outcome`), as the CLI's.
_OUTCOME_STYLE = thresholds.OUTCOME_STYLES


def journal_view(entries: list[dict], now: int) -> tuple[list, Text]:
    """Rows and note of the journal tab (``entries``: the journal stream's entries)."""
    rows = []
    for n, e in enumerate(entries):
        what = e.get("filter") or (", ".join(e.get("ids") or [])[:60]) or ""
        word = outcome(e)
        rows.append((e.get("stream_id") or str(n), (
            fmt.ago(now, e.get("ended_ms")), Text(word, style=_OUTCOME_STYLE[word]),
            Text(str(e.get("operation")), style="bold"),
            str(e.get("operator") or ""), Text(f"{e.get('planned', 0):,}", justify="right"),
            Text(f"{e.get('moved', 0):,}", justify="right"), Text(f"{e.get('skipped', 0):,}", justify="right"),
            Text(f"{e.get('failed', 0):,}", justify="right"), what)))
    note = Text(f"the queue's audit journal stream: {len(entries)} newest entr{'y' if len(entries) == 1 else 'ies'}"
                " (operations from the CLI and the TUI)")
    return rows, note
