"""The key footer of every screen (:class:`KeyFooter`): Textual's Footer
with ``q`` and ``?`` first, then the focused widget's keys, then the
screen's, so the keys that matter stay visible on an 80-column terminal;
compact (less padding) below :data:`COMPACT_BELOW` columns."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

__all__ = ["KeyFooter", "PINNED_KEYS", "COMPACT_BELOW"]

#: Keys shown first, whatever is focused: quit (or back) and help.
PINNED_KEYS = ("q", "escape", "question_mark")
#: Terminal width (columns) under which the footer drops its padding.
COMPACT_BELOW = 120


def ordered_bindings(active: dict) -> list:
    """``(binding, enabled, tooltip)`` of the shown bindings of ``active``
    (a screen's ``active_bindings``), one per action: the pinned keys first,
    then the binding chain's order (focused widget, screen, app)."""
    shown = [(b, enabled, tip) for (_, b, enabled, tip) in active.values() if b.show]
    rank = {k: i for i, k in enumerate(PINNED_KEYS)}
    shown.sort(key=lambda item: rank.get(item[0].key, len(rank)))  # stable: chain order kept
    seen, out = set(), []
    for item in shown:
        if item[0].action not in seen:
            seen.add(item[0].action)
            out.append(item)
    return out


class KeyFooter(Footer):
    """A Footer ordering its keys by :func:`ordered_bindings`."""

    def on_mount(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW

    def on_resize(self) -> None:
        self.compact = self.app.size.width < COMPACT_BELOW

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        active = self.screen.active_bindings
        keys = ordered_bindings(active)
        self.styles.grid_size_columns = len(keys)
        for binding, enabled, tooltip in keys:
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                            binding.action, disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE and self.app.size.width >= COMPACT_BELOW:
            entry = active.get(self.app.COMMAND_PALETTE_BINDING)
            if entry is not None:
                _node, binding, enabled, _tip = entry
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                                binding.action, classes="-command-palette", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)
