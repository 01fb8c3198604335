"""The window engine (jobctl.ops.walk) on a real server: a key of the
wrong type stops an operation before anything moves (exit 6), a payload of
the wrong type fails only its job, a crash mid-walk leaves every job in one
state and a rerun finishes in order, a second operation on the same dead
list is refused by the lease, and every read counts the hold as dead."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from jobctl.config import QueueConfig
from jobctl.errors import Busy, DataError
from jobctl.exitcodes import ExitCode
from jobctl.filter import compile_filter
from jobctl.keys import HashJobKeys, JsonListKeys, ReliableListKeys, StreamGroupKeys
from jobctl.layouts import layout_for
from jobctl.layouts.hash_job.layout import FENCE_FIELDS
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver, wire
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.json_list import ADAPTER, MAX_RETRIES, VISIBILITY_TIMEOUT_MS, JsonListQueue
from jobctl_fixtures.layouts.hash_job import ADAPTER as HJ_ADAPTER
from jobctl_fixtures.layouts.hash_job import VISIBILITY_TIMEOUT_MS as HJ_VT
from jobctl_fixtures.layouts.hash_job import HashJobQueue
from jobctl_fixtures.layouts.stream_group import ADAPTER as SG_ADAPTER
from test_operations import (  # noqa: F401 - fixtures
    assert_consistent, cfg, ids, redrive_spec, run, simple_dead,
)
from helpers import redrive_records, today_record

K = ReliableListKeys("email")
JL = JsonListKeys("jobs")
NOW = 1_795_000_000_000


def rl_layout(client) -> ReliableList:
    return ReliableList(client, QueueConfig("email"))


def spec_for(op: str, queue: str = "email", flt: str = "error = HTTP_503") -> OpSpec:
    f = compile_filter(flt)
    if op == "redrive":
        return OpSpec(Operation.REDRIVE, queue, State.DEAD, State.READY, filter=f)
    if op == "suppress":
        return OpSpec(Operation.SUPPRESS, queue, State.DEAD, State.SUPPRESSED, filter=f, reason="r")
    return OpSpec(Operation.PURGE, queue, State.DEAD, None, filter=f)


def snapshot(client) -> dict:
    out = {}
    for key in sorted(client.scan_iter(match="*", count=1000)):
        if b":jobctl:journal" in key:
            continue
        t = client.type(key)
        if t == b"list":
            out[key] = client.lrange(key, 0, -1)
        elif t == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif t == b"hash":
            out[key] = sorted(client.hgetall(key).items())
        elif t == b"string" and not key.endswith(b":jobctl:lease"):
            out[key] = client.get(key)
    return out


# -- a key of the wrong type: nothing moves, exit 6 ---------------------------------------

@pytest.mark.parametrize("op, bad", [("redrive", K.ready), ("suppress", K.suppressed), ("purge", K.hold),
                                     ("redrive", "record"), ("suppress", K.suppressed_info)])
def test_wrong_type_key_moves_nothing_and_exits_6(redis_client, run, op, bad):
    simple_dead(redis_client, "email", 30)
    if bad == "record":  # jobctl's redrive record of today
        bad = today_record(K)
        redis_client.set(bad, "not a hash")
    else:
        redis_client.hset(bad, "x", "y")
    if bad == K.suppressed_info:
        redis_client.delete(bad)
        redis_client.set(bad, "not a hash")
    before = snapshot(redis_client)
    args = {"redrive": ("redrive", "email"), "suppress": ("suppress", "email", "--reason", "r"),
            "purge": ("purge", "email", "--state", "dead", "--no-export")}[op]
    code, out, err = run(*args, "--filter", "error = HTTP_503", "--yes")
    assert code == ExitCode.DATA, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "WRONGTYPE" in lines[0], err
    assert bad in lines[0] or bad == K.hold, err  # the hold is read (and refused) when planning already
    assert "Traceback" not in err
    assert snapshot(redis_client) == before  # nothing moved, nothing written
    assert not redis_client.exists(K.lease) and not redis_client.exists(K.walk)
    redis_client.delete(bad)
    code, out, err = run("check", "email")
    assert code == 0, out + err


def data_error_changes_nothing(redis_client, lay, plan) -> str:
    """The message of the DataError (exit code DATA) ``run_plan`` raises on
    ``plan``; asserts that nothing in Redis changed."""
    before = snapshot(redis_client)
    with pytest.raises(DataError) as exc:
        run_plan(lay, plan, journal=False)
    assert exc.value.exit_code == ExitCode.DATA
    assert snapshot(redis_client) == before
    return str(exc.value)


@pytest.mark.parametrize("op", ["redrive", "suppress", "purge"])
def test_json_list_wrong_type_target_moves_nothing(redis_client, op):
    q = JsonListQueue(redis_client, "jobs", max_retries=MAX_RETRIES, timeout_ms=VISIBILITY_TIMEOUT_MS)
    for i in range(12):
        q.enqueue({"id": f"d{i:03d}", "task": "charge_card", "n": i})
        for _ in range(MAX_RETRIES):
            q.nack(q.claim(now=NOW), "card declined")
    bad = {"redrive": JL.pending, "suppress": JL.suppressed, "purge": JL.suppressed_info}[op]
    redis_client.delete(bad)
    redis_client.set(bad, "wrong type")
    lay = layout_for(redis_client, ADAPTER.queue_config("jobs"))
    plan = lay.plan(spec_for(op, "jobs", flt="id ~ '*'"))
    assert plan.planned == 12
    message = data_error_changes_nothing(redis_client, lay, plan)
    assert "WRONGTYPE" in message and "\n" not in message
    redis_client.delete(bad)
    assert lay.check().ok


# -- a payload of the wrong type mid-batch: that job fails, every job in one state --------

def test_wrong_type_payload_mid_batch_fails_only_that_job(redis_client):
    jobs = simple_dead(redis_client, "email", 20, codes=("HTTP_503",))
    lay = rl_layout(redis_client)
    plan = lay.plan(redrive_spec(reset_attempts=True))
    victim = jobs[7]
    redis_client.delete(K.job(victim))
    redis_client.hset(K.job(victim), "not", "a string")
    res = run_plan(lay, plan, journal=False)
    assert (res.moved, res.failed, res.skipped) == (19, 1, 0)
    assert ids(redis_client, K.dead) == [victim]
    assert sorted(ids(redis_client, K.ready)) == sorted(set(jobs) - {victim})
    assert_consistent(redis_client, ["email"])


# -- a crash mid-walk, then a rerun -------------------------------------------------------

CRASH = """
import os, signal, sys
import redis
from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.spec import Operation, OpSpec

