"""The unfiltered redrive of the ``bullmq`` layout on failed jobs written as
BullMQ 6.7 writes them (no node needed; tests/test_layout_bullmq.py runs
BullMQ itself): the fence read at plan time, several bounded calls a round
trip, a flushed script cache, a key of the wrong type."""

from __future__ import annotations

import pytest

N = 23


def _failed(client, n: int = N) -> None:
    """``n`` failed jobs 1..n of queue ``work`` (every 5th prioritized, every 7th lifo)."""
    client.hset("bull:work:meta", mapping={"version": "bullmq:6.7.0", "opts.maxLenEvents": "10000"})
    for i in range(1, n + 1):
        opts = '{"attempts":1,"lifo":true}' if i % 7 == 0 else '{"attempts":1}'
        client.hset(f"bull:work:{i}", mapping={
            "name": "send", "data": '{"id64":9223372036854775807}', "opts": opts, "timestamp": "1700000000000",
            "priority": "2" if i % 5 == 0 else "0", "atm": "1", "finishedOn": str(1700000001000 + i),
            "failedReason": "boom", "stacktrace": "[]", "processedOn": "1700000000500"})
        client.zadd("bull:work:failed", {str(i): 1700000001000 + i})


def _layout(client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(client, QueueConfig(name="work", layout="bullmq"))


def _plan(lay):
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    return lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))


@pytest.fixture
def small_calls(monkeypatch):
    """5 jobs a call, 2 calls a round trip: a redrive of :data:`N` jobs takes 5 calls in 3 round trips."""
    from jobctl.layouts.bullmq import calls, ops

    monkeypatch.setattr(ops, "FENCED_BATCH", 5)
    monkeypatch.setattr(calls, "DEPTH", 2)


def test_unfiltered_redrive_in_pipelined_calls_keeps_order_priority_and_lifo(redis_client, small_calls):
    from jobctl.ops.engine import run_plan

    _failed(redis_client)
    redis_client.zadd("bull:work:failed", {"99": 1})  # no hash: dangling, never planned
    lay = _layout(redis_client)
    plan = _plan(lay)
    assert plan.planned == N and plan.dangling == ["99"]
    redis_client.hset("bull:work:3", "failedReason", "failed again")  # after the plan: fenced out
    redis_client.script_flush()  # the move loads its script again (or is refused, then sent again)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == N - 1 and res.skipped_reasons == {"changed": 1}
    plain = [i for i in range(1, N + 1) if i % 5 and i % 7 and i != 3]
    lifo = [i for i in range(1, N + 1) if i % 7 == 0 and i % 5]
    # workers take from the right: plain jobs in plan order, lifo ones first
    assert [int(x) for x in redis_client.lrange("bull:work:wait", 0, -1)] == list(reversed(plain)) + lifo
    prio = redis_client.zrange("bull:work:prioritized", 0, -1, withscores=True)
    assert [int(m) for m, _ in prio] == [5, 10, 15, 20] and [int(s) >> 32 for _, s in prio] == [2] * 4
    assert [int(s) & 0xFFFFFFFF for _, s in prio] == [1, 2, 3, 4] and redis_client.get("bull:work:pc") == b"4"
    assert redis_client.zrange("bull:work:failed", 0, -1) == [b"99", b"3"]
    fields = redis_client.hgetall("bull:work:1")
    assert fields[b"atm"] == b"1" and fields[b"data"] == b'{"id64":9223372036854775807}'
    assert not {b"finishedOn", b"failedReason", b"stacktrace", b"processedOn"} & set(fields)
    assert redis_client.xlen("bull:work:events") == N - 1 and redis_client.zscore("bull:work:marker", "0") == 0


def test_a_queue_key_of_the_wrong_type_stops_the_redrive_with_nothing_moved(redis_client, small_calls):
    from jobctl.errors import DataError
    from jobctl.ops.engine import run_plan

    _failed(redis_client)
    lay = _layout(redis_client)
    plan = _plan(lay)
    redis_client.set("bull:work:wait", "not a list")
    with pytest.raises(DataError, match="bull:work:wait"):
        run_plan(lay, plan, journal=False)
    assert redis_client.zcard("bull:work:failed") == N and redis_client.zcard("bull:work:prioritized") == 0


@pytest.fixture
def small_windows(monkeypatch, small_calls):
    """4 ranks a plan window as well: a plan of :data:`N` jobs takes 6 fence calls."""
    from jobctl.layouts.bullmq import lean

    monkeypatch.setattr(lean, "READ_BATCH", 4)


def _with_child_and_dangling(client) -> None:
    """:func:`_failed`, then job 9 a flow child of ``p`` and job 13's hash gone (dangling)."""
    _failed(client)
    client.hset("bull:work:9", "parentKey", "bull:work:p")
    client.hset("bull:work:p", "name", "parent")
    client.zadd("bull:work:p:unsuccessful", {"bull:work:9": 1})
    client.delete("bull:work:13")


def test_plan_windows_keep_order_with_a_flow_child_and_a_dangling_job(redis_client, small_windows):
    from jobctl.layouts.bullmq.ops import BullFencedJob, BullPlannedJob
    from jobctl.ops.engine import run_plan

    _with_child_and_dangling(redis_client)
    lay = _layout(redis_client)
    plan = _plan(lay)
    kept = [str(i) for i in range(1, N + 1) if i != 13]
    assert [j.job_id for j in plan.jobs] == kept and plan.dangling == ["13"] and plan.scanned == N
    assert isinstance(plan.jobs[8], BullPlannedJob) and plan.jobs[8].fields[3] == "bull:work:p"
    assert all(isinstance(j, BullFencedJob) for n, j in enumerate(plan.jobs) if n != 8)
    assert plan.jobs[-1].sha1 == str(1700000001000 + N)  # the failed score as stored
    res = run_plan(lay, plan, journal=False)
    assert res.moved == N - 1 and not res.skipped_reasons
    assert redis_client.zrange("bull:work:failed", 0, -1) == [b"13"]
    assert redis_client.sismember("bull:work:p:dependencies", "bull:work:9")
    plain = [i for i in range(1, N + 1) if i % 5 and i % 7 and i != 13]
    lifo = [i for i in range(1, N + 1) if i % 7 == 0 and i % 5]
    assert [int(x) for x in redis_client.lrange("bull:work:wait", 0, -1)] == list(reversed(plain)) + lifo


def test_a_limit_cuts_the_plan_inside_a_window(redis_client, small_windows):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    _with_child_and_dangling(redis_client)
    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY, limit=10))
    assert [j.job_id for j in plan.jobs] == [str(i) for i in range(1, 11)] and plan.truncated
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 10 and redis_client.zcard("bull:work:failed") == N - 10


def test_calls_refused_after_a_script_flush_are_sent_again(redis_client, small_windows):
    """The scripts flushed between two redrives on one client: the plan's and
    the move's calls are refused NOSCRIPT, then sent again once loaded."""
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    _failed(redis_client)
    lay = _layout(redis_client)
    first = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY, limit=5))
    assert run_plan(lay, first, journal=False).moved == 5
    redis_client.script_flush()
    plan = _plan(lay)
    assert plan.planned == N - 5
    redis_client.script_flush()
    assert run_plan(lay, plan, journal=False).moved == N - 5 and redis_client.zcard("bull:work:failed") == 0
