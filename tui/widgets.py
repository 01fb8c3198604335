"""Widgets shared by the screens: the top bar (server, environment badge,
refresh state), the Redis-trouble banner, a DataTable with vim keys and the
``/`` filter bar.

None of them talks to Redis: they render what the app already holds.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Static

from jobctl.filter import MATCH_ALL, Filter, FilterError, compile_filter
from jobctl.ops.catalog import is_production

from . import format as fmt

__all__ = ["TopBar", "TroubleBanner", "VimTable", "FilterBar", "env_badge"]


def env_badge(environment: str | None) -> Text:
    """The profile's environment as a badge: PRODUCTION in red, others
    yellow (staging) or blue."""
    if not environment:
        return Text("")
    name = environment.strip().upper()
    low = name.lower()
    if is_production(environment):
        style = "bold white on red"
    elif low in ("staging", "stage", "preprod", "uat"):
        style = "bold black on yellow"
    else:
        style = "bold white on blue"
    return Text(f" {name} ", style=style)


class TopBar(Static):
    """One line: ``jobctl  <server>  [ENV] [READ-ONLY]  ...  refresh state``."""

    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    def __init__(self, where: str = "", **kw) -> None:
        super().__init__(**kw)
        self.where = where
        #: The bar as plain text (tests and screen readers).
        self.text = ""

    def on_mount(self) -> None:
        for name in ("frozen_since_ms", "frozen_ticks", "refresh_s", "last_update_ms", "activity"):
            self.watch(self.app, name, lambda *_: self.redraw(), init=False)
        self.redraw()

    def redraw(self) -> None:
        app = self.app
        left = Text.assemble(("jobctl", "bold"), "  ", (app.server_label, "cyan"))
        badge = env_badge(app.environment)
        if badge:
            left.append("  ")
            left.append(badge)
        if app.read_only:
            left.append("  ")
            left.append(" READ-ONLY ", style="bold black on white")
        if self.where:
            left.append("  › ")
            left.append(self.where, style="bold")
        if app.note:
            left.append("  ")
            left.append(app.note, style="italic")
        right = Text()
        if app.activity:
            right.append(f"{app.activity}  ", style="italic")
        if app.frozen:
            right.append(" FROZEN ", style="bold black on yellow")
            right.append(f" for {fmt.age(app.clock() - app.frozen_since_ms)} · p unfreezes")
        else:
            right.append(f"↻ every {fmt.age(int(app.refresh_s * 1000))}")
        right.append(f"  updated {fmt.clock(app.last_update_ms)}")
        self.text = f"{left.plain}  {right.plain}"
        grid = Table.grid(expand=True, padding=(0, 2))
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(left, right)
        self.update(grid)


class TroubleBanner(Static):
    """Shown while Redis is unreachable, timing out or denying commands."""

    DEFAULT_CSS = """
    TroubleBanner { height: auto; background: $error; color: $text; padding: 0 1; display: none; }
    TroubleBanner.-shown { display: block; }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "trouble", self._show, init=True)

    def _show(self, trouble: str | None) -> None:
        self.set_class(bool(trouble), "-shown")
        if trouble:
            app = self.app
            since = f" since {fmt.clock(app.trouble_since_ms)}" if app.trouble_since_ms else ""
            self.update(Text.assemble(("⚠ Redis trouble", "bold"), f"{since}: {trouble}  ",
                                      ("(the dashboard keeps retrying; numbers shown are the last good ones)",
                                       "italic")))


def fitted_indexes(widths: list[int], width: int, drop_order: tuple[int, ...]) -> list[int]:
    """Indexes of the columns (``widths``: cells each, padding included) to
    show within ``width`` cells, dropping them in ``drop_order`` until they
    fit; the last column is text that may be clipped, so it counts as at most
    12 cells."""
    need = {i: (min(w, 12) if i == len(widths) - 1 else w) for i, w in enumerate(widths)}
    for i in drop_order:
        if sum(need.values()) <= width:
            break
        need.pop(i, None)
    return sorted(need)


