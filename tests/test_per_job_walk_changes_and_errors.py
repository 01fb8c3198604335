"""The per-job walk with round trips in flight when the list changes under
it (duplicates, removals, rewritten fences, wrong types, Ctrl-C), and the
hash-job plan's own connection."""

from __future__ import annotations

import os
import signal

import pytest

from jobctl.filter import compile_filter
from jobctl.keys import JsonListKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver, per_job
from jobctl import scripts
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import TailRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.json_list import ADAPTER

JP = "rvj"
JK = JsonListKeys(JP)
#: matches every string below: a filtered plan, walked per job (unfiltered: a tail walk, jl_tail.lua)
PER_JOB = compile_filter('type = "t"')


def jl_layout(client):
    return layout_for(client, ADAPTER.queue_config(JP))


def jl_string(i: int) -> bytes:
    return b'{"id": "d%03d", "task": "t"}' % i


@pytest.mark.parametrize("ahead", [1, 2])
def test_json_list_duplicates_shifted_below_the_walk_are_counted_once_each(redis_client, monkeypatch, ahead):
    monkeypatch.setattr(driver, "TAIL_AHEAD", ahead)
    dup = b'{"id": "dup", "task": "t"}'
    els = [jl_string(i) for i in range(5)] + [dup, dup] + [jl_string(i) for i in range(7, 20)]
    redis_client.rpush(JK.dead, *els)
    lay = jl_layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PURGE, JP, State.DEAD, None, filter=PER_JOB))
    assert not isinstance(plan.jobs, TailRange) and plan.planned == 20
    redis_client.lpop(JK.dead, 2)  # another client takes two jobs below the walk: the copies at 3 and 4
    res = run_plan(lay, plan, batch=4, journal=False)
    left = redis_client.lrange(JK.dead, 0, -1)
    assert left == [] and not redis_client.exists(JK.hold)
    assert res.moved + res.skipped + res.failed == 20
    assert res.moved == 18 and res.skipped == 2


# -- hash-job: the walk through walk_driver.drive on a connection of its own ------------------

from collections import Counter  # noqa: E402

import redis  # noqa: E402

from jobctl.keys import HashJobKeys  # noqa: E402
from test_per_job_walk_in_flight import K, failed_jobs, hj_layout, redrive  # noqa: E402


def own(redis_client):
    """A client with a connection of its own (what run_plan pins): the walk
    keeps round trips in flight only on such a client."""
    return redis.Redis(connection_pool=redis_client.connection_pool, single_connection_client=True)


def until(check, what: str) -> None:
    """Busy-wait (no sleep) for a state another connection's round trip
    leaves on the server."""
    for _ in range(200_000):
        if check():
            return
    raise AssertionError(f"never reached: {what}")


def popped(redis_client, walk_key: str) -> int:
    return int(redis_client.hget(walk_key, "popped") or 0)


class Walk:
    """The results of one walk_driver.drive: moved/skipped/failed per planned id."""

    def __init__(self, lay, plan, *, batch, ahead=2, stop=None, after=None) -> None:
        self.moved: list[str] = []
        self.skipped: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self.skips: list[str] = []  # json-list ids repeat (equal strings)
        self.fails: list[str] = []
        self.results = 0
        self.error: Exception | None = None
        gen = walk_driver.drive(lay.sources(plan.spec), plan, batch=batch, stop=stop, ahead=ahead)
        try:
            for br in gen:
                self.results += 1
                self.moved += br.moved
                self.skips += br.skipped
                self.fails += br.failed
                for j in br.skipped:
                    self.skipped[j] = br.reasons[j]
                for j in br.failed:
                    self.failed[j] = br.reasons[j]
                if after is not None:
                    after(self.results)
                if not br.more and stop is not None and stop():
                    break
        except Exception as exc:  # noqa: BLE001 - checked by the test
            self.error = exc
        finally:
            gen.close()

    def counted(self) -> Counter:
        return Counter(self.moved) + Counter(self.skips) + Counter(self.fails)


