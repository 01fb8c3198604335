"""The tail walk with round trips in flight (issue 11): lists that
change under the walk, errors mid-walk, the filtered plan's read-ahead."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list import predicate_plan as predicate_plan
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.config import QueueConfig
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver
from jobctl import scripts
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import PredicateRange, TailRange
from jobctl.ops.spec import Operation, OpSpec
from test_operations import (  # noqa: F401 - fixtures
    assert_consistent, dead_letter_jobs, ids, simple_dead,
)
from helpers import today_record

K = ReliableListKeys("email")
FLT = "tenant = tenant_1"  # simple_dead: job n has tenant_(1 + n % 5): every 5th job


def rl_layout(client) -> ReliableList:
    return ReliableList(client, QueueConfig("email"))


def spec(flt: str | None) -> OpSpec:
    extra = {"filter": compile_filter(flt)} if flt else {}
    return OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, **extra)


def narrow(monkeypatch, rt: int = 20, plan_window: int = 10) -> None:
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", rt)
    monkeypatch.setattr(predicate_plan, "SCAN_WINDOW", plan_window)


def setup_walk(client, monkeypatch, flt: str | None, n: int) -> tuple[list[str], list[str], ReliableList]:
    """Narrow round trips (:func:`narrow`) and ``n`` dead jobs on email:
    ``(jobs, the ones a plan of flt takes, the layout)``."""
    narrow(monkeypatch)
    jobs = simple_dead(client, "email", n)
    return jobs, [j for i, j in enumerate(jobs) if not flt or i % 5 == 0], rl_layout(client)


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
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 100)
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


@pytest.mark.parametrize("flt", [None, FLT])
def test_wrong_type_key_mid_walk_with_round_trips_in_flight(redis_client, monkeypatch, flt):
    """A key turns the wrong type while round trips are in flight: the walk
    stops with DataError, every reply in flight is read (the restore on the
    same connection sees its own replies), the hold is put back, the lease
    released, and a rerun moves the rest once, in order."""
    from jobctl.errors import DataError

    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 200)
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            redis_client.set(today_record(K), "x")  # jobctl's redrive record: a string now

    with pytest.raises(DataError):
        run_plan(lay, lay.plan(spec(flt)), batch=10, progress=progress, journal=False)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease) and not redis_client.exists(K.walk)
    assert_consistent(redis_client, ["email"])
    moved = ids(redis_client, K.ready)
    assert 0 < len(moved) < len(want)
    redis_client.delete(today_record(K))
    res = run_plan(lay, lay.plan(spec(flt)), batch=10, journal=False)
    assert (res.moved, res.skipped, res.failed) == (len(want) - len(moved), 0, 0)
    assert ids(redis_client, K.ready) == list(reversed(want))


@pytest.mark.parametrize("flt", [None, FLT])
def test_connection_killed_mid_walk_with_round_trips_in_flight(redis_client, monkeypatch, flt):
    """The engine's connection is killed while round trips are in flight:
    ConnectionFailed, every job in one state, and a rerun moves the rest
    once, in order."""
    from jobctl.errors import ConnectionFailed

    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 200)
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            me = redis_client.client_id()
            for c in redis_client.client_list():
                if int(c["id"]) != me:
                    redis_client.client_kill_filter(_id=c["id"])

    with pytest.raises(ConnectionFailed):
        run_plan(lay, lay.plan(spec(flt)), batch=10, progress=progress, journal=False)
    assert_consistent(redis_client, ["email"])
    res = run_plan(lay, lay.plan(spec(flt)), batch=10, journal=False)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert ids(redis_client, K.ready) == list(reversed(want))
    assert res.skipped == res.failed == 0


def _interrupt_reads(monkeypatch, after: list[bool]):
    """Ctrl-C inside a socket read: the parser's next read once ``after`` is
    set raises KeyboardInterrupt (as SIGINT while blocked in recv would)."""
    from redis.connection import DefaultParser

    real = DefaultParser.read_response

    def read_response(self, *a, **kw):
        if after and after[0]:
            after[0] = False
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(DefaultParser, "read_response", read_response)


def _ctrl_c_inside_a_read(redis_client, monkeypatch, flt):
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 200)
    arm: list[bool] = []
    _interrupt_reads(monkeypatch, arm)

    def progress(done, total):
        if not arm:
            arm.append(True)  # the next read: round trip 1's first reply (round trip 2 in flight)

    res = run_plan(lay, lay.plan(spec(flt)), batch=10, progress=progress, journal=False)
    monkeypatch.undo()
    return want, res


@pytest.mark.parametrize("flt", [None, FLT])
def test_ctrl_c_inside_a_read_with_round_trips_in_flight_leaves_every_job_in_one_state(redis_client, monkeypatch,
                                                                                        flt):
    """Ctrl-C (a KeyboardInterrupt: a third Ctrl-C of the CLI, or any
    caller without its handler) lands while the walk waits for a round
    trip's replies with another in flight: redis-py drops the connection,
    the walk's drain gives up, the restore reconnects; every job is in one
    state, the hold is put back, the lease released, and a rerun moves the
    rest once, in order."""
    want, res = _ctrl_c_inside_a_read(redis_client, monkeypatch, flt)
    assert res.interrupted
    moved = ids(redis_client, K.ready)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    lay = rl_layout(redis_client)
    res2 = run_plan(lay, lay.plan(spec(flt)), batch=10, journal=False)
    assert ids(redis_client, K.ready) == list(reversed(want))
    assert (res2.moved, res2.skipped) == (len(want) - len(moved), 0)


def _deferring_handler(signum, frame):
    """A front end's handler that only defers (no stop flag of its own)."""
    from jobctl.ops import interrupt

    if not interrupt.defer():
        raise KeyboardInterrupt


