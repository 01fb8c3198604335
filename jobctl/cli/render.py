"""Rich renderables for the CLI's human output (stdout), and the JSON printer.

Nothing here talks to Redis.  ``rich`` is imported when a table is drawn, not
at start-up.
"""

from __future__ import annotations

import codecs
import os
import sys
from typing import TYPE_CHECKING, Any

import click
import orjson

from .. import humanize, thresholds
from ..escape import json_safe, shown
from ..model import JobRecord, QueueStatus

if TYPE_CHECKING:
    from ..dashboard.slo import Slo
    from ..thresholds import Level

__all__ = ["print_json", "status_table", "jobs_table", "job_panel", "histogram_table", "fmt_ms",
           "console", "progress", "note"]


def print_json(data: Any, *, compact: bool = False) -> None:
    """Write ``data`` as one JSON document (plus newline) to stdout;
    ``compact`` puts it on one line (a stream of documents, e.g. ``--watch``).
    Undecodable bytes in strings are escaped (``\\xff``, :func:`json_safe`)."""
    opts = orjson.OPT_NON_STR_KEYS | (0 if compact else orjson.OPT_INDENT_2)
    try:
        body = orjson.dumps(data, option=opts)
    except TypeError:  # orjson.JSONEncodeError: surrogates, ints over 64 bits
        body = orjson.dumps(json_safe(data), option=opts)
    sys.stdout.buffer.write(body)
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()


def _shown_error(exc: UnicodeError):
    """Codec error handler ``jobctl-shown``: undecodable bytes kept as
    surrogates are written ``\\xff`` (as :func:`shown` does)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start:exc.end]
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}"
                   for c in bad), exc.end


codecs.register_error("jobctl-shown", _shown_error)


class _SafeText:
    """A text stream that never fails on undecodable bytes (ids, values
    read from Redis): they are written escaped, ``\\xff``."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            return self._stream.write(text.encode("utf-8", "jobctl-shown").decode("utf-8"))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def console(stderr: bool = False):
    from rich.console import Console

    stream = _SafeText(sys.stderr if stderr else sys.stdout)
    con = Console(file=stream, highlight=False, soft_wrap=False)
    if not con.is_terminal and not os.environ.get("COLUMNS"):
        # piped or captured (and no COLUMNS set): draw the table at full width rather than 80 columns
        con = Console(file=stream, highlight=False, soft_wrap=False, width=max(con.width, 160))
    return con


def fmt_ms(epoch_ms: int | None) -> str:
    """Epoch ms -> ``2026-11-21 10:04:05.123Z``; ``-`` for None."""
    if epoch_ms is not None and abs(epoch_ms) >= _NEVER_MS:
        return "never (score +inf)" if epoch_ms > 0 else "always (score -inf)"
    return humanize.stamp(epoch_ms)


#: Epoch ms at or beyond which a time is a zset's +inf/-inf
#: (:data:`jobctl.layouts.common.SCORE_INF_MS`).
_NEVER_MS = 2 ** 53

_age = humanize.duration  # a duration: 5 m 17 s
_rel = humanize.rel  # a time that may lie ahead: in 4 h 41 m / 2.07 s ago
_ago = humanize.ago  # a past event: 2.07 s ago, "now" under clock skew


#: ``jobctl status`` columns (header, justify) in display order, and their rank: a narrow terminal
#: drops the highest rank first, never shortening a number.
STATUS_COLUMNS = (("queue", "left"), ("layout", "left"), ("ready", "right"), ("oldest ready", "right"),
                  ("scheduled", "right"), ("overdue", "right"), ("next due", "right"),
                  ("processing", "right"), ("stuck", "right"), ("dead", "right"), ("suppressed", "right"))
STATUS_RANK = ("queue", "dead", "stuck", "oldest ready", "ready", "processing", "overdue", "scheduled",
               "suppressed", "next due", "layout")


def _dead_count(s: QueueStatus) -> str:
    """The dead count as shown: "n/a" for a layout without a dead state, or a
    queue whose status says it has none ("dead n/a": Celery without the opt-in)."""
    from ..layouts import layout_class
    from ..model import State

    if any(w.startswith("dead n/a") for w in s.warnings):
        return "n/a"
    try:
        has_dead = State.DEAD in layout_class(s.layout).states
    except (KeyError, ImportError):  # a layout this process does not know: show the count
        has_dead = True
    return f"{s.dead:,}" if has_dead else "n/a"


