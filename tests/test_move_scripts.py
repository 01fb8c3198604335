"""The per-job move scripts of zset sources and of the processing side
(``jobctl/lua/*_zset_move.lua``, ``*_suppressed_move.lua``, ``de_move``,
``dz_move``, ``*_requeue.lua``) on a real server: an error in the middle of
a call is undone job by job, bad arguments are refused before any write, and
a requeue's search of the processing list stays within its budget.

Errors are injected with an ACL user that may not run one command the
script needs after its first write (``redis.pcall`` inside a script is
subject to ACLs): the script must undo that job's earlier writes and answer
``error`` for it, and go on with the next job.
"""

from __future__ import annotations

import pytest
import redis

from jobctl.keys import ReliableListKeys
from jobctl.ops.engine import run_plan
from jobctl.scripts import script
from jobctl.layouts.moves import requeue_calls
from jobctl_fixtures.layouts import ADAPTERS
from robustness_support import census, state_snapshot
from test_conformance import Conformance
from test_operations import snapshot
from test_robustness import _prepare, _spec

USER, PASSWORD = "jobctl-e2-limited", "limited-pw"

#: (layout, op case, command denied): the denied command comes after the
#: job's first write, so the script has something to undo.
INJECTED = [
    ("reliable-list", "promote", "zrem"),
    ("reliable-list", "requeue", "lrem"),
    ("reliable-list", "unsuppress", "zrem"),
    ("hash-job", "requeue", "lrem"),
    ("hash-job", "unsuppress", "zrem"),
    ("json-list", "requeue", "lrem"),
    ("json-list", "unsuppress", "zrem"),
    ("stream-group", "requeue", "xack"),
    ("stream-group", "promote", "zrem"),
    ("delayed-events", "redrive", "hset"),
    ("delay-zset", "promote", "zadd"),
]


@pytest.fixture
def limited(redis_client):
    """A client of an ACL user that may run everything but the command it
    is given (``limited(command)``); the user is deleted afterwards."""
    made = []

    def make(command: str) -> redis.Redis:
        redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], channels=["*"],
                                 commands=["+@all", f"-{command}"], reset=True)
        kw = redis_client.connection_pool.connection_kwargs
        client = redis.Redis(host=kw.get("host", "localhost"), port=kw.get("port", 6379), db=kw.get("db", 0),
                             username=USER, password=PASSWORD)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
    redis_client.acl_deluser(USER)


@pytest.mark.parametrize("name,case,denied", [pytest.param(*c, id=f"{c[0]}-{c[1]}-no-{c[2]}") for c in INJECTED])
def test_error_mid_call_is_undone(redis_client, redis_url, tmp_path, capsys, limited, name, case, denied):
    conf = Conformance(ADAPTERS[name], redis_client, redis_url, tmp_path, capsys)
    _prepare(conf, case)
    layout = conf.layout()
    plan = layout.plan(_spec(case))
    assert plan.planned >= 2
    before = state_snapshot(redis_client, snapshot)
    jobs_before = census(redis_client, layout)

    restricted = type(layout)(limited(denied), layout.queue)
    res = run_plan(restricted, plan, batch=plan.planned)
    assert res.error is None
    assert (res.moved, res.failed) == (0, plan.planned), res.to_json()
    assert state_snapshot(redis_client, snapshot) == before, "every job's writes were undone"
    assert census(redis_client, layout) == jobs_before


def _rl_keys(redis_client) -> ReliableListKeys:
    return ReliableListKeys("e2")  # a queue of its own: the scripts are called directly


def test_bad_arguments_write_nothing(redis_client):
    k = _rl_keys(redis_client)
    redis_client.zadd(k.scheduled, {"a": 5})
    redis_client.set(k.job("a"), b"{}")
    before = snapshot(redis_client)
    zset_move = script(redis_client, "rl_zset_move")
    for args in (["lpushx", 1, "a", "5", "x"], ["lpush", 2, "a", "5", "x"], ["lpush", 1, "a", "soon", "x"]):
        with pytest.raises(redis.exceptions.ResponseError, match="^BADARG"):
            zset_move(keys=[k.scheduled, k.ready, k.suppressed_info, k.job("a")], args=args)
    requeue = script(redis_client, "rl_requeue")
    for args in ([0, 1, "a", "5"], [10, 1, "a", "later"], [10, 2, "a", "5"]):
        with pytest.raises(redis.exceptions.ResponseError, match="^BADARG"):
            requeue(keys=[k.processing, k.deadline, k.ready], args=args)
    assert snapshot(redis_client) == before


