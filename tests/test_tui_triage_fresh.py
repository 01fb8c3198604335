"""Pilot test: the triage tab says when its figures were computed, in the
header's clock and format, and never stays silently behind the header:
stale figures say so (with their lag and ``r``), and they are recomputed when
the tab is in view or comes into view.  The clock is stepped, never slept."""

from __future__ import annotations

import asyncio

from jobctl_tui import format as fmt
from jobctl_tui.queue_screen import QueueScreen
from jobctl_tui.testing import settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, tui_export_root  # noqa: F401 - autouse fixture

from test_tui_pilot import app_for, spike_session


def _note(scr) -> str:
    return str(scr.query_one("#triage-note").render())


def test_triage_follows_the_header_refresh(redis_url, redis_client) -> None:
    load_spike(redis_client, now_ms=TUI_T0)
    now = [TUI_T0 + 1_000]

    async def go():
        app = app_for(spike_session(redis_url), clock=lambda: now[0])
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            app.open_queue("email", tab="triage")
            await settle(pilot)
            scr = app.screen
            assert isinstance(scr, QueueScreen) and scr.active_tab == "triage"
            assert scr.triage.now_ms == app.last_update_ms == TUI_T0 + 1_000
            assert f"as of {fmt.clock(TUI_T0 + 1_000)}" in _note(scr) and "stale" not in _note(scr)
            assert f"updated {fmt.clock(TUI_T0 + 1_000)}" in scr.query_one("#topbar").text

            # the header refreshes 53 s later with the tab in view: recomputed at the header's time
            now[0] += 53_000
            app.refresh_status()
            await settle(pilot)
            assert scr.triage.now_ms == app.last_update_ms == TUI_T0 + 54_000
            assert f"as of {fmt.clock(TUI_T0 + 54_000)}" in _note(scr) and "stale" not in _note(scr)
            assert scr.triage.depth == app.snapshot.row("email").status.dead

            # another tab in view: the triage note says it lags, by how much, and how to recompute
            await pilot.press("4")
            await settle(pilot)
            now[0] += 61_000
            app.refresh_status()
            await settle(pilot)
            assert scr.triage.now_ms == TUI_T0 + 54_000
            note = _note(scr)
            assert f"stale: {fmt.age(61_000)} older than the header ({fmt.clock(TUI_T0 + 115_000)})" in note
            assert "r recomputes" in note

            # back on the triage tab: recomputed
            await pilot.press("3")
            await settle(pilot)
            assert scr.triage.now_ms == TUI_T0 + 115_000 and "stale" not in _note(scr)
        app.session.close()

    asyncio.run(go())