def hj_after(redis_client, plan, w: Walk) -> None:
    """Every job in one state, each planned job counted once, moved = what
    is in pending, the hold and the lease gone."""
    failed, pending = (list(reversed(ids_of(redis_client, K.failed))), ids_of(redis_client, K.pending))
    assert Counter(pending) == Counter(w.moved)
    assert not set(failed) & set(pending)
    planned = [plan.jobs.job_id(n) for n in range(len(plan.jobs))]
    assert w.counted() == Counter(planned)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease) and not redis_client.exists(K.walk)


def ids_of(client, key: str) -> list[str]:
    return [x.decode("utf-8", "surrogateescape") for x in client.lrange(key, 0, -1)]


@pytest.mark.parametrize("ahead", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 7, 500])
def test_hash_job_walk_moves_each_job_once_for_any_batch(redis_client, ahead, batch):
    job_ids = failed_jobs(redis_client, 23)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    w = Walk(lay, plan, batch=batch, ahead=ahead)
    assert w.error is None and sorted(w.moved) == job_ids and not w.skipped
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids))  # in order
    hj_after(redis_client, plan, w)


def test_hash_job_walk_with_a_rate(redis_client):
    job_ids = failed_jobs(redis_client, 23)
    lay = hj_layout(redis_client)
    res = run_plan(lay, lay.plan(redrive()), batch=7, rate=100_000, journal=False)
    assert (res.moved, res.skipped, res.failed) == (23, 0, 0)
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids))


def test_a_fence_rewritten_by_a_worker_mid_walk_is_skipped_as_changed(redis_client):
    job_ids = failed_jobs(redis_client, 60)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())

    def after(n):
        if n == 1:  # round trip 2 in flight, 3 and on not packed yet (j0030); j0007 in flight or not
            redis_client.hset(K.job("j0030"), "attempts", 4)
            redis_client.hset(K.job("j0007"), "attempts", 4)

    w = Walk(lay, plan, batch=5, after=after)
    assert w.error is None and w.skipped["j0030"] == "changed"
    assert set(w.skipped) <= {"j0030", "j0007"} and len(w.moved) == 60 - len(w.skipped)
    assert sorted(ids_of(redis_client, K.failed)) == sorted(w.skipped)
    hj_after(redis_client, plan, w)


def test_a_job_hash_turned_the_wrong_type_mid_walk_fails_that_job_only(redis_client):
    failed_jobs(redis_client, 60)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())

    def after(n):
        if n == 1:
            redis_client.delete(K.job("j0040"))
            redis_client.set(K.job("j0040"), "x")

    w = Walk(lay, plan, batch=5, after=after)
    assert w.error is None and w.failed == {"j0040": "wrongtype"} and len(w.moved) == 59
    assert ids_of(redis_client, K.failed) == ["j0040"]
    hj_after(redis_client, plan, w)


@pytest.mark.parametrize("removed, moved", [(10, 190), (70, 20)])
def test_jobs_removed_below_the_walk_within_and_beyond_the_slack(redis_client, removed, moved):
    """Others remove jobs the walk has not reached (positions 20 on): within
    the slack the jobs above them still match, beyond it they stay dead."""
    job_ids = failed_jobs(redis_client, 200)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())

    def after(n):
        if n == 1:  # round trip 2 (positions 10-19) in flight: untouched
            for j in job_ids[20:20 + removed]:
                redis_client.lrem(K.failed, 0, j)

    w = Walk(lay, plan, batch=10, after=after)
    assert w.error is None and len(w.moved) == moved
    assert Counter(w.skipped.values()) == Counter({"gone": 200 - moved})
    failed, pending = list(reversed(ids_of(redis_client, K.failed))), ids_of(redis_client, K.pending)
    assert Counter(pending) == Counter(w.moved) and w.counted() == Counter(job_ids)
    assert failed == ([] if moved == 190 else job_ids[20 + removed:])  # beyond the slack: held, back in order
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)


