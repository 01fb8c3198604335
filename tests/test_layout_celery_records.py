"""Celery's failed result records read as a queue's dead state (layout
``celery``, ``replay_results = 1``), written by Celery's own Redis result
backend (``mark_as_failure`` with ``result_extended = True``), no worker:
record fields of the wrong types are malformed at plan time; the dead
count and walks are bounded and sampled; a key SCAN returns twice counts
once; an ACL that refuses the records' GET is the usual access error."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("celery")
from helpers import config_fixtures, queues_toml  # noqa: E402

cfg, run = config_fixtures(queues_toml(celery={"layout": "celery", "replay_results": 1}))
USER, PASSWORD = "jobctl-no-results", "no-results"


@pytest.fixture
def backend(redis_url):
    """``fail(task_id, **request)``: Celery's result backend writes a FAILURE record of queue ``celery``."""
    from celery import Celery
    from celery.app.task import Context

    app = Celery("rec", backend=redis_url, result_extended=True)

    def fail(task_id: str, **request) -> None:
        req = dict(task="celres.flaky", args=["p", 1], kwargs={}, delivery_info={"routing_key": "celery"},
                   hostname="h", retries=0)
        app.backend.mark_as_failure(task_id, RuntimeError("x"), request=Context(id=task_id, **{**req, **request}))
    return fail


@pytest.fixture
def layout(redis_client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(redis_client, QueueConfig(name="celery", layout="celery", options={"replay_results": 1}))


def _spec():
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    return OpSpec(Operation.REPLAY, "celery", State.HISTORY, State.READY)


def test_fields_of_the_wrong_types_are_malformed_at_plan_time(backend, layout, redis_client):
    from jobctl.ops.engine import run_plan

    backend("good", args=["y" * 5000, 2 ** 63 - 1], kwargs={"k": "v" * 5000})
    backend("bad-args", args="oops")
    backend("bad-kwargs", kwargs=[1])
    backend("bad-name", task=5)
    plan = layout.plan(_spec())
    assert plan.planned == 1 and sorted(plan.malformed) == ["bad-args", "bad-kwargs", "bad-name"]
    assert "wrong type" in plan.describe()
    res = run_plan(layout, plan, journal=False)
    assert res.moved == 1 and redis_client.llen("celery") == 1
    headers = json.loads(redis_client.lindex("celery", 0))["headers"]
    assert headers["task"] == "celres.flaky" and headers["jobctl_replay_of"] == "good"
    assert len(headers["argsrepr"]) <= 1024 and len(headers["kwargsrepr"]) <= 1024


def test_dead_depth_and_walk_are_bounded_and_sampled(backend, layout, monkeypatch):
    from jobctl.layouts.celery import layout as celery_layout, results
    from jobctl.model import State

    for i in range(40):
        backend(f"t{i}")
    assert layout.depth(State.DEAD) == 40
    monkeypatch.setattr(results, "SCAN_COUNT", 2)  # a keyspace of many SCAN steps, a cap of two of them
    monkeypatch.setattr(celery_layout, "RESULT_SCAN_CAP", 4)
    assert layout.depth(State.DEAD) < 40 and sum(map(len, layout.iter_batches(State.DEAD))) < 40
    assert len(list(layout.iter_batches(State.DEAD, sample=(1, 100)))) <= 1


def test_a_key_scan_returns_twice_counts_once(backend, layout, monkeypatch):
    from jobctl.layouts.celery import results
    from jobctl.model import State

    for i in range(5):
        backend(f"t{i}")
    real = results.scan_pages

    def twice(client, match, count):  # SCAN may return a key again (a rehash between steps): every page twice
        for page in real(client, match, count):
            yield page
            yield page
    monkeypatch.setattr(results, "scan_pages", twice)
    assert layout.depth(State.DEAD) == 5 and layout.plan(_spec()).planned == 5


def test_a_refused_record_read_is_the_access_error(backend, redis_client, redis_url, cfg, capsys):
    from helpers import cli_runner

    backend("t0")
    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["celery", "celery\x06\x16*", "unacked*", "_kombu*", "jobctl:*"], channels=["*"])
    try:
        run = cli_runner(capsys, redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1), cfg)
        for argv in (("replay", "celery", "--dry-run"), ("ls", "celery", "--state", "dead")):
            code, out, err = run(*argv)
            assert code == 4 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, out, err)
    finally:
        redis_client.acl_deluser(USER)
