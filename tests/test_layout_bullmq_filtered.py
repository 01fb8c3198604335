"""The filtered redrive plan of the ``bullmq`` layout (no record per job,
``jobctl.layouts.bullmq.filtered``) against the plan the same filter makes
from full job records, on failed jobs written as BullMQ 6.7 writes them
plus odd ones (no node needed; tests/test_layout_bullmq.py runs BullMQ
itself): the same jobs in the same order, the same fences, breakdown,
dangling ids, ``--limit`` cut; then the move of that plan."""

from __future__ import annotations

import hashlib

import pytest

N = 30
NOW = 1_700_000_100_000

#: Every field of the filter language, alone and combined (a field BullMQ has no counterpart of too).
FILTERS = [
    "type = 'a'", "type ~ 'b*' or type = 'c'", "not type = 'a'", "error ~ 'boom*'", "message contains 'x'",
    "error = 'boom 1'", "attempts >= 2", "attempts = 0", "max_attempts = 3", "max_attempts != 3", "age > 60s",
    "created < 2023-11-14T22:13:21Z", "dead_for > 50s", "dead_for < 50s", "payload.n >= 7",
    "payload.id64 = 9223372036854775807", "payload.tags contains 'x'", "id = '5' or id ~ '2*'", "state = dead",
    "tenant = 'x'", "tenant != 'x'", "version = 1", "trace = 'x' or correlation != 'y'",
    "type = 'a' and attempts = 1 and payload.n < 20 and dead_for > 1s", "type = 'a' or error = 'boom 2 x'",
    "(type = 'b' or max_attempts = 2) and not attempts = 3",
]


def _failed(client, n: int = N) -> None:
    """``n`` failed jobs 1..n of queue ``work``, varied: names a/b/c, reasons,
    attempts, options, data; job 9 a lifo flow child, 13 dangling, 17 a hash
    without any field the plan reads, 19 without finishedOn, 23 with an
    empty failedReason, 29 not a hash."""
    client.hset("bull:work:meta", mapping={"version": "bullmq:6.7.0", "opts.maxLenEvents": "10000"})
    for i in range(1, n + 1):
        opts = '{"attempts":3,"lifo":true}' if i % 9 == 0 else '{"attempts":%d}' % (1 + i % 3)
        data = '{"n":%d,"id64":9223372036854775807,"tags":["%s"]}' % (i, "x" if i % 4 == 0 else "y")
        client.hset(f"bull:work:{i}", mapping={
            "name": "abc"[i % 3], "data": data, "opts": opts, "timestamp": str(1700000000000 + 1000 * i),
            "priority": "2" if i % 5 == 0 else "0", "atm": str(i % 4), "finishedOn": str(NOW - 2000 * i),
            "failedReason": f"boom {i % 4}" + (" x" if i % 6 == 0 else ""), "processedOn": str(NOW - 3000 * i)})
        client.zadd("bull:work:failed", {str(i): NOW - 2000 * i})
    client.hset("bull:work:9", "parentKey", "bull:work:p")
    client.hset("bull:work:p", "name", "parent")
    client.zadd("bull:work:p:unsuccessful", {"bull:work:9": 1})
    client.delete("bull:work:13", "bull:work:17", "bull:work:29")
    client.hset("bull:work:17", "other", "1")
    client.hdel("bull:work:19", "finishedOn")
    client.hset("bull:work:23", "failedReason", "")
    client.set("bull:work:29", "not a hash")


def _layout(client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(client, QueueConfig(name="work", layout="bullmq"))


def _spec(flt: str, limit: int | None = None):
    from jobctl.filter import compile_filter
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    return OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY, filter=compile_filter(flt), limit=limit)


@pytest.fixture
def small_windows(monkeypatch):
    """7 ranks a window, 3 keys a read call, 2 calls a round trip: windows end inside the data."""
    from jobctl.layouts.bullmq import calls, lean

    monkeypatch.setattr(lean, "ZSET_WINDOW", 7)
    monkeypatch.setattr(lean, "READ_BATCH", 3)
    monkeypatch.setattr(calls, "DEPTH", 2)


def _record_plan(monkeypatch, lay, spec):
    """The plan made from full records (the column-wise plan turned off)."""
    from jobctl.layouts.bullmq import filtered

    with monkeypatch.context() as m:
        m.setattr(filtered, "read_fields", lambda flt: None)
        return lay.plan(spec, now=NOW)


