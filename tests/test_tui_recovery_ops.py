"""Recovery operations from the TUI, part 2 (issue 14): resume lifts the
queue's holds through the operations core (``W``), replay of a
stream-group queue's history and envelope migration (``migrate
--transform`` / ``--rollback``) from the queue screen, behind the plan
modal.  Pilot tests on a real server asserting on what Redis holds."""

from __future__ import annotations

import orjson
from textual.widgets import Static

from jobctl.config import QueueConfig
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.layouts.reliable_list.pause import add_hold, holds
from jobctl.ops.journal import read_entries
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.recovery_modals import ReplayModal, TransformModal
from jobctl_tui.testing import settle
from test_pause import enqueue
from test_replay import K as EV, history, replays
from test_transform import TRANSFORM
from test_tui_pilot import run
from test_tui_recovery import app_for, notices, open_email

SRC = ReliableListKeys("email")
SIZE = (130, 40)


def stream_app(redis_url, tmp_path):
    return app_for(redis_url, tmp_path, ev=QueueConfig("ev", layout="stream-group", tag="ev"),
                   email=QueueConfig("email"))


def test_resume_from_the_queue_screen_lifts_the_hold(redis_url, redis_client, tmp_path) -> None:
    enqueue(redis_client, "email", 4)
    lay = ReliableList(redis_client, QueueConfig("email"))
    add_hold(lay, None, "incident 9", "ops@test")
    assert holds(lay)

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
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


