"""The dashboard's history chart (textual-plotext) holds the samples the
app's own refreshes took: dead depth per queue, then DLQ growth per minute."""

from __future__ import annotations

import asyncio


from jobctl.config import Config
from jobctl.keys import ReliableListKeys
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui.history_chart import HistoryChart
from jobctl_tui.testing import screen_text, settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, spike_queues, tui_export_root  # noqa: F401 - fixtures


def test_chart_holds_each_refresh_sample(redis_client, redis_url) -> None:
    truths = load_spike(redis_client, now_ms=TUI_T0)
    dead0 = len(truths["email"].ids_by_state["dead"])
    clock = [TUI_T0 + 1000]
    s = Session(url=redis_url, timeout_s=5.0)
    s._config = Config(queues=spike_queues())
    app = make_app(s, refresh_s=3600, clock=lambda: clock[0], server_label="redis://test",
                   export_root=TUI_EXPORTS["root"])

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            for added in (30, 60):  # a minute apart, the DLQ grows by 30 then 60
                redis_client.lpush(ReliableListKeys("email:00").dead, *[f"x{added}-{i}" for i in range(added)])
                clock[0] += 60_000
                app.refresh_status()
                await settle(pilot)
            chart = app.screen.query_one(HistoryChart)
            xs, ys = chart.points["email"]
            assert xs == [-2.0, -1.0, 0.0]
            assert ys == [dead0, dead0 + 30, dead0 + 90]
            assert set(chart.points) == {"email", "billing", "reports"}
            assert chart.window_ms == 120_000
            assert any("dead jobs per queue · last 2 m" in line for line in screen_text(app))
            await pilot.press("c", "c")  # dead -> ready depth -> DLQ growth
            await settle(pilot)
            assert chart.metric == "growth"
            assert chart.points["email"] == ([-1.0, 0.0], [30.0, 60.0])
            assert any("DLQ growth per queue" in line for line in screen_text(app))
            await pilot.press("c")
            await settle(pilot)
            assert chart.metric == "age" and len(chart.points["email"][0]) == 3

    try:
        asyncio.run(go())
    finally:
        s.close()