client = redis.Redis.from_url(sys.argv[1])
lay = ReliableList(client, QueueConfig("email"))
plan = lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY,
                       filter=compile_filter("error = HTTP_503")))
for n, br in enumerate(walk_driver.drive(lay.sources(plan.spec), plan, batch=7, depth=2)):
    if n == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)  # no restore, no lease release: a crash
"""


@pytest.mark.parametrize("calls", [1, 4])
def test_crash_mid_walk_then_rerun_moves_every_job_once_in_order(redis_client, redis_url, run, calls):
    jobs = simple_dead(redis_client, "email", 60, codes=("HTTP_503", "HTTP_400", "HTTP_400"))
    proc = subprocess.run([sys.executable, "-c", CRASH, redis_url, str(calls)], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    held = redis_client.llen(K.hold)
    assert held > 0 and redis_client.exists(K.lease) and redis_client.exists(K.walk)
    # every job is in exactly one state; the reads count the hold as dead
    where = assert_consistent(redis_client, ["email"])
    assert set(where) == set(jobs)
    dead_now = redis_client.llen(K.dead) + held
    code, out, err = run("status", "email", "--json")
    assert code == 0, err
    assert json.loads(out)["queues"][0]["dead"] == dead_now
    assert rl_layout(redis_client).depth(State.DEAD) == dead_now
    assert {r.job_id for r in rl_layout(redis_client).list_jobs(State.DEAD, limit=100)} == \
        {j for j, key in where.items() if key == K.dead}
    code, out, err = run("check", "email")  # the hold a dead operation left is reported, not hidden
    assert code == 7 and "orphaned_hold" in out, out + err
    # the rerun takes the dead process's lease over, finishes the hold, then the work
    code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes", "--json")
    assert code == 0, err
    moved_first = len(ids(redis_client, K.ready)) - json.loads(out)["moved"]
    assert moved_first > 0 and json.loads(out)["skipped"] == 0
    assert sorted(ids(redis_client, K.ready)) == sorted(jobs[0::3])
    assert ids(redis_client, K.dead) == [j for j in reversed(jobs) if j not in set(jobs[0::3])]
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.walk)
    assert not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])


# -- two operations on the same dead list ---------------------------------------------------

def test_a_second_operation_is_refused_while_one_walks(redis_client, run):
    jobs = simple_dead(redis_client, "email", 90, codes=("HTTP_503", "HTTP_400", "HTTP_400"))
    lay = rl_layout(redis_client)
    first = lay.plan(redrive_spec(flt="error = HTTP_503"))
    second = lay.plan(redrive_spec(flt="error = HTTP_503"))
    walk = walk_driver.drive(lay.sources(first.spec), first, batch=10, depth=1)
    moved = len(next(walk).moved)
    assert moved > 0 and redis_client.exists(K.lease)
    before = snapshot(redis_client)
    with pytest.raises(Busy) as exc:
        run_plan(lay, second, journal=False)
    assert exc.value.exit_code == ExitCode.BUSY and first.spec.op_id in str(exc.value)
    code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes")
    assert code == ExitCode.BUSY and len(err.strip().splitlines()) == 1, err
    assert snapshot(redis_client) == before  # refused up front: nothing changed
    moved += sum(len(br.moved) for br in walk)  # the first one finishes
    assert moved == 30 and not redis_client.exists(K.lease)
    # afterwards the second plan's jobs are gone, not "skipped" while still dead
    res = run_plan(lay, second, journal=False)
    assert res.moved == 0
    assert all(j not in ids(redis_client, K.dead) for j in res.skipped_sample)
    assert sorted(ids(redis_client, K.ready)) == sorted(jobs[0::3])
    assert_consistent(redis_client, ["email"])


def test_unfiltered_redrive_pipelines_and_records_each_redrive_once(redis_client):
    jobs = simple_dead(redis_client, "email", 200)
    lay = rl_layout(redis_client)
    plan = lay.plan(redrive_spec())
    results = list(walk_driver.drive(lay.sources(plan.spec), plan, batch=16, depth=4))
    assert sum(len(br.moved) for br in results) == 200
    assert sum(not br.more for br in results) == -(-len(results) // 4)  # one stop point per round trip
    recs = redrive_records(redis_client, K)
    assert len(recs) == 200 and {json.loads(v)[0] for v in recs.values()} == {plan.spec.op_id}
    assert ids(redis_client, K.ready) == list(reversed(jobs))  # the oldest dead job first: at the ready tail
    assert not redis_client.exists(K.dead) and not redis_client.exists(K.hold)


def test_inspect_shows_where_a_redrive_is_recorded(redis_client, run):
    jobs = simple_dead(redis_client, "email", 4, codes=("HTTP_503",))
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    op = json.loads(out)["operation_id"]
    code, out, err = run("inspect", "email", jobs[2], "--json")
    assert code == 0, err
    doc = json.loads(out)
    rec = doc.get("meta", doc).get("redriven")
    assert rec["operation"] == op and rec["count"] == 1 and rec["at_ms"] > 0
    code, out, err = run("inspect", "email", jobs[2])
    assert code == 0 and op in out


def test_ctrl_c_inside_a_round_trip_leaves_every_job_in_one_state_in_order(redis_client, monkeypatch):
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 40)  # 8 calls of 5 a round trip
    jobs = simple_dead(redis_client, "email", 120, codes=("HTTP_503", "HTTP_400"))
    lay = rl_layout(redis_client)
    plan = lay.plan(redrive_spec(flt="error = HTTP_503"))
    seen = []

    def progress(done, total):
        seen.append(done)
        if len(seen) == 3:  # inside the first round trip: its other calls already ran
            raise KeyboardInterrupt

    res = run_plan(lay, plan, batch=5, progress=progress, journal=False)
    assert res.interrupted and 0 < res.moved < 60
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)  # restored, released
    where = assert_consistent(redis_client, ["email"])
    assert set(where) == set(jobs)
    stay = [j for j in reversed(jobs) if j in set(jobs[1::2])]
    assert [j for j in ids(redis_client, K.dead) if j in set(stay)] == stay
    res2 = run_plan(lay, lay.plan(redrive_spec(flt="error = HTTP_503")), journal=False)
    assert res2.moved == 60 - res.moved and res2.skipped == 0
    assert sorted(ids(redis_client, K.ready)) == sorted(jobs[0::2])


CRASH_MID_WALK = """
import os, signal, sys
import redis
from jobctl.filter import compile_filter
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.{layout} import ADAPTER