class VimTable(DataTable):
    """A row-cursor DataTable with vim keys (j/k, g/G, ctrl+d/ctrl+u) and
    ``l`` to open the highlighted row.

    ``drop_order`` (column indexes): on a narrow terminal these columns are
    left out, in that order, until the others fit whole (numbers are never
    cut at the screen's edge); rows keep every cell, the table shows the kept
    ones.
    """

    BINDINGS = [
        Binding("j", "cursor_down", "down", show=False),
        Binding("k", "cursor_up", "up", show=False),
        Binding("g", "scroll_top", "top", show=False),
        Binding("G", "scroll_bottom", "bottom", show=False),
        Binding("ctrl+d", "page_down", "page down", show=False),
        Binding("ctrl+u", "page_up", "page up", show=False),
        Binding("l", "select_cursor", "open", show=False),
    ]

    def __init__(self, *, drop_order: tuple[int, ...] = (), **kw) -> None:
        kw.setdefault("cursor_type", "row")
        kw.setdefault("zebra_stripes", True)
        super().__init__(**kw)
        self.drop_order = drop_order
        self._all_columns: list | None = None  # (label, key) of every column, once defined
        self._rows: list | None = None  # the last rows given, every cell

    def _fit(self, rows: list[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
        """``rows`` with only the cells of the columns that fit (re-adding the
        columns when that set changed)."""
        if self._all_columns is None:
            self._all_columns = [(c.label, c.key.value) for c in self.columns.values()]
        self._rows = rows
        widths = [max([label.cell_len, *(_cell_len(cells[i]) for _, cells in rows)]) + 2
                  for i, (label, _) in enumerate(self._all_columns)]
        keep = fitted_indexes(widths, (self.size.width or self.app.size.width) - 2, self.drop_order)
        if [k.value for k in self.columns] != [self._all_columns[i][1] for i in keep]:
            self.clear(columns=True)
            for i in keep:
                label, key = self._all_columns[i]
                self.add_column(label, key=key)
        return [(key, tuple(cells[i] for i in keep)) for key, cells in rows]

    def on_resize(self) -> None:
        if self._rows is not None:
            self.replace_rows(self._rows)

    async def _on_idle(self, event) -> None:
        # DataTable widens its columns on idle without invalidating the header
        # cells it may have rendered (and cached) just before: a stale, narrow
        # header.  Drop the render caches whenever the widths were recomputed.
        pending = getattr(self, "_require_update_dimensions", False)
        await super()._on_idle(event)
        if pending:
            for name in ("_cell_render_cache", "_row_render_cache", "_line_cache"):
                cache = getattr(self, name, None)
                if cache is not None:
                    cache.clear()
            self.refresh()

    def action_scroll_top(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_scroll_bottom(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    @property
    def current_key(self) -> str | None:
        """The key of the highlighted row, or None."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - cursor out of range during a rebuild
            return None
        return key.value if key is not None else None

    def replace_rows(self, rows: list[tuple[str, tuple]], *, keep_cursor: bool = True) -> None:
        """Replace every row (``(key, cells)``) keeping the cursor on the same key."""
        current = self.current_key if keep_cursor else None
        row = self.cursor_row
        if self.drop_order:
            rows = self._fit(rows)
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        if not rows:
            return
        keys = [k for k, _ in rows]
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False)
        else:
            self.move_cursor(row=min(row, len(rows) - 1), animate=False)


def _cell_len(cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else Text.from_markup(str(cell)).cell_len


class FilterBar(Vertical):
    """``/``: a one-line input for the filter language (docs/filter.md).

    Posts :class:`FilterBar.Applied` with the compiled filter (``MATCH_ALL``
    for an empty input); a bad filter shows its message and a caret under
    the offending column, and the bar stays open.
    """

    DEFAULT_CSS = """
    FilterBar { height: auto; display: none; background: $boost; }
    FilterBar.-open { display: block; }
    FilterBar > Horizontal { height: auto; }
    FilterBar Label#filter-prompt { width: 3; padding: 1 0 0 1; }
    FilterBar Input { width: 1fr; }
    FilterBar Static#filter-error { display: none; color: $error; padding: 0 0 0 6; }
    FilterBar Static#filter-error.-shown { display: block; }
    """

    BINDINGS = [Binding("escape", "close", "close filter", show=False)]

    class Applied(Message):
        """The operator applied ``filter`` (``MATCH_ALL``: cleared)."""

        def __init__(self, flt: Filter) -> None:
            super().__init__()
            self.filter = flt

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("/", id="filter-prompt")
            yield Input(placeholder='e.g. error ~ "HTTP_5*" and tenant = tenant_3    '
                                    '(enter applies, empty clears, esc closes)', id="filter-input")
        yield Static("", id="filter-error")

    @property
    def input(self) -> Input:
        return self.query_one("#filter-input", Input)

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    @property
    def error(self) -> str:
        """The message shown under the input ("" when none)."""
        return self._error

    _error = ""

    def _set_error(self, message: str) -> None:
        self._error = message
        err = self.query_one("#filter-error", Static)
        err.update(message)
        err.set_class(bool(message), "-shown")

    def open(self, text: str) -> None:
        self.add_class("-open")
        self._set_error("")
        self.input.value = text
        self.input.cursor_position = len(text)
        self.input.focus()

    def action_close(self) -> None:
        self.remove_class("-open")
        self._set_error("")
        self.post_message(self.Closed())

    class Closed(Message):
        """The bar was closed without applying anything."""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            flt = MATCH_ALL
        else:
            try:
                flt = compile_filter(text)
            except FilterError as exc:
                caret = " " * (exc.column - 1) + "^"
                self._set_error(f"{caret}\n{exc}")
                return
        self._set_error("")
        self.remove_class("-open")
        self.post_message(self.Applied(flt))
