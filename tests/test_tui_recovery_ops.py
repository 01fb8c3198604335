"""Recovery operations from the TUI, part 2 (issue 14): resume lifts the
queue's holds through the operations core (``W``), replay of a
stream-group queue's history and envelope migration (``migrate
--transform`` / ``--rollback``) from the queue screen, behind the plan
modal.  Pilot tests on a real server asserting on what Redis holds."""

from __future__ import annotations

from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list import ReliableList
from jobctl.layouts.reliable_list_pause import add_hold, holds
from jobctl.config import QueueConfig
from jobctl.ops.journal import read_entries
from jobctl_tui.actions import PlanModal
from jobctl_tui.testing import settle
from test_pause import enqueue
from test_tui_pilot import run
from test_tui_recovery import app_for, notices, open_email

SRC = ReliableListKeys("email")


def test_resume_from_the_queue_screen_lifts_the_hold(redis_url, redis_client, tmp_path) -> None:
    enqueue(redis_client, "email", 4)
    lay = ReliableList(redis_client, QueueConfig("email"))
    add_hold(lay, None, "incident 9", "ops@test")
    assert holds(lay)

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=(130, 40)) as pilot:
            screen = await open_email(pilot)
            await pilot.press("W")                      # nothing paused, but a hold to lift
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == 0 and plan.prepared.holds
            assert "lifts hold" in str(plan.query_one("#plan-body").render())
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen is screen
            assert any(m.startswith("hold ") and "lifted" in m for m in notices(app)), notices(app)
        app.session.close()

    run(go())
    assert holds(lay) == [] and redis_client.hlen(SRC.holds) == 0
    assert redis_client.llen(SRC.ready) == 4