def test_workers_pushing_at_the_head_mid_walk_stay_dead_in_order(redis_client):
    job_ids = failed_jobs(redis_client, 50)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    late: list[str] = []

    def after(n):
        late.append(f"late{n:03d}")
        redis_client.hset(K.job(late[-1]), mapping={"id": late[-1], "payload": "{}", "status": "failed"})
        redis_client.lpush(K.failed, late[-1])

    w = Walk(lay, plan, batch=4, after=after)
    assert w.error is None and sorted(w.moved) == job_ids
    assert list(reversed(ids_of(redis_client, K.failed))) == late
    hj_after(redis_client, plan, w)


def test_the_list_running_out_then_refilled_between_round_trips(redis_client):
    """The list runs out in round trip 1 (others took 25 jobs) while round
    trip 2 is in flight; before it runs a worker pushes new ids and one of
    the taken jobs back (hash unchanged): whatever round trip 2 moves is a
    planned job whose fence holds, and it is counted."""
    job_ids = failed_jobs(redis_client, 30)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    for j in job_ids[5:]:
        redis_client.lrem(K.failed, 0, j)
    polls: list[int] = []

    def stop():
        polls.append(1)
        if len(polls) == 1:  # round trip 1 sent, round trip 2 not yet
            until(lambda: popped(redis_client, K.walk) >= 5, "round trip 1 ran")
            redis_client.lpush(K.failed, "new1", job_ids[7], "new2")
            redis_client.hset(K.job("new1"), "payload", "{}")
        return False

    w = Walk(lay, plan, batch=10, stop=stop)
    assert w.error is None and sorted(w.moved) == job_ids[:5]
    # round trip 2 pops what the workers pushed (j0007 is planned at 7, round
    # trip 2 carries 10 on): held, back in order
    assert list(reversed(ids_of(redis_client, K.failed))) == ["new1", job_ids[7], "new2"]
    assert w.skipped == {j: "gone" for j in job_ids[5:]}
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids[:5]))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)


def noscript_errors(client) -> int:
    info = client.info("errorstats")
    return int(info.get("errorstat_NOSCRIPT", {}).get("count", 0))


def test_noscript_with_another_client_reloading_the_script_between_round_trips(redis_client):
    """Round trip 2 is refused (cache flushed after round trip 1 ran);
    another client loads the script before round trip 3 runs: round trip 3
    pops round trip 2's positions too (its jobs held), round trip 2 runs
    again and pops nothing.  Every planned job is counted once, nothing
    moved that was not planned, and a rerun moves the rest."""
    job_ids = failed_jobs(redis_client, 60)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    polls: list[int] = []
    base = noscript_errors(redis_client)
    script = scripts.script(redis_client, "hj_window").script

    def stop():
        polls.append(1)
        if len(polls) == 1:  # round trip 1 in flight, 2 not sent
            until(lambda: popped(redis_client, K.walk) >= 10, "round trip 1 ran")
            redis_client.script_flush()
        elif len(polls) == 2:  # round trip 2 in flight (refused), 3 not sent
            until(lambda: noscript_errors(redis_client) > base, "round trip 2 refused")
            redis_client.script_load(script)
        return False

    w = Walk(lay, plan, batch=10, stop=stop)
    assert w.error is None
    assert set(job_ids[:10]) | set(job_ids[20:]) == set(w.moved)
    assert Counter(w.skipped.values()) == Counter({"not at its planned position": 10})
    assert list(reversed(ids_of(redis_client, K.failed))) == job_ids[10:20]
    hj_after(redis_client, plan, w)
    rest = run_plan(lay, lay.plan(redrive()), batch=10, journal=False)
    assert (rest.moved, rest.skipped) == (10, 0)


# -- hash-job lean plan: the HMGETs packed by jobctl --------------------------------------

