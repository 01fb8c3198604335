"""Replay of failed Celery tasks from their result records (layout
``celery``, opt-in ``replay_results = 1``), against Celery itself,
unmodified: its producer (``apply_async``), its worker (``celery worker -P
solo``, ``tests/celery_results_app.py``, ``result_extended = True``) and its
Redis result backend write every key; jobctl reads the failed records as the
queue's dead state and replays them through the CLI while the worker runs.
Every replayed task runs exactly once more (a per-task counter), a second
replay moves nothing, racing plans replay each task once, a pickled record
is never decoded, a dry run writes nothing, and the journal has the entry."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("celery")
import celery_results_app as capp  # noqa: E402
from celery_workers import until, worker_starter  # noqa: E402
from helpers import config_fixtures, queues_toml  # noqa: E402

BIG = 2 ** 63 - 1
NAMES = [f"t{i}" for i in range(6)]
#: Tasks with tag "a" (replayed by the filtered runs) and "b" (left failed).
TAGS = {n: "a" if i % 2 == 0 else "b" for i, n in enumerate(NAMES)}
cfg, run = config_fixtures(queues_toml(celery={"layout": "celery", "replay_results": 1},
                                       plain={"layout": "celery", "tag": "celery"}))


@pytest.fixture
def app(redis_url):
    """The Celery app of tests/celery_results_app.py on the fixture's server (broker and results)."""
    capp.app.conf.broker_url = redis_url
    capp.app.conf.result_backend = redis_url
    return capp.app


@pytest.fixture
def worker(redis_url):
    """``start()`` -> a running ``celery worker`` subprocess (Celery's own CLI); every one started is killed at the end."""
    yield from worker_starter("celery_results_app", {"CELTEST_BROKER": redis_url})


def _json(run, *args, codes=(0,)) -> dict:
    code, out, err = run(*args, "--json")
    assert code in codes, err
    return json.loads(out)


def _count(r, name: str) -> int:
    return int(r.get(f"celres:count:{name}") or 0)


def _states(r, ids: dict) -> dict:
    """Celery's own view: ``{name: status}`` of each original task's result record."""
    return {n: json.loads(r.get(f"celery-task-meta-{i}") or b"{}").get("status") for n, i in ids.items()}


def _dump(r) -> dict:
    """Every key's DUMP but kombu's pidbox deadlines, which the running worker refreshes."""
    return {k: r.dump(k) for k in r.keys("*") if k != b"_kombu.binding_deadlines"}


def _failed_tasks(app, worker, r) -> dict:
    """Six ``flaky`` tasks (a 64-bit integer argument) run once by the worker and failed; ``{name: task id}``."""
    r.set(capp.FAIL, 1)
    ids = {n: capp.flaky.apply_async((n, BIG), {"tag": TAGS[n]}).id for n in NAMES}
    worker()
    until(lambda: set(_states(r, ids).values()) == {"FAILURE"}, "every task to fail")
    r.delete(capp.FAIL)
    return ids


def test_failed_records_are_the_dead_state_and_replay_runs_each_once(run, app, worker, redis_client):
    r = redis_client
    ids = _failed_tasks(app, worker, r)
    st = _json(run, "status", "celery")["queues"][0]
    assert st["dead"] == 6 and any("Celery's failed result records" in w for w in st["warnings"]), st
    dead = _json(run, "ls", "celery", "--state", "dead", "--limit", "50")["jobs"]
    assert sorted(j["id"] for j in dead) == sorted(ids.values())
    doc = _json(run, "inspect", "celery", ids["t0"])
    assert doc["state"] == "dead" and doc["meta"]["source"].startswith("Celery result record")
    code, out, err = run("replay", "plain")  # the same Celery queue without the opt-in: one line, nothing read
    assert code == 2 and err.count("\n") == 1 and "replay_results = 1" in err, err

    by_error = ("--filter", "error = 'RuntimeError' and message ~ 'flag set*' and type = 'celres.flaky' and "
                            "dead_for < 1h and attempts = 0")
    assert _json(run, "replay", "celery", *by_error, "--dry-run")["plan"]["planned"] == 6
    filt = ("--filter", 'payload.kwargs.tag = "a"')
    before = _dump(r)
    plan = _json(run, "replay", "celery", *filt, "--dry-run")["plan"]
    assert plan["planned"] == 3
    assert _dump(r) == before  # a dry run writes nothing
    res = _json(run, "replay", "celery", *filt, "--yes")
    assert (res["planned"], res["moved"]) == (3, 3), res
    replayed = {n for n in NAMES if TAGS[n] == "a"}
    until(lambda: all(_count(r, n) == 2 for n in replayed), "the worker to run the replayed tasks")
    marks = {k.decode(): v.decode() for k, v in r.hgetall("jobctl:celery:celery:replayed").items()
             if not v.startswith(b"^")}  # original -> new id (new id -> ^original: the replay's own)
    assert set(marks) == {ids[n] for n in replayed}
    until(lambda: all(_states(r, {n: marks[ids[n]]})[n] == "SUCCESS" for n in replayed), "the new results")
    assert _states(r, ids) == {n: "FAILURE" for n in NAMES}  # the originals stay as they were: the fence
    assert all(r.get(f"celres:arg:{n}") == f"int:{BIG}".encode() for n in replayed)  # 64-bit integer exact

    again = _json(run, "replay", "celery", *filt, "--yes", codes=(0, 8))
    assert (again["planned"], again["moved"]) == (0, 0), again
    assert _json(run, "status", "celery")["queues"][0]["dead"] == 3  # the "b" tasks, never replayed
    assert r.llen("celery") == 0 and all(_count(r, n) == (2 if n in replayed else 1) for n in NAMES)
    entries = [json.loads(f[b"entry"]) for _, f in r.xrange("jobctl:celery:celery:journal")]
    assert [(e["operation"], e["queue"]) for e in entries] == [("replay", "celery")]  # an empty plan: no entry