@pytest.mark.parametrize("handler", ["cli", "bare"])
@pytest.mark.parametrize("flt", [None, FLT])
def test_a_second_ctrl_c_inside_a_read_counts_every_job_moved(redis_client, monkeypatch, flt, handler):
    """Ctrl-C (real ``SIGINT``s) inside the read of a round trip's first
    reply, another in flight.  ``cli``: twice, with the CLI's handler and
    its stop flag; ``bare``: once, with a handler that only defers and no
    ``stop``.  The press is deferred (``jobctl.ops.interrupt``), so the
    replies in flight are read and every job moved is counted (review5's
    finding: they were lost with the connection), and nothing more is
    sent."""
    from redis.connection import DefaultParser

    from jobctl.cli.ops_cmds import StopFlag

    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 200)
    arm: list[bool] = []
    real = DefaultParser.read_response
    presses = 2 if handler == "cli" else 1

    def read_response(self, *a, **kw):
        if arm and arm[0]:
            arm[0] = False
            for _ in range(presses):
                os.kill(os.getpid(), signal.SIGINT)
        return real(self, *a, **kw)

    def progress(done, total):
        if not arm:
            arm.append(True)  # the next read: a round trip's first reply, another in flight

    monkeypatch.setattr(DefaultParser, "read_response", read_response)
    plan = lay.plan(spec(flt))
    if handler == "cli":
        with StopFlag() as stopper:
            res = run_plan(lay, plan, batch=10, progress=progress, stop=stopper.flag.is_set, journal=False)
    else:
        old = signal.signal(signal.SIGINT, _deferring_handler)
        try:
            res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
        finally:
            signal.signal(signal.SIGINT, old)
    monkeypatch.undo()
    moved = ids(redis_client, K.ready)
    assert res.interrupted and 0 < len(moved) < len(want)
    assert res.moved == len(moved), f"moved {len(moved)}, counted {res.moved}"
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])


