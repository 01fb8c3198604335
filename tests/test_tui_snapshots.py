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

import inspect

import pytest

from jobctl.config import Config, Profile
from jobctl.filter import MATCH_ALL
from jobctl.model import State
from jobctl.ops.plan import Plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui.run_modal import RunModal, RunProgress
from jobctl_tui.testing import settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, snap, spike_queues, tui_export_root  # noqa: F401 - fixtures

T0 = TUI_T0


@pytest.fixture
def loaded(redis_client, redis_url):
    return redis_url, load_spike(redis_client, now_ms=T0)


def make(url: str, *, environment: str | None = "production", read_only: bool = False, **kw):
    s = Session(profile="ops", read_only_flag=read_only, timeout_s=1.0)
    s._config = Config(queues=spike_queues(), profiles={"ops": Profile("ops", url=url, environment=environment)})
    kw.setdefault("refresh_s", 3600)
    kw.setdefault("export_root", TUI_EXPORTS["root"])  # a purge exports first
    return make_app(s, clock=lambda: T0 + 1000, server_label="redis://test", **kw)


def before(*steps, then=None):
    """A ``run_before``: settle, then each step settling after it, then
    ``then`` followed by one pause (no settle).  A step (or ``then``) is a
    tuple of keys to press or a function of the pilot (awaited when it
    returns an awaitable)."""
    async def do(pilot, step) -> None:
        if isinstance(step, tuple):
            await pilot.press(*step)
        elif inspect.isawaitable(result := step(pilot)):
            await result

    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            await do(pilot, step)
            await settle(pilot)
        if then is not None:
            await do(pilot, then)
            await pilot.pause()

    return run_before


def test_dashboard(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url, read_only=True), before())


def test_queue_overview(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(("enter",)))


def test_queue_processing(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(lambda pilot: pilot.app.open_queue("billing", tab="processing")))


def test_queue_triage(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(("t",)))


def test_queue_jobs_drill_down_with_selection(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(("t",), ("j", "enter"), then=("space", "space")))


def test_filter_error(snap, loaded) -> None:
    url, _ = loaded

    async def type_a_bad_filter(pilot):
        await pilot.press("slash")
        bar = pilot.app.screen.query_one("FilterBar")
        bar.input.cursor_blink = False
        bar.input.value = "tenant = tenant_1 and"
        await pilot.press("enter")

    assert snap(make(url), before(lambda pilot: pilot.app.open_queue("email", tab="jobs"), then=type_a_bad_filter))


def test_inspector_envelope(snap, loaded) -> None:
    url, truths = loaded
    job_id = sorted(truths["email"].ids_by_state["dead"] - truths["email"].malformed_ids)[0]
    assert snap(make(url), before(lambda pilot: pilot.app.open_job("email", job_id)))


def test_inspector_raw_bytes(snap, loaded) -> None:
    url, truths = loaded
    t = truths["email"]
    job_id = sorted(i for i in t.malformed_ids if t.malformed_kinds[i] == "non-utf8")[0]
    assert snap(make(url), before(lambda pilot: pilot.app.open_job("email", job_id)))


def test_plan_modal(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(("t",), ("R",)))


def test_plan_modal_typed_purge(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url), before(("t",), ("j", "j", "X")))


def test_run_modal_static(snap, loaded) -> None:
    url, _ = loaded
    plan = Plan(spec=OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, filter=MATCH_ALL,
                            op_id="redrive-snapshot"), now_ms=T0)
    plan.jobs = [None] * 180  # only the count is shown

    async def show_the_modal(pilot):
        modal = RunModal(plan, autostart=False)
        await pilot.app.push_screen(modal)
        modal.post_message(RunProgress(64, 180))

    assert snap(make(url), before(then=show_the_modal))


def test_help(snap, loaded) -> None:
    url, _ = loaded
    assert snap(make(url, environment="staging"), before(then=("question_mark",)))


def test_trouble_banner(snap) -> None:
    assert snap(make("redis://127.0.0.1:1/0", environment=None), before())
