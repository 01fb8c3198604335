"""The ``celery`` layout against Celery 5.x and kombu's Redis transport
themselves, unmodified (a test extra): Celery's own producer
(``apply_async``) and worker (``celery worker -P solo``, a subprocess on
the fixture's server, ``tests/celery_app.py``) make the keys; jobctl reads
them through the CLI, requeues the unacked message a killed worker left
past its visibility timeout, and a fresh worker runs it exactly once;
kombu's own view agrees on the counts."""

from __future__ import annotations

import json
import signal

import pytest

pytest.importorskip("celery")
import celery_app  # noqa: E402
from celery_workers import until, worker_starter  # noqa: E402
from helpers import config_fixtures, queues_toml  # noqa: E402

BIG = 2 ** 63 - 1
#: The worker's visibility timeout (s) and the catalogue's (ms): the same.
VT_S = 1
cfg, run = config_fixtures(queues_toml(celery={"layout": "celery", "visibility_timeout_ms": VT_S * 1000}))


@pytest.fixture
def app(redis_url):
    """The Celery app of tests/celery_app.py on the fixture's server (visibility timeout :data:`VT_S`)."""
    celery_app.app.conf.broker_url = redis_url
    celery_app.app.conf.broker_transport_options = {"visibility_timeout": VT_S}
    return celery_app.app


@pytest.fixture
def worker(redis_url):
    """``start()`` -> a running ``celery worker`` subprocess (Celery's own CLI); every one started is killed at the end."""
    yield from worker_starter("celery_app", {"CELTEST_BROKER": redis_url, "CELTEST_VISIBILITY_S": str(VT_S)})


def _json(run, *args) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _status(run) -> dict:
    return _json(run, "status", "celery")["queues"][0]


def _kombu_ready(app) -> int:
    """kombu's own count of the queue (its channel's ``_size``, over the priority lists)."""
    with app.connection_for_write() as conn:
        return conn.default_channel._size("celery")


def _count(redis_client, name: str) -> int:
    return int(redis_client.get(f"celtest:count:{name}") or 0)


def test_status_ls_inspect_then_the_worker_consumes(run, app, worker, redis_client):
    names = [f"n{i}" for i in range(5)]
    ids = {n: celery_app.count.apply_async((n, BIG)).id for n in names}
    ids["hi"] = celery_app.count.apply_async(("hi", BIG), priority=6).id
    st = _status(run)
    assert (st["layout"], st["ready"], st["processing"], st["dead"]) == ("celery", 6, 0, 0)
    assert st["ready_by_priority"] == {"0": 5, "6": 1} and st["ready"] == _kombu_ready(app)
    assert any(w.startswith("dead n/a") for w in st["warnings"])
    ready = _json(run, "ls", "celery", "--state", "ready", "--limit", "10")["jobs"]
    assert [j["id"] for j in ready] == [ids[n] for n in names + ["hi"]]  # served order: priority 0 first, FIFO
    doc = _json(run, "inspect", "celery", ids["n0"])
    assert doc["state"] == "ready" and doc["envelope"]["body"][0] == ["n0", BIG]
    assert doc["envelope"]["headers"]["task"] == "celtest.count"
    worker()
    until(lambda: all(_count(redis_client, n) for n in ids), "the worker to run every task")
    until(lambda: _status(run)["processing"] == 0, "the last ack")
    st = _status(run)
    assert (st["ready"], st["processing"]) == (0, 0) == (_kombu_ready(app), 0)
    assert all(_count(redis_client, n) == 1 for n in ids)
    assert redis_client.get("celtest:arg:n0") == f"int:{BIG}".encode()


def _server_s(redis_client) -> float:
    sec, usec = redis_client.time()
    return sec + usec / 1e6


def _killed_mid_task(worker, redis_client, name: str) -> str:
    """A ``hang`` task (acks_late) whose worker was killed with SIGKILL while it ran; its id."""
    redis_client.set(celery_app.HANG, 1)
    task_id = celery_app.hang.apply_async((name, BIG)).id
    proc = worker()
    until(lambda: _count(redis_client, name) == 1, "the worker to start the task")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    redis_client.delete(celery_app.HANG)
    return task_id


def _overdue(redis_client) -> float:
    """Wait (bounded poll of the server's clock) until every unacked entry is past the visibility timeout."""
    newest = redis_client.zrange("unacked_index", -1, -1, withscores=True)[0][1]
    until(lambda: _server_s(redis_client) > newest + VT_S, "the visibility timeout to pass", 30)
    return newest