@pytest.mark.parametrize("own_conn", [False, True])
def test_hash_job_plan_a_wrong_type_job_key_holds_only_its_job_and_the_connection_stays_clean(redis_client,
                                                                                             own_conn):
    from jobctl.layouts.hash_job.layout import WRONGTYPE_BREAKDOWN

    job_ids = failed_jobs(redis_client, 300)
    redis_client.delete(K.job(job_ids[150]))
    redis_client.set(K.job(job_ids[150]), "x")
    client = own(redis_client) if own_conn else redis_client
    lay = hj_layout(client)
    plan = lay.plan(redrive())  # planned: the apply fails it alone (wrongtype)
    assert plan.planned == 300 and plan.breakdown[WRONGTYPE_BREAKDOWN] == 1 and not plan.dangling
    # every reply of the window was read: the next replies are right
    assert client.llen(K.failed) == 300 and client.get(K.job(job_ids[150])) == b"x"
    assert client.hget(K.job(job_ids[3]), "id") == job_ids[3].encode()
    redis_client.delete(K.job(job_ids[150]))
    plan = lay.plan(redrive())
    assert plan.planned == 299 and plan.dangling == [job_ids[150]]


@pytest.mark.parametrize("reset", [True, False])  # unfiltered: per job (hj_window), a tail range (hj_tail)
def test_hash_job_plan_dangling_and_non_ascii_ids(redis_client, reset):
    job_ids = failed_jobs(redis_client, 5)
    odd = ["é-1", "\udcff\udcfe-raw", "日本"]  # one not UTF-8 (surrogateescape)
    for j in odd:
        raw = j.encode("utf-8", "surrogateescape")
        redis_client.hset(K.job(j).encode("utf-8", "surrogateescape"),
                          mapping={"id": raw, "payload": "{}", "status": "failed", "attempts": 3})
        redis_client.lpush(K.failed, raw)
    redis_client.lpush(K.failed, "ghost")  # no hash: dangling
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive(per_job=False, reset_attempts=reset))
    assert plan.dangling == ["ghost"] and plan.planned == 8
    assert plan.sample_ids() == job_ids + odd
    res = run_plan(lay, plan, batch=3, journal=False)
    assert (res.moved, res.skipped, res.failed) == (8, 0, 0)
    assert ids_of(redis_client, K.failed) == ["ghost"]
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids + odd))


def test_hash_job_plan_of_an_empty_failed_list(redis_client):
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    assert plan.planned == 0 and plan.scanned == 0
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and not redis_client.exists(K.lease)
    redis_client.rpush(K.failed, "")  # an empty id: dangling, not a crash
    assert lay.plan(redrive()).dangling == [""]


def test_hash_job_plan_with_a_hold_a_crashed_walk_left(redis_client):
    """A crashed walk left the 7 oldest ids in the hold (as hj_window
    does: LMOVE failed hold RIGHT LEFT): the plan counts them first, the
    walk puts them back first; every job moves, in order."""
    job_ids = failed_jobs(redis_client, 30)
    for _ in range(7):
        redis_client.lmove(K.failed, K.hold, "RIGHT", "LEFT")
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    assert [plan.jobs.job_id(n) for n in range(30)] == job_ids and plan.walked[0] == 30
    w = Walk(lay, plan, batch=4)
    assert w.error is None and sorted(w.moved) == job_ids
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids))
    hj_after(redis_client, plan, w)