def test_racing_replays_send_each_task_once_and_pickle_is_never_decoded(run, redis_url, app, worker, redis_client):
    """Two plans made before either applies (two operators at once): the
    second's calls skip every task as already replayed; a record Celery
    rewrote since the plans is skipped as changed.  A pickled record and
    one without result_extended data are counted, never replayed."""
    from celery import Celery
    from celery.app.task import Context

    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    r = redis_client
    ids = _failed_tasks(app, worker, r)
    req = dict(task="celres.flaky", args=["p", BIG], kwargs={}, delivery_info={"routing_key": "celery"},
               hostname="h", retries=0)
    pickled = Celery("p", backend=redis_url, result_serializer="pickle", result_accept_content=["pickle"],
                     result_extended=True)
    pickled.backend.mark_as_failure("pickled-1", RuntimeError("x"), request=Context(id="pickled-1", **req))
    plain = Celery("n", backend=redis_url)  # result_extended off: no name, arguments or queue
    plain.backend.mark_as_failure("plain-1", RuntimeError("x"), request=Context(id="plain-1", **req))
    stored = r.get("celery-task-meta-pickled-1")
    st = _json(run, "status", "celery")["queues"][0]
    assert st["dead"] == 6 and sum("without result_extended data" in w or "not JSON (pickle" in w
                                   for w in st["warnings"]) == 2, st["warnings"]

    lay = layout_for(r, QueueConfig(name="celery", layout="celery", options={"replay_results": 1}))
    spec = OpSpec(Operation.REPLAY, "celery", State.HISTORY, State.READY)
    first, second = lay.plan(spec), lay.plan(spec)
    assert first.planned == second.planned == 6 and first.malformed == []  # pickle: counted, not this queue's
    assert "not JSON (pickle" in first.describe() and "without result_extended data" in first.describe()
    app.backend.mark_as_done(ids["t5"], BIG)  # Celery rewrote t5's record since the plans: not replayed
    res = run_plan(lay, first, journal=False)
    assert res.moved == 5 and res.skipped_reasons == {"changed": 1}
    res = run_plan(lay, second, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {"replayed": 5, "changed": 1}
    again = NAMES[:5]
    until(lambda: all(_count(r, n) == 2 for n in again), "the worker to run every replayed task")
    assert r.hlen("jobctl:celery:celery:replayed") == 2 * 5 and _count(r, "t5") == 1  # both ways per task
    assert r.get("celery-task-meta-pickled-1") == stored and stored.startswith(b"\x80")  # never decoded
    assert lay.plan(spec).planned == 0  # t5 succeeded: no longer a failed record


def test_a_replay_that_fails_is_never_replayed_again(run, app, worker, redis_client):
    """T replayed as T', T' fails too (Celery writes its FAILURE record on the
    same queue): T' is no dead job, the next replay sends nothing (a runbook
    replaying while dead > 0 ends), and the script refuses it "is-replay"."""
    from jobctl.layouts.celery.replay import task_message
    from jobctl.layouts.moves import call_move

    r = redis_client
    ids = _failed_tasks(app, worker, r)
    r.set(capp.FAIL, 1)  # the replays fail as well
    assert _json(run, "replay", "celery", "--yes")["moved"] == 6
    marks = {k.decode(): v.decode() for k, v in r.hgetall("jobctl:celery:celery:replayed").items()}
    new = {n: marks[ids[n]] for n in NAMES}
    assert {marks[t] for t in new.values()} == {"^" + t for t in ids.values()}  # each new id names its original
    until(lambda: set(_states(r, new).values()) == {"FAILURE"}, "every replay to fail")
    st = _json(run, "status", "celery")["queues"][0]
    assert st["dead"] == 0 and any("sent by jobctl replay themselves" in w for w in st["warnings"]), st
    again = _json(run, "replay", "celery", "--yes", codes=(0, 8))
    assert (again["planned"], again["moved"]) == (0, 0), again
    doc = _json(run, "inspect", "celery", new["t0"])
    assert doc["meta"]["replay_of"] == ids["t0"] and doc["meta"]["replayed_as"] is None

    raw = r.get(f"celery-task-meta-{new['t0']}")  # a plan that named the replay anyway: the script refuses it
    msg = task_message(json.loads(raw), "x-1", "celery", new["t0"])
    reply = call_move(r, "cel_replay", ["jobctl:celery:celery:replayed", "celery", f"celery-task-meta-{new['t0']}"],
                      [1, new["t0"], hashlib.sha1(raw).hexdigest(), "x-1", msg])
    assert [x.decode() if isinstance(x, bytes) else x for x in reply] == [new["t0"], "is-replay"]
    assert r.llen("celery") == 0 and all(_count(r, n) == 2 for n in NAMES)