client = redis.Redis.from_url(sys.argv[1])
lay = layout_for(client, ADAPTER.queue_config("jobs"))
plan = lay.plan(OpSpec(Operation.PURGE, "jobs", State.DEAD, None, filter=compile_filter({flt!r})))
for n, br in enumerate(walk_driver.drive(lay.sources(plan.spec), plan, batch={batch}, depth=2)):
    if n == 3:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def purge_killed_mid_walk(redis_url: str, layout: str, flt: str, batch: int) -> None:
    """A purge of queue jobs' dead jobs matching ``flt`` (the fixture layout
    ``layout``), walked in a child process that is killed (SIGKILL) as the
    walk yields its fourth batch."""
    code = CRASH_MID_WALK.format(layout=layout, flt=flt, batch=batch)
    proc = subprocess.run([sys.executable, "-c", code, redis_url], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_json_list_crash_mid_walk_then_rerun(redis_client, redis_url):
    q = JsonListQueue(redis_client, "jobs", max_retries=MAX_RETRIES, timeout_ms=VISIBILITY_TIMEOUT_MS)
    for i in range(40):
        q.enqueue({"id": f"d{i:03d}", "task": "charge_card" if i % 3 else "send_email", "n": i})
        for _ in range(MAX_RETRIES):
            q.nack(q.claim(now=NOW), "card declined")
    before = redis_client.lrange(JL.dead, 0, -1)
    purge_killed_mid_walk(redis_url, "json_list", "type = charge_card", 4)
    lay = layout_for(redis_client, ADAPTER.queue_config("jobs"))
    held = redis_client.llen(JL.hold)
    assert held > 0
    # the hold is dead: the oldest part of the dead list, in order
    logical = redis_client.lrange(JL.hold, 0, -1) + redis_client.lrange(JL.dead, 0, -1)
    assert [r for r in before if r in set(logical)] == logical
    assert lay.depth(State.DEAD) == len(logical)
    assert lay.check().ok
    res = run_plan(lay, lay.plan(OpSpec(Operation.PURGE, "jobs", State.DEAD, None,
                                        filter=compile_filter("type = charge_card"))), journal=False)
    assert res.skipped == 0 and res.failed == 0
    assert redis_client.lrange(JL.dead, 0, -1) == [r for r in before if b"send_email" in r]
    assert not redis_client.exists(JL.hold) and not redis_client.exists(JL.walk)


# -- stream-group dead list on the same engine ---------------------------------------------

def sg_layout(client):
    q = SG_ADAPTER.queue_config("email")
    return layout_for(client, QueueConfig(name=q.name, layout=q.layout, tag=q.tag, shards=q.shards,
                                          visibility_timeout_ms=q.visibility_timeout_ms))


def test_stream_group_dead_list_redrive_is_bounded_per_call_and_keeps_order(redis_client):
    SG_ADAPTER.load(redis_client, "dlq-spike", queue="email", size=400, seed=3)
    sg = StreamGroupKeys("email")
    lay = sg_layout(redis_client)
    dead_before = [x.decode() for x in redis_client.lrange(sg.dead, 0, -1)]
    plan = lay.plan(spec_for("redrive", flt="error = HTTP_503"))
    assert 0 < plan.planned < len(dead_before) and plan.redrive_record == "hash"
    entries_before = redis_client.xlen(sg.stream)
    sizes = []
    for br in walk_driver.drive(lay.sources(plan.spec), plan, batch=16, depth=3):
        sizes.append(len(br.moved) + len(br.skipped))
        assert len(br.moved) + len(br.skipped) <= 16 + walk_driver.SLACK
    moved = set(plan.job_ids())
    assert redis_client.xlen(sg.stream) == entries_before + len(moved)  # one XADD jobId <id> each
    assert [x.decode() for x in redis_client.lrange(sg.dead, 0, -1)] == [j for j in dead_before if j not in moved]
    assert {k.decode() for k in redrive_records(redis_client, sg)} == moved
    assert not redis_client.exists(sg.hold) and not redis_client.exists(sg.lease)
    assert lay.check().ok


def test_stream_group_wrong_type_stream_moves_nothing(redis_client):
    SG_ADAPTER.load(redis_client, "dlq-spike", queue="email", size=120, seed=4)
    sg = StreamGroupKeys("email")
    lay = sg_layout(redis_client)
    plan = lay.plan(spec_for("redrive", flt="error = HTTP_503"))
    assert plan.planned > 0
    redis_client.rename(sg.stream, "saved")
    redis_client.hset(sg.stream, "not", "a stream")
    assert sg.stream in data_error_changes_nothing(redis_client, lay, plan)
    redis_client.delete(sg.stream)
    redis_client.rename("saved", sg.stream)
    assert lay.check().ok


def test_job_columns_keep_planned_jobs_compactly():
    from jobctl.ops.plan import JobColumns, PlannedJob

    cols = JobColumns()
    jobs = [PlannedJob("a", 0, 3, None, "00" * 19 + "ff"), PlannedJob("bé", 1, None, 17, ""),
            PlannedJob("c", 0, 9, None, "not a sha1")]
    for j in jobs:
        cols.append(j)
    assert len(cols) == 3 and list(cols) == jobs and cols[-1] == jobs[-1] and cols[0:2] == jobs[:2]
    assert [cols.job_id(n) for n in range(3)] == ["a", "bé", "c"] and cols.position(1) is None


# -- an unfiltered dead-list plan: the tail positions, no per-job data --------------------

def test_unfiltered_plan_keeps_no_per_job_data_and_takes_exactly_its_tail(redis_client):
    from jobctl.ops.plan import TailRange

    jobs = simple_dead(redis_client, "email", 50)  # jobs[0] at the tail (oldest)
    lay = rl_layout(redis_client)
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, limit=40)
    plan = lay.plan(spec)
    assert isinstance(plan.jobs, TailRange) and plan.planned == 40 and plan.truncated
    assert plan.breakdown_sampled > 0 and plan.to_json()["breakdown_sampled"] is True
    assert sum(plan.breakdown.values()) <= plan.breakdown_sampled
    dangling = jobs[5]
    redis_client.delete(K.job(dangling))  # a dangling id: stays dead, reported gone
    newer = simple_dead(redis_client, "email", 3, prefix="late")  # pushed at the head after the plan
    res = run_plan(lay, plan, batch=6, journal=False)
    assert (res.moved, res.skipped, res.failed) == (39, 1, 0) and res.skipped_reasons == {"gone": 1}
    assert sorted(ids(redis_client, K.ready)) == sorted(set(jobs[:40]) - {dangling})
    assert ids(redis_client, K.dead) == list(reversed(newer)) + list(reversed(jobs[40:])) + [dangling]
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    recs = redrive_records(redis_client, K)
    assert len(recs) == 39


