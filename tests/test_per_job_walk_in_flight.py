"""The per-job walk of the window engine with round trips in flight (issue
11): a hash-job failed list (jobs fenced by their hash) and a reliable-list
plan with ``--limit``; stopping, a flushed script cache and a refused call
while a round trip is in flight."""

from __future__ import annotations

import pytest

from jobctl.config import QueueConfig
from jobctl.errors import DataError
from jobctl.filter import compile_filter
from jobctl.keys import HashJobKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import TailRange
from jobctl.ops.spec import Operation, OpSpec
from test_operations import assert_consistent, ids, simple_dead  # noqa: F401 - fixtures

Q = "hjw"
K = HashJobKeys(Q)


def failed_jobs(client, n: int) -> list[str]:
    """``n`` failed hash-job jobs as the seed's ``fail`` leaves them, oldest
    at the tail; returns their ids oldest first."""
    job_ids = [f"j{i:04d}" for i in range(n)]
    pipe = client.pipeline(transaction=False)
    for i, job_id in enumerate(job_ids):
        pipe.hset(K.job(job_id), mapping={"id": job_id, "payload": '{"n": %d}' % i, "status": "failed",
                                          "attempts": 3, "enqueued_at_ms": 1000 + i, "claim_token": "",
                                          "last_error": "boom", "last_error_at_ms": 2000 + i})
    pipe.lpush(K.failed, *job_ids)
    pipe.execute()
    return job_ids


def hj_layout(client):
    return layout_for(client, QueueConfig(name=Q, layout="hash-job"))


#: a filter every job matches: the plan is per job (hj_window.lua); an
#: unfiltered hash-job plan is a tail range (hj_tail.lua)
PER_JOB = compile_filter("id ~ '*'")


def redrive(queue: str = Q, per_job: bool = True, **kw) -> OpSpec:
    """A redrive of the failed list; ``per_job``: with :data:`PER_JOB` (unless a filter is given)."""
    if per_job:
        kw.setdefault("filter", PER_JOB)
    return OpSpec(Operation.REDRIVE, queue, State.DEAD, State.READY, **kw)


def hj_state(client) -> tuple[list[str], list[str]]:
    """(failed ids tail first, pending ids)."""
    return list(reversed(ids(client, K.failed))), ids(client, K.pending)


def target_turns_wrong_type(client):
    """``(counted, progress)``: a progress callback that records each count
    and, at the first result (a round trip still in flight), moves the
    target aside to ``hjw:moved-aside`` and makes it a string, so every
    later call is refused."""
    counted: list[int] = []

    def progress(done, total):
        counted.append(done)
        if len(counted) == 1:
            client.rename(K.pending, "hjw:moved-aside")
            client.set(K.pending, "x")

    return counted, progress


@pytest.mark.parametrize("ahead", [1, 2, 3])
def test_hash_job_redrive_moves_every_job_once_whatever_is_in_flight(redis_client, monkeypatch, ahead):
    monkeypatch.setattr(driver, "TAIL_AHEAD", ahead)
    job_ids = failed_jobs(redis_client, 230)
    lay = hj_layout(redis_client)
    plan = lay.plan(redrive())
    assert not isinstance(plan.jobs, TailRange) and plan.planned == 230
    res = run_plan(lay, plan, batch=10, journal=False)
    assert (res.moved, res.skipped, res.failed) == (230, 0, 0)
    failed, pending = hj_state(redis_client)
    assert failed == [] and sorted(pending) == job_ids
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)


def test_a_stop_lands_after_the_round_trip_in_flight_and_counts_every_job_moved(redis_client):
    job_ids = failed_jobs(redis_client, 200)
    lay = hj_layout(redis_client)
    seen: list[int] = []
    res = run_plan(lay, lay.plan(redrive()), batch=10, journal=False,
                   progress=lambda done, total: seen.append(done), stop=lambda: len(seen) >= 1)
    failed, pending = hj_state(redis_client)
    assert res.interrupted and res.moved == len(pending) == 20  # the first round trip and the one behind it
    assert sorted(failed + pending) == job_ids and failed == job_ids[20:]
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    rest = run_plan(lay, lay.plan(redrive()), batch=10, journal=False)
    assert (rest.moved, rest.skipped) == (180, 0)