@pytest.mark.parametrize("batch,rt", [(7, 20), (10, 20), (15, 30), (20, 60), (25, 50), (10, 10)])
def test_filtered_plan_any_batch_with_changes_under_the_walk_counts_each_match_once(redis_client, monkeypatch,
                                                                                    batch, rt):
    """A filtered plan (plan windows of 10) with --batch values that are and
    are not multiples of the plan window (read-ahead on and off): others
    remove a planned match and a non-match before the apply, workers push
    new dead jobs while the walk runs; a window that changed moves nothing,
    no job outside the plan moves, each match is counted once, and a rerun
    moves every remaining match once."""
    narrow(monkeypatch, rt=rt)
    jobs = simple_dead(redis_client, "email", 300)
    want = [j for n, j in enumerate(jobs) if n % 5 == 0]
    lay = rl_layout(redis_client)
    plan = lay.plan(spec(FLT))
    assert isinstance(plan.jobs, PredicateRange) and plan.planned == len(want)
    removed = [jobs[150], jobs[233]]  # a match (150 % 5 == 0) and a non-match
    remove_by_others(redis_client, removed)
    fresh: list[str] = []
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) in (2, 9):
            fresh.extend(new_dead(redis_client, 3, f"new{len(calls)}"))

    res = run_plan(lay, plan, batch=batch, progress=progress, journal=False)
    moved = ids(redis_client, K.ready)
    assert len(moved) == len(set(moved)) == res.moved
    assert set(moved) <= set(want) - set(removed)
    # the calls before the one holding the removed position saw only unchanged plan windows: their matches move
    # (a call over an unchanged window and a changed one moves nothing: all its windows must be as planned)
    cut = 150 // batch * batch
    assert set(moved) >= {j for n, j in enumerate(jobs[:cut]) if n % 5 == 0}, dict(res.skipped_reasons)
    assert res.moved + res.skipped + res.failed == len(want), (res.moved, dict(res.skipped_reasons))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    res2 = run_plan(lay, lay.plan(spec(FLT)), batch=batch, journal=False)
    assert res2.moved == len(want) - 1 - res.moved + len(fresh)  # the new jobs match the filter too
    assert sorted(ids(redis_client, K.ready)) == sorted(set(want) - set(removed) | {f for f in fresh})


def _flushed_then_loaded(redis_client, monkeypatch, flt):
    """The script cache is flushed with a round trip in flight (refused:
    NOSCRIPT) and another client loads the script again before the next
    round trip runs: every job stays in one state, none moves twice or out
    of the plan, and a rerun moves the rest."""
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 200)
    plan = lay.plan(spec(flt))
    script = scripts.script(redis_client, "rl_tail").script
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            redis_client.script_flush()  # round trip 1 ran; round trip 2, sent next, is refused
        if len(calls) == 3:
            redis_client.script_load(script)  # round trip 3, sent next, runs before round trip 2 is run again

    res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
    moved = ids(redis_client, K.ready)
    assert len(moved) == len(set(moved)) == res.moved and set(moved) <= set(want)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    res2 = run_plan(lay, lay.plan(spec(flt)), batch=10, journal=False)
    assert sorted(ids(redis_client, K.ready)) == sorted(want)
    assert res2.moved == len(want) - res.moved
    return res, want


@pytest.mark.parametrize("flt", [None, FLT])
def test_script_flushed_then_loaded_by_another_client_between_round_trips_in_flight(redis_client, monkeypatch, flt):
    _flushed_then_loaded(redis_client, monkeypatch, flt)


@pytest.mark.parametrize("flt", [None, FLT])
def test_script_flushed_then_loaded_by_another_client_counts_every_planned_job(redis_client, monkeypatch, flt):
    """The round trip sent after the reload runs before the refused one is
    run again: it holds the refused round trip's entries (they stay dead);
    the refused calls, run again, pop nothing and count those entries as
    skipped, so every planned job is counted once."""
    res, want = _flushed_then_loaded(redis_client, monkeypatch, flt)
    assert res.moved + res.skipped + res.failed == len(want), (res.moved, dict(res.skipped_reasons))
    assert res.skipped == res.skipped_reasons["not at its planned position"]