def test_replay_from_the_queue_screen_twice_replays_once(redis_url, redis_client, tmp_path) -> None:
    ids = history(redis_client, 30, acked=24, pending=3)
    want = [i for i in ids[4:20] if int(i.split("-")[0]) % 2]   # tenant t1 (odd), acknowledged

    async def replay_once(pilot, screen, bad: bool = False) -> None:
        await pilot.press("Y")
        await settle(pilot)
        modal = pilot.app.screen
        assert isinstance(modal, ReplayModal)
        if bad:                                     # the CLI's parser: a one-line notice, the question stays
            await pilot.press(*"yesterday-ish", "enter", "enter")
            await settle(pilot)
            assert pilot.app.screen is modal and "--from: 'yesterday-ish' is no entry id" in notices(pilot.app)[-1]
            modal.query_one("#from").value = ""
            modal.query_one("#from").focus()
        await pilot.press(*ids[4], "enter", *ids[19], "enter")
        await settle(pilot)
        plan = pilot.app.screen
        assert isinstance(plan, PlanModal) and plan.plan.spec.replay_range == (ids[4], ids[19])
        assert plan.plan.planned == len(want) and plan.focused.id == "cancel"
        await pilot.press("tab", "enter")
        await settle(pilot)
        assert pilot.app.screen is screen

    async def go():
        app = stream_app(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.open_queue("ev")
            await settle(pilot)
            screen = app.screen
            from jobctl.filter import compile_filter

            screen.filter = compile_filter("tenant = t1")
            await replay_once(pilot, screen, bad=True)
            assert any(m.startswith(f"replay ev: planned {len(want)}, moved {len(want)}") for m in notices(app))
            await replay_once(pilot, screen)        # the same again: nothing replayed twice
            assert any(m.startswith(f"replay ev: planned {len(want)}, moved 0, skipped {len(want)}")
                       for m in notices(app)), notices(app)
            await pilot.press("escape")             # not stream-group: the core's refusal, nothing asked
            await settle(pilot)
            await open_email(pilot)
            await pilot.press("Y")
            await settle(pilot)
            assert not isinstance(app.screen, ReplayModal)
            assert notices(app)[-1] == ("replay is for the stream-group or celery layout; email is reliable-list (no "
                                        "acknowledged history to replay)")
        app.session.close()

    run(go())
    assert [r["replayOf"] for r in replays(redis_client)] == want   # replayed once
    assert redis_client.xlen(EV.stream) == 30 + len(want)
    entries = read_entries(redis_client, [EV.journal])
    assert [e["operation"] for e in entries] == ["replay", "replay"]
    assert entries[0]["command"].startswith(f"jobctl --url {redis_url} replay ev --from {ids[4]} --to {ids[19]} --filter")


def test_envelope_migration_and_rollback_from_the_queue_screen(redis_url, redis_client, tmp_path) -> None:
    ids = enqueue(redis_client, "email", 9)
    before = {i: redis_client.get(SRC.job(i)) for i in ids}
    tfile = tmp_path / "v3.toml"
    tfile.write_text(TRANSFORM)
    bad = tmp_path / "bad.toml"
    bad.write_text("[set")
    t2 = ["j0001", "j0004", "j0007"]
    op = {}

    async def go():
        app = app_for(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_email(pilot)
            from jobctl.filter import compile_filter

            screen.filter = compile_filter("tenant = t2")
            await pilot.press("T")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, TransformModal)
            await pilot.press(*str(bad), "enter")   # a bad file: a notice, the question stays
            await settle(pilot)
            assert app.screen is modal and notices(app)[-1].startswith(f"--transform {bad}")
            modal.query_one("#transform").value = str(tfile)
            await pilot.press("enter")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == 3, notices(app)
            diff = str(plan.query_one("#plan-samples", Static).render())
            assert plan.prepared.samples and '-  "jobVersion": 2,' in diff and '+  "jobVersion": 3,' in diff
            assert {i: redis_client.get(SRC.job(i)) for i in ids} == before   # planning changed nothing
            assert plan.typed_required                  # a transform rewrites data: the count typed
            await pilot.press("tab", "3", "enter")
            await settle(pilot)
            assert app.screen is screen
            done = next(m for m in notices(app) if m.startswith("transform email: planned 3, rewritten 3"))
            op["id"] = done.rsplit("[", 1)[1].rstrip("]")
            assert all(orjson.loads(redis_client.get(SRC.job(i)))["jobVersion"] == 3 for i in t2)
            await pilot.press("c", "T")             # roll it back by its operation id
            await settle(pilot)
            await pilot.press(*op["id"], "enter")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.planned == 3 and not plan.prepared.samples
            await pilot.press("tab", "3", "enter")
            await settle(pilot)
            assert any(m.startswith("transform email: planned 3, rewritten 3") and op["id"] not in m
                       for m in notices(app))
        app.session.close()

    run(go())
    assert {i: redis_client.get(SRC.job(i)) for i in ids} == before
    assert redis_client.hlen(SRC.envelopes_before) == 0
    entries = read_entries(redis_client, [SRC.journal])
    assert [e["operation"] for e in entries] == ["transform", "transform"]
    assert any(f"--rollback {op['id']}" in e["command"] for e in entries)


def test_reshard_from_the_queue_screen(redis_url, redis_client, tmp_path) -> None:
    from jobctl_fixtures.ids import shard_index

    from jobctl_tui.recovery_modals import ShardsModal
    from test_pause import partition

    ids = enqueue(redis_client, "rs", 24, shards=2)
    rs = QueueConfig("rs", shards=2, options={"shard_rule": "java-hashcode-floormod"})

    async def go():
        app = app_for(redis_url, tmp_path, rs=rs, email=QueueConfig("email"))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.open_queue("rs")
            await settle(pilot)
            screen = app.screen
            await pilot.press("H")
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, ShardsModal)
            await pilot.press("2", "enter")         # the count it has: the core's refusal, the question stays
            await settle(pilot)
            assert app.screen is modal and notices(app)[-1] == "rs already has 2 shard(s)"
            modal.query_one("#shards").value = "4"
            await pilot.press("enter")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal) and plan.plan.spec.destination.queue.shards == 4
            moving = plan.plan.planned
            assert 0 < moving <= len(ids)
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen is screen
            assert any(m.startswith(f"migrate rs: planned {moving}, moved {moving}") for m in notices(app))
            await pilot.press("escape")             # not sharded / no shard_rule: refused before asking
            await settle(pilot)
            await open_email(pilot)
            await pilot.press("H")
            await settle(pilot)
            assert not isinstance(app.screen, ShardsModal) and "shard" in notices(app)[-1]
        app.session.close()

    run(go())
    where = partition(redis_client, [f"rs:{i:02d}" for i in range(4)])
    assert set(where) == set(ids)
    for job_id, (key,) in where.items():
        assert key.startswith(f"queue:{{rs:{shard_index(job_id, 4):02d}}}:"), (job_id, key)
    journals = [k.decode() for k in redis_client.scan_iter("*journal*")]
    entry = read_entries(redis_client, journals)[0]
    assert entry["command"].startswith(f"jobctl --url {redis_url} reshard rs --shards 4 --state ready")


# -- snapshot ------------------------------------------------------------------------------

from helpers import open_and_press, snap  # noqa: E402,F401 - the fixture


def test_transform_plan_modal_with_sample_diff(snap, redis_url, redis_client, tmp_path, monkeypatch) -> None:  # noqa: F811
    import test_pause
    from test_tui_pilot import T0

    monkeypatch.setattr(test_pause, "wall_ms", lambda: T0)  # the same envelopes in every run
    enqueue(redis_client, "email", 6)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "v3.toml").write_text(TRANSFORM)
    app = app_for(redis_url, None)

    async def before(pilot):
        await open_and_press(pilot, "email", "T", (*"v3.toml", "enter"))
        assert isinstance(pilot.app.screen, PlanModal) and pilot.app.screen.prepared.samples
        pilot.app.screen.query_one("#typed").cursor_blink = False  # a transform: the count typed

    assert snap(app, before, size=(130, 44))
