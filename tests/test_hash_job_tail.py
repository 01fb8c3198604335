"""An unfiltered operation on a hash-job failed list plans a tail range
(``plan_failed_tail``: no job hash read beyond a sample) and its apply
(``hj_tail.lua``) fences each job as it pops it: its id at its planned
position and its hash's status ``failed``.  What changed since the plan
stays dead and is counted, never moved; dangling ids (and a redrive's
malformed payloads) stay dead, set aside as the per-job plan sets them
aside: not counted, and a rerun plans none of them."""

from __future__ import annotations

import pytest

from jobctl.filter import compile_filter
from jobctl.keys import HashJobKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import TailRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.hash_job import ADAPTER, load_scenario

Q = "jobs"
NOW = 1_795_000_000_000
TARGET = {"redrive": State.READY, "suppress": State.SUPPRESSED, "purge": None}


def _setup(client):
    exp = load_scenario(client, "dlq-spike", queue=Q, size=120, now_ms=NOW)
    return exp, layout_for(client, ADAPTER.queue_config(Q)), HashJobKeys(Q)


@pytest.mark.parametrize("op", ["redrive", "suppress", "purge"])
def test_the_tail_plan_counts_positions_and_samples_the_breakdown(redis_client, op):
    exp, lay, k = _setup(redis_client)
    dangling = set(exp["dangling_ids"])
    assert dangling, "the scenario has dangling ids"
    spec = OpSpec(Operation(op), Q, State.DEAD, TARGET[op], reason="r")
    plan = lay.plan(spec)
    assert isinstance(plan.jobs, TailRange) and redis_client.llen(k.failed) == exp["dead"]
    assert plan.planned == exp["dead"] - len(dangling) and set(plan.dangling) == dangling
    assert plan.walked == {0: exp["dead"]} and plan.breakdown_sampled == exp["dead"]  # the sample covers all
    full = lay.plan(OpSpec(Operation(op), Q, State.DEAD, TARGET[op], reason="r", filter=compile_filter("id ~ '*'")))
    assert plan.breakdown == full.breakdown and plan.planned == full.planned and set(full.dangling) == dangling
    assert len(plan.sample_ids()) == 10 and "stay dead" in plan.describe()
    limited = lay.plan(OpSpec(Operation(op), Q, State.DEAD, TARGET[op], reason="r", limit=5))
    assert limited.planned == 5 and limited.truncated
    assert limited.walked == lay.plan(OpSpec(Operation(op), Q, State.DEAD, TARGET[op], reason="r", limit=5,
                                             filter=compile_filter("id ~ '*'"))).walked


@pytest.mark.parametrize("op", ["redrive", "suppress", "purge"])
def test_what_changed_since_the_plan_stays_dead(redis_client, op):
    exp, lay, k = _setup(redis_client)
    plan = lay.plan(OpSpec(Operation(op), Q, State.DEAD, TARGET[op], reason="r"))
    oldest = [x.decode() for x in redis_client.lrange(k.failed, -8, -1)][::-1]  # tail first
    live = [j for j in oldest if j not in exp["dangling_ids"]]
    changed, wrong, malformed, expired = live[0], live[1], live[2], live[3]
    redis_client.hset(k.job(changed), "status", "processing")  # a worker claimed it since the plan
    redis_client.delete(k.job(wrong))
    redis_client.set(k.job(wrong), "oops")
    redis_client.hset(k.job(malformed), "payload", "{not json")  # a redrive sets it aside, the others take it
    if op == "suppress":  # a hash left without its payload: dangling too
        redis_client.hdel(k.job(expired), "payload")
    else:  # its TTL ran out since the plan: dangling, set aside
        redis_client.delete(k.job(expired))
    res = run_plan(lay, plan, journal=False)
    aside = {expired} | ({malformed} if op == "redrive" else set())
    assert res.moved == plan.planned - 2 - len(aside)
    assert dict(res.skipped_reasons) == {"changed": 1} and res.failed == 1
    left = {x.decode() for x in redis_client.lrange(k.failed, 0, -1)}
    assert left == set(exp["dangling_ids"]) | {changed, wrong} | aside and redis_client.llen(k.hold) == 0
    assert redis_client.hget(k.job(changed), "status") == b"processing"
    if op == "redrive":
        assert redis_client.hget(k.job(malformed), "status") == b"failed"
        ready = [x.decode() for x in redis_client.lrange(k.pending, 0, -1)]
        moved = [j for j in oldest if j not in left]
        assert [j for j in ready if j in moved] == moved[::-1]  # the oldest failure nearest the claim end
    elif op == "purge":
        assert not redis_client.exists(k.job(malformed))
    else:
        assert redis_client.zscore(k.suppressed, malformed) is not None


def test_a_rerun_plans_none_of_the_ids_set_aside(redis_client):
    """After a redrive only the dangling ids are left: the rerun plans 0."""
    exp, lay, k = _setup(redis_client)
    spec = OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reason="r")
    res = run_plan(lay, lay.plan(spec), journal=False)
    assert (res.skipped, res.failed) == (0, 0) and res.moved == exp["dead"] - len(exp["dangling_ids"])
    assert {x.decode() for x in redis_client.lrange(k.failed, 0, -1)} == set(exp["dangling_ids"])
    assert lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reason="r")).planned == 0


def test_a_target_of_the_wrong_type_moves_nothing(redis_client):
    """The pending list of the wrong type: every call refuses before its
    first write, and every job stays dead and failed."""
    from jobctl.errors import DataError

    exp, lay, k = _setup(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY))
    redis_client.delete(k.pending)
    redis_client.set(k.pending, "oops")
    before = redis_client.lrange(k.failed, 0, -1)
    with pytest.raises(DataError):
        run_plan(lay, plan, journal=False)
    assert redis_client.lrange(k.failed, 0, -1) == before
    assert all(redis_client.hget(k.job(j.decode()), "status") in (b"failed", None) for j in before)


def test_an_id_twice_on_the_failed_list_moves_once(redis_client):
    """The second copy of an id fences after the first copy's writes (as one
    job at a time would): it is changed, stays dead, and the job is
    redriven once."""
    exp, lay, k = _setup(redis_client)
    live = [x.decode() for x in redis_client.lrange(k.failed, 0, -1)[::-1] if x.decode() not in exp["dangling_ids"]]
    twice = live[2]
    redis_client.rpush(k.failed, twice)  # at the tail: popped in the same run as its first copy
    pending = redis_client.llen(k.pending)
    res = run_plan(lay, lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reason="r")), journal=False)
    assert res.moved == len(live) and dict(res.skipped_reasons) == {"changed": 1}
    left = sorted(x.decode() for x in redis_client.lrange(k.failed, 0, -1))
    assert left == sorted([twice, *exp["dangling_ids"]])
    ready = [x.decode() for x in redis_client.lrange(k.pending, 0, -1)]
    assert ready.count(twice) == 1 and len(ready) == pending + len(live)
    assert redis_client.hget(k.job(twice), "redrive_count") == b"1"
