"""Helpers for Pilot tests of the TUI (``async with app.run_test() as pilot``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["settle", "wait_for", "screen_text"]


async def settle(pilot, timeout: float = 15.0) -> None:
    """Wait until every read worker and operation of the app has finished and
    its results were applied to the widgets (``app.busy`` is False).
    Raises AssertionError after ``timeout`` seconds."""
    await wait_for(pilot, lambda: not pilot.app.busy, timeout, "the app to settle")
    # widgets (DataTable column widths) finish updating on the following idle passes
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.05)
    await pilot.pause()


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 15.0, what: str = "a condition") -> None:
    """Let the app run until ``condition()`` holds; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause()
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.01)


def screen_text(app) -> list[str]:
    """The lines of text the app shows now (its screen, modals over their
    background), as a terminal of ``app.size`` would show them."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text().splitlines()