def test_killed_worker_leaves_unacked_that_jobctl_requeues_and_a_fresh_worker_runs_once(run, app, worker,
                                                                                        redis_client):
    task_id = _killed_mid_task(worker, redis_client, "h")
    st = _status(run)
    assert (st["ready"], st["processing"]) == (0, 1)
    doc = _json(run, "inspect", "celery", task_id)
    tag, score = redis_client.zrange("unacked_index", 0, 0, withscores=True)[0]
    assert doc["state"] == "processing" and doc["meta"]["delivery_tag"] == tag.decode()
    assert doc["deadline_ms"] == doc["meta"]["delivered_at_ms"] + VT_S * 1000
    assert abs(doc["meta"]["delivered_at_ms"] - score * 1000) < 1  # kombu's own delivery time
    _overdue(redis_client)
    st = _status(run)
    assert (st["processing"], st["stuck"]) == (1, 1)
    assert any("past the visibility timeout" in w for w in st["warnings"])
    code, out, err = run("requeue", "celery", "--stuck", "--dry-run")
    assert code == 0 and redis_client.hlen("unacked") == 1, err  # a dry run writes nothing
    stored = redis_client.hget("unacked", tag)
    res = _json(run, "requeue", "celery", "--stuck", "--yes")
    assert (res["planned"], res["moved"]) == (1, 1)
    assert redis_client.hlen("unacked") == 0 and redis_client.zcard("unacked_index") == 0
    [pushed] = redis_client.lrange("celery", 0, -1)
    assert pushed in stored and json.loads(stored)[0] == json.loads(pushed)  # the stored bytes, unchanged
    assert _kombu_ready(app) == 1
    worker()
    until(lambda: _count(redis_client, "h") == 2, "the fresh worker to run the requeued task")
    until(lambda: redis_client.hlen("unacked") == 0, "the fresh worker's ack")
    st = _status(run)
    assert (st["ready"], st["processing"], st["stuck"]) == (0, 0, 0)
    assert _count(redis_client, "h") == 2  # the killed run and one more: never twice after the requeue
    assert redis_client.get("celtest:arg:h") == f"int:{BIG}".encode()


