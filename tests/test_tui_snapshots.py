"""Snapshot tests of every TUI screen (pytest-textual-snapshot's SVG
extension; files in tests/snapshots/test_tui_snapshots/).

Deterministic by construction: scenarios loaded with a pinned ``now_ms`` and
seed, the app's clock pinned to the same instant, a fixed terminal size, a
fixed server label and an hour-long refresh interval (so no second refresh
lands in a screenshot).  The progress modal is snapshotted as a static
variant (no worker, no ETA).  Update after a deliberate change with
``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_textual_snapshot import SVGImageExtension
from textual._doc import take_svg_screenshot

from jobctl.config import Config, Profile, QueueConfig
from jobctl.filter import MATCH_ALL
from jobctl.model import State
from jobctl.ops.plan import Plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario
from jobctl_tui import make_app
from jobctl_tui.actions import RunModal, RunProgress
from jobctl_tui.testing import settle

#: Where a purge started from the TUI exports first (a folder of each test's own).
_EXPORTS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _export_root(tmp_path):
    _EXPORTS["root"] = str(tmp_path / "tui-exports")


T0 = 1_790_000_000_000
SIZE = (130, 36)


class _TuiSnapshots(SVGImageExtension):
    """Stores the SVGs under tests/snapshots/<test module>/."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(Path(test_location.filepath).parent / "snapshots" / test_location.basename)


@pytest.fixture
def snap(snapshot):
    snapshot = snapshot.use_extension(_TuiSnapshots)

    def compare(app, run_before=None, size=SIZE) -> bool:
        svg = take_svg_screenshot(app=app, terminal_size=size, run_before=run_before)
        app.session.close()
        return snapshot == svg

    return compare


@pytest.fixture
def loaded(redis_client, redis_url):
    truths = {
        "email": load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=600, seed=11, now_ms=T0,
                               malformed=4),
        "billing": load_scenario(redis_client, "stuck-workers", queue="billing", size=300, seed=12, now_ms=T0),
        "reports": load_scenario(redis_client, "scheduler-lag", queue="reports", size=200, seed=13, now_ms=T0),
    }
    return redis_url, truths


def make(url: str, *, environment: str | None = "production", read_only: bool = False, **kw):
    queues = {
        "email": QueueConfig("email", shards=2, options={"slo": {"dead": {"warn": 100, "breach": 1000},
                                                                 "oldest_ready_age": "10m"}}),
        "billing": QueueConfig("billing"),
        "reports": QueueConfig("reports"),
    }
    s = Session(profile="ops", read_only_flag=read_only, timeout_s=1.0)
    s._config = Config(queues=queues, profiles={"ops": Profile("ops", url=url, environment=environment)})
    kw.setdefault("refresh_s", 3600)
    kw.setdefault("export_root", _EXPORTS["root"])  # a purge exports first
    return make_app(s, clock=lambda: T0 + 1000, server_label="redis://test", **kw)


def test_dashboard(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)

    assert snap(make(url, read_only=True), before)


def test_queue_overview(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)

    assert snap(make(url), before)


def test_queue_processing(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        pilot.app.open_queue("billing", tab="processing")
        await settle(pilot)

    assert snap(make(url), before)


def test_queue_triage(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)

    assert snap(make(url), before)


def test_queue_jobs_drill_down_with_selection(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        await pilot.press("space", "space")
        await pilot.pause()

    assert snap(make(url), before)


def test_filter_error(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        pilot.app.open_queue("email", tab="jobs")
        await settle(pilot)
        await pilot.press("slash")
        bar = pilot.app.screen.query_one("FilterBar")
        bar.input.cursor_blink = False
        bar.input.value = "tenant = tenant_1 and"
        await pilot.press("enter")
        await pilot.pause()

    assert snap(make(url), before)


def test_inspector_envelope(snap, loaded) -> None:
    url, truths = loaded
    job_id = sorted(truths["email"].ids_by_state["dead"] - truths["email"].malformed_ids)[0]

    async def before(pilot):
        await settle(pilot)
        pilot.app.open_job("email", job_id)
        await settle(pilot)

    assert snap(make(url), before)


def test_inspector_raw_bytes(snap, loaded) -> None:
    url, truths = loaded
    t = truths["email"]
    job_id = sorted(i for i in t.malformed_ids if t.malformed_kinds[i] == "non-utf8")[0]

    async def before(pilot):
        await settle(pilot)
        pilot.app.open_job("email", job_id)
        await settle(pilot)

    assert snap(make(url), before)


def test_plan_modal(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)

    assert snap(make(url), before)


def test_plan_modal_typed_purge(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("j", "j", "X")
        await settle(pilot)

    assert snap(make(url), before)


def test_run_modal_static(snap, loaded) -> None:
    url, _ = loaded
    plan = Plan(spec=OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, filter=MATCH_ALL,
                            op_id="redrive-snapshot"), now_ms=T0)
    plan.jobs = [None] * 180  # only the count is shown

    async def before(pilot):
        await settle(pilot)
        modal = RunModal(plan, autostart=False)
        await pilot.app.push_screen(modal)
        modal.post_message(RunProgress(64, 180))
        await pilot.pause()

    assert snap(make(url), before)


def test_help(snap, loaded) -> None:
    url, _ = loaded

    async def before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap(make(url, environment="staging"), before)


def test_trouble_banner(snap) -> None:
    async def before(pilot):
        await settle(pilot)

    assert snap(make("redis://127.0.0.1:1/0", environment=None), before)