def _status_cells(s: QueueStatus, slo: Slo | None = None) -> tuple[str, ...]:
    """One queue's cells (rich markup), in :data:`STATUS_COLUMNS` order,
    coloured by :mod:`jobctl.thresholds` against ``slo`` (default bounds
    when ``None``), as the TUI colours them."""
    lv = status_levels(s, slo)

    def paint(cell: str, text: str) -> str:
        st = thresholds.style(lv.get(cell))
        return f"[{st}]{text}[/]" if st else text

    ready = f"{s.ready:,}"
    if s.ready_by_priority:
        ready += " (" + " ".join(f"{k}:{v:,}" for k, v in sorted(s.ready_by_priority.items())) + ")"
    paused, holds = getattr(s, "paused", 0), getattr(s, "held_filters", [])
    if paused or holds:  # jobctl pause: shown only when something is paused or held
        ready += f" [yellow]+{paused:,} paused" + (f", {len(holds)} held" if holds else "") + "[/]"
    overdue = f"{s.scheduled_overdue:,}"
    if s.scheduled_overdue:
        overdue += f" (max {_age(s.scheduled_overdue_max_age_ms)})"
    name = s.queue + (f" [dim]x{s.shards}[/]" if s.shards > 1 else "")
    if s.errors:
        name += " [red]![/]"
    return (name, s.layout, paint("ready", ready), paint("oldest_ready_age", _age(s.oldest_ready_age_ms)),
            paint("scheduled", f"{s.scheduled:,}"), paint("overdue", overdue), _rel(s.now_ms, s.next_due_ms),
            paint("processing", f"{s.processing:,}"), paint("stuck", f"{s.stuck:,}"), paint("dead", _dead_count(s)),
            paint("suppressed", f"{s.suppressed:,}"))


def status_levels(s: QueueStatus, slo: Slo | None = None) -> dict[str, Level]:
    """Display cell -> :class:`~jobctl.thresholds.Level` of one status
    (:func:`jobctl.thresholds.cell_levels`; no DLQ growth: one sample)."""
    from ..dashboard.slo import Slo, slo_values

    return thresholds.cell_levels((slo or Slo()).evaluate(slo_values(s, None)))


def _kept_columns(rows: list[tuple[str, ...]], width: int) -> list[int]:
    """Indexes of :data:`STATUS_COLUMNS` to show within ``width`` cells: by
    :data:`STATUS_RANK`, each column as wide as its widest cell (numbers are
    never wrapped), queue and dead always."""
    from rich.text import Text

    def need(i: int) -> int:  # the column's cells, its padding (2) and border (1)
        cells = [Text.from_markup(r[i]).cell_len for r in rows]
        return max([len(STATUS_COLUMNS[i][0]), *cells]) + 3

    names = [c for c, _ in STATUS_COLUMNS]
    kept, used = [], 1  # the table's left border
    for rank, col in enumerate(STATUS_RANK):
        i = names.index(col)
        if rank >= 2 and used + need(i) > width:
            continue
        kept.append(i)
        used += need(i)
    return sorted(kept)


class _StatusTable:
    """The status table laid out at render time for the console's width."""

    def __init__(self, statuses: list[QueueStatus], title: str | None, slos: dict[str, Slo]) -> None:
        self.rows = [_status_cells(s, slos.get(s.queue)) for s in statuses]
        self.title = title

    def __rich_console__(self, console, options):
        from rich.table import Table

        kept = _kept_columns(self.rows, options.max_width)
        t = Table(title=self.title, title_justify="left", header_style="bold")
        for i in kept:
            col, just = STATUS_COLUMNS[i]
            numeric = just == "right"
            t.add_column(col, justify=just, no_wrap=numeric, overflow="fold")
        for row in self.rows:
            t.add_row(*(row[i] for i in kept))
        yield t


def status_table(statuses: list[QueueStatus], *, title: str | None = None, slos: dict[str, Slo] | None = None):
    """The ``jobctl status`` table (a rich renderable): one row per logical
    queue; on a narrow console the least important columns are left out
    (:data:`STATUS_RANK`) and no count is ever cut short.  Cells are
    coloured by their level against ``slos`` (queue name -> its
    :class:`~jobctl.dashboard.Slo`; the default bounds for a queue not in it)."""
    return _StatusTable(statuses, title, slos or {})


def jobs_table(records: list[JobRecord], now: int):
    """The ``jobctl ls`` table."""
    from rich.table import Table

    t = Table(header_style="bold")
    for col in ("#", "id", "type", "tenant", "attempt", "created", "when", "error"):
        t.add_column(col, justify="right" if col in ("#", "attempt") else "left", overflow="fold")
    for n, r in enumerate(records):
        e = r.envelope
        if r.state is not None and r.state.value == "scheduled":
            when = "due " + _rel(now, r.score)
        elif r.state is not None and r.state.value == "processing":
            when = "deadline " + _rel(now, r.deadline_ms) if r.deadline_ms is not None else "[red]no deadline[/]"
        elif r.state is not None and r.state.value == "suppressed":
            when = "suppressed " + _ago(now, r.score)
        elif r.state is not None and r.state.value == "dead":
            when = "dead " + _ago(now, r.meta.get("dead_since_ms"))
        else:
            when = "ready " + _ago(now, e.ready_since_ms)
        attempt = "-" if e.attempt is None else f"{e.attempt}/{e.max_attempts if e.max_attempts is not None else '?'}"
        # hash-job and json-list keep only a message: show it when there is no code
        err = _markup_escape(shown(str(e.last_error_code or e.last_error_message or "")))[:200]
        if e.problems:
            err = f"[red]malformed: {_markup_escape(shown(e.problems[0]))}[/]"
        t.add_row(str(n + 1), _markup_escape(shown(r.job_id)), _markup_escape(shown(str(e.job_type or "-"))),
                  _markup_escape(shown(str(e.tenant_id or "-"))), attempt,
                  _ago(now, e.created_ms), when, err)
    return t


