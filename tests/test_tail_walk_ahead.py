"""Review of the tail walk with round trips in flight (issue 11): lists that
change under the walk, errors mid-walk, the filtered plan's read-ahead."""

from __future__ import annotations

from collections import Counter

import pytest

from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts import predicate_plan
from jobctl.layouts.reliable_list import ReliableList
from jobctl.config import QueueConfig
from jobctl.model import State
from jobctl.ops import window
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import PredicateRange, TailRange
from jobctl.ops.spec import Operation, OpSpec
from test_operations import (  # noqa: F401 - fixtures
    assert_consistent, dead_letter_jobs, ids, simple_dead,
)

K = ReliableListKeys("email")
FLT = "tenant = tenant_1"  # simple_dead: job n has tenant_(1 + n % 5): every 5th job


def rl_layout(client) -> ReliableList:
    return ReliableList(client, QueueConfig("email"))


def spec(flt: str | None) -> OpSpec:
    extra = {"filter": compile_filter(flt)} if flt else {}
    return OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, **extra)


def narrow(monkeypatch, rt: int = 20, plan_window: int = 10) -> None:
    monkeypatch.setattr(window, "ROUND_TRIP_POSITIONS", rt)
    monkeypatch.setattr(predicate_plan, "SCAN_WINDOW", plan_window)


def remove_by_others(client, job_ids) -> None:
    """Another client deletes these dead jobs (list entry and payload)."""
    for j in job_ids:
        client.lrem(K.dead, 0, j)
        client.delete(K.job(j))


def new_dead(client, n: int, prefix: str) -> list[str]:
    """Workers dead-letter ``n`` new jobs (LPUSH at the dead list's head)."""
    return dead_letter_jobs(client, "email", [(f"{prefix}_{i:04d}", "webhook.deliver", "tenant_1", "HTTP_503")
                                               for i in range(n)])


@pytest.mark.parametrize("flt", [None, FLT])
def test_list_emptied_by_others_then_new_jobs_pushed_while_round_trips_are_in_flight(redis_client, monkeypatch, flt):
    """Others remove every dead job the walk has not reached while two round
    trips are in flight (the walk has already read the ids of a later group
    ahead), then workers dead-letter new jobs: no new job moves, each planned
    job is counted once, every job stays in one state."""
    narrow(monkeypatch)
    jobs = simple_dead(redis_client, "email", 100)
    want = [j for n, j in enumerate(jobs) if not flt or n % 5 == 0]
    lay = rl_layout(redis_client)
    plan = lay.plan(spec(flt))
    assert isinstance(plan.jobs, PredicateRange if flt else TailRange) and plan.planned == len(want)
    calls: list[int] = []
    fresh: list[str] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:  # the first result of round trip 0: round trip 1 is in flight
            remove_by_others(redis_client, ids(redis_client, K.dead))
        if len(calls) == 3:
            fresh.extend(new_dead(redis_client, 30, "new"))

    res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
    moved = ids(redis_client, K.ready)
    assert not set(fresh) & set(moved), "a job dead-lettered after the plan moved"
    assert set(moved) <= set(want) and res.moved == len(moved)
    counted = res.moved + res.skipped + res.failed
    if flt:  # each planned match counted once: moved, skipped, or "gone" past the list's end
        assert counted == len(want), (res.moved, res.skipped, dict(res.skipped_reasons))
    else:  # an unfiltered plan counts the positions it met (those others emptied: none)
        assert counted <= len(want), (res.moved, res.skipped, dict(res.skipped_reasons))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    assert [j for j in ids(redis_client, K.dead) if j in set(fresh)] == list(reversed(fresh))