def _fence(client, job_id: str) -> str:
    """The fence ``bullmq_redrive.lua`` checks, from the job's hash as stored."""
    f = [client.hget(f"bull:work:{job_id}", k) or b"" for k in ("finishedOn", "parentKey", "deid", "failedReason")]
    return hashlib.sha1(b"\0".join(f)).hexdigest()


@pytest.mark.parametrize("cap", [None, 2])
@pytest.mark.parametrize("flt", FILTERS)
def test_the_column_plan_is_the_record_plan(redis_client, small_windows, monkeypatch, flt, cap):
    """``cap``: the memo of filter results full after 2 distinct values (then every job is evaluated)."""
    from jobctl.layouts.bullmq.columns import FencedColumns
    from jobctl.layouts.bullmq.ops import BullFencedJob, BullPlannedJob

    from jobctl.layouts.bullmq import filtered

    if cap is not None:
        monkeypatch.setattr(filtered, "MEMO_CAP", cap)
    _failed(redis_client)
    lay = _layout(redis_client)
    ref = _record_plan(monkeypatch, lay, _spec(flt))
    plan = lay.plan(_spec(flt), now=NOW)
    assert isinstance(plan.jobs, FencedColumns)
    assert [j.job_id for j in plan.jobs] == [j.job_id for j in ref.jobs]
    assert (plan.dangling, plan.scanned, plan.breakdown, plan.walked, plan.truncated) \
        == (ref.dangling, ref.scanned, ref.breakdown, ref.walked, ref.truncated)
    for job, old in zip(plan.jobs, ref.jobs):
        assert float(job.sha1) == float(old.sha1)  # the failed score the plan saw
        if job.job_id == "9":
            assert isinstance(job, BullPlannedJob) and job.fields == old.fields
        else:
            assert isinstance(job, BullFencedJob) and job.fence == _fence(redis_client, job.job_id)


@pytest.mark.parametrize("limit", [1, 6, 9, 12])
def test_a_limit_cuts_the_column_plan_where_the_record_plan_stops(redis_client, small_windows, monkeypatch, limit):
    _failed(redis_client)
    lay = _layout(redis_client)
    ref = _record_plan(monkeypatch, lay, _spec("type != 'c'", limit))
    plan = lay.plan(_spec("type != 'c'", limit), now=NOW)
    assert [j.job_id for j in plan.jobs] == [j.job_id for j in ref.jobs] and len(plan.jobs) == limit
    assert (plan.dangling, plan.scanned, plan.breakdown, plan.walked, plan.truncated) \
        == (ref.dangling, ref.scanned, ref.breakdown, ref.walked, True)


def test_the_filtered_move_is_fenced_to_what_the_plan_saw(redis_client, small_windows):
    from jobctl.ops.engine import run_plan

    _failed(redis_client)
    lay = _layout(redis_client)
    plan = lay.plan(_spec("payload.tags contains 'x' or id = '9'"), now=NOW)
    assert [j.job_id for j in plan.jobs] == ["28", "24", "20", "16", "12", "9", "8", "4"]  # oldest failure first
    redis_client.hset("bull:work:8", "failedReason", "failed again")  # since the plan: fenced out
    redis_client.hset("bull:work:16", "name", "renamed")  # not fenced: the move takes it
    redis_client.zadd("bull:work:failed", {"24": 5})  # failed again: a new score
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 6 and res.skipped_reasons == {"changed": 2}
    left = {m.decode() for m in redis_client.zrange("bull:work:failed", 0, -1)}
    assert left == {str(i) for i in range(1, N + 1)} - {"4", "9", "12", "16", "20", "28"}
    assert redis_client.sismember("bull:work:p:dependencies", "bull:work:9")  # the flow child, back in its parent
    assert [int(x) for x in redis_client.lrange("bull:work:wait", 0, -1)] == [4, 12, 16, 28, 9]  # 9 lifo: taken next
    assert [m for m, _ in redis_client.zrange("bull:work:prioritized", 0, -1, withscores=True)] == [b"20"]
    assert redis_client.hget("bull:work:4", "data") == b'{"n":4,"id64":9223372036854775807,"tags":["x"]}'
    assert redis_client.xlen("bull:work:events") == 6 and redis_client.zscore("bull:work:marker", "0") == 0