@pytest.mark.parametrize("flt", [None, "tenant = tenant_1"])
def test_tail_walk_with_two_round_trips_in_flight_stops_with_every_call_that_ran_counted(redis_client, monkeypatch,
                                                                                       flt):
    """Tail mode keeps two round trips in flight (the engine's own
    connection): the first one's last result does not end the run, and
    ``stop()``, polled before a third is sent, lets the second finish; every
    call that ran is counted and a rerun moves the rest, in order."""
    from jobctl.layouts.reliable_list import predicate_plan as predicate_plan
    from jobctl.ops.plan import PredicateRange, TailRange

    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 20)  # 2 calls of 10 a round trip
    monkeypatch.setattr(predicate_plan, "SCAN_WINDOW", 10)  # a filtered plan's windows: one a call
    jobs = simple_dead(redis_client, "email", 200)  # tenant_1 .. tenant_5 in turn, jobs[0] the oldest
    want = [j for n, j in enumerate(jobs) if not flt or n % 5 == 0]
    lay = rl_layout(redis_client)
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, **({"filter": compile_filter(flt)} if flt else {}))
    plan = lay.plan(spec)
    assert isinstance(plan.jobs, PredicateRange if flt else TailRange) and plan.planned == len(want)
    seen: list[int] = []
    res = run_plan(lay, plan, batch=10, progress=lambda d, t: seen.append(d), stop=lambda: len(seen) >= 1,
                   journal=False)
    walked = 40  # two round trips of 20 positions: the one in flight when stop() turned true finished
    assert res.interrupted and res.moved == len([j for j in want if jobs.index(j) < walked])
    assert res.moved == len(ids(redis_client, K.ready)) and res.skipped == 0
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert_consistent(redis_client, ["email"])
    res2 = run_plan(lay, lay.plan(spec), journal=False)
    assert (res2.moved, res2.skipped, res2.failed) == (len(want) - res.moved, 0, 0)
    assert ids(redis_client, K.ready) == list(reversed(want))  # the oldest dead job first, across the stop


