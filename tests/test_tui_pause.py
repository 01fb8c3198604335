"""Pause and resume from the TUI's dashboard (keys Z and W) through the
same reason prompt and plan modal as every operation (the operations
core), and the paused count on the dashboard."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.keys import ReliableListKeys
from jobctl.ops.journal import read_entries
from jobctl_tui.ask_modals import ReasonModal
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.dashboard_screen import DashboardScreen
from jobctl_tui.testing import settle
from test_pause import enqueue, tail_first
from jobctl_tui import make_app
from test_tui_pilot import SIZE, T0, run, session_for

K = ReliableListKeys("email")


def test_pause_and_resume_from_the_dashboard(redis_url, redis_client, tmp_path) -> None:
    ids = enqueue(redis_client, "email", 12)

    async def go():
        app = make_app(session_for(redis_url, email=QueueConfig("email")), refresh_s=3600,
                       clock=lambda: T0 + 1000, server_label="redis://test", export_root=str(tmp_path))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await pilot.press("Z")                      # pause every ready job of the selected queue
            await settle(pilot)
            assert isinstance(app.screen, ReasonModal)
            await pilot.press(*"incident 42", "enter")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal) and modal.plan.planned == 12
            assert modal.focused.id == "cancel"
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen)
            assert redis_client.llen(K.paused) == 12
            await pilot.press("W")                      # resume them
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal) and modal.plan.planned == 12
            await pilot.press("tab", "enter")
            await settle(pilot)
        app.session.close()

    run(go())
    assert redis_client.llen(K.paused) == 0 and tail_first(redis_client, K.ready) == ids
    ops = [e["operation"] for e in read_entries(redis_client, [K.journal])]
    assert sorted(ops) == ["pause", "resume"]
    entry = next(e for e in read_entries(redis_client, [K.journal]) if e["operation"] == "pause")
    assert entry["reason"] == "incident 42" and entry["command"].startswith(f"jobctl --url {redis_url} pause email")


def test_dashboard_and_status_show_paused_and_held():
    from rich.console import Console

    from jobctl.cli.render import status_table
    from jobctl.dashboard.facade import QueueRow
    from jobctl.model import QueueStatus
    from jobctl_tui.dashboard_screen import COLUMNS, row_cells

    st = QueueStatus(queue="email", layout="reliable-list", now_ms=0, ready=5, paused=7,
                     held_filters=[{"id": "h", "filter": "tenant = t1"}])
    ready = [key for key, _ in COLUMNS].index("ready")
    assert "+7 paused, 1 held" in str(row_cells(QueueRow("email", st))[ready])
    con = Console(width=200, record=True)
    con.print(status_table([st]))
    assert "+7 paused, 1 held" in con.export_text()
    plain = QueueStatus(queue="email", layout="reliable-list", now_ms=0, ready=5)
    assert "paused" not in str(row_cells(QueueRow("email", plain))[ready])