def test_a_flushed_script_cache_mid_walk_runs_the_refused_calls_again_in_order(redis_client):
    job_ids = failed_jobs(redis_client, 150)
    lay = hj_layout(redis_client)
    seen: list[int] = []

    def progress(done, total):
        seen.append(done)
        if len(seen) in (1, 4):  # a round trip is in flight behind the one just read
            redis_client.script_flush()

    res = run_plan(lay, lay.plan(redrive()), batch=10, journal=False, progress=progress)
    assert (res.moved, res.skipped, res.failed) == (150, 0, 0)
    failed, pending = hj_state(redis_client)
    assert failed == [] and pending == list(reversed(job_ids))  # LPUSHed oldest first: in order
    assert not redis_client.exists(K.hold)


def test_a_refused_call_counts_what_the_round_trip_in_flight_moved(redis_client):
    """The target turns the wrong type while a round trip is in flight: the
    walk stops with DataError after counting what ran, the journal's count
    is what moved, and a rerun moves the rest once."""
    job_ids = failed_jobs(redis_client, 120)
    lay = hj_layout(redis_client)
    counted, progress = target_turns_wrong_type(redis_client)
    with pytest.raises(DataError):
        run_plan(lay, lay.plan(redrive()), batch=10, journal=False, progress=progress)
    moved = ids(redis_client, "hjw:moved-aside")
    assert counted[-1] == len(moved) == 20  # the first round trip and the one in flight: both ran
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert sorted(ids(redis_client, K.failed) + moved) == job_ids
    redis_client.delete(K.pending)
    rest = run_plan(lay, lay.plan(redrive()), batch=10, journal=False)
    assert (rest.moved, rest.skipped, rest.failed) == (100, 0, 0)


@pytest.mark.parametrize("ahead", [1, 2])
def test_a_limited_reliable_list_redrive_walks_per_job_with_round_trips_in_flight(redis_client, monkeypatch, ahead):
    """``--reset-attempts`` plans jobs (no tail range) and sends each job's
    new envelope: the per-job walk, others removing jobs the walk has not
    reached (a shift within the slack) meanwhile."""
    from jobctl.keys import ReliableListKeys

    monkeypatch.setattr(driver, "TAIL_AHEAD", ahead)
    rk = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 120)
    lay = layout_for(redis_client, QueueConfig("email"))
    plan = lay.plan(redrive("email", per_job=False, reset_attempts=True))
    assert not isinstance(plan.jobs, TailRange) and plan.planned == 120
    seen: list[int] = []

    def progress(done, total):
        seen.append(done)
        if len(seen) == 1:  # another operator removes 5 jobs the walk has not reached
            for j in jobs[40:45]:
                redis_client.lrem(rk.dead, 0, j)
                redis_client.delete(rk.job(j))

    res = run_plan(lay, plan, batch=10, journal=False, progress=progress)
    assert (res.moved, res.skipped) == (115, 5)
    assert sorted(ids(redis_client, rk.ready)) == sorted(jobs[:40] + jobs[45:])
    assert_consistent(redis_client, ["email"])


def test_a_refused_call_is_reported_even_when_a_stop_comes_with_it(redis_client):
    """A stop requested while a refused call's round trip is counted does
    not hide the error: the run raises DataError, not "interrupted"."""
    job_ids = failed_jobs(redis_client, 120)
    lay = hj_layout(redis_client)
    counted, progress = target_turns_wrong_type(redis_client)
    with pytest.raises(DataError):
        run_plan(lay, lay.plan(redrive()), batch=10, journal=False, progress=progress,
                 stop=lambda: len(counted) >= 2)
    moved = ids(redis_client, "hjw:moved-aside")
    assert len(moved) == 20 and sorted(ids(redis_client, K.failed) + moved) == job_ids
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