def test_ctrl_c_with_two_round_trips_in_flight_stops_after_them(redis_client, monkeypatch):
    """Ctrl-C at a result of the first round trip: the second, already in
    flight, finishes and counts; nothing more is sent."""
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 20)
    jobs = simple_dead(redis_client, "email", 300)
    lay = rl_layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY))

    def progress(done, total):
        if done == 10:
            raise KeyboardInterrupt

    res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
    assert res.interrupted and res.moved == 40 == len(ids(redis_client, K.ready))
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)
    assert ids(redis_client, K.dead) == list(reversed(jobs[40:]))


def test_tail_walk_script_cache_flushed_with_round_trips_in_flight_moves_each_job_once(redis_client, monkeypatch):
    """A flush lands while two round trips are in flight (both refused,
    NOSCRIPT): both are run again in order and the ids read ahead are read
    again, so every job moves exactly once, in order."""
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 20)
    jobs = simple_dead(redis_client, "email", 300)
    lay = rl_layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY))
    flushed: list[int] = []

    def progress(done, total):
        if done in (40, 160):  # twice: a round trip after each is already in flight
            flushed.append(done)
            redis_client.script_flush()

    res = run_plan(lay, plan, batch=10, progress=progress, journal=False)
    assert flushed == [40, 160] and (res.moved, res.skipped, res.failed) == (300, 0, 0)
    assert ids(redis_client, K.ready) == list(reversed(jobs))
    assert not redis_client.exists(K.dead) and not redis_client.exists(K.hold)
    assert len(redrive_records(redis_client, K)) == 300


