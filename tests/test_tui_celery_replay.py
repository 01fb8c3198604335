"""Replay of a Celery queue's failed tasks from the TUI (``Y`` on the queue
screen): the layout's replay takes no stream range, so nothing is asked
but what the CLI asks (the ``/`` filter, then the plan to confirm); the
result records are written by Celery's own Redis result backend
(``result_extended = True``), no worker needed.  Without the opt-in
(``replay_results``) the TUI refuses with the CLI's one line and writes
nothing.  Pilot tests on a real server asserting on what Redis holds."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("celery")
from celery import Celery  # noqa: E402
from celery.app.task import Context  # noqa: E402

from jobctl.config import QueueConfig  # noqa: E402
from jobctl.filter import compile_filter  # noqa: E402
from jobctl.ops.journal import read_entries  # noqa: E402
from jobctl_tui.plan_modal import PlanModal  # noqa: E402
from jobctl_tui.recovery_modals import ReplayModal  # noqa: E402
from jobctl_tui.testing import settle  # noqa: E402
from helpers import config_fixtures, queues_toml  # noqa: E402
from test_operations import snapshot  # noqa: E402
from test_tui_pilot import run as run_async  # noqa: E402
from test_tui_recovery import app_for, notices  # noqa: E402

SIZE = (130, 40)
BIG = 2 ** 63 - 1
#: Task name -> the ``tag`` keyword its failed run had ("a": replayed by the filtered run).
TAGS = {"t0": "a", "t1": "b", "t2": "a", "t3": "b"}
FILTER = 'payload.kwargs.tag = "a"'
cfg, run = config_fixtures(queues_toml(celery={"layout": "celery", "replay_results": 1},
                                       plain={"layout": "celery", "tag": "celery"}))


def failed_records(redis_url: str, tags: dict[str, str] = TAGS) -> dict[str, str]:
    """One FAILURE record per task of ``tags`` (name -> tag keyword), written by Celery's Redis
    result backend as a worker's failure writes it (``result_extended``:
    name, args, kwargs, queue); ``{name: task id}``."""
    app = Celery("celtui", backend=redis_url, result_extended=True)
    ids = {}
    for n, tag in tags.items():
        ids[n] = f"task-{n}"
        req = Context(id=ids[n], task="celres.flaky", args=[n, BIG], kwargs={"tag": tag}, retries=0,
                      delivery_info={"routing_key": "celery"}, hostname="worker@test")
        app.backend.mark_as_failure(ids[n], RuntimeError(f"flag set for {n}"), request=req)
    return ids


def celery_app(redis_url, tmp_path):
    return app_for(redis_url, tmp_path, celery=QueueConfig("celery", layout="celery", options={"replay_results": 1}),
                   plain=QueueConfig("plain", layout="celery", tag="celery"))


async def _open(pilot, queue: str):
    await settle(pilot)
    pilot.app.open_queue(queue)
    await settle(pilot)
    return pilot.app.screen


def test_celery_replay_from_the_queue_screen_asks_no_range(redis_url, redis_client, tmp_path) -> None:
    r = redis_client
    ids = failed_records(redis_url)
    want = sorted(ids[n] for n, tag in TAGS.items() if tag == "a")
    seen = {}

    async def go():
        app = celery_app(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open(pilot, "celery")
            screen.filter = compile_filter(FILTER)      # what `/` sets: the CLI's --filter
            await pilot.press("Y")
            await settle(pilot)
            plan = app.screen
            assert isinstance(plan, PlanModal), notices(app)   # no range asked: straight to the plan
            assert plan.plan.spec.replay_range is None and sorted(j.job_id for j in plan.plan.jobs) == want
            assert plan.focused.id == "cancel" and not plan.typed_required
            seen["body"] = str(plan.query_one("#plan-body").render())
            await pilot.press("tab", "enter")
            await settle(pilot)
            assert app.screen is screen
            seen["notices"] = notices(app)
        app.session.close()

    run_async(go())
    body = seen["body"]
    assert f"scope: failed tasks of Celery's result records matching {FILTER}" in body
    assert "replay celery: move 2 job(s) from history to ready; each failed task of Celery's result records sent " \
           "to the queue again as a new task" in body
    assert "matched 2" in body and f"filter: {FILTER}" in body
    assert any(m.startswith("replay celery: planned 2, moved 2") for m in seen["notices"]), seen["notices"]
    assert r.llen("celery") == 2                        # two new protocol-2 messages for the workers
    sent = [json.loads(m)["headers"] for m in r.lrange("celery", 0, -1)]
    assert sorted(h["jobctl_replay_of"] for h in sent) == want and {h["task"] for h in sent} == {"celres.flaky"}
    marks = {k.decode(): v.decode() for k, v in r.hgetall("jobctl:celery:celery:replayed").items()}
    assert sorted(k for k, v in marks.items() if not v.startswith("^")) == want  # and each new id -> ^original
    entries = read_entries(r, ["jobctl:celery:celery:journal"])
    assert [(e["operation"], e["queue"]) for e in entries] == [("replay", "celery")]
    assert entries[0]["command"].startswith(f"jobctl --url {redis_url} replay celery --filter")


def test_celery_replay_without_the_opt_in_is_refused_like_the_cli(run, redis_url, redis_client,  # noqa: F811
                                                                   tmp_path) -> None:
    failed_records(redis_url)
    code, _, err = run("replay", "plain")
    assert code == 2 and err.count("\n") == 1, err
    before = snapshot(redis_client)
    seen = {}

    async def go():
        app = celery_app(redis_url, tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _open(pilot, "plain")
            await pilot.press("Y")
            await settle(pilot)
            assert app.screen is screen and not isinstance(app.screen, (ReplayModal, PlanModal))
            seen["notices"] = notices(app)
        app.session.close()

    run_async(go())
    refusal = seen["notices"][-1]
    assert "replay_results = 1" in refusal and err.rstrip("\n").endswith(refusal), (err, refusal)
    assert snapshot(redis_client) == before             # nothing written


# -- snapshot ------------------------------------------------------------------------------

from helpers import snap  # noqa: E402,F401 - the fixture


def test_celery_replay_plan_modal(snap, redis_url, redis_client) -> None:  # noqa: F811
    failed_records(redis_url, {"t0": "a", "t1": "b"})  # one planned: SCAN's order does not show
    app = celery_app(redis_url, None)

    async def before(pilot):
        screen = await _open(pilot, "celery")
        screen.filter = compile_filter(FILTER)
        await pilot.press("Y")
        await settle(pilot)
        assert isinstance(pilot.app.screen, PlanModal)

    assert snap(app, before, size=(130, 36))