def test_kombu_restoring_first_wins_the_race_and_the_message_is_queued_once(app, worker, redis_client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    _killed_mid_task(worker, redis_client, "r")
    _overdue(redis_client)
    lay = layout_for(redis_client, QueueConfig(name="celery", layout="celery", visibility_timeout_ms=VT_S * 1000))
    plan = lay.plan(OpSpec(Operation.REQUEUE, "celery", State.PROCESSING, State.READY, stuck_only=True))
    assert plan.planned == 1
    with app.connection_for_write() as conn:  # kombu's own recovery, between jobctl's plan and apply
        conn.default_channel.qos.restore_visible(num=100, interval=1)
    assert redis_client.llen("celery") == 1 and redis_client.hlen("unacked") == 0
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {"gone": 1}
    assert redis_client.llen("celery") == 1


def test_a_message_not_yet_overdue_is_never_requeued(run, worker, redis_client):
    task_id = _killed_mid_task(worker, redis_client, "n")
    redis_client.zadd("unacked_index", {redis_client.zrange("unacked_index", 0, 0)[0]: _server_s(redis_client) + 3600})
    res = _json(run, "requeue", "celery", "--ids", task_id, "--yes")
    assert res["planned"] == 0 and redis_client.hlen("unacked") == 1 and redis_client.llen("celery") == 0


def test_purge_of_dead_says_there_is_no_dead_store_and_discover_finds_the_queue(run, app, redis_client):
    celery_app.count.apply_async(("d", 1))
    code, _, err = run("purge", "celery", "--state", "dead", "--yes", "--no-export")
    assert code == 2 and "no dead-letter store" in err
    st = _status(run)  # dead is Celery's failed result records, read only on opt-in (not here): said
    assert st["dead"] == 0 and any(w.startswith("dead n/a") for w in st["warnings"])
    assert any("opt-in (replay_results = 1" in w for w in st["warnings"]), st["warnings"]
    code, out, err = run("status", "celery")
    assert code == 0 and "n/a" in out.split("\n")[-3], out  # the queue's row: no dead store, not 0 dead
    found = _json(run, "discover")
    assert any(q["queue"] == "celery" and q["layout"] == "celery" for q in found["queues"]), found


def test_the_dashboard_and_check_read_a_celery_queue(cfg, redis_url, run, app, worker, redis_client):
    """What the TUI shows comes from the same reads (status, detail, the
    processing page); ``check`` finds what a half-written unacked entry leaves."""
    from jobctl.dashboard.facade import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    task_id = _killed_mid_task(worker, redis_client, "d")
    celery_app.count.apply_async(("w", 1))
    s = Session(config_file=cfg, url=redis_url)
    try:
        dash = Dashboard(s)
        row = dash.refresh().row("celery").status
        assert (row.ready, row.processing, row.dead) == (1, 1, 0)
        detail = dash.queue_detail("celery")  # no dead state without the opt-in: no triage tab
        assert State.DEAD not in detail.states and State.DEAD not in s.layout("celery").states
        assert [r.job_id for r in dash.jobs("celery", State.PROCESSING).records] == [task_id]
    finally:
        s.close()
    code, out, err = run("check", "celery", "--json")
    assert code == 0 and json.loads(out)["queues"][0]["ok"], out
    redis_client.zadd("unacked_index", {"lost-tag": 5})  # an index entry whose value is gone
    code, out, err = run("check", "celery", "--json")
    found = {(p["kind"], p["id"]) for p in json.loads(out)["queues"][0]["problems"]}
    assert code != 0 and found == {("dangling", "lost-tag")}


def test_purge_removes_exactly_the_planned_messages_and_the_worker_runs_the_rest(run, app, worker, redis_client,
                                                                                 tmp_path):
    names = [f"{kind}-{n}" for kind in ("even", "odd") for n in range(3)]
    for name in names:
        celery_app.count.apply_async((name, BIG), priority=6 if name.endswith("-2") else 0)
    flt = 'payload.args[0] ~ "even-*"'
    code, out, err = run("purge", "celery", "--state", "ready", "--filter", flt, "--dry-run")
    assert code == 0 and _kombu_ready(app) == 6, err
    res = _json(run, "purge", "celery", "--state", "ready", "--filter", flt, "--export-to", str(tmp_path / "x"),
                "--yes")
    assert (res["planned"], res["moved"]) == (3, 3)
    st = _status(run)
    assert st["ready"] == _kombu_ready(app) == 3 and st["ready_by_priority"] == {"0": 2, "6": 1}
    worker()
    until(lambda: all(_count(redis_client, n) for n in names if n.startswith("odd-")), "the odd tasks")
    until(lambda: _status(run)["processing"] == 0, "the last ack")
    assert {n: _count(redis_client, n) for n in names} == {n: int(n.startswith("odd-")) for n in names}


def test_an_eta_beyond_the_visibility_timeout_is_flagged(run, app, worker, redis_client):
    task_id = celery_app.count.apply_async(("later", 1), countdown=3600).id
    worker()  # takes the message at once and holds it until its ETA: in unacked meanwhile

    def flagged():
        st = _status(run)
        return st["processing"] == 1 and [w for w in st["warnings"] if "beyond the visibility timeout" in w]
    assert until(flagged, "the worker to hold the ETA task")
    [rec] = _json(run, "ls", "celery", "--state", "processing")["jobs"]
    assert rec["id"] == task_id and rec["meta"]["eta_beyond_visibility"] is True


def test_a_purge_walked_in_windows_meets_every_planned_message_while_workers_pop(app, redis_client):
    """Windows from the deepest planned message toward the tail; messages
    popped between two calls (a worker's BRPOP) are reported gone, the
    others planned are removed, the rest keep their order."""
    from jobctl.config import QueueConfig
    from jobctl.filter import compile_filter
    from jobctl.layouts import layout_for
    from jobctl.layouts.celery.purge import apply_purge
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    with app.producer_or_acquire() as producer:
        for n in range(300):
            celery_app.count.apply_async((f"{'even' if n % 2 == 0 else 'odd'}-{n}", n), producer=producer)
    lay = layout_for(redis_client, QueueConfig(name="celery", layout="celery"))
    spec = OpSpec(Operation.PURGE, "celery", State.READY, None, filter=compile_filter('payload.args[0] ~ "even-*"'))
    plan = lay.plan(spec)
    assert plan.planned == 150
    calls, popped = apply_purge(lay, plan, batch=100, window=40), []
    results = [next(calls)]
    popped += redis_client.rpop("celery", 3)  # a worker takes the three oldest: one or two of them planned
    results += list(calls)
    gone = [j for r in results for j in r.skipped]
    moved = [j for r in results for j in r.moved]
    def names(raws: list[bytes]) -> list[str]:
        return [json.loads(r)["headers"]["argsrepr"] for r in raws]

    left = names(redis_client.lrange("celery", 0, -1))
    assert len(moved) + len(gone) == 150 and len(gone) == sum("'even-" in n for n in names(popped))
    assert not any("'even-" in n for n in left)
    assert left == [f"('odd-{n}', {n})" for n in range(299, 2, -2)]  # newest first, order kept


def test_a_pickled_body_is_shown_opaque_never_unpickled(run, app, redis_client):
    task_id = celery_app.count.apply_async(("p", BIG), serializer="pickle").id
    doc = _json(run, "inspect", "celery", task_id)
    assert doc["envelope"]["content-type"] == "application/x-python-serialize"
    assert doc["envelope"]["body"].endswith("bytes, application/x-python-serialize: not decoded>")
    [rec] = _json(run, "ls", "celery", "--state", "ready")["jobs"]
    assert rec["id"] == task_id and rec["meta"]["content_type"] == "application/x-python-serialize"
