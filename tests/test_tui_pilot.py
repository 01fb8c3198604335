"""Pilot tests of the TUI on a real server: every screen and action, asserting
on the app's state, what Redis holds afterwards, and the notices shown."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from jobctl.config import Config, Profile, QueueConfig
from jobctl.dashboard import Level
from jobctl.keys import ReliableListKeys
from jobctl.model import State
from jobctl.ops.journal import read_entries, read_local
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario
from jobctl_tui import make_app
from jobctl_tui.ask_modals import ReasonModal
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.run_modal import RunModal
from jobctl_tui.dashboard_screen import DashboardScreen
from jobctl_tui.help import HelpScreen
from jobctl_tui.inspector import InspectorScreen
from jobctl_tui.queue_screen import QueueScreen
from jobctl_tui.testing import settle, wait_for
from jobctl_tui.widgets import FilterBar, TopBar
from helpers import TUI_EXPORTS, TUI_T0, load_spike, spike_queues, tui_export_root  # noqa: F401 - autouse fixture

T0 = TUI_T0
SIZE = (140, 40)


def session_for(url: str, *, read_only: bool = False, timeout_s: float = 5.0, environment: str | None = None,
                **queues: QueueConfig) -> Session:
    s = Session(url=None if environment else url, read_only_flag=read_only, timeout_s=timeout_s,
                profile="ops" if environment else None)
    s._config = Config(queues=queues, profiles={"ops": Profile("ops", url=url, environment=environment)}
                       if environment else {})
    return s


def app_for(session: Session, **kw):
    kw.setdefault("refresh_s", 3600)
    kw.setdefault("clock", lambda: T0 + 1000)
    kw.setdefault("server_label", "redis://test")
    kw.setdefault("export_root", TUI_EXPORTS["root"])
    return make_app(session, **kw)


@pytest.fixture
def spike(redis_client):
    """dlq-spike on email (2 shards), stuck-workers on billing, scheduler-lag on reports."""
    return load_spike(redis_client, now_ms=T0)


def spike_session(url: str, **kw) -> Session:
    return session_for(url, **spike_queues(), **kw)


def dead_depth(client, tag: str, shards: int | None = None) -> int:
    from jobctl.keys import shard_tags

    return sum(client.llen(ReliableListKeys(t).dead) for t in shard_tags(tag, shards))


def run(coro):
    return asyncio.run(coro)


@asynccontextmanager
async def piloted(app, queue: str | None = None, tab: str | None = None):
    """``app.run_test(size=SIZE)``'s pilot once the app has settled (on the
    screen of ``queue`` at ``tab`` when a queue is given); the app's session
    is closed afterwards."""
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            if queue is not None:
                app.open_queue(queue, tab=tab)
                await settle(pilot)
            yield pilot
    finally:
        app.session.close()


# -- dashboard ------------------------------------------------------------------------------


def test_plan_modal_names_server_environment_and_queue_and_types_in_production(redis_url, spike) -> None:
    """In production even a small redrive needs the count typed, and the
    modal's title names the queue, the server and the red PRODUCTION badge
    it covers; elsewhere the same redrive is a plain confirm."""
    async def go(environment: str | None) -> tuple[str, bool]:
        app = app_for(spike_session(redis_url, environment=environment))
        async with piloted(app) as pilot:
            await pilot.press("R")  # redrive the highlighted queue (email)
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal)
            title = str(modal.query_one("#plan-title").render())
            typed = modal.typed_required
            await pilot.press("escape")
            await settle(pilot)
        return title, typed

    title, typed = run(go("production"))
    assert title.startswith("Redrive — queue email on redis://test") and "PRODUCTION" in title and typed
    title, typed = run(go(None))
    assert title == "Redrive — queue email on redis://test" and not typed


def test_dashboard_shows_every_queue_with_slo_levels_and_badge(redis_url, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url, environment="production"))
        async with piloted(app) as pilot:
            assert isinstance(app.screen, DashboardScreen)
            table = app.screen.table
            assert [k.value for k in table.rows] == ["email", "billing", "reports"]
            rows = {r.name: r for r in app.snapshot.rows}
            for name, truth in spike.items():
                st = rows[name].status
                for f in ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead"):
                    assert getattr(st, f) == truth.expected[f], (name, f)
            assert rows["email"].levels["dead"] is Level.WARN       # 180 >= warn 100
            assert rows["email"].levels["oldest_ready_age"] is Level.BREACH
            assert rows["billing"].levels["stuck"] is Level.BREACH   # default SLO: any stuck job
            assert rows["reports"].levels["scheduled_overdue_max_age"] is Level.BREACH  # overdue 10 min or more
            top = app.screen.query_one(TopBar).text
            assert "PRODUCTION" in top and "redis://test" in top and "updated" in top
            assert app.trouble is None

    run(go())


def test_freeze_refresh_interval_floor_and_sparklines(redis_url, redis_client, spike) -> None:
    clock = [T0]

    async def go():
        app = app_for(spike_session(redis_url), clock=lambda: clock[0], refresh_s=0.1)
        assert app.refresh_s == 0.5  # the floor
        async with piloted(app) as pilot:
            await pilot.press("p")
            assert app.frozen
            bar = app.screen.query_one(TopBar).text
            assert "FROZEN" in bar and "for 0 ms · p unfreezes" in bar
            clock[0] += 65_000
            app._tick()  # a timer tick while frozen reads nothing, but ages the freeze
            await settle(pilot)
            assert "for 1 m 5 s · p unfreezes" in app.screen.query_one(TopBar).text
            clock[0] -= 65_000  # nothing was read meanwhile: the growth below spans one minute
            n = len(app.snapshot.row("email").depth_series)
            app._tick()
            await settle(pilot)
            assert len(app.snapshot.row("email").depth_series) == n
            await pilot.press("p")
            assert not app.frozen and "FROZEN" not in app.screen.query_one(TopBar).text
            await pilot.press("minus")
            assert app.refresh_s == 0.5
            assert any("cannot go below" in m for _, m in app.notices)
            await pilot.press("plus", "plus")
            assert app.refresh_s == 2.0
            app._set_interval(3600)
            # the DLQ grows by 60 in a minute: growth rate and sparklines follow
            await settle(pilot)
            redis_client.lpush(ReliableListKeys("email:00").dead, *[f"x{i}" for i in range(60)])
            clock[0] += 60_000
            await pilot.press("r")
            await settle(pilot)
            row = app.snapshot.row("email")
            assert row.dead_growth_per_min == pytest.approx(60.0)
            assert len(row.depth_series) >= 2
            cells = [str(c) for c in app.screen.table.get_row("email")]
            assert "+60.0/min" in cells

    run(go())


def test_vim_keys_help_and_command_palette(redis_url, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app) as pilot:
            table = app.screen.table
            await pilot.press("j")
            assert table.cursor_row == 1
            await pilot.press("G")
            assert table.cursor_row == 2
            await pilot.press("g")
            assert table.cursor_row == 0
            await pilot.press("?")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert isinstance(app.screen, DashboardScreen)
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Open queue billing")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, QueueScreen) and app.screen.queue == "billing"
            await pilot.press("h")
            assert isinstance(app.screen, DashboardScreen)
            await pilot.press("l")
            await settle(pilot)
            assert isinstance(app.screen, QueueScreen) and app.screen.queue == "email"

    run(go())


# -- queue screen ---------------------------------------------------------------------------


def test_queue_screen_histogram_due_times_and_processing(redis_url, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app, "reports") as pilot:
            scr = app.screen
            truth = spike["reports"]
            for state in ("dead", "scheduled", "processing"):
                counts = dict(scr.histograms[state].counts)
                assert counts == truth.attempts_histogram.get(state, {}), state
            due = dict(scr.detail.due.counts)
            assert due["overdue"] == truth.expected["scheduled_overdue"]
            assert sum(due.values()) == truth.expected["scheduled"]
            assert scr.query_one("#hist").row_count == len({a for h in scr.histograms.values() for a in h.counts})
            await pilot.press("escape")
            # billing: processing sorted by time left, stuck first and highlighted
            app.open_queue("billing", tab="processing")
            await settle(pilot)
            scr = app.screen
            assert scr.active_tab == "processing"
            keys = [k.value for k in scr.query_one("#proc").rows]
            truth = spike["billing"]
            n_stuck = len(truth.stuck_ids)
            assert set(keys[:n_stuck]) == truth.stuck_ids
            assert not set(keys[n_stuck:]) & truth.stuck_ids
            first = scr.query_one("#proc").get_row_at(0)
            assert "STUCK" in str(first[5]) and "red" in str(first[5].style)
            assert f"{n_stuck:,} stuck" in str(scr.query_one("#proc-note").render())

    run(go())


def test_triage_view_drill_down_and_filter(redis_url, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app) as pilot:
            await pilot.press("t")
            await settle(pilot)
            scr = app.screen
            assert isinstance(scr, QueueScreen) and scr.active_tab == "triage"
            truth = spike["email"]
            assert {(g.job_type, g.error): g.count for g in scr.triage.groups} == truth.dead_breakdown
            assert scr.query_one("#groups").row_count == len(truth.dead_breakdown)
            assert "2 malformed" in str(scr.query_one("#triage-note").render())
            # drill down into the second group
            await pilot.press("j", "enter")
            await settle(pilot)
            assert scr.active_tab == "jobs"
            page = scr.page
            assert page.state == "dead"
            expected = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[1]
            (jt, err), n = expected
            assert page.filter_text == f'type = "{jt}" and error = "{err}"'
            assert len(page.records) == n
            assert all(r.envelope.job_type == jt and r.envelope.last_error_code == err for r in page.records)
            # a bad filter names the column and changes nothing
            await pilot.press("slash")
            bar = scr.query_one(FilterBar)
            assert bar.is_open
            bar.input.value = "tenant = tenant_1 and"
            await pilot.press("enter")
            await pilot.pause()
            assert "column 22" in bar.error and bar.is_open
            assert scr.filter.text == page.filter_text
            # a good one applies to the triage view and the job list
            bar.input.value = "tenant = tenant_3"
            await pilot.press("enter")
            await settle(pilot)
            assert not bar.is_open and scr.filter.text == "tenant = tenant_3"
            assert scr.triage.matched == truth.dead_by_tenant["tenant_3"]
            assert all(r.envelope.tenant_id == "tenant_3" for r in scr.page.records)
            await pilot.press("c")
            await settle(pilot)
            assert scr.filter.is_match_all and scr.triage.matched == truth.expected["dead"] - 2

    run(go())


def test_job_inspector_envelope_and_raw_bytes(redis_url, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app, "email", tab="jobs") as pilot:
            scr = app.screen
            first = scr.page.records[0]
            await pilot.press("enter")
            await settle(pilot)
            insp = app.screen
            assert isinstance(insp, InspectorScreen) and insp.record.job_id == first.job_id
            assert insp.record.state is State.DEAD
            assert str(insp.query_one("#env-title").render()).startswith("envelope")
            facts = insp.query_one("#facts").render()
            assert facts is not None
            await pilot.press("escape")
            assert app.screen is scr
            # a malformed dead job: the raw bytes
            bad = sorted(spike["email"].malformed_ids & spike["email"].ids_by_state["dead"])
            for job_id in bad:
                app.open_job("email", job_id)
                await settle(pilot)
                title = str(app.screen.query_one("#env-title").render())
                kind = spike["email"].malformed_kinds[job_id]
                if kind == "missing-fields":
                    assert "problems: missing field" in title
                else:
                    assert title.startswith("raw bytes — the envelope does not parse")
                    body = app.screen.query_one("#envelope").render()
                    text = "".join(str(r) for r in getattr(body, "renderables", [body]))
                    assert ("hex dump" in text) == (kind == "non-utf8")
                await pilot.press("h")

    run(go())


# -- actions ----------------------------------------------------------------------------------


def test_acceptance_redrive_one_triage_group_from_the_keyboard(redis_url, redis_client, spike) -> None:
    """Open on a dlq-spike, go to triage, pick a group, redrive it, confirm;
    the jobs moved and the journal stream has the entry."""
    truth = spike["email"]
    (jt, err), n = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[1]

    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app) as pilot:
            await pilot.press("enter")          # open email
            await settle(pilot)
            await pilot.press("3")              # triage tab
            await pilot.press("j")              # second group
            await pilot.press("R")              # redrive
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal)
            assert modal.focused is not None and modal.focused.id == "cancel"
            assert modal.plan.planned == n and not modal.typed_required
            assert dict(modal.plan.breakdown) == {(jt, err): n}
            await pilot.press("tab")            # to the Redrive button
            assert modal.focused.id == "apply"
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, QueueScreen)
            # one summary line: the counts, then how long it took and its rate (as the CLI's)
            assert any(f"moved {n:,}" in m and " jobs/s)  [redrive-" in m for _, m in app.notices), app.notices
            await pilot.press("5")
            await settle(pilot)
            assert app.screen.journal[0]["operation"] == "redrive"

    run(go())
    assert dead_depth(redis_client, "email", 2) == truth.expected["dead"] - n
    entries = read_entries(redis_client, [ReliableListKeys("email").journal])
    assert len(entries) == 1
    e = entries[0]
    assert (e["operation"], e["queue"], e["planned"], e["moved"], e["skipped"]) == ("redrive", "email", n, n, 0)
    assert e["filter"] == f'type = "{jt}" and error = "{err}"'
    assert e["operator"] == "tester@ci" and e["command"].startswith(f"jobctl --url {redis_url} redrive email --filter")
    assert read_local(5)[0]["id"] == e["id"]
    ready_ids = {x.decode() for t in ("email:00", "email:01")
                 for x in redis_client.lrange(ReliableListKeys(t).ready, 0, -1)}
    group_ids = {r for r in truth.ids_by_state["dead"] if r not in truth.malformed_ids}
    moved = {i for i in group_ids if i in ready_ids}
    assert len(moved) == n


def test_cancel_changes_nothing_and_read_only_refuses(redis_url, redis_client, spike) -> None:
    dead = spike["email"].expected["dead"]

    async def go(read_only: bool):
        app = app_for(spike_session(redis_url, read_only=read_only))
        async with piloted(app) as pilot:
            await pilot.press("R")   # whole-queue redrive from the dashboard
            await settle(pilot)
            if read_only:
                assert not isinstance(app.screen, PlanModal)
                assert any("redrive refused: read-only" in m and sev == "error" for sev, m in app.notices)
            else:
                # an unfiltered dead-list plan takes every tail position, malformed envelopes
                # included (docs/layouts.md, "Unfiltered dead-list plans")
                assert isinstance(app.screen, PlanModal) and app.screen.plan.planned == dead
                await pilot.press("enter")   # focus is on Cancel
                await settle(pilot)
                assert isinstance(app.screen, DashboardScreen)
                assert any("cancelled: nothing was changed" in m for _, m in app.notices)

    run(go(read_only=True))
    run(go(read_only=False))
    assert dead_depth(redis_client, "email", 2) == dead
    assert read_entries(redis_client, [ReliableListKeys("email").journal]) == []


def test_requeue_stuck_and_promote_a_selection(redis_url, redis_client, spike) -> None:
    stuck = spike["billing"].stuck_ids

    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app, "billing", tab="processing") as pilot:
            await pilot.press("U")
            await settle(pilot)
            assert isinstance(app.screen, PlanModal) and app.screen.plan.planned == len(stuck)
            assert app.screen.request.stuck_only
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen.detail.status.stuck == 0
            # promote two selected scheduled jobs of reports
            await pilot.press("escape")
            app.open_queue("reports", tab="jobs")
            await settle(pilot)
            scr = app.screen
            await pilot.press("s", "s")     # dead -> ready -> scheduled
            await settle(pilot)
            assert scr.page.state == "scheduled"
            chosen = [r.job_id for r in scr.page.records[:2]]
            await pilot.press("space", "space")
            assert scr.selection == set(chosen)
            await pilot.press("P")
            await settle(pilot)
            assert isinstance(app.screen, PlanModal)
            assert app.screen.plan.planned == 2 and app.screen.request.ids == tuple(sorted(chosen))
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert scr.selection == set()
            # redrive is refused on a scheduled list, with a notice
            await pilot.press("R")
            assert any("redrive works on dead jobs" in m for _, m in app.notices)

    run(go())
    assert redis_client.zcount(ReliableListKeys("billing").deadline, "-inf", f"({T0}") == 0
    ready = {x.decode() for x in redis_client.lrange(ReliableListKeys("reports").ready, 0, -1)}
    assert stuck <= {x.decode() for x in redis_client.lrange(ReliableListKeys("billing").ready, 0, -1)}
    assert len(ready) == spike["reports"].expected["ready"] + 2


def test_suppress_asks_a_reason_and_purge_needs_the_count(redis_url, redis_client, spike) -> None:
    truth = spike["email"]
    (jt, err), n = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    (jt2, err2), n2 = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[2]

    async def go():
        app = app_for(spike_session(redis_url))
        async with piloted(app, "email", tab="triage") as pilot:
            await pilot.press("S")
            assert isinstance(app.screen, ReasonModal)
            await pilot.press(*"known outage", "enter")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal) and modal.plan.planned == n
            assert modal.plan.spec.reason == "known outage"
            await pilot.press("tab", "enter")
            await settle(pilot)
            # purge the third group: the count must be typed
            scr = app.screen
            assert [(g.job_type, g.error) for g in scr.triage.groups][1] == (jt2, err2)
            await pilot.press("j", "X")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal) and modal.typed_required
            apply = modal.query_one("#apply")
            assert apply.disabled and modal.focused.id == "cancel"
            await pilot.press("tab")   # Apply is disabled: tab reaches the input
            await pilot.press(*str(n2 + 1))
            assert apply.disabled
            await pilot.press("enter")
            assert isinstance(app.screen, PlanModal)
            modal.query_one("#typed").value = ""
            await pilot.press(*str(n2))
            assert not apply.disabled
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, QueueScreen)

    run(go())
    sup = sum(redis_client.zcard(ReliableListKeys(t).suppressed) for t in ("email:00", "email:01"))
    assert sup == n
    assert dead_depth(redis_client, "email", 2) == truth.expected["dead"] - n - n2
    ops = [e["operation"] for e in read_entries(redis_client, [ReliableListKeys("email").journal])]
    assert sorted(ops) == ["purge", "suppress"]


def test_acceptance_tui_purge_exports_first_like_the_cli(redis_url, redis_client, spike, tmp_path) -> None:
    """The TUI's purge takes the CLI's export-before-purge path (the
    operations core): the group is exported under ``export_root`` first, the
    plan is fenced to the exported ids, and the journal records
    ``--export-to``, never ``--no-export``."""
    from jobctl.export.manifest import load_manifest
    from jobctl.export.reader import iter_rows

    truth = spike["email"]
    (jt, err), n = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    seen: dict = {}

    async def go():
        app = app_for(spike_session(redis_url), export_root=str(tmp_path))
        async with piloted(app, "email", tab="triage") as pilot:
            await pilot.press("X")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, PlanModal) and modal.typed_required and modal.plan.planned == n
            pending = modal.prepared.export_pending   # exported on Apply: nothing written before
            assert pending is not None and modal.prepared.exported is None and not Path(pending).exists()
            seen["malformed"] = len(modal.plan.malformed)   # exported too, never purged (as in the CLI)
            seen["dir"] = pending
            modal.query_one("#typed").value = str(n)
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert isinstance(app.screen, QueueScreen)
            assert any(m.startswith(f"exported {n + seen['malformed']:,} dead job(s)") for _, m in app.notices)

    run(go())
    m = load_manifest(seen["dir"])
    assert m.queue == "email" and m.rows == n + seen["malformed"] and m.malformed == seen["malformed"]
    exported = {job_id for (job_id,) in iter_rows(seen["dir"], m, ("job_id",))}
    assert len(exported) == m.rows
    assert dead_depth(redis_client, "email", 2) == truth.expected["dead"] - n
    e = read_entries(redis_client, [ReliableListKeys("email").journal])[0]
    assert (e["operation"], e["planned"], e["moved"]) == ("purge", n, n)
    assert "--export-to" in e["command"] and "--no-export" not in e["command"]


def test_large_plan_needs_the_count_and_a_run_can_be_stopped(redis_url, redis_client) -> None:
    load_scenario(redis_client, "dlq-spike", queue="big", size=3600, seed=21, now_ms=T0)
    dead = redis_client.llen(ReliableListKeys("big").dead)
    assert dead > 1000

    async def go():
        app = app_for(session_for(redis_url, big=QueueConfig("big")), op_rate=200)
        async with piloted(app) as pilot:
            await pilot.press("R")
            await settle(pilot)
            modal = app.screen
            # a redrive of thousands outside production: a plain confirm, no typed count
            assert isinstance(modal, PlanModal) and modal.plan.planned == dead and not modal.typed_required
            await pilot.press("tab", "enter")   # from Cancel to Apply
            await wait_for(pilot, lambda: isinstance(app.screen, RunModal) and app.screen.done > 0, what="progress")
            run_modal = app.screen
            assert run_modal.query_one("#run-progress").progress > 0
            await pilot.press("escape")          # stop after the current batch
            await settle(pilot)
            assert isinstance(app.screen, DashboardScreen)
            assert any("interrupted" in m for _, m in app.notices)

    run(go())
    left = redis_client.llen(ReliableListKeys("big").dead)
    assert 0 < left < dead
    e = read_entries(redis_client, [ReliableListKeys("big").journal])[0]
    assert e["interrupted"] is True and e["moved"] == dead - left


# -- Redis trouble ------------------------------------------------------------------------------


def test_unreachable_server_shows_a_banner_and_the_ui_keeps_running() -> None:
    async def go():
        app = app_for(session_for("redis://127.0.0.1:1/0", timeout_s=0.5, q=QueueConfig("q")))
        async with piloted(app) as pilot:
            assert app.trouble and "cannot reach redis://127.0.0.1:1/0" in app.trouble
            banner = app.screen.query_one("#banner")
            assert banner.display and "Redis trouble" in str(banner.render())
            await pilot.press("?")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape", "r")
            await settle(pilot)
            assert app.trouble and isinstance(app.screen, DashboardScreen)

    run(go())


def test_timeout_banner_then_reconnect(redis_url, redis_client, spike) -> None:
    async def go():
        app = app_for(spike_session(redis_url, timeout_s=0.3))
        async with piloted(app) as pilot:
            assert app.trouble is None
            redis_client.client_pause(1200, all=True)
            app.refresh_status()
            await settle(pilot)
            assert app.trouble and "timed out" in app.trouble
            assert app.screen.query_one("#banner").display
            assert app.snapshot is not None  # the last good numbers stay
            await asyncio.sleep(1.3)
            app.refresh_status()
            await settle(pilot)
            assert app.trouble is None and not app.screen.query_one("#banner").has_class("-shown")
            assert any("Redis answers again" in m for _, m in app.notices)

    run(go())


def test_acl_denial_shows_a_banner(redis_url, redis_client, spike) -> None:
    redis_client.acl_setuser("tui-limited", enabled=True, passwords=["+pw"], keys=["*"],
                             commands=["-@all", "+ping", "+client", "+hello", "+auth"])
    try:
        host = redis_url.split("://", 1)[1]
        url = f"redis://tui-limited:pw@{host}"

        async def go():
            app = app_for(spike_session(url))
            async with piloted(app) as pilot:
                assert app.trouble and "permission denied" in app.trouble
                assert "pw@" not in app.trouble

        run(go())
    finally:
        redis_client.acl_deluser("tui-limited")


def test_jobctl_tui_needs_a_terminal(redis_url, capsys) -> None:
    from jobctl.cli.main import main

    assert main(["--url", redis_url, "tui"]) == 2
    assert "needs a terminal" in capsys.readouterr().err



def test_queue_screen_on_a_layout_without_a_dlq(redis_url, redis_client) -> None:
    """delay-zset has ready and scheduled only: the job list starts on ready,
    `s` cycles through the states the layout has, triage is empty."""
    from jobctl.layouts.base import now_ms
    from jobctl_fixtures.layouts import ADAPTERS

    adapter = ADAPTERS["delay-zset"]
    now = now_ms()
    expected = adapter.load(redis_client, "healthy", queue="dz", size=60, seed=5, now_ms=now)

    async def go():
        app = app_for(session_for(redis_url, dz=adapter.queue_config("dz")), clock=lambda: now)
        async with piloted(app, "dz", tab="jobs") as pilot:
            scr = app.screen
            assert scr.page.state == "ready" and len(scr.page.records) == expected["ready"]
            await pilot.press("s")
            await settle(pilot)
            assert scr.page.state == "scheduled"
            await pilot.press("s")
            await settle(pilot)
            assert scr.page.state == "ready"
            assert scr.triage.groups == [] and not [m for sev, m in app.notices if sev == "error"]

    run(go())


def test_each_purge_exports_into_a_new_folder(tmp_path) -> None:
    from jobctl_tui.actions import ActionRequest
    from jobctl.ops.spec import Operation

    app = app_for(session_for("redis://127.0.0.1:1/0"), export_root=str(tmp_path))
    req = ActionRequest(Operation.PURGE, "email", State.DEAD, "every dead job")
    first = app._export_dir(req)
    Path(first).mkdir(parents=True)
    second = app._export_dir(req)
    assert first != second and second.endswith("-2") and not Path(second).exists()