def test_an_error_outside_the_walk_with_a_round_trip_in_flight_leaves_the_connection_clean(redis_client):
    """A progress callback raises while a round trip is in flight: run_plan
    raises it after counting that round trip; the hold is back, the lease
    released, and the pool's connection answers the next commands (before
    the fix: the unread EVALSHA reply answered them)."""
    job_ids = failed_jobs(redis_client, 100)
    lay = hj_layout(redis_client)
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        raise RuntimeError("progress display failed")

    with pytest.raises(RuntimeError):
        run_plan(lay, lay.plan(redrive()), batch=10, journal=False, progress=progress)
    for _ in range(3):
        assert redis_client.set("probe", "v") is True and redis_client.get("probe") == b"v"
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    pending = ids_of(redis_client, K.pending)
    assert pending == list(reversed(job_ids[:20]))  # the first round trip and the one in flight
    assert list(reversed(ids_of(redis_client, K.failed))) == job_ids[20:]


def test_hash_job_plan_with_a_limit_leaves_the_own_connection_clean(redis_client):
    failed_jobs(redis_client, 300)
    client = own(redis_client)
    lay = hj_layout(client)
    plan = lay.plan(redrive(limit=5))
    assert plan.planned == 5 and plan.walked[0] == 5
    assert client.set("probe", "v") is True and client.get("probe") == b"v"


# -- json-list: duplicates of the same string ----------------------------------------------

@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ahead", [2, 3])
def test_json_list_many_duplicates_and_removals_below_the_walk_count_every_move_once(redis_client, seed, ahead):
    """Strings from a small set (many equal ones) and others removing some
    below the walk after the plan: what the walk counts moved is exactly
    what left the dead list, and each planned job is counted once."""
    import random

    rnd = random.Random(seed)
    els = [b'{"id": "v%d", "task": "t"}' % rnd.randrange(6) for _ in range(80)]
    redis_client.rpush(JK.dead, *els)
    lay = jl_layout(own(redis_client))
    plan = lay.plan(OpSpec(Operation.PURGE, JP, State.DEAD, None, filter=PER_JOB))
    assert plan.planned == 80
    for _ in range(rnd.randrange(1, 12)):
        redis_client.lrem(JK.dead, 1, rnd.choice(els))  # the copy nearest the tail
    before = redis_client.llen(JK.dead)
    w = Walk(lay, plan, batch=rnd.choice([1, 3, 7, 20]), ahead=ahead)
    assert w.error is None
    assert len(w.moved) == before - redis_client.llen(JK.dead)
    assert w.counted() == Counter(plan.jobs[n].job_id for n in range(80))
    assert not redis_client.exists(JK.hold) and not redis_client.exists(JK.lease)


def test_json_list_stop_with_a_round_trip_in_flight(redis_client):
    els = [jl_string(i) for i in range(100)]
    redis_client.rpush(JK.dead, *els)
    lay = jl_layout(redis_client)
    seen: list[int] = []
    res = run_plan(lay, lay.plan(OpSpec(Operation.PURGE, JP, State.DEAD, None, filter=PER_JOB)), batch=10, journal=False,
                   progress=lambda done, total: seen.append(done), stop=lambda: len(seen) >= 1)
    assert res.interrupted and res.moved == 20  # the first round trip and the one behind it
    assert redis_client.lrange(JK.dead, 0, -1) == els[20:]
    assert not redis_client.exists(JK.hold) and not redis_client.exists(JK.lease)


# -- reliable-list: an --ids plan (per-job walk) -------------------------------------------

@pytest.mark.parametrize("ahead", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 7, 500])
def test_reliable_list_ids_plan_with_removals_below_the_walk(redis_client, ahead, batch):
    from jobctl.config import QueueConfig
    from jobctl.keys import ReliableListKeys
    from test_operations import assert_consistent, ids, simple_dead

    rk = ReliableListKeys("rvw")
    jobs = simple_dead(redis_client, "rvw", 40)
    lay = layout_for(own(redis_client), QueueConfig("rvw"))
    chosen = jobs[::3]
    plan = lay.plan(OpSpec(Operation.REDRIVE, "rvw", State.DEAD, State.READY, ids=tuple(chosen)))
    assert not isinstance(plan.jobs, TailRange) and plan.planned == len(chosen)

    gone = {jobs[31], jobs[32]} if batch < 31 else set()

    def after(n):
        if n == 1 and gone:  # others remove two jobs (not chosen) the walk has not reached
            for j in (jobs[31], jobs[32]):
                redis_client.lrem(rk.dead, 0, j)
                redis_client.delete(rk.job(j))

    w = Walk(lay, plan, batch=batch, ahead=ahead, after=after)
    assert w.error is None and sorted(w.moved) == sorted(chosen) and not w.skips
    assert sorted(ids(redis_client, rk.ready)) == sorted(chosen)
    assert sorted(ids(redis_client, rk.dead)) == sorted(set(jobs) - set(chosen) - gone)
    assert_consistent(redis_client, ["rvw"])