def test_walk_closed_by_its_caller_with_a_round_trip_in_flight_leaves_a_clean_connection(redis_client, monkeypatch):
    """A caller of :func:`walk_driver.drive` closes the walk at a result with
    ``more`` set (a round trip in flight): the walk reads the replies in
    flight, so the hold is put back and the lease released on the same
    connection, and the connection's next command gets its own reply."""
    import redis as redis_py

    narrow(monkeypatch)
    simple_dead(redis_client, "email", 200)
    pinned = redis_py.Redis(connection_pool=redis_client.connection_pool, single_connection_client=True)
    lay = rl_layout(pinned)
    plan = lay.plan(spec(None))
    walk = walk_driver.drive(lay.sources(plan.spec), plan, batch=10)
    first = next(walk)
    assert first.more and len(first.moved) == 10
    walk.close()
    assert pinned.lrange(K.ready, 0, -1) == redis_client.lrange(K.ready, 0, -1)  # its own reply
    assert pinned.ping() is True and pinned.llen(K.dead) + pinned.llen(K.ready) == 200
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease) and not redis_client.exists(K.walk)
    assert_consistent(redis_client, ["email"])
    pinned.close()


@pytest.mark.parametrize("flt", [None, FLT])
def test_client_without_its_own_connection_walks_one_round_trip_at_a_time(redis_client, monkeypatch, flt):
    """A client with no connection of its own (a pooled client, as a
    cluster client is) gets no read-ahead: one round trip at a time, each
    result's ``more`` set only inside its round trip; every planned job
    moves once, in order, counted once."""
    narrow(monkeypatch)
    jobs = simple_dead(redis_client, "email", 95)
    want = [j for n, j in enumerate(jobs) if not flt or n % 5 == 0]
    assert getattr(redis_client, "connection", None) is None
    lay = rl_layout(redis_client)
    plan = lay.plan(spec(flt))
    results = list(walk_driver.drive(lay.sources(plan.spec), plan, batch=10))
    # each round trip (2 calls of 10) ends with more unset: never two round trips in flight
    assert [r.more for r in results[:8]] == [True, False] * 4
    moved = [j for r in results for j in r.moved]
    assert moved == want and not any(r.skipped or r.failed for r in results)
    assert ids(redis_client, K.ready) == list(reversed(want))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)


@pytest.mark.parametrize("flt", [None, FLT])
def test_workers_dead_lettering_during_the_walk_never_move_new_jobs(redis_client, monkeypatch, flt):
    """Workers push new dead jobs at the head while round trips are in
    flight: exactly the planned tail positions are walked, every planned
    match moves once in order, the new jobs stay dead in order."""
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 150)
    plan = lay.plan(spec(flt))
    fresh: list[str] = []
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) % 3 == 1:
            fresh.extend(new_dead(redis_client, 2, f"new{len(calls):03d}"))

    res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
    assert (res.moved, res.skipped, res.failed) == (len(want), 0, 0)
    assert ids(redis_client, K.ready) == list(reversed(want))
    assert ids(redis_client, K.dead) == list(reversed(fresh)) + [j for j in reversed(jobs) if j not in set(want)]
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])


@pytest.mark.parametrize("flt", [None, FLT])
def test_rate_walks_one_call_at_a_time_and_stops_after_the_call_it_saw(redis_client, monkeypatch, flt):
    """--rate: one call a round trip, one round trip at a time (its LRANGE
    still reads the next call's ids): a stop seen at a result ends the run
    there, with nothing else in flight."""
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 100)
    seen: list[int] = []
    res = run_plan(lay, lay.plan(spec(flt)), batch=10, rate=1_000_000, progress=lambda d, t: seen.append(d),
                   stop=lambda: len(seen) >= 3, journal=False)
    per_call = 10 if not flt else 2
    assert res.interrupted and res.moved == 3 * per_call == len(ids(redis_client, K.ready))
    assert ids(redis_client, K.ready) == list(reversed(want[:3 * per_call]))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    res2 = run_plan(lay, lay.plan(spec(flt)), batch=10, rate=1_000_000, journal=False)
    assert (res2.moved, res2.skipped) == (len(want) - res.moved, 0)
    assert ids(redis_client, K.ready) == list(reversed(want))
