"""The walk driver's one NOSCRIPT policy (jobctl.ops.walk.flight), on a real
server, for every walker that uses it: the per-job walk, the tail walk, the
filtered plan's scan and its windows' walk, the hash-job plan and its walk.

A second client flushes the script cache just before the driver's nth write
(the one place that sends, :meth:`Wire.send`), so that round trip, and
maybe the one before it, is refused: the driver loads the script once and
sends the refused calls again in order.  Every planned job moves exactly
once.  Refused again (the cache flushed before the replay too): a one-line
error, every job in exactly one state."""

from __future__ import annotations

from collections import Counter

import pytest

from jobctl.config import QueueConfig
from jobctl.errors import DataError
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.hash_job import plan as hash_job_plan
from jobctl.layouts.reliable_list import predicate_plan
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import JobColumns, PredicateRange, TailRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.walk import driver
from jobctl.ops.walk.wire import Wire
from test_operations import assert_consistent, ids, simple_dead  # noqa: F401 - fixtures
from test_per_job_walk_in_flight import K as HK, failed_jobs, hj_layout, redrive

K = ReliableListKeys("email")
FLT = "tenant = tenant_1"  # simple_dead: job n has tenant_(1 + n % 5): every 5th job
N = 300


class Flusher:
    """Flushes the script cache from ``client`` just before the driver's
    write number ``at`` (counted from :meth:`arm`), and before every later
    one when ``every``."""

    def __init__(self, client, monkeypatch) -> None:
        self.client, self.sends, self.at, self.every, self.flushes = client, 0, 0, False, 0
        real = Wire.send

        def send(wire, blobs):
            self.sends += 1
            if self.at and (self.sends == self.at or (self.every and self.sends > self.at)):
                self.client.script_flush()
                self.flushes += 1
            return real(wire, blobs)

        monkeypatch.setattr(Wire, "send", send)

    def arm(self, at: int, every: bool = False) -> None:
        self.sends, self.at, self.every = 0, at, every


def noscript_errors(client) -> int:
    return int(client.info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0))


@pytest.fixture
def flusher(redis_client, monkeypatch):
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 20)  # tail: 2 calls of 10 a round trip
    monkeypatch.setattr(predicate_plan, "SCAN_WINDOW", 10)  # the scan: many round trips
    monkeypatch.setattr(hash_job_plan, "WINDOW", 25)  # the hash-job plan: many windows
    return Flusher(redis_client, monkeypatch)


def rl_spec(flt: str | None = None, **kw) -> OpSpec:
    extra = {"filter": compile_filter(flt)} if flt else {}
    return OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, **extra, **kw)


#: walker -> (spec, the plan shape it walks)
RL_WALKERS = {
    "tail": (lambda: rl_spec(), TailRange),
    "predicate-plan": (lambda: rl_spec(FLT), PredicateRange),
    "per-job": (lambda: rl_spec(FLT, limit=10_000), JobColumns),  # --limit: planned client-side, per job
}


def _plan_and_run(client, flusher, lay, spec, shape, plan_at: int, apply_at: int):
    flusher.arm(plan_at)
    base = noscript_errors(client)
    plan = lay.plan(spec)
    assert isinstance(plan.jobs, shape) and (shape is not TailRange or not isinstance(plan.jobs, PredicateRange))
    planned_refused = noscript_errors(client) > base
    flusher.arm(apply_at)
    base = noscript_errors(client)
    res = run_plan(lay, plan, batch=10, journal=False)
    assert noscript_errors(client) > base, "the apply was never refused: the test flushed too late"
    return plan, res, planned_refused


@pytest.mark.parametrize("apply_at", [2, 3, 5])
@pytest.mark.parametrize("walker", sorted(RL_WALKERS))
def test_reliable_list_walkers_move_every_job_once_across_a_flushed_script_cache(redis_client, flusher, walker,
                                                                                  apply_at):
    jobs = simple_dead(redis_client, "email", N)
    make_spec, shape = RL_WALKERS[walker]
    want = [j for i, j in enumerate(jobs) if walker == "tail" or i % 5 == 0]
    lay = ReliableList(redis_client, QueueConfig("email"))
    plan, res, planned_refused = _plan_and_run(redis_client, flusher, lay, make_spec(), shape, 3, apply_at)
    if walker == "predicate-plan":
        assert planned_refused and plan.planned == len(want)  # the scan was refused, and replayed
    assert (res.error, res.moved, res.failed, res.skipped) == (None, len(want), 0, 0), res.to_json()
    moved = Counter(ids(redis_client, K.ready))
    assert set(moved) == set(want) and set(moved.values()) == {1}
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])


@pytest.mark.parametrize("apply_at", [2, 3, 5])
@pytest.mark.parametrize("reset", [False, True])  # a tail range (hj_tail), per job (hj_window)
def test_hash_job_plan_and_walk_move_every_job_once_across_a_flushed_script_cache(redis_client, flusher,
                                                                                 apply_at, reset):
    jobs = failed_jobs(redis_client, N)
    lay = hj_layout(redis_client)
    spec = redrive(per_job=False, reset_attempts=True) if reset else redrive(per_job=False)
    plan, res, _ = _plan_and_run(redis_client, flusher, lay, spec, JobColumns if reset else TailRange, 3, apply_at)
    assert plan.planned == N
    assert (res.error, res.moved, res.failed, res.skipped) == (None, N, 0, 0), res.to_json()
    moved = Counter(ids(redis_client, HK.pending))
    assert set(moved) == set(jobs) and set(moved.values()) == {1}
    assert not redis_client.exists(HK.failed) and not redis_client.exists(HK.hold)


@pytest.mark.parametrize("walker", ["tail", "per-job"])
def test_calls_refused_again_after_the_reload_end_the_walk_with_one_error(redis_client, flusher, walker):
    jobs = simple_dead(redis_client, "email", N)
    make_spec, _ = RL_WALKERS[walker]
    lay = ReliableList(redis_client, QueueConfig("email"))
    plan = lay.plan(make_spec())
    flusher.arm(3, every=True)  # the replay is flushed too
    with pytest.raises(DataError, match="script cache was flushed again") as err:
        run_plan(lay, plan, batch=10, journal=False)
    assert "\n" not in str(err.value)
    moved = Counter(ids(redis_client, K.ready))
    assert set(moved.values()) <= {1}
    left = ids(redis_client, K.dead)
    assert len(left) + len(moved) == N and not set(left) & set(moved)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    assert set(left) | set(moved) == set(jobs)


def test_the_scan_refused_again_after_the_reload_raises_one_error(redis_client, flusher):
    simple_dead(redis_client, "email", N)
    lay = ReliableList(redis_client, QueueConfig("email"))
    flusher.arm(3, every=True)
    with pytest.raises(DataError, match="script cache was flushed again"):
        lay.plan(rl_spec(FLT))
    flusher.arm(0)
    assert redis_client.ping()
    assert isinstance(lay.plan(rl_spec(FLT)).jobs, PredicateRange)