def test_planned_jobs_past_the_walks_total_are_not_met(redis_client):
    """A plan whose jobs lie past ``walked`` (the walk's total): the walk
    pops only ``total`` positions; the jobs past it are counted skipped and
    stay dead in order."""
    job_ids = failed_jobs(redis_client, 30)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    plan.walked[0] = 10
    w = Walk(lay, plan, batch=4)
    assert w.error is None and sorted(w.moved) == job_ids[:10]
    assert w.skipped == {j: "not at its planned position" for j in job_ids[10:]}
    assert list(reversed(ids_of(redis_client, K.failed))) == job_ids[10:]
    hj_after(redis_client, plan, w)


@pytest.mark.parametrize("presses", [2, 3])
def test_ctrl_c_while_reading_counts_what_ran(redis_client, monkeypatch, presses):
    """Ctrl-C pressed (real ``SIGINT``s, the CLI's handler) while the first
    round trip's replies are counted (read, not yet yielded), the second in
    flight (the tail walk's test presses inside the socket read itself).  Twice: the second
    press is deferred (``jobctl.ops.interrupt``), the walk sends nothing
    more, and both round trips are counted (review6's finding: they were
    lost with the connection).  Three times: the third interrupts at once,
    uncounted, but every job is still in one state."""
    from jobctl.cli.ops_cmds import StopFlag

    job_ids = failed_jobs(redis_client, 100)
    lay = hj_layout(own(redis_client))
    plan = lay.plan(redrive())
    real = per_job.record_code
    calls: list[int] = []

    def record_code(br, job_id, code):
        calls.append(1)
        if len(calls) == 1:
            for _ in range(presses):
                os.kill(os.getpid(), signal.SIGINT)
        real(br, job_id, code)

    monkeypatch.setattr(per_job, "record_code", record_code)
    with StopFlag() as stopper:
        res = run_plan(lay, plan, batch=10, stop=stopper.flag.is_set, journal=False)
    pending = ids_of(redis_client, K.pending)
    assert res.interrupted and not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert sorted(pending + ids_of(redis_client, K.failed)) == job_ids and len(pending) == 20
    assert res.moved == len(pending) if presses == 2 else res.moved <= len(pending)


def test_a_client_without_a_connection_of_its_own_walks_one_round_trip_at_a_time(redis_client):
    """The path of a cluster client (no ``.connection``): redis-py's
    pipeline, one round trip at a time, NOSCRIPT after a flush rerun."""
    job_ids = failed_jobs(redis_client, 40)
    lay = hj_layout(redis_client)  # a pooled client: .connection is None
    plan = lay.plan(redrive())

    def after(n):
        if n in (1, 3):
            redis_client.script_flush()

    w = Walk(lay, plan, batch=7, ahead=3, after=after)
    assert w.error is None and sorted(w.moved) == job_ids
    assert ids_of(redis_client, K.pending) == list(reversed(job_ids))
    hj_after(redis_client, plan, w)