def test_unfiltered_purge_crash_mid_walk_then_rerun(redis_client, redis_url, run):
    jobs = simple_dead(redis_client, "email", 60)
    crash = CRASH.replace('filter=compile_filter("error = HTTP_503")', "").replace(
        "OpSpec(Operation.REDRIVE, \"email\", State.DEAD, State.READY,", "OpSpec(Operation.PURGE, \"email\", State.DEAD, None")
    proc = subprocess.run([sys.executable, "-c", crash, redis_url, "2"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    gone = [j for j in jobs if not redis_client.exists(K.job(j))]
    assert 0 < len(gone) < 60
    assert_consistent(redis_client, ["email"])
    code, out, err = run("purge", "email", "--state", "dead", "--no-export", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 60 - len(gone)
    assert not any(redis_client.exists(K.job(j)) for j in jobs)
    assert not redis_client.exists(K.dead) and not redis_client.exists(K.hold)


@pytest.mark.parametrize("raw", [
    b'{"jobId":"a","jobType":"t","createdAtEpochMs":1,"tenantId":"x","attempt":2,"payload":{"k":[1]}}',
    b'{"jobId":"a","jobType":"t","createdAtEpochMs":1,"attempt":"2"}',      # wrong type: malformed
    b'{"jobId":"a","jobType":"t","createdAtEpochMs":1.0}',                  # converted: full parse
    b'{"jobId":7,"jobType":"t","createdAtEpochMs":1}',                      # converted: full parse
    b'{"jobId":"a","jobType":"t"}', b'[1]', b'{"jobId":', b'{"jobId":"\xff"}',
    b'{"jobId":"a","jobType":"t","createdAtEpochMs":1,"attempt":true}',
])
def test_doc_envelope_agrees_with_parse_envelope(raw):
    from jobctl.layouts.reliable_list.lean_plan import doc_envelope
    from jobctl.model import ENVELOPE_FIELDS, parse_envelope

    full = parse_envelope(raw)
    lean = doc_envelope(raw)
    if lean is None:  # the plan falls back to parse_envelope: nothing to compare
        return
    assert not full.problems
    for attr in ENVELOPE_FIELDS.values():
        assert getattr(lean, attr) == getattr(full, attr), attr


def test_lean_filtered_plan_matches_the_record_plan(redis_client):
    from jobctl.layouts.planning import plan_from_walk, shard_index
    from jobctl.ops.plan import Plan

    simple_dead(redis_client, "email", 120, codes=("HTTP_503", "HTTP_400", "HTTP_400", "HTTP_503", "HTTP_400"))
    redis_client.set(K.job("job_0004"), b"{bad")
    redis_client.delete(K.job("job_0007"))
    lay = rl_layout(redis_client)
    for flt in ("error = HTTP_503 or tenant = tenant_2", "not error ~ 'HTTP_4*'", "id ~ '*'"):
        spec = spec_for("redrive", flt=flt)
        lean = lay.plan(spec, now=NOW)
        ref = plan_from_walk(Plan(spec=spec, now_ms=NOW), lay.iter_batches(State.DEAD), lambda rec: "",
                             shard_of=shard_index(lay.shards))
        assert [(j.job_id, j.position) for j in lean.jobs] == [(j.job_id, j.position) for j in ref.jobs]
        assert lean.breakdown == ref.breakdown and lean.walked == ref.walked
        assert (lean.scanned, lean.dangling) == (ref.scanned, ref.dangling)
        # the server-side quick rule-out never decodes a malformed envelope
        # none of the filter's text values occurs in (jobctl/layouts/reliable_list/predicate_plan.py)
        assert set(lean.malformed) <= set(ref.malformed)


# -- hash-job failed list on the same engine ------------------------------------------------

HJ = HashJobKeys("jobs")


def hj_failed(client, n: int, *, history: int = 10_000) -> tuple[HashJobQueue, list[str]]:
    """``n`` jobs failed for good by the seed's worker (``fail`` with retries
    exhausted: LPUSH failed + LTRIM to ``history``); oldest failure first."""
    q = HashJobQueue(client, "jobs", visibility_ms=HJ_VT, completed_ttl_s=86_400, history=history,
                     max_attempts=1)
    out = []
    for i in range(n):
        job_id = q.enqueue({"kind": "webhook" if i % 3 == 0 else "email", "n": i}, job_id=f"h{i:04d}", now=NOW + i)
        job = q.claim(now=NOW + i)
        assert job is not None and job.id == job_id
        assert q.fail(job, "HTTP 503", now=NOW + i)
        out.append(job_id)
    return q, out


def hj_layout(client):
    return layout_for(client, HJ_ADAPTER.queue_config("jobs"))


@pytest.fixture
def hj_run(redis_url, tmp_path, capsys):
    """``hj_run(*args)`` -> (exit code, stdout, stderr) of ``jobctl`` with the hash-job queue ``jobs``."""
    from jobctl.cli.main import main

    cfg = tmp_path / "hj.toml"
    cfg.write_text(f'[queues.jobs]\nlayout = "hash-job"\nvisibility_timeout_ms = {HJ_VT}\n')

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(["--url", redis_url, "--config", str(cfg), *args])
        out, err = capsys.readouterr()
        return code, out, err
    return _run


def hj_spec(op: str, flt: str = 'type = "webhook"') -> OpSpec:
    return spec_for(op, "jobs", flt=flt)


def test_hash_job_failed_list_goes_through_the_window_engine(redis_client):
    _, jobs = hj_failed(redis_client, 90)
    lay = hj_layout(redis_client)
    plan = lay.plan(hj_spec("redrive"))
    [src] = lay.sources(plan.spec)
    assert src.kind == "hj" and src.dead == HJ.failed and tuple(src.fence_fields) == FENCE_FIELDS
    results = list(walk_driver.drive([src], plan, batch=8, depth=3))
    assert all(len(br.moved) + len(br.skipped) <= 8 + walk_driver.SLACK for br in results)
    webhooks = jobs[0::3]
    assert sum(len(br.moved) for br in results) == 30
    assert ids(redis_client, HJ.pending) == list(reversed(webhooks))  # the oldest failure at the served tail
    assert ids(redis_client, HJ.failed) == [j for j in reversed(jobs) if j not in set(webhooks)]  # order kept
    fields = redis_client.hgetall(HJ.job(webhooks[0]))
    assert fields[b"status"] == b"pending" and fields[b"redrive_count"] == b"1"
    assert fields[b"redrive_operation"].decode() == plan.spec.op_id and redis_client.ttl(HJ.job(webhooks[0])) == -1
    assert not redis_client.exists(HJ.hold) and not redis_client.exists(HJ.walk) and not redis_client.exists(HJ.lease)
    assert lay.check().ok


def test_hash_job_fence_is_computed_server_side_from_the_field_list(redis_client):
    _, jobs = hj_failed(redis_client, 30)
    lay = hj_layout(redis_client)
    plan = lay.plan(hj_spec("suppress", flt="id ~ '*'"))
    assert plan.planned == 30
    # a worker touches two jobs after the plan: their fence no longer holds
    redis_client.hset(HJ.job(jobs[4]), "attempts", 9)
    redis_client.hset(HJ.job(jobs[20]), "last_error_at_ms", NOW + 99)
    res = run_plan(lay, plan, batch=7, journal=False)
    assert (res.moved, res.skipped, res.failed) == (28, 2, 0) and res.skipped_reasons == {"changed": 2}
    assert ids(redis_client, HJ.failed) == [jobs[20], jobs[4]]
    info = json.loads(redis_client.hget(HJ.suppressed_info, jobs[0]))
    assert info["operation"] == plan.spec.op_id and info["ttl_ms"] > 0
    # the field list comes from Python (FENCE_FIELDS as ARGV), never written again in the script
    from jobctl.scripts import script

    source = script(redis_client, "hj_window").script
    assert "last_error_at_ms" not in source and "'claim_token', 'claimed_at_ms', 'last_error" not in source


def test_hash_job_crash_mid_walk_reads_count_the_hold_then_rerun(redis_client, redis_url, hj_run):
    _, jobs = hj_failed(redis_client, 60)
    purge_killed_mid_walk(redis_url, "hash_job", 'type = "webhook"', 5)
    held = [x.decode() for x in redis_client.lrange(HJ.hold, 0, -1)]
    assert held and redis_client.exists(HJ.lease) and redis_client.exists(HJ.walk)
    lay = hj_layout(redis_client)
    logical = ids(redis_client, HJ.failed) + held  # the hold is the oldest part of the failed list
    assert logical == [j for j in reversed(jobs) if j in set(logical)]
    assert lay.depth(State.DEAD) == len(logical)
    code, out, err = hj_run("status", "jobs", "--json")
    assert code == 0, err
    assert json.loads(out)["queues"][0]["dead"] == len(logical)
    assert [r.job_id for r in lay.list_jobs(State.DEAD, limit=100)] == logical
    rec = lay.inspect(held[0])
    assert rec.state is State.DEAD and rec.position == logical.index(held[0])
    assert [r.job_id for b in lay.iter_batches(State.DEAD, batch=7) for r in b] == list(reversed(logical))
    assert lay.check().ok
    # the rerun takes the dead process's lease over, puts the hold back, then finishes
    code, out, err = hj_run("purge", "jobs", "--state", "dead", "--filter", 'type = "webhook"', "--no-export",
                         "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"] == 0
    assert ids(redis_client, HJ.failed) == [j for j in reversed(jobs) if j not in set(jobs[0::3])]
    assert not any(redis_client.exists(HJ.job(j)) for j in jobs[0::3])
    assert not redis_client.exists(HJ.hold) and not redis_client.exists(HJ.walk) and not redis_client.exists(HJ.lease)
    assert lay.check().ok


def test_hash_job_workers_ltrim_while_jobctl_holds(redis_client):
    q, jobs = hj_failed(redis_client, 40, history=40)
    lay = hj_layout(redis_client)
    plan = lay.plan(hj_spec("redrive"))
    walk = walk_driver.drive(lay.sources(plan.spec), plan, batch=6, depth=1)
    moved = list(next(walk).moved)
    held = [x.decode() for x in redis_client.lrange(HJ.hold, 0, -1)]
    assert moved and held
    # the workers fail 10 more jobs meanwhile: the seed's fail (LPUSH at the head, LTRIM to 40 at the
    # tail) trims the oldest ids still in the failed list, never the ones jobctl holds
    newer = [f"n{i}" for i in range(10)]
    for job_id in newer:
        redis_client.hset(HJ.job(job_id), mapping={"id": job_id, "payload": "{}", "status": "failed", "attempts": 1})
        redis_client.lpush(HJ.failed, job_id)
        redis_client.ltrim(HJ.failed, 0, 39)
    trimmed = set(jobs) - set(moved) - set(held) - set(ids(redis_client, HJ.failed))
    assert trimmed
    for br in walk:
        moved += br.moved
    failed = ids(redis_client, HJ.failed)
    assert not redis_client.exists(HJ.hold) and len(set(failed)) == len(failed)
    assert failed[-len(held):] == held  # the hold kept them dead: back at the tail, in order
    assert set(newer) <= set(failed) and not set(failed) & (set(moved) | trimmed)
    assert set(moved) == set(jobs[0::3]) - trimmed  # the trimmed ones were the workers' to drop
    assert set(ids(redis_client, HJ.pending)) == set(moved)
    # the next failure trims the list back to its cap, from the oldest end: the held ones go first
    redis_client.delete(HJ.pending)
    q.enqueue({"kind": "email"}, job_id="last", now=NOW + 200)
    assert q.fail(q.claim(now=NOW + 200), "boom", now=NOW + 200)
    assert ids(redis_client, HJ.failed) == (["last"] + failed)[:40]


def test_hash_job_second_operation_is_refused_while_one_walks(redis_client, hj_run):
    hj_failed(redis_client, 45)
    lay = hj_layout(redis_client)
    first = lay.plan(hj_spec("redrive"))
    walk = walk_driver.drive(lay.sources(first.spec), first, batch=5, depth=1)
    moved = len(next(walk).moved)
    before = snapshot(redis_client)
    code, out, err = hj_run("purge", "jobs", "--state", "dead", "--no-export", "--yes")
    assert code == ExitCode.BUSY and len(err.strip().splitlines()) == 1, err
    assert snapshot(redis_client) == before
    moved += sum(len(br.moved) for br in walk)
    assert moved == 15 and not redis_client.exists(HJ.lease)


def test_hash_job_wrong_type_target_moves_nothing(redis_client):
    hj_failed(redis_client, 20)
    lay = hj_layout(redis_client)
    plan = lay.plan(hj_spec("redrive"))
    redis_client.set(HJ.pending, "wrong type")
    assert HJ.pending in data_error_changes_nothing(redis_client, lay, plan)
    redis_client.delete(HJ.pending)
    assert lay.check().ok


def test_stream_group_unfiltered_plan_is_a_tail_range(redis_client):
    from jobctl.ops.plan import TailRange

    SG_ADAPTER.load(redis_client, "dlq-spike", queue="email", size=300, seed=5)
    sg = StreamGroupKeys("email")
    lay = sg_layout(redis_client)
    dead_before = [x.decode() for x in redis_client.lrange(sg.dead, 0, -1)]
    plan = lay.plan(OpSpec(Operation.SUPPRESS, "email", State.DEAD, State.SUPPRESSED, reason="r"))  # no filter
    assert isinstance(plan.jobs, TailRange) and plan.planned == len(dead_before)
    assert plan.walked == {0: len(dead_before)}
    res = run_plan(lay, plan, batch=16, journal=False)
    gone = {j for j in dead_before if not redis_client.exists(sg.job(j))}  # dangling ids stay dead
    assert res.moved == len(dead_before) - len(gone) and res.failed == 0
    assert [x.decode() for x in redis_client.lrange(sg.dead, 0, -1)] == [j for j in dead_before if j in gone]
    assert {m.decode() for m in redis_client.zrange(sg.suppressed, 0, -1)} == set(dead_before) - gone
    assert not redis_client.exists(sg.hold) and not redis_client.exists(sg.lease)


def test_hash_job_window_call_without_fence_fields_is_refused(redis_client):
    import redis as redis_lib

    from jobctl.scripts import script

    _, jobs = hj_failed(redis_client, 3)
    lay = hj_layout(redis_client)
    [src] = lay.sources(hj_spec("purge", flt="id ~ '*'"))
    before = snapshot(redis_client)
    window_script = script(redis_client, "hj_window")
    base = ["hj", "purge", "op", "v", 1000, 3, NOW, NOW, "0", b"", 64, 1]
    for width, extra in ((4, []), (3, list(FENCE_FIELDS)), (0, list(FENCE_FIELDS))):
        entry = [jobs[0], 0, "", ""][:width] if width else [0, src.payload_key("")]
        with pytest.raises(redis_lib.ResponseError, match="BADARG"):
            window_script(keys=src.fixed_keys() + [src.payload_key(jobs[0])], args=base + [width] + entry + extra)
    assert snapshot(redis_client) == before


def test_filtered_window_call_that_starts_before_its_entries_loses_nothing(redis_client):
    """A filtered (PredicateRange) tail call whose walk is behind its first
    entry (an earlier call of the round trip ended the walk, then new dead
    jobs arrived) pops no more than the entries it was given and holds them:
    every element stays in the dead list or the hold (review of the merge)."""
    from jobctl.scripts import script

    k = ReliableListKeys("email")
    ids = [f"j{i}" for i in range(20)]
    redis_client.rpush(k.dead, *ids)
    for i in ids:
        redis_client.set(k.job(i), b'{"jobId": "%s"}' % i.encode())
    redis_client.hset(k.walk, mapping={"op": "op", "total": 20, "popped": 0})
    keys = [k.dead, k.hold, k.walk, k.lease, k.ready, today_record(k), k.suppressed_info, k.dead, k.dead, k.dead]
    entries = ids[::-1][5:10]  # the plan's window 5..9 from the tail; the walk is at 0
    args = ["rl", "ready", "op", "v", 1000, 20, NOW, NOW, "0", b"", 0, len(entries), 0, 5, k.job(""),
            bytes([0b11111000]), "1"]
    script(redis_client, "rl_tail")(keys=keys + [k.job(i) for i in entries], args=args)
    left = [x.decode() for x in redis_client.lrange(k.dead, 0, -1) + redis_client.lrange(k.hold, 0, -1)]
    assert sorted(left) == sorted(ids) and redis_client.llen(k.ready) == 0


def test_window_calls_are_packed_as_resp_with_or_without_hiredis(monkeypatch):
    """The per-job walk packs its EVALSHAs itself (jobctl.ops.walk.wire.packed_evalsha):
    hiredis's packer when it takes every value, else the pure-Python one,
    which also sends ids with surrogate escapes byte for byte."""
    import builtins

    calls = [(["k1", "k2"], ["redrive", 7, b"x\x00y", "", "é"]), ([], ["a"])]
    fast = b"".join(wire.packed_evalsha("sha", calls))
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "hiredis" else real_import(name, *a, **k))
    assert b"".join(wire.packed_evalsha("sha", calls)) == fast
    assert fast.startswith(b"*10\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$1\r\n2\r\n$2\r\nk1\r\n")
    monkeypatch.undo()
    odd = b"".join(wire.packed_evalsha("sha", [(["job:{q}:a\udcff"], [1])]))
    assert b"$10\r\njob:{q}:a\xff\r\n" in odd
    with pytest.raises(TypeError):
        wire.bulk(None)
