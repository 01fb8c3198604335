"""The dashboard's history chart (textual-plotext) holds the samples the
app's own refreshes took: dead depth per queue, then DLQ growth per minute."""

from __future__ import annotations

import asyncio
import json

from jobctl.config import Config
from jobctl.keys import ReliableListKeys
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui.history_chart import HistoryChart
from jobctl_tui.testing import screen_text, settle
from prom_server import RECORDED_REPLY, prometheus_server
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


def _prom_app(redis_url: str, prometheus_url: str):
    s = Session(url=redis_url, timeout_s=5.0)
    s._config = Config(queues=spike_queues())
    return make_app(s, refresh_s=3600, clock=lambda: TUI_T0 + 1000, server_label="redis://test",
                    export_root=TUI_EXPORTS["root"], prometheus_url=prometheus_url)


def test_chart_is_full_on_open_from_prometheus(redis_client, redis_url) -> None:
    """The recorded query_range reply's points are on the chart the moment
    the dashboard has settled (before any second refresh)."""
    load_spike(redis_client, now_ms=TUI_T0)
    reply = json.loads(RECORDED_REPLY.read_text())
    served = {r["metric"]["queue"]: [(round(float(t) * 1000), float(v)) for t, v in r["values"]]
              for r in reply["data"]["result"] if r["metric"]["__name__"] == "redis_job_dead_depth"}
    with prometheus_server() as (base, asked):
        app = _prom_app(redis_url, base)

        async def go() -> None:
            async with app.run_test(size=(160, 48)) as pilot:
                await settle(pilot)
                chart = app.screen.query_one(HistoryChart)
                now = TUI_T0 + 1000
                for queue in ("email", "billing"):
                    xs, ys = chart.points[queue]
                    assert xs[:-1] == [(at - now) / 60_000 for at, _ in served[queue]]
                    assert ys[:-1] == [v for _, v in served[queue]]
                    assert xs[-1] == 0.0  # then the TUI's own first sample
                assert chart.points["reports"][0] == [0.0]  # nothing served for it
                assert chart.window_ms == now - served["email"][0][0]
                text = "\n".join(screen_text(app))
                assert "from Prometheus + this TUI" in text and "history: the last 3 h from Prometheus, 10 samples of 2 queue(s)" in text
                assert len(asked) == 1 and "query_range" in asked[0]

        try:
            asyncio.run(go())
        finally:
            app.session.close()


def test_prometheus_unreachable_is_one_notice(redis_client, redis_url) -> None:
    load_spike(redis_client, now_ms=TUI_T0)
    with prometheus_server(b"not json") as (base, _):
        app = _prom_app(redis_url, base)

        async def go() -> None:
            async with app.run_test(size=(160, 48)) as pilot:
                await settle(pilot)
                chart = app.screen.query_one(HistoryChart)
                assert chart.points["email"][0] == [0.0]  # only the TUI's own sample
                notices = [m for _, m in app.notices]
                assert notices == [f"Prometheus history: {base[7:]}: the reply is not JSON"]
                assert "Prometheus history:" in "\n".join(screen_text(app))

        try:
            asyncio.run(go())
        finally:
            app.session.close()