def test_cli_redrive_with_a_wrong_type_job_key_fails_that_job_alone(redis_client, redis_url, tmp_path, capsys):
    from helpers import cli_runner, write_config

    failed_jobs(redis_client, 50)
    redis_client.delete(K.job("j0020"))
    redis_client.set(K.job("j0020"), "x")
    cfg = write_config(tmp_path, '[queues.hjw]\nlayout = "hash-job"\n')
    code, out, err = cli_runner(capsys, redis_url, cfg)("redrive", "hjw", "--yes")
    assert code == 8 and "failed 1" in out and "Traceback" not in err, (out, err)
    assert [x.decode() for x in redis_client.lrange(K.failed, 0, -1)] == ["j0020"]
    assert redis_client.llen(K.pending) == 49 and redis_client.get(K.job("j0020")) == b"x"


def test_an_equal_string_dead_lettered_between_round_trips_is_not_moved(redis_client):
    """A job met by the round trip in flight before its position (others
    removed jobs below it) is carried again by the next one, packed before
    the reply; an equal string dead-lettered meanwhile within its slack must
    not be moved under it (before the fix: purged, uncounted).  The window
    script keeps such positions in the walk hash ("met")."""
    a = b'{"id": "a", "task": "t"}'
    els = [jl_string(0), jl_string(1), jl_string(2), a, jl_string(4)]
    redis_client.rpush(JK.dead, *els)
    lay = jl_layout(own(redis_client))
    plan = lay.plan(OpSpec(Operation.PURGE, JP, State.DEAD, None, filter=PER_JOB))
    redis_client.lpop(JK.dead, 2)  # others take two below the walk: a is at 1 now (planned at 3)
    polls: list[int] = []

    def stop():
        polls.append(1)
        if len(polls) == 1:  # round trip 1 (positions 0-1: x2, a) sent, round trip 2 not yet
            until(lambda: popped(redis_client, JK.walk) >= 2, "round trip 1 ran")
            redis_client.rpush(JK.dead, a)  # a worker dead-letters an equal string
        return False

    w = Walk(lay, plan, batch=2, stop=stop)
    assert w.error is None
    assert redis_client.lrange(JK.dead, 0, -1) == [a]  # not planned: stays dead
    assert sorted(w.moved) == ["a", "d002", "d004"]


def test_a_reliable_list_job_dead_lettered_again_between_round_trips_is_not_redriven_twice(redis_client):
    """As above on a reliable-list --ids plan: the job redriven by round
    trip 1 (met before its position) fails again and is pushed back at the
    head before round trip 2 (packed before the reply, carrying it again)
    runs: it stays dead; before the fix it reached ready a second time,
    uncounted."""
    from jobctl.config import QueueConfig
    from jobctl.keys import ReliableListKeys
    from test_operations import ids, simple_dead

    rk = ReliableListKeys("rvx")
    jobs = simple_dead(redis_client, "rvx", 5)  # tail first: jobs[0] at position 0
    lay = layout_for(own(redis_client), QueueConfig("rvx"))
    plan = lay.plan(OpSpec(Operation.REDRIVE, "rvx", State.DEAD, State.READY, ids=tuple(jobs)))
    assert not isinstance(plan.jobs, TailRange) and plan.planned == 5
    assert [plan.jobs[n].position for n in range(5)] == [0, 1, 2, 3, 4]
    redis_client.rpop(rk.dead, 2)  # others take the two oldest: jobs[3] is at 1 now
    polls: list[int] = []

    def stop():
        polls.append(1)
        if len(polls) == 1:  # round trip 1 (jobs[2], jobs[3]) sent, round trip 2 not yet
            until(lambda: popped(redis_client, rk.walk) >= 2, "round trip 1 ran")
            assert redis_client.lrem(rk.ready, 1, jobs[3]) == 1  # a worker claims it, it fails again
            redis_client.lpush(rk.dead, jobs[3])
        return False

    w = Walk(lay, plan, batch=2, stop=stop)
    assert w.error is None and sorted(w.moved) == sorted([jobs[2], jobs[3], jobs[4]])
    assert ids(redis_client, rk.dead) == [jobs[3]] and jobs[3] not in ids(redis_client, rk.ready)
