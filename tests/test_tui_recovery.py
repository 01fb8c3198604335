"""Recovery operations from the TUI (issue 14): migrate / drain --to (``M``)
and drain --export-to (``D``) from the queue screen behind the same plan
modal as every operation, pause / resume (``Z`` / ``W``) from a triage
group's job type or tenant, and the holds on the dashboard.  Pilot tests on
a real server asserting on the app's messages and state and on what Redis
holds afterwards, plus snapshots of the modals."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList, Static

from jobctl.config import QueueConfig
from jobctl.export.manifest import load_manifest
from jobctl.export.reader import iter_rows
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.layouts.reliable_list.pause import add_hold
from jobctl.ops.journal import read_entries
from jobctl_fixtures.protocol import Worker
from jobctl_fixtures.scenarios import load_scenario
from jobctl_tui import make_app
from jobctl_tui.ask_modals import ReasonModal, ScopeModal, TargetModal
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.dashboard_screen import DashboardScreen
from jobctl_tui.queue_screen import QueueScreen
from jobctl_tui.testing import settle, wait_for
from test_pause import enqueue, partition, tail_first, tenant_of
from test_tui_pilot import SIZE, T0, run, session_for
from helpers import open_and_press, snap  # noqa: F401 - the fixture

SRC, DST = ReliableListKeys("email"), ReliableListKeys("email-v2")


def app_for(redis_url: str, tmp_path: Path | None, **queues: QueueConfig):
    """The app; ``tmp_path`` ``None``: exports under ``tui-exports`` of the
    current directory (a path the same in every run, for snapshots)."""
    queues = queues or {"email": QueueConfig("email"), "email-v2": QueueConfig("email-v2")}
    root = "tui-exports" if tmp_path is None else str(tmp_path / "tui-exports")
    return make_app(session_for(redis_url, **queues), refresh_s=3600, clock=lambda: T0 + 1000,
                    server_label="redis://test", export_root=root)


def notices(app) -> list[str]:
    return [m for _, m in app.notices]


async def open_email(pilot, tab: str | None = None) -> QueueScreen:
    await settle(pilot)
    pilot.app.open_queue("email", tab=tab)
    await settle(pilot)
    assert isinstance(pilot.app.screen, QueueScreen)
    return pilot.app.screen


def test_migrate_then_drain_to_a_queue_from_the_queue_screen(redis_url, redis_client, tmp_path) -> None:
    ids = enqueue(redis_client, "email", 12)
    t2 = [i for i in ids if tenant_of(i) == "t2"]

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_email(pilot)
            screen.filter = compile_filter("tenant = t2")   # what `/` sets
            await pilot.press("M")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, TargetModal) and modal.kind == "queue" and modal.suggestions == ["email-v2"]
            await pilot.press(*"email-v2", "enter")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == len(t2)
            assert "to queue email-v2" in plan.plan.describe() and plan.focused.id == "cancel"
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen is screen
            assert any(m.startswith(f"migrate email: planned {len(t2)}, moved {len(t2)}") for m in notices(app))
            # no filter: every ready job (`jobctl drain email --to email-v2`)
            await pilot.press("c")
            await settle(pilot)
            await pilot.press("M")
            await settle(pilot)
            await pilot.press(*"email-v2", "enter")
            await settle(pilot)
            assert isinstance(app.screen, PlanModal) and app.screen.plan.planned == len(ids) - len(t2)
            await pilot.press("tab", "enter")
            await settle(pilot)
            # escape at the question changes nothing
            await pilot.press("M")
            await settle(pilot)
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen is screen and notices(app)[-1] == "migrate cancelled: nothing was changed"
        app.session.close()

    run(go())
    assert redis_client.llen(SRC.ready) == 0
    assert tail_first(redis_client, DST.ready) == t2 + [i for i in ids if i not in t2]
    assert set(partition(redis_client, ["email", "email-v2"])) == set(ids)
    entries = read_entries(redis_client, [SRC.journal])
    assert [e["operation"] for e in entries] == ["migrate", "migrate"]
    assert any(e["command"].startswith(f"jobctl --url {redis_url} migrate email email-v2 --state ready --filter")
               for e in entries)


def exported(directory: Path) -> Counter:
    m = load_manifest(directory)
    return Counter(job_id for job_id, in iter_rows(directory, m, ("job_id",)))


def test_drain_into_an_export_from_the_queue_screen(redis_url, redis_client, tmp_path) -> None:
    ids = enqueue(redis_client, "email", 12)
    where = {}

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_email(pilot)
            await pilot.press("D")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, TargetModal) and modal.kind == "export"
            default = modal.query_one("#target", Input).value
            assert default.startswith(str(tmp_path / "tui-exports" / "email-ready-"))
            await pilot.press("enter")                  # the directory offered
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == 12 and plan.typed_required
            assert plan.prepared.export_pending == default and plan.prepared.exported is None
            assert "drain removes the jobs from Redis" in str(plan.query_one("#plan-extra", Static).render())
            assert not Path(default).exists()           # nothing written before Apply
            assert redis_client.llen(SRC.ready) == 12
            assert plan.focused.id == "cancel" and plan.query_one("#apply").disabled
            await pilot.press("tab", *"12", "enter")    # the count typed confirms
            await settle(pilot)
            assert app.screen is screen
            assert any(m.startswith("drain email: planned 12, removed 12, skipped 0") for m in notices(app)), \
                notices(app)
            where["dir"] = default
        app.session.close()

    run(go())
    assert exported(Path(where["dir"])) == Counter(ids)  # every drained job exactly once
    assert redis_client.llen(SRC.ready) == 0 and not any(redis_client.exists(SRC.job(i)) for i in ids)
    entry = read_entries(redis_client, [SRC.journal])[0]
    assert entry["operation"] == "drain" and entry["moved"] == 12
    assert entry["command"].startswith(f"jobctl --url {redis_url} drain email --state ready --export-to")


def test_drain_refusals_in_the_tui_change_nothing(redis_url, redis_client, tmp_path) -> None:
    enqueue(redis_client, "email", 5)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_email(pilot)
            screen.filter = compile_filter("tenant = t1")
            await pilot.press("D")                      # drain takes the whole state
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert app.screen is screen and "no --limit or --filter" in notices(app)[-1]
            await pilot.press("3", "M")                 # not on the triage tab (dead jobs)
            await settle(pilot)
            assert "does not apply to dead jobs" in notices(app)[-1]
            await pilot.press("1", "M")
            await settle(pilot)
            await pilot.press(*"nope", "enter")         # an unknown queue
            await settle(pilot)
            assert app.screen is screen and "nope" in notices(app)[-1]
        app.session.close()

    run(go())
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before


def dead_jobs(client, n: int) -> list[str]:
    """``n`` dead jobs d0000.. (webhook.deliver x BAD_PAYLOAD, tenants t1, t2, t3 in turn)."""
    ids = enqueue(client, "email", n, prefix="d")
    worker = Worker(client, "email")
    while (job := worker.claim()) is not None:
        worker.fail(job, "BAD_PAYLOAD", message="payload rejected")
    assert client.llen(SRC.dead) == n
    return ids


def test_pause_and_resume_a_tenant_from_a_triage_group(redis_url, redis_client, tmp_path) -> None:
    dead = dead_jobs(redis_client, 6)
    ids = enqueue(redis_client, "email", 12)
    t2 = [i for i in ids if tenant_of(i) == "t2"]

    async def pick(pilot, index: int) -> None:
        modal = pilot.app.screen
        assert isinstance(modal, ScopeModal)
        modal.query_one(OptionList).highlighted = index
        await pilot.press("enter")
        await settle(pilot)

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_email(pilot, tab="triage")
            await pilot.press("Z")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, ScopeModal)
            g = screen.triage.groups[0]
            assert modal.scopes == g.scopes()           # the core's grouping, not rebuilt in the TUI
            assert [t for _, t in modal.scopes] == ['type = "webhook.deliver"', 'tenant = "t1"', 'tenant = "t2"',
                                                     'tenant = "t3"']
            await pick(pilot, 2)
            assert isinstance(app.screen, ReasonModal)
            await pilot.press(*"noisy t2", "enter")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == len(t2)
            assert plan.plan.spec.filter.text == 'tenant = "t2"' and "tenant t2" in plan.request.scope
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen is screen
            assert redis_client.llen(SRC.paused) == len(t2)
            assert any(m.startswith(f"pause email: planned {len(t2)}, moved {len(t2)}") for m in notices(app))
            await settle(pilot)
            await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.row("email").status.paused)
            summary = str(screen.query_one("#summary", Static).render())
            assert f"paused {len(t2)}" in summary
            await pilot.press("W")                      # resume the same tenant
            await settle(pilot)
            await pick(pilot, 2)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == len(t2)
            await pilot.press("tab", "enter")
            await settle(pilot)
        app.session.close()

    run(go())
    # resumed jobs are served first (they were ready before the others: docs/recovery.md), in their order
    assert redis_client.llen(SRC.paused) == 0
    assert tail_first(redis_client, SRC.ready) == t2 + [i for i in ids if i not in t2]
    assert tail_first(redis_client, SRC.dead) != [] and redis_client.llen(SRC.dead) == len(dead)
    entries = read_entries(redis_client, [SRC.journal])
    pause = next(e for e in entries if e["operation"] == "pause")
    assert pause["reason"] == "noisy t2" and pause["filter"] == 'tenant = "t2"' and pause["moved"] == len(t2)


def test_the_dashboard_shows_paused_counts_and_holds(redis_url, redis_client, tmp_path) -> None:
    enqueue(redis_client, "email", 6)
    lay = ReliableList(redis_client, QueueConfig("email"))
    add_hold(lay, "tenant = t1", "incident 7", "ops@test")
    redis_client.lpush(SRC.paused, "x1")
    redis_client.hset(SRC.paused_info, "x1", "{}")

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen)
            notes = str(app.screen.query_one("#dash-notes", Static).render())
            assert "email: held tenant = t1 for" in notes and "(incident 7), 1 paused" in notes
            screen = await open_email(pilot)
            summary = str(screen.query_one("#summary", Static).render())
            assert "paused 1" in summary and "held: tenant = t1 for" in summary
        app.session.close()

    run(go())


# -- snapshots of the modals ------------------------------------------------------------

@pytest.fixture
def scenario(redis_client, redis_url):
    load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=600, seed=11, now_ms=T0, malformed=4)
    return redis_url


def test_drain_plan_modal(snap, scenario, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = app_for(scenario, None, email=QueueConfig("email", shards=2), billing=QueueConfig("billing"))

    async def before(pilot):
        await open_and_press(pilot, "email", "D", "enter")
        assert isinstance(pilot.app.screen, PlanModal)
        pilot.app.screen.query_one("#typed", Input).cursor_blink = False

    assert snap(app, before)


def test_migrate_target_modal(snap, scenario, tmp_path) -> None:
    app = app_for(scenario, tmp_path, email=QueueConfig("email", shards=2), billing=QueueConfig("billing"))

    async def before(pilot):
        await open_and_press(pilot, "email", "M")
        pilot.app.screen.query_one("#target", Input).cursor_blink = False

    assert snap(app, before)