def test_wrong_type_key_is_refused_before_any_write(redis_client):
    k = _rl_keys(redis_client)
    redis_client.zadd(k.scheduled, {"a": 5, "b": 6})
    redis_client.set(k.job("a"), b"{}")
    redis_client.set(k.job("b"), b"{}")
    redis_client.hset(k.ready, "not", "a list")
    before = snapshot(redis_client)
    sha = __import__("hashlib").sha1(b"{}").hexdigest()
    with pytest.raises(redis.exceptions.ResponseError, match=f"^WRONGTYPE key {k.ready} holds a hash"):
        script(redis_client, "rl_zset_move")(keys=[k.scheduled, k.ready, k.suppressed_info, k.job("a"), k.job("b")],
                                             args=["lpush", 2, "a", "5", sha, "b", "6", sha])
    assert snapshot(redis_client) == before


def test_requeue_search_stays_within_its_budget(redis_client):
    """A processing list of 300 ids (the oldest claim at the tail); a call
    with a budget of 100 elements finds what lies within what is left of it,
    defers the rest (the first job of a call always has the whole budget:
    beyond it, a job is "unreached"), and the caller's loop passes the
    deferred jobs again first until every job moved exactly once."""
    k = _rl_keys(redis_client)
    ids = [f"p{n:03d}" for n in range(300)]
    redis_client.rpush(k.processing, *ids)  # p000 at the head, p299 at the tail
    redis_client.zadd(k.deadline, {i: 1000 + n for n, i in enumerate(ids)})
    requeue = script(redis_client, "rl_requeue")

    def args(budget, chunk):
        out = [budget, len(chunk)]
        for i in chunk:
            out += [i, str(1000 + int(i[1:]))]
        return out

    def codes(reply):
        return [(a.decode(), b.decode()) for a, b in zip(reply[0::2], reply[1::2])]

    keys = [k.processing, k.deadline, k.ready]
    reply = requeue(keys=keys, args=args(100, ["p290", "p280", "p250", "p010"]))
    # p290: 10 elements searched, p280: 19, p250: 48; 23 left, p010 is 287 away
    assert codes(reply) == [("p290", "moved"), ("p280", "moved"), ("p250", "moved"), ("p010", "deferred")]
    assert codes(requeue(keys=keys, args=args(100, ["p010"]))) == [("p010", "unreached")]

    results = list(requeue_calls(["p010", "p100", "p200"], 3, lambda i: i,
                                 lambda chunk: requeue(keys=keys, args=args(300, chunk))))
    assert [r.moved for r in results] == [["p010"], ["p100", "p200"]]  # the deferred two led the next call
    assert not any(r.skipped or r.failed for r in results)
    ready = [x.decode() for x in redis_client.lrange(k.ready, 0, -1)]
    processing = [x.decode() for x in redis_client.lrange(k.processing, 0, -1)]
    assert sorted(ready) == ["p010", "p100", "p200", "p250", "p280", "p290"]
    assert len(processing) == 294 and not set(processing) & set(ready)
    assert redis_client.zcard(k.deadline) == 294


def _dead_stream_queue(redis_client):
    """A stream-group queue whose dead letters are a stream (see
    ``test_layout_stream_group.dead_stream_queue``)."""
    from test_layout_stream_group import dead_stream_queue

    return dead_stream_queue(redis_client)


def test_dead_stream_wrong_type_target_and_injected_error(redis_client, limited):
    from jobctl.errors import DataError
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    keys, lay = _dead_stream_queue(redis_client)
    spec = OpSpec(Operation.SUPPRESS, "email", State.DEAD, State.SUPPRESSED, reason="x")
    plan = lay.plan(spec)
    assert plan.planned == 6
    redis_client.set(keys.suppressed, "not a zset")
    before = snapshot(redis_client)
    with pytest.raises(DataError, match="holds a string"):
        list(lay.apply(plan))
    assert snapshot(redis_client) == before
    redis_client.delete(keys.suppressed)

    before = snapshot(redis_client)
    restricted = type(lay)(limited("xdel"), lay.queue)  # ZADD and HSET done, XDEL refused: undone
    res = run_plan(restricted, lay.plan(spec), batch=10)
    assert (res.moved, res.failed) == (0, 6), res.to_json()
    assert state_snapshot(redis_client, snapshot) == before

    res = run_plan(lay, lay.plan(spec), batch=10)
    assert res.moved == 6 and redis_client.xlen(keys.dead_stream) == 0 and redis_client.zcard(keys.suppressed) == 6
