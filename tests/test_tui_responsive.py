"""The TUI at 80x24 and 160x48: every screen keeps its buttons, its footer's
``q`` / ``?`` / focused keys and its key numbers on the visible screen
(Pilot tests on the widgets' regions and the screen's text), plus SVG
snapshots of each screen at both sizes (tests/snapshots/test_tui_responsive/;
update with ``--snapshot-update`` and read the SVGs)."""

from __future__ import annotations

import asyncio

import pytest
from textual.geometry import Region
from textual.widgets import Button

from jobctl.config import Config, Profile
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui import format as fmt
from jobctl_tui.dashboard_screen import COLUMNS
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.testing import screen_text, settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, snap, spike_queues, tui_export_root  # noqa: F401 - fixtures

SIZES = [(80, 24), (160, 48)]
SIZE_IDS = ["80x24", "160x48"]


def make(url: str):
    s = Session(profile="ops", timeout_s=1.0)
    s._config = Config(queues=spike_queues(), profiles={"ops": Profile("ops", url=url, environment="production")})
    return make_app(s, clock=lambda: TUI_T0 + 1000, server_label="redis://test", refresh_s=3600,
                    export_root=TUI_EXPORTS["root"])


def first_dead_job(truths) -> str:
    t = truths["email"]
    return sorted(t.ids_by_state["dead"] - t.malformed_ids)[0]


#: screen name -> steps from the dashboard: keys to press (a tuple) or a function of (app, truths)
SCREENS = {
    "dashboard": [],
    "queue": [("enter",)],
    "triage": [("t",)],
    "plan_redrive": [("t",), ("R",)],
    "plan_purge": [("t",), ("j", "j", "X")],
    "jobs": [("t",), ("j", "enter")],
    "journal": [("enter",), ("5",)],
    "inspector": [lambda app, truths: app.open_job("email", first_dead_job(truths))],
}


def steps_for(name: str, truths):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in SCREENS[name]:
            if isinstance(step, tuple):
                await pilot.press(*step)
            else:
                step(pilot.app, truths)
            await settle(pilot)
    return run_before


def visible(app, widget) -> bool:
    """Whether ``widget`` is drawn whole on the screen and on top at its centre."""
    region = widget.region
    screen = Region(0, 0, *app.size)
    if not region.area or screen.intersection(region) != region:
        return False
    at, _ = app.screen.get_widget_at(*region.center)
    return at is widget or widget in at.ancestors


def footer_line(app) -> str:
    return screen_text(app)[-1]


def check_screen(name: str, app, truths) -> None:
    text = "\n".join(screen_text(app))
    if name.startswith("plan"):
        modal = app.screen
        assert isinstance(modal, PlanModal)
        for button in modal.query(Button):
            assert visible(app, button), f"{button.id} not visible"
        assert f"{modal.plan.planned:,}" in str(modal.query_one("#apply", Button).label)
        return
    footer = footer_line(app)
    assert "q " in footer and "? help" in footer, footer
    if name in ("queue", "triage", "jobs", "journal"):
        assert "esc back" in footer and "/ filter" in footer, footer
    if name == "dashboard":
        rows = {r.name: r.status for r in app.snapshot.rows}
        lines = screen_text(app)
        assert [h for _, h in COLUMNS[:5]] == [str(c.label) for c in app.screen.table.columns.values()][:5]
        for queue, st in rows.items():
            line = next(line for line in lines if line.startswith(f" {queue}"))
            assert f"{st.dead:,}" in line and f"{st.stuck:,}" in line, line
    elif name in ("queue", "triage", "journal"):
        st = next(r.status for r in app.snapshot.rows if r.name == "email")
        assert f"dead {st.dead:,}" in text and "1 overview" in text
        if name == "triage":
            assert app.screen.triage is not None and f"{app.screen.triage.depth:,} dead" in text
            assert "last seen" in text
            for group in app.screen.triage.groups:  # each row whole: its count and its last-seen age
                line = next(line for line in screen_text(app) if group.error in line and group.job_type in line)
                last_seen = fmt.ago(app.screen.triage.now_ms, group.last_seen_ms)
                assert f"{group.count:,}" in line and last_seen in line, (last_seen, line)
    elif name == "jobs":  # the job list keeps each job's attempt and when it died, whole
        table = app.screen.query_one("#jobs-table")
        lines = screen_text(app)
        shown = 0
        for key in table.rows:
            line = next((line for line in lines if key.value in line), None)
            if line is not None:  # on screen: its attempt and 'dead … ago' whole
                cells = [str(c) for c in table.get_row(key)]
                assert next(c for c in cells if c.endswith("ago")) in line and cells[2] in line, line
                shown += 1
        assert shown >= 5
    elif name == "inspector":
        assert first_dead_job(truths) in text


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen_usable(redis_client, redis_url, name, size) -> None:
    truths = load_spike(redis_client, now_ms=TUI_T0)
    app = make(redis_url)

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await steps_for(name, truths)(pilot)
            check_screen(name, app, truths)

    try:
        asyncio.run(go())
    finally:
        app.session.close()


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen_snapshot(snap, redis_client, redis_url, name, size) -> None:
    truths = load_spike(redis_client, now_ms=TUI_T0)
    assert snap(make(redis_url), steps_for(name, truths), size=size)


def test_docs_screenshots_are_the_dashboard_snapshots() -> None:
    """docs/screenshots/dashboard-WxH.svg are copies of the dashboard's
    snapshots above (after ``--snapshot-update``, copy them again)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent
    for size in SIZE_IDS:
        snapshot = root / "snapshots" / "test_tui_responsive" / f"test_screen_snapshot[dashboard-{size}].svg"
        doc = root.parent / "docs" / "screenshots" / f"dashboard-{size}.svg"
        assert doc.read_bytes() == snapshot.read_bytes(), f"{doc} differs: cp '{snapshot}' '{doc}'"
