"""The job inspector: state and layout metadata, the envelope pretty-printed,
and the raw bytes when the envelope does not parse (a hex dump when they are
not UTF-8).  Actions here apply to this one job."""

from __future__ import annotations

from rich.console import Group
from rich.json import JSON
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from jobctl.errors import NotFound
from jobctl.model import JobRecord
from jobctl.ops.catalog import job_operations
from jobctl.ops.spec import Operation

from . import format as fmt
from .actions import OPERATIONS, ActionRequest, operation_bindings
from .footer import KeyFooter
from .widgets import TopBar, TroubleBanner

__all__ = ["InspectorScreen", "hexdump", "facts_table", "RAW_LIMIT"]

#: Raw bytes shown at most.
RAW_LIMIT = 4096


def hexdump(raw: bytes, limit: int = RAW_LIMIT) -> str:
    """``xxd``-style lines: offset, 16 hex bytes, printable ASCII."""
    lines = []
    for off in range(0, min(len(raw), limit), 16):
        chunk = raw[off:off + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{off:08x}  {hexes:<47}  {text}")
    if len(raw) > limit:
        lines.append(f"… {len(raw) - limit:,} more byte(s)")
    return "\n".join(lines)


def facts_table(r: JobRecord, now: int) -> Table:
    """State, position/score, deadline and layout metadata of one job."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", justify="right")
    t.add_column()
    e = r.envelope
    state = r.state.value if r.state else "none (orphan payload)"
    t.add_row("job id", r.job_id)
    t.add_row("queue", f"{r.queue} ({r.layout}, shard {r.shard})")
    t.add_row("state", Text(state, style="bold red" if r.state is None or state == "dead" else "bold"))
    if r.position is not None:
        t.add_row("position", f"{r.position:,} from the served end")
    if r.score is not None:
        label = "due" if state == "scheduled" else "suppressed at" if state == "suppressed" else "score"
        t.add_row(label, f"{fmt.stamp(r.score)} ({(fmt.ago if state == 'suppressed' else fmt.rel)(now, r.score)})")
    if r.deadline_ms is not None:
        left = r.deadline_ms - now
        style = "bold white on red" if left < 0 else ""
        t.add_row("visibility deadline", Text(f"{fmt.stamp(r.deadline_ms)} ({fmt.rel(now, r.deadline_ms)})"
                                              + (" — STUCK" if left < 0 else ""), style=style))
    for key in ("payload_key", "state_key", "priority", "dead_since_ms", "also_in", "also_in_shards",
                "stray_deadline", "problem"):
        if key in r.meta:
            v = r.meta[key]
            if key == "dead_since_ms":
                v = f"{fmt.stamp(v)} ({fmt.ago(now, v)})"
            elif isinstance(v, list):
                v = ", ".join(map(str, v))
            style = "bold red" if key in ("problem", "also_in", "also_in_shards", "stray_deadline") else ""
            label = {"dead_since_ms": "dead since", "also_in": "also in", "also_in_shards": "also in shards",
                     "stray_deadline": "stray deadline"}.get(key, key.replace("_", " "))
            t.add_row(label, Text(str(v), style=style))
    if e.ok or e.document:
        t.add_row("type", f"{e.job_type or '-'} v{e.job_version if e.job_version is not None else '?'}")
        t.add_row("tenant", e.tenant_id or "-")
        attempt = "-" if e.attempt is None else f"{e.attempt} of {e.max_attempts if e.max_attempts is not None else '?'}"
        t.add_row("attempt", attempt)
        t.add_row("created", f"{fmt.stamp(e.created_ms)} ({fmt.ago(now, e.created_ms)})")
        if e.last_error_code or e.last_error_message:
            t.add_row("last error", Text(f"{e.last_error_code or '-'}: {e.last_error_message or ''}", style="red"))
        if e.idempotency_key:
            t.add_row("idempotency key", e.idempotency_key)
        if "redriveOperation" in e.extra:
            t.add_row("redriven", f"{e.extra.get('redriveCount', '?')} time(s), last by {e.extra['redriveOperation']}")
    rec = r.meta.get("redriven")  # jobctl's redrive record (the envelope is not rewritten)
    if isinstance(rec, dict) and isinstance(rec.get("at_ms"), int) and "redriveOperation" not in e.extra:
        t.add_row("redriven", f"{rec.get('count', '?')} time(s), last by {rec.get('operation')} "
                              f"at {fmt.stamp(rec['at_ms'])} ({fmt.ago(now, rec['at_ms'])})")
    return t


class InspectorScreen(Screen):
    """One job; ``escape``/``h`` goes back.  ``j``/``k`` scroll.  The
    operation keys offered are those that apply to the job's state
    (:func:`jobctl.ops.catalog.job_operations`): none until it is loaded."""

    BINDINGS = [
        Binding("escape,h,q", "back", "back"),
        Binding("j", "scroll('down')", "down", show=False),
        Binding("k", "scroll('up')", "up", show=False),
        *operation_bindings(),
        Binding("N", "op('unsuppress')", "unsuppress"),
    ]

    DEFAULT_CSS = """
    InspectorScreen VerticalScroll { height: 1fr; padding: 0 1; }
    InspectorScreen .section { text-style: bold; margin: 1 0 0 0; color: $accent; }
    """

    def __init__(self, queue: str, job_id: str) -> None:
        super().__init__()
        self.queue = queue
        self.job_id = job_id
        self.record: JobRecord | None = None
        self.gone = False

    def compose(self) -> ComposeResult:
        yield TopBar(f"queue {self.queue} › job {self.job_id}", id="topbar")
        yield TroubleBanner(id="banner")
        with VerticalScroll(id="inspector"):
            yield Static("loading …", id="facts")
            yield Static("envelope", classes="section", id="env-title")
            yield Static("", id="envelope")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()
        self.query_one("#inspector").focus()

    def reload(self) -> None:
        dash, q, job_id = self.app.dash, self.queue, self.job_id
        self.app.read(lambda: dash.inspect(q, job_id), self._loaded, key=f"inspect:{q}:{job_id}",
                      failed=self._failed)

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, NotFound):
            self.gone = True
            self.record = None
            self.query_one("#facts", Static).update(Text(f"job {self.job_id} no longer exists in queue "
                                                         f"{self.queue} (purged, or acknowledged)", style="yellow"))
            self.query_one("#envelope", Static).update("")
            self.refresh_bindings()

    def _loaded(self, r: JobRecord) -> None:
        self.record = r
        self.gone = False
        self.refresh_bindings()  # the operation keys follow the job's state
        now = self.app.clock()
        self.query_one("#facts", Static).update(facts_table(r, now))
        env = r.envelope
        title = self.query_one("#env-title", Static)
        body = self.query_one("#envelope", Static)
        if env.document is not None and not any(p.startswith(("bad JSON", "not UTF-8", "envelope is"))
                                                for p in env.problems):
            title.update("envelope" + (" — problems: " + "; ".join(env.problems) if env.problems else ""))
            body.update(JSON.from_data(env.document, indent=2, sort_keys=False))
            return
        if r.raw is None:
            title.update("envelope — missing: no payload key")
            body.update(Text("the id is listed but its payload key does not exist (dangling id; see jobctl check)",
                             style="red"))
            return
        title.update("raw bytes — the envelope does not parse: " + "; ".join(env.problems))
        try:
            text = r.raw[:RAW_LIMIT].decode("utf-8")
            parts = [Text(f"{len(r.raw):,} byte(s), UTF-8 text:", style="dim"), Text(text)]
        except UnicodeDecodeError:
            parts = [Text(f"{len(r.raw):,} byte(s), not UTF-8 — hex dump:", style="dim"), Text(hexdump(r.raw))]
        body.update(Group(*parts))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll(self, direction: str) -> None:
        view = self.query_one("#inspector", VerticalScroll)
        (view.scroll_down if direction == "down" else view.scroll_up)()

    def applicable(self) -> tuple[Operation, ...]:
        """The operations that apply to the job as last read (none when gone or not yet read)."""
        r = self.record
        if r is None or self.gone:
            return ()
        stuck = r.deadline_ms is not None and r.deadline_ms < self.app.clock()
        return job_operations(r.state, stuck=stuck)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hides (and refuses) an operation key that does not apply to this job."""
        if action == "op" and parameters:
            return Operation(str(parameters[0])) in self.applicable()
        return True

    def action_op(self, operation: str) -> None:
        op = Operation(operation)
        r = self.record
        if op not in self.applicable() or r is None or r.state is None:
            state = "gone" if r is None or self.gone else r.state.value if r.state else "in no state"
            self.app.notify(f"{OPERATIONS[op].verb} does not apply to this job ({state})", severity="warning")
            return
        self.app.start_action(ActionRequest(op, self.queue, r.state, f"job {r.job_id}", ids=(r.job_id,)),
                              after=self.reload)