def job_panel(r: JobRecord, now: int):
    """The ``jobctl inspect`` view: state facts, then the envelope or raw bytes."""
    from rich.console import Group
    from rich.json import JSON
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("queue", f"{r.queue} ({r.layout}, shard {r.shard})")
    facts.add_row("state", r.state.value if r.state else "[red]none[/]")
    if r.position is not None:
        facts.add_row("position", f"{r.position} from the served end")
    if r.score is not None:
        facts.add_row("score", f"{fmt_ms(r.score)} ({_rel(now, r.score)})")
    if r.deadline_ms is not None:
        facts.add_row("deadline", f"{fmt_ms(r.deadline_ms)} ({_rel(now, r.deadline_ms)})")
    for k, v in r.meta.items():
        if k == "redriven" and isinstance(v, dict) and isinstance(v.get("at_ms"), int):
            # jobctl's redrive record (jobctl.ops.redrive_record): {operation, at_ms, count}
            at = v["at_ms"]
            v = f"{v.get('count')} time(s), last by {v.get('operation')} at {fmt_ms(at)} ({_ago(now, at)})"
        readable = humanize.ms_field(k, v, now) if k.endswith("_ms") else None
        v = f"{v} ({readable})" if readable else v  # the raw ms stay, as in --json
        facts.add_row(_markup_escape(shown(k)), _markup_escape(shown(str(v))))
    for p in r.envelope.problems:
        facts.add_row("[red]problem[/]", _markup_escape(shown(p)))
    if r.envelope.document is not None:
        body = JSON.from_data(r.envelope.document)
    elif r.raw is None:
        body = Text("(no payload)", style="red")
    else:
        try:
            body = Text(r.raw.decode("utf-8"))
        except UnicodeDecodeError:
            body = Text(repr(r.raw))
    return Group(Panel(facts, title=f"job {_markup_escape(shown(r.job_id))}", title_align="left"),
                 Panel(body, title="envelope" if r.envelope.document is not None else "raw value",
                       title_align="left"))


def _markup_escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


def histogram_table(hist) -> Any:
    """The ``jobctl attempts`` bar chart."""
    from rich.table import Table

    t = Table(header_style="bold", title=f"{hist.queue} {hist.state}: attempts"
              + (" (sampled)" if hist.sampled else ""), title_justify="left")
    t.add_column("attempt", justify="right")
    t.add_column("jobs", justify="right")
    t.add_column("")
    top = max(hist.counts.values(), default=0) or 1
    for k in sorted(hist.counts):
        v = hist.counts[k]
        t.add_row(str(k), f"{'~' if hist.sampled else ''}{v:,}", "█" * max(1, round(40 * v / top)))
    if hist.unknown:
        t.add_row("?", f"{hist.unknown:,}", "[dim]no attempt field[/]")
    return t


def progress(total: int, description: str = "jobs"):
    """A rich progress bar on stderr: ``jobs ━━━ 4,560 of 30,000 · 2,730
    jobs/s · elapsed 1.67 s · ETA 9 s``.  Returns ``(update(done, note=None),
    stop())``; ``note`` (text) is shown after the times until replaced."""
    from rich.progress import BarColumn, Progress, ProgressColumn
    from rich.text import Text

    from .. import humanize

    class Counts(ProgressColumn):
        def render(self, task) -> Text:
            return Text(f"{humanize.count(int(task.completed))} of {humanize.count(int(task.total or 0))}")

    class Speed(ProgressColumn):
        def render(self, task) -> Text:
            return Text(humanize.rate(task.speed) if task.speed is not None else "- jobs/s")

    class Times(ProgressColumn):
        max_refresh = 0.5

        def render(self, task) -> Text:
            left = task.time_remaining
            eta = humanize.duration(left * 1000) if left is not None else "-"
            return Text(f"elapsed {humanize.duration((task.elapsed or 0) * 1000)} · ETA {eta}")

    class Note(ProgressColumn):
        def render(self, task) -> Text:
            return Text(task.fields.get("note", ""))

    prog = Progress("[progress.description]{task.description}", BarColumn(), Counts(), Speed(), Times(), Note(),
                    console=console(stderr=True), transient=False)
    task = prog.add_task(description, total=total, note="")

    def update(done: int, note: str | None = None) -> None:
        prog.update(task, completed=done, **({} if note is None else {"note": note}))

    prog.start()
    return update, prog.stop


def note(message: str) -> None:
    """A diagnostic line on stderr (undecodable bytes escaped, ``\\xff``)."""
    click.echo(f"jobctl: {message}".encode("utf-8", "jobctl-shown").decode("utf-8"), err=True)
