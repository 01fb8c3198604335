"""Mutating operations against a real server: requeue, redrive, promote,
suppress, unsuppress, purge (``jobctl/cli/ops_cmds.py``, ``jobctl/ops``,
``jobctl/layouts/reliable_list/ops.py`` and ``jobctl/lua/rl_*.lua``).

Queues are put in a known state by the fixtures (``load_scenario`` and the
protocol's Producer/Worker, as other teams' services would), every check
reads the keys back itself, and "nothing changed" means a full snapshot of
every key (type, value, list order, zset scores, TTL presence) is equal.

The helpers at the top (:func:`snapshot`, :func:`read_partition`,
:func:`assert_consistent`, :func:`dead_letter_jobs`) are shared with the
other operations test modules.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts.reliable_list import ops as reliable_list_ops
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import payload_sha1
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver
from jobctl.scripts import SCRIPT_NAMES, source
from jobctl_fixtures.batching import CommandStream
from jobctl_fixtures.envelopes import new_envelope, record_dead
from jobctl_fixtures.ids import shard_index
from jobctl_fixtures.protocol import Producer, ProtocolScripts, Worker, ready_list_for
from jobctl_fixtures.scenarios import load_scenario
from helpers import config_fixtures, queues_toml, wall_ms

#: Scripts that read one window of a list with LRANGE, capped inside the script (rl_pause_move.lua).
BOUNDED_WINDOW_SCRIPTS = {"rl_pause_move"}
RESULT_FIELDS = {"operation", "queue", "planned", "moved", "skipped", "failed", "dry_run"}
REDRIVE_FIELDS = ("redrivenAtEpochMs", "redriveOperation", "redriveCount")


def redrive_record(client, tag: str, job_id: str) -> dict | None:
    """jobctl's record of the redrives of ``job_id`` (the redriven hash; the
    envelope is rewritten only with --reset-attempts)."""
    from jobctl.ops.redrive_record import lookup

    return lookup(client, ReliableListKeys(tag), job_id, wall_ms())

RL = {"layout": "reliable-list"}
QUEUES_TOML = queues_toml(email=RL, shq={**RL, "shards": 4}, pq={**RL, "priorities": 3})


# -- shared helpers --------------------------------------------------------------


def _s(v) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


def snapshot(client) -> dict:
    """Every key of the database: type, value (lists in order, zsets with
    scores, hashes and sets sorted, streams entry by entry) and whether it
    has a TTL.  Equal snapshots mean nothing changed."""
    out = {}
    for key in sorted(client.scan_iter(count=1000)):
        kind = client.type(key)
        if kind == b"string":
            value = client.get(key)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            value = sorted(client.hgetall(key).items())
        elif kind == b"set":
            value = sorted(client.smembers(key))
        elif kind == b"stream":
            value = client.xrange(key)
        else:
            value = kind
        out[key] = (kind, value, client.pttl(key) >= 0)
    return out


def read_partition(client, tags: list[str]) -> dict[str, list[str]]:
    """job id -> every state key holding it (one entry per copy), from the
    keys themselves: each ``queue:{tag}:*`` list but processing is a ready
    list (plain or priority), plus processing, dead (jobctl's hold list, which
    a stopped or crashed window-engine walk may leave, counts as dead: it is
    reported under the dead key), scheduled and suppressed.  Independent of
    ``jobctl check``."""
    where: dict[str, list[str]] = defaultdict(list)
    for tag in tags:
        k = ReliableListKeys(tag)
        lists = [_s(x) for x in client.scan_iter(match=k.queue_pattern, count=1000)
                 if client.type(x) == b"list"]
        assert set(lists) <= {k.ready, k.processing, k.dead, k.hold} | {k.ready_priority(p) for p in range(10)}, lists
        for key in lists:
            for x in client.lrange(key, 0, -1):
                where[_s(x)].append(k.dead if key == k.hold else key)
        for key in (k.scheduled, k.suppressed):
            for x in client.zrange(key, 0, -1):
                where[_s(x)].append(key)
    return where


def assert_consistent(client, tags: list[str]) -> dict[str, str]:
    """Every job id in exactly one state key, on the shard its id hashes to
    (when sharded), with its payload; no payload without a state; processing
    ids and deadlines the same set.  Returns id -> its state key."""
    where = read_partition(client, tags)
    twice = {i: keys for i, keys in where.items() if len(keys) != 1}
    assert not twice, f"{len(twice)} ids not in exactly one state, e.g. {list(twice.items())[:3]}"
    for tag in tags:
        k = ReliableListKeys(tag)
        indexed = {i for i, (key,) in where.items() if key.startswith(f"queue:{{{tag}}}:")}
        payloads = {_s(x)[len(k.job_prefix):] for x in client.scan_iter(match=k.job_pattern, count=1000)}
        payloads = {p for p in payloads if not p.endswith(":owner")}
        assert indexed - payloads == set(), f"dangling ids in {tag}: {sorted(indexed - payloads)[:3]}"
        assert payloads - indexed == set(), f"orphan payloads in {tag}: {sorted(payloads - indexed)[:3]}"
        processing = {_s(x) for x in client.lrange(k.processing, 0, -1)}
        deadlines = {_s(x) for x in client.zrange(k.deadline, 0, -1)}
        assert processing == deadlines, f"{tag}: processing {len(processing)} != deadlines {len(deadlines)}"
    if len(tags) > 1:
        base = tags[0].rsplit(":", 1)[0]
        for i, (key,) in where.items():
            assert key.startswith(f"queue:{{{tags[shard_index(i, len(tags))]}}}:"), (i, key, base)
    return {i: keys[0] for i, keys in where.items()}


def ids(client, key: str) -> list[str]:
    """A list's ids, head first."""
    return [_s(x) for x in client.lrange(key, 0, -1)]


def envelope(client, tag: str, job_id: str) -> dict:
    return orjson.loads(client.get(ReliableListKeys(tag).job(job_id)))


def dead_letter_jobs(client, tag: str, specs, *, now: int | None = None, priorities=None,
                     seed: int = 0) -> list[str]:
    """Enqueue, claim and dead-letter one job per ``(job_id, job_type,
    tenant, code)`` through the fixtures' protocol, one after the other, so
    the dead list's head is the last one.  Returns the ids."""
    rng = random.Random(seed)
    now = wall_ms() - 60_000 if now is None else now
    producer = Producer(client, tag, priorities=priorities)
    worker = Worker(client, tag, priorities=priorities, rng=rng)
    ready = ready_list_for(producer.keys, priorities, None)
    out = []
    for n, (job_id, job_type, tenant, code) in enumerate(specs):
        env = new_envelope(job_id, job_type, tenant, now - 3_600_000 + n, rng)
        producer.enqueue(env, now=now)
        _claim_newest(client, worker, ready, job_id, now + n)
        assert worker.dead_letter(job_id, record_dead(env, now + n, code)) == "DEAD_LETTERED"
        out.append(job_id)
    return out


def _claim_newest(client, worker: Worker, ready: str, job_id: str, now: int) -> None:
    """A worker's claim of the job just enqueued (to processing with its
    deadline), taken by id in one transaction so that other ready jobs stay
    put, whatever a concurrent redrive pushes to the ready list meanwhile."""
    pipe = client.pipeline(transaction=True)
    pipe.lrem(ready, 1, job_id)
    pipe.lpush(worker.keys.processing, job_id)
    pipe.zadd(worker.keys.deadline, {job_id: now + worker.visibility_ms})
    assert pipe.execute()[0] == 1


def simple_dead(client, tag: str, n: int, *, codes=("HTTP_503", "HTTP_400"), prefix: str = "job",
                now: int | None = None, priorities=None) -> list[str]:
    """``n`` dead jobs ``<prefix>_0000..``; job i fails with ``codes[i % len(codes)]``."""
    specs = [(f"{prefix}_{i:04d}", "webhook.deliver", f"tenant_{1 + i % 5}", codes[i % len(codes)])
             for i in range(n)]
    return dead_letter_jobs(client, tag, specs, now=now, priorities=priorities)


def bulk_dead(client, tag: str, n: int, *, code_of=lambda i: "HTTP_503", prefix: str = "job") -> list[str]:
    """``n`` dead jobs written through the protocol's scripts, streamed in
    pipelines (enqueue, claim, dead-letter; four commands a job, every reply
    checked).  Head is the last."""
    scripts = ProtocolScripts.for_client(client).load()
    producer = Producer(client, tag, scripts=scripts)
    worker = Worker(client, tag, scripts=scripts)
    rng = random.Random(7)
    now = wall_ms() - 60_000
    out = []
    with CommandStream(client, batch=4000, background=n > 5000) as stream:
        for i in range(n):
            job_id = f"{prefix}_{i:07d}"
            env = new_envelope(job_id, "webhook.deliver", f"tenant_{1 + i % 5}", now - 3_600_000, rng)
            producer.enqueue(env, now=now, pipe=stream)
            stream.expect("READY")
            stream.lmove(producer.keys.ready, worker.keys.processing, "LEFT", "LEFT")  # see _claim_newest
            stream.expect(job_id)
            stream.zadd(worker.keys.deadline, {job_id: now + worker.visibility_ms})
            worker.dead_letter(job_id, record_dead(env, now, code_of(i)), pipe=stream)
            stream.expect("DEAD_LETTERED")
            stream.maybe_flush()
            out.append(job_id)
    return out


#: ``run(*args)`` -> (exit code, stdout, stderr) of ``jobctl --url .. --config .. args``.
cfg, run = config_fixtures(QUEUES_TOML)


def layout(client, name: str = "email", shards=None, priorities=None) -> ReliableList:
    return ReliableList(client, QueueConfig(name, shards=shards, priorities=priorities))


def redrive_spec(queue: str = "email", flt: str | None = None, **kw) -> OpSpec:
    return OpSpec(Operation.REDRIVE, queue, State.DEAD, kw.pop("target", State.READY),
                  filter=compile_filter(flt) if flt else compile_filter("id ~ '*'"), **kw)


def planned_503_redrive(client, n: int, codes=("HTTP_503", "HTTP_400", "HTTP_400")) -> tuple:
    """``n`` dead jobs on email (see :func:`simple_dead`; by default one in
    three failed with HTTP_503) and the plan of their ``error = HTTP_503``
    redrive: ``(jobs, layout, plan)``."""
    jobs = simple_dead(client, "email", n, codes=codes)
    lay = layout(client)
    return jobs, lay, lay.plan(redrive_spec(flt="error = HTTP_503"))


# -- redrive ------------------------------------------------------------------------


def test_redrive_moves_matching_dead_jobs_keeping_ids_and_order(redis_client, run):
    truth = load_scenario(redis_client, "dlq-spike", size=300, seed=3)
    k = ReliableListKeys("email")
    dead_before = ids(redis_client, k.dead)
    envs = {i: envelope(redis_client, "email", i) for i in dead_before}
    want = [i for i in dead_before if envs[i]["lastErrorCode"] == "HTTP_503" and envs[i]["tenantId"] == "tenant_3"]
    assert len(want) >= 10
    ready_before = ids(redis_client, k.ready)

    t0 = wall_ms()
    code, out, err = run("redrive", "email", "--filter", 'error = "HTTP_503" and tenant = tenant_3',
                         "--yes", "--json")
    t1 = wall_ms()
    assert code == 0, err
    res = json.loads(out)
    assert RESULT_FIELDS <= set(res)
    assert (res["operation"], res["queue"], res["dry_run"]) == ("redrive", "email", False)
    assert (res["planned"], res["moved"], res["skipped"], res["failed"]) == (len(want), len(want), 0, 0)

    # same ids, now at the producers' end of the ready list; the rest untouched
    ready_after = ids(redis_client, k.ready)
    assert ready_after[len(want):] == ready_before
    assert sorted(ready_after[:len(want)]) == sorted(want)
    assert ids(redis_client, k.dead) == [i for i in dead_before if i not in set(want)]
    for job_id in want:
        rec = redrive_record(redis_client, "email", job_id)
        assert t0 <= rec["at_ms"] <= t1
        assert rec["operation"] == res["operation_id"]
        assert rec["count"] == 1
        assert envelope(redis_client, "email", job_id) == envs[job_id]  # the envelope is not rewritten
    where = assert_consistent(redis_client, ["email"])
    assert len(where) == truth.size


def test_redrive_count_grows_and_reset_attempts(redis_client, run):
    k = ReliableListKeys("email")
    [job_id] = simple_dead(redis_client, "email", 1)
    attempt = envelope(redis_client, "email", job_id)["attempt"]
    assert attempt >= 1
    assert run("redrive", "email", "--yes")[0] == 0
    # a worker fails it again: back to the DLQ, then a second redrive
    worker = Worker(redis_client, "email")
    job = worker.claim()
    assert job.job_id == job_id
    worker.dead_letter(job_id, record_dead(dict(job.envelope), wall_ms(), "HTTP_400"))
    code, out, err = run("redrive", "email", "--reset-attempts", "--yes", "--json")
    assert code == 0, err
    env = envelope(redis_client, "email", job_id)
    assert env["attempt"] == 0 and env["redriveOperation"] == json.loads(out)["operation_id"]
    rec = redrive_record(redis_client, "email", job_id)
    assert rec["count"] == 2 and rec["operation"] == json.loads(out)["operation_id"]
    assert ids(redis_client, k.ready) == [job_id] and redis_client.llen(k.dead) == 0


def test_redrive_to_scheduled_with_delay(redis_client, run):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 6)
    t0 = wall_ms()
    code, out, err = run("redrive", "email", "--to", "scheduled", "--delay", "10m",
                         "--filter", "error = HTTP_503", "--yes", "--json")
    t1 = wall_ms()
    assert code == 0, err
    moved = jobs[0::2]
    assert json.loads(out)["moved"] == 3
    scores = dict((_s(m), int(s)) for m, s in redis_client.zrange(k.scheduled, 0, -1, withscores=True))
    assert set(scores) == set(moved)
    for job_id, due in scores.items():
        assert t0 + 600_000 <= due <= t1 + 600_000
        assert redrive_record(redis_client, "email", job_id)["count"] == 1
    assert ids(redis_client, k.dead) == list(reversed(jobs[1::2]))
    assert redis_client.exists(k.ready) == 0


@pytest.mark.parametrize("args", [
    ["redrive", "email", "--delay", "5m", "--yes"],                   # --delay needs --to scheduled
    ["redrive", "email", "--to", "scheduled", "--delay", "soon", "--yes"],
    ["redrive", "email", "--to", "nowhere", "--yes"],
    ["requeue", "email", "--yes"],                                    # needs --stuck or --ids
    ["suppress", "email", "--filter", "error = HTTP_503", "--yes"],   # needs --reason
    ["suppress", "email", "--filter", "error = HTTP_503", "--reason", " ", "--yes"],
    ["suppress", "email", "--reason", "x", "--yes"],                  # needs --filter
    ["purge", "email", "--state", "dead", "--yes"],                   # needs --no-export
    ["purge", "email", "--state", "ready", "--no-export", "--yes"],
    ["redrive", "email", "--priority", "0", "--yes"],                 # no priority lists
])
def test_bad_command_lines_exit_2_and_change_nothing(redis_client, run, args):
    simple_dead(redis_client, "email", 4)
    before = snapshot(redis_client)
    code, out, err = run(*args)
    assert code == 2, (out, err)
    assert snapshot(redis_client) == before
    assert "Traceback" not in err


def test_purge_without_no_export_is_refused(redis_client, run):
    simple_dead(redis_client, "email", 3)
    before = snapshot(redis_client)
    code, out, err = run("purge", "email", "--state", "dead", "--yes")
    assert code == 2
    assert err.strip().splitlines() == [err.strip()] and "--no-export" in err
    assert snapshot(redis_client) == before


# -- dry runs -------------------------------------------------------------------------


DRY_RUNS = {
    "redrive": ("dlq-spike", ["redrive", "email", "--filter", "error ~ 'HTTP_5*'"]),
    "redrive-scheduled": ("dlq-spike", ["redrive", "email", "--to", "scheduled", "--delay", "1h"]),
    "requeue": ("stuck-workers", ["requeue", "email", "--stuck"]),
    "promote": ("scheduler-lag", ["promote", "email"]),
    "suppress": ("dlq-spike", ["suppress", "email", "--filter", "tenant = tenant_1", "--reason", "r"]),
    "unsuppress": ("dlq-spike", ["unsuppress", "email"]),
    "purge-dead": ("dlq-spike", ["purge", "email", "--state", "dead", "--no-export"]),
    "purge-dead-without-export-flag": ("dlq-spike", ["purge", "email", "--state", "dead"]),
    "purge-suppressed": ("dlq-spike", ["purge", "email", "--state", "suppressed", "--no-export"]),
}


@pytest.mark.parametrize("name", list(DRY_RUNS))
def test_dry_run_changes_nothing(redis_client, run, name):
    scenario, args = DRY_RUNS[name]
    load_scenario(redis_client, scenario, size=200, seed=5, malformed=4)
    if "suppressed" in name or "unsuppress" in name:
        assert run("suppress", "email", "--filter", "error = HTTP_400", "--reason", "known bad",
                   "--yes")[0] == 0
    before = snapshot(redis_client)
    code, out, err = run(*args, "--dry-run")
    assert code == 0, err
    assert "job(s)" in out and "matched" in out
    code, out, err = run(*args, "--dry-run", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert RESULT_FIELDS <= set(res) and res["dry_run"] is True
    assert res["planned"] > 0 and res["moved"] == 0 and res["plan"]["planned"] == res["planned"]
    # dry runs are allowed in read-only mode, and are not journaled
    assert run("--read-only", *args, "--dry-run")[0] == 0
    assert snapshot(redis_client) == before


# -- each operation's happy path --------------------------------------------------------


def test_requeue_stuck(redis_client, run):
    truth = load_scenario(redis_client, "stuck-workers", size=200, seed=2)
    k = ReliableListKeys("email")
    assert truth.stuck_ids
    ready_before = ids(redis_client, k.ready)
    code, out, err = run("requeue", "email", "--stuck", "--yes", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["moved"] == res["planned"] == len(truth.stuck_ids)
    ready = ids(redis_client, k.ready)
    assert set(ready[:len(truth.stuck_ids)]) == truth.stuck_ids and ready[len(truth.stuck_ids):] == ready_before
    in_flight = truth.ids_by_state["processing"] - truth.stuck_ids
    assert set(ids(redis_client, k.processing)) == in_flight
    assert {_s(m) for m in redis_client.zrange(k.deadline, 0, -1)} == in_flight
    assert_consistent(redis_client, ["email"])
    # again: nothing is stuck any more
    code, out, err = run("requeue", "email", "--stuck", "--yes")
    assert code == 0 and "nothing to do" in err


def test_requeue_ids_is_fenced_to_the_deadline(redis_client, run):
    k = ReliableListKeys("email")
    rng = random.Random(1)
    producer, worker = Producer(redis_client, "email"), Worker(redis_client, "email", visibility_ms=60_000)
    for i in range(3):
        producer.enqueue(new_envelope(f"job_{i}", "webhook.deliver", "tenant_1", wall_ms(), rng))
    claimed = [worker.claim().job_id for _ in range(3)]
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REQUEUE, "email", State.PROCESSING, State.READY, ids=tuple(claimed)))
    assert plan.planned == 3
    redis_client.zadd(k.deadline, {claimed[0]: wall_ms() + 999_999})  # the worker renewed its lease
    worker.ack(claimed[1])                                            # the worker finished
    res = run_plan(lay, plan, journal=False)
    assert (res.moved, res.skipped) == (1, 2)
    assert dict(res.skipped_reasons) == {"changed": 1, "gone": 1}
    assert res.skipped_sample == [claimed[0], claimed[1]]
    assert ids(redis_client, k.ready) == [claimed[2]]
    assert ids(redis_client, k.processing) == [claimed[0]]


def test_promote_moves_scheduled_to_ready(redis_client, run):
    truth = load_scenario(redis_client, "scheduler-lag", size=200, seed=4)
    k = ReliableListKeys("email")
    sched = truth.ids_by_state["scheduled"]
    some = sorted(sched)[:3]
    code, out, err = run("promote", "email", *[a for i in some for a in ("--ids", i)], "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 3
    assert set(ids(redis_client, k.ready)[:3]) == set(some)
    code, out, err = run("promote", "email", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == len(sched) - 3
    assert redis_client.zcard(k.scheduled) == 0
    assert set(ids(redis_client, k.ready)) == truth.ids_by_state["ready"] | sched
    assert_consistent(redis_client, ["email"])


def test_promote_is_fenced_to_the_score(redis_client):
    truth = load_scenario(redis_client, "scheduler-lag", size=100, seed=4)
    k = ReliableListKeys("email")
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PROMOTE, "email", State.SCHEDULED, State.READY))
    first, second = plan.jobs[0].job_id, plan.jobs[1].job_id
    redis_client.zadd(k.scheduled, {first: 1})            # rescheduled since the plan
    redis_client.zrem(k.scheduled, second)                # promoted by the scheduler
    redis_client.lpush(k.ready, second)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == plan.planned - 2 and res.skipped == 2
    assert redis_client.zscore(k.scheduled, first) == 1
    assert ids(redis_client, k.ready).count(second) == 1
    assert len(truth.ids_by_state["scheduled"]) == plan.planned


def test_suppress_excludes_from_redrive_and_unsuppress_returns_to_dead(redis_client, run):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 10, codes=("HTTP_400", "HTTP_503"))
    bad = jobs[0::2]
    t0 = wall_ms()
    code, out, err = run("suppress", "email", "--filter", "error = HTTP_400", "--reason", "invalid payloads, ticket 42",
                         "--yes", "--json")
    assert code == 0, err
    op = json.loads(out)["operation_id"]
    assert {_s(m) for m in redis_client.zrange(k.suppressed, 0, -1)} == set(bad)
    for job_id in bad:
        assert t0 <= redis_client.zscore(k.suppressed, job_id) <= wall_ms()
        info = orjson.loads(redis_client.hget(k.suppressed_info, job_id))
        assert info == {"by": "tester@ci", "at_ms": info["at_ms"], "reason": "invalid payloads, ticket 42",
                        "operation": op}
    assert ids(redis_client, k.dead) == list(reversed(jobs[1::2]))
    # a redrive of everything leaves the suppressed jobs alone
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 5
    assert redis_client.zcard(k.suppressed) == 5 and redis_client.llen(k.dead) == 0
    # unsuppress puts them back in the DLQ, info gone
    code, out, err = run("unsuppress", "email", "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 5, err
    assert set(ids(redis_client, k.dead)) == set(bad)
    assert redis_client.exists(k.suppressed, k.suppressed_info) == 0
    assert_consistent(redis_client, ["email"])


def test_purge_removes_index_entry_and_payload_together(redis_client, run):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 8)
    code, out, err = run("purge", "email", "--state", "dead", "--filter", "error = HTTP_400", "--no-export",
                         "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 4
    gone = jobs[1::2]
    assert ids(redis_client, k.dead) == list(reversed(jobs[0::2]))
    assert redis_client.exists(*[k.job(i) for i in gone]) == 0
    assert redis_client.exists(*[k.job(i) for i in jobs[0::2]]) == 4
    # suppressed jobs: purged from the zset, the info hash and the payload
    assert run("suppress", "email", "--filter", "id = job_0000", "--reason", "x", "--yes")[0] == 0
    code, out, err = run("purge", "email", "--state", "suppressed", "--no-export", "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 1, err
    assert redis_client.exists(k.suppressed, k.suppressed_info, k.job("job_0000")) == 0
    assert_consistent(redis_client, ["email"])


def test_purge_older_than(redis_client, run):
    k = ReliableListKeys("email")
    now = wall_ms()
    old = simple_dead(redis_client, "email", 3, prefix="old", now=now - 3 * 3_600_000)
    new = simple_dead(redis_client, "email", 3, prefix="new", now=now - 60_000)
    code, out, err = run("purge", "email", "--state", "dead", "--older-than", "2h", "--no-export", "--yes")
    assert code == 0, err
    assert ids(redis_client, k.dead) == list(reversed(new))
    assert redis_client.exists(*[k.job(i) for i in old]) == 0


# -- confirmation, JSON, read-only --------------------------------------------------------


def test_without_a_terminal_yes_is_required(redis_client, run):
    simple_dead(redis_client, "email", 3)
    before = snapshot(redis_client)
    for args in (["redrive", "email"], ["redrive", "email", "--json"],
                 ["purge", "email", "--state", "dead", "--no-export"]):
        code, out, err = run(*args)
        assert code == 2, err
        assert "--yes" in err and len(err.strip().splitlines()) == 1
    assert snapshot(redis_client) == before


class _Tty:
    """A stdin that claims to be a terminal and answers ``answer``."""

    def __init__(self, answer: str) -> None:
        self.lines = [answer + "\n"]

    def isatty(self) -> bool:
        return True

    def readline(self, *a) -> str:
        return self.lines.pop(0) if self.lines else ""

    def read(self, *a) -> str:
        return self.readline()


def test_confirmation_on_a_terminal(redis_client, run, monkeypatch):
    k = ReliableListKeys("email")
    simple_dead(redis_client, "email", 3)
    before = snapshot(redis_client)
    monkeypatch.setattr(sys, "stdin", _Tty("n"))
    code, out, err = run("redrive", "email")
    assert code == 10 and "Proceed?" in err
    assert "queue email on redis://" in err  # the prompt names the queue and the server
    assert snapshot(redis_client) == before
    monkeypatch.setattr(sys, "stdin", _Tty("y"))  # a purge wants the count typed: "y" is not it
    code, out, err = run("purge", "email", "--state", "dead", "--no-export")
    assert code == 10 and "Type 3 to proceed" in err and "queue email on redis://" in err
    assert snapshot(redis_client) == before
    monkeypatch.setattr(sys, "stdin", _Tty("y"))
    code, out, err = run("redrive", "email")
    assert code == 0, err
    assert redis_client.llen(k.ready) == 3



def test_journal_table_says_the_result_and_local_names_the_server(redis_client, run):
    simple_dead(redis_client, "email", 3)
    code, out, err = run("redrive", "email", "--yes")
    assert code == 0, err
    summary = out.splitlines()[-1]  # the plan first, then the one-line result with its time and rate
    assert summary.startswith("redrive email: planned 3, moved 3, skipped 0, failed 0")
    assert " jobs/s)  [redrive-" in summary or "failed 0  [redrive-" in summary
    code, out, err = run("journal", "email")
    assert code == 0, err
    header = next(ln for ln in out.splitlines() if "operation" in ln)
    for col in ("ended", "result", "planned", "done", "skipped", "failed"):
        assert col in header
    row = next(ln for ln in out.splitlines() if "redrive" in ln)
    assert " ok " in row and "server" not in header
    code, out, err = run("journal", "email", "--local", "--limit", "1")
    assert code == 0 and "server" in out and "redis://" in out, err


MUTATING = [
    ["redrive", "email", "--yes"],
    ["redrive", "email", "--to", "scheduled", "--delay", "1m", "--yes"],
    ["requeue", "email", "--stuck", "--yes"],
    ["promote", "email", "--yes"],
    ["suppress", "email", "--filter", "error = HTTP_503", "--reason", "r", "--yes"],
    ["unsuppress", "email", "--yes"],
    ["purge", "email", "--state", "dead", "--no-export", "--yes"],
    ["check", "--repair", "--yes"],
]


@pytest.mark.parametrize("args", MUTATING, ids=lambda a: "-".join(a[:2]))
def test_read_only_refuses_before_touching_redis(redis_client, run, args):
    load_scenario(redis_client, "dlq-spike", size=100, seed=1)
    before = snapshot(redis_client)
    code, out, err = run("--read-only", *args)
    assert code == 9, err
    assert err.startswith("jobctl: error:") and "read-only" in err and len(err.strip().splitlines()) == 1
    assert out == ""
    assert snapshot(redis_client) == before
    # no server at all: still refused (exit 9, not 3), so nothing was sent
    code, out, err = run("--read-only", *args, url="redis://127.0.0.1:1/0")
    assert code == 9, err


def test_read_only_profile_refuses_too(redis_client, tmp_path, capsys, redis_url):
    simple_dead(redis_client, "email", 2)
    path = tmp_path / "ro.toml"
    path.write_text(f'[profiles.prod]\nurl = "{redis_url}"\nread_only = true\n')
    before = snapshot(redis_client)
    code = main(["--config", str(path), "--profile", "prod", "redrive", "email", "--yes"])
    assert code == 9, capsys.readouterr().err
    assert snapshot(redis_client) == before


def test_json_result_shape(redis_client, run):
    simple_dead(redis_client, "email", 4)
    code, out, err = run("redrive", "email", "--json", "--yes")
    res = json.loads(out)
    assert RESULT_FIELDS <= set(res)
    assert res == {**res, "operation": "redrive", "queue": "email", "planned": 4, "moved": 4, "skipped": 0,
                   "failed": 0, "dry_run": False}
    assert res["operation_id"].startswith("redrive-") and res["started_ms"] <= res["ended_ms"]
    # nothing left: still a result, planned 0
    code, out, err = run("redrive", "email", "--json", "--yes")
    assert code == 0 and json.loads(out)["planned"] == 0


# -- filters and malformed envelopes ------------------------------------------------------


def test_a_filter_that_matches_nothing(redis_client, run):
    load_scenario(redis_client, "dlq-spike", size=100, seed=1)
    before = snapshot(redis_client)
    code, out, err = run("redrive", "email", "--filter", "tenant = nobody", "--yes")
    assert code == 0
    assert "nothing to do" in err
    assert snapshot(redis_client) == before


@pytest.mark.parametrize("text", ["error = = x", "eror = HTTP_503", "attempts > many", "(error = x",
                                  "error ~", "dead_for > 5 parsecs"])
def test_bad_filters_exit_2_with_a_column(redis_client, run, text):
    load_scenario(redis_client, "dlq-spike", size=60, seed=1)
    before = snapshot(redis_client)
    code, out, err = run("redrive", "email", "--filter", text, "--yes")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jobctl: error:") and "column" in lines[0], err
    assert out == ""
    assert snapshot(redis_client) == before


def test_malformed_envelopes_are_skipped_and_reported(redis_client, run):
    truth = load_scenario(redis_client, "dlq-spike", size=200, seed=8, malformed=12)
    k = ReliableListKeys("email")
    bad_dead = truth.malformed_ids & truth.ids_by_state["dead"]
    assert len(bad_dead) == 6
    raw_before = {i: redis_client.get(k.job(i)) for i in bad_dead}
    # a filter reads every envelope: malformed ones are excluded (an unfiltered
    # redrive moves them: test_unfiltered_redrive_moves_malformed_envelopes)
    code, out, err = run("redrive", "email", "--filter", "id ~ '*'", "--yes", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["plan"]["malformed"] == 6 and set(res["plan"]["malformed_sample"]) <= bad_dead
    assert res["moved"] == len(truth.ids_by_state["dead"]) - 6
    assert set(ids(redis_client, k.dead)) == bad_dead          # never half-moved
    assert {i: redis_client.get(k.job(i)) for i in bad_dead} == raw_before
    code, out, err = run("redrive", "email", "--filter", "id ~ '*'", "--yes")
    assert code == 0 and "malformed" in err and "nothing to do" in err
    assert_consistent(redis_client, ["email"])


def test_unfiltered_redrive_plans_by_position_and_moves_malformed_envelopes(redis_client, run):
    truth = load_scenario(redis_client, "dlq-spike", size=200, seed=8, malformed=12)
    k = ReliableListKeys("email")
    dead = truth.ids_by_state["dead"]
    bad_dead = truth.malformed_ids & dead
    raw_before = {i: redis_client.get(k.job(i)) for i in bad_dead}
    code, out, err = run("redrive", "email", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)["plan"]
    assert plan["breakdown_sampled"] is True and plan["planned"] == len(dead)
    assert "malformed envelopes move too" in plan["change"]
    code, out, err = run("redrive", "email", "--dry-run")
    assert code == 0 and "breakdown from a sample of" in out + err, out + err
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["moved"] == len(dead) and redis_client.llen(k.dead) == 0
    assert bad_dead <= set(ids(redis_client, k.ready))
    assert {i: redis_client.get(k.job(i)) for i in bad_dead} == raw_before  # envelopes untouched
    assert_consistent(redis_client, ["email"])


# -- plan then apply: fenced ------------------------------------------------------------------


def test_apply_is_fenced_to_the_plan(redis_client):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 20, codes=("HTTP_503",))
    lay = layout(redis_client)
    plan = lay.plan(redrive_spec())
    assert plan.planned == 20
    # after the plan: a new dead letter, a changed payload, a job moved away, a purged one.
    # The dead-list fence is identity + position (docs/layouts.md): a payload edited in place
    # while dead is still the job the plan chose and moves; jobs no longer there are skipped.
    [late] = simple_dead(redis_client, "email", 1, codes=("HTTP_503",), prefix="late")
    changed, moved_away, purged = jobs[3], jobs[10], jobs[15]
    env = envelope(redis_client, "email", changed)
    env["lastErrorMessage"] = "edited by hand"
    redis_client.set(k.job(changed), orjson.dumps(env))
    redis_client.lrem(k.dead, 1, moved_away)
    redis_client.zadd(k.suppressed, {moved_away: 1})
    redis_client.lrem(k.dead, 1, purged)
    redis_client.delete(k.job(purged))
    res = run_plan(lay, plan, journal=False)
    assert (res.planned, res.moved, res.skipped, res.failed) == (20, 18, 2, 0)
    assert set(res.skipped_sample) == {moved_away, purged}
    assert ids(redis_client, k.dead) == [late]
    assert redrive_record(redis_client, "email", late) is None
    assert redrive_record(redis_client, "email", changed)["count"] == 1
    assert redis_client.zscore(k.suppressed, moved_away) == 1
    assert sorted(ids(redis_client, k.ready)) == sorted(set(jobs) - {moved_away, purged})


def test_suppress_and_purge_plans_are_fenced_to_identity_and_position(redis_client):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 6, codes=("HTTP_400",))
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.SUPPRESS, "email", State.DEAD, State.SUPPRESSED,
                           filter=compile_filter("error = HTTP_400"), reason="r"))
    victim = plan.jobs[0].job_id
    redis_client.set(k.job(victim), redis_client.get(k.job(victim)) + b" ")  # edited in place: still moves
    plan_gone = plan.jobs[1].job_id
    redis_client.lrem(k.dead, 1, plan_gone)  # gone from the dead list: skipped
    res = run_plan(lay, plan, journal=False)
    assert (res.moved, res.skipped) == (5, 1)
    assert ids(redis_client, k.dead) == [] and redis_client.zcard(k.suppressed) == 5
    redis_client.zrem(k.suppressed, victim)
    redis_client.lpush(k.dead, victim)
    plan = lay.plan(OpSpec(Operation.PURGE, "email", State.DEAD, None))
    redis_client.set(k.job(victim), b"not json any more")
    res = run_plan(lay, plan, journal=False)
    assert (res.moved, res.skipped) == (1, 0)  # the planned job, whatever its payload became
    assert ids(redis_client, k.dead) == [] and not redis_client.exists(k.job(victim))
    assert set(jobs) - {victim, plan_gone} == {_s(m) for m in redis_client.zrange(k.suppressed, 0, -1)}


# -- batches, rate, limit, stop, resume ---------------------------------------------------------


def test_lua_scripts_have_headers_and_never_read_a_whole_key():
    names = [n for n in SCRIPT_NAMES if n.startswith("rl_") or n in ("jl_window", "hj_window", "list_restore", "lease")]
    assert {"rl_zset_move", "rl_requeue", "rl_repair"} <= set(names)
    for name in names:
        text = source(name)
        header = text.split("\n\n", 1)[0]
        assert "KEYS[1]" in header and "ARGV[1]" in header and "returns" in header, name
        upper = text.upper()
        if name in BOUNDED_WINDOW_SCRIPTS:  # one LRANGE of a window the script caps itself
            assert "MAX_WINDOW" in text, name
            upper = upper.replace("'LRANGE', SRC, -(HI + 1), -(LO + 1)", "").replace("'LRANGE', SRC, LO, HI", "")
        for forbidden in ("LRANGE", "HGETALL", "SMEMBERS", "HKEYS", "HVALS", "'KEYS'", "'SCAN'", "SORT'",
                          "ZRANGE", "ZREVRANGE", "SUNION", "SINTER"):
            assert forbidden not in upper, (name, forbidden)
    for path in Path(reliable_list_ops.__file__).parents[1].joinpath("lua").glob("rl_*.lua"):
        assert path.stem in SCRIPT_NAMES, f"{path.name} is not registered in jobctl.scripts"


@pytest.mark.parametrize("batch", [1, 7, 256, 1000])
def test_batches_bound_each_call(redis_client, batch):
    k = ReliableListKeys("email")
    jobs, lay, plan = planned_503_redrive(redis_client, 40)
    sizes = []
    for br in lay.apply(plan, batch=batch):
        sizes.append(len(br.moved) + len(br.skipped))
        assert len(br.moved) + len(br.skipped) <= batch
    # the walk pops only up to the newest planned job, `batch` per call
    assert len(sizes) == -(-plan.walked[0] // batch)
    assert sum(sizes) == 14
    assert sorted(ids(redis_client, k.ready)) == sorted(jobs[0::3])
    assert ids(redis_client, k.dead) == list(reversed([j for n, j in enumerate(jobs) if n % 3]))


def test_rate_limits_jobs_per_second(redis_client, run):
    simple_dead(redis_client, "email", 20, codes=("HTTP_503",))
    started = time.monotonic()
    code, out, err = run("redrive", "email", "--rate", "10", "--yes", "--json")
    took = time.monotonic() - started
    assert code == 0 and json.loads(out)["moved"] == 20
    assert took >= 1.5, took   # 20 jobs at 10/s: ~2 s (the first 10 go at once)
    assert took < 10, took


def test_limit_caps_the_jobs_touched(redis_client, run):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 30, codes=("HTTP_503",))
    code, out, err = run("redrive", "email", "--limit", "12", "--yes", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["planned"] == res["moved"] == 12 and res["plan"]["truncated"] is True
    assert sorted(ids(redis_client, k.ready)) == sorted(jobs[:12])   # the oldest first (dead list's tail)
    assert ids(redis_client, k.dead) == list(reversed(jobs[12:]))


def test_stop_between_batches_leaves_a_consistent_state_and_a_rerun_finishes(redis_client, run, monkeypatch):
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 40)  # 4 calls of 10 a round trip
    k = ReliableListKeys("email")
    jobs, lay, plan = planned_503_redrive(redis_client, 90)
    calls = []
    res = run_plan(lay, plan, batch=10, progress=lambda done, total: calls.append(done),
                   stop=lambda: len(calls) >= 3, journal=False)
    # stopped between round trips: the window calls of the first one (4 of 10 positions) all count
    assert res.interrupted and 0 < res.moved < 30 and len(calls) == walk_driver.tail_depth(None, 10) == 4
    assert_consistent(redis_client, ["email"])
    keep = [j for n, j in enumerate(jobs) if n % 3]
    dead = ids(redis_client, k.dead)
    assert [j for j in dead if j in set(keep)] == list(reversed(keep))  # order kept even when stopped
    # the same command again finishes, then there is nothing left to do
    code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 30 - res.moved
    assert sorted(ids(redis_client, k.ready)) == sorted(jobs[0::3])
    assert ids(redis_client, k.dead) == list(reversed(keep))
    code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes")
    assert code == 0 and "nothing to do" in err
    assert all(redrive_record(redis_client, "email", j)["count"] == 1 for j in jobs[0::3])


# -- the dead-list window: rotation, order, stragglers -------------------------------------------


def test_window_keeps_the_order_of_jobs_that_stay_dead(redis_client):
    """Regression: the walk used to pop a whole window past the newest
    planned job and leave the rotated jobs at the head, so the oldest dead
    jobs looked like the newest."""
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 300, codes=("HTTP_503",) * 1 + ("HTTP_400",) * 9)
    lay = layout(redis_client)
    plan = lay.plan(redrive_spec(flt="error = HTTP_503 and id ~ 'job_00*'"))
    assert plan.planned == 10 and plan.walked == {0: 91}
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 10
    assert ids(redis_client, k.dead) == [j for j in reversed(jobs) if not (j < "job_0100" and j.endswith("0"))]


def test_window_larger_than_the_old_carry_limit_moves_everything(redis_client):
    """Regression: with --batch above 512 the excess of a window was counted
    as skipped ("moved") without being tried."""
    k = ReliableListKeys("email")
    jobs = bulk_dead(redis_client, "email", 1500)
    lay = layout(redis_client)
    res = run_plan(lay, lay.plan(redrive_spec()), batch=1000, journal=False)
    assert (res.moved, res.skipped) == (1500, 0)
    assert redis_client.llen(k.dead) == 0 and sorted(ids(redis_client, k.ready)) == jobs


def test_jobs_dead_lettered_during_the_apply_are_never_moved(redis_client):
    k = ReliableListKeys("email")
    jobs, lay, plan = planned_503_redrive(redis_client, 60, codes=("HTTP_503", "HTTP_400"))
    late: list[str] = []

    def progress(done, total):  # a worker dead-letters two jobs between every two calls
        late.extend(simple_dead(redis_client, "email", 2, codes=("HTTP_503",), prefix=f"late{len(late):02d}"))

    res = run_plan(lay, plan, batch=8, progress=progress, journal=False)
    assert res.moved == 30 and res.skipped == 0 and late
    dead = ids(redis_client, k.dead)
    # new dead letters at the head, newest first; the old ones in their order behind them
    assert dead == list(reversed(late)) + list(reversed(jobs[1::2]))
    assert sorted(ids(redis_client, k.ready)) == sorted(jobs[0::2])
    assert all(redrive_record(redis_client, "email", j) is None for j in late)
    assert_consistent(redis_client, ["email"])


@pytest.mark.parametrize("seed", range(8))
def test_window_never_loses_or_duplicates_under_interference(redis_client, seed):
    """Random plans, batch sizes and interference between calls (new dead
    letters at the head, planned jobs taken by someone else, a job put back
    at the tail): every element stays exactly once, planned jobs are moved at
    most once, unplanned ones never."""
    rng = random.Random(seed)
    k = ReliableListKeys("email")
    n = rng.randrange(50, 400)
    jobs = bulk_dead(redis_client, "email", n, code_of=lambda i: rng.choice(["HTTP_503", "HTTP_400"]))
    lay = layout(redis_client)
    plan = lay.plan(redrive_spec(flt="error = HTTP_503"))
    planned = {j.job_id for j in plan.jobs}
    taken: set[str] = set()
    late: list[str] = []
    tail_pushed: list[str] = []

    def interfere(done, total):
        what = rng.random()
        if what < 0.3:
            late.extend(bulk_dead(redis_client, "email", rng.randrange(1, 4), prefix=f"late{len(late):03d}"))
        elif what < 0.5:
            victim = rng.choice(sorted(planned - taken))
            if redis_client.lrem(k.dead, 1, victim):  # another operator redrove it
                redis_client.lpush(k.ready, victim)
                taken.add(victim)
        elif what < 0.6 and not tail_pushed:
            [extra] = bulk_dead(redis_client, "email", 1, prefix="tail")
            redis_client.lrem(k.dead, 1, extra)
            redis_client.rpush(k.dead, extra)  # below every planned job
            tail_pushed.append(extra)

    res = run_plan(lay, plan, batch=rng.choice([1, 5, 16, 64]), progress=interfere, journal=False)
    assert res.moved + res.skipped == plan.planned
    where = assert_consistent(redis_client, ["email"])
    assert set(where) == set(jobs) | set(late) | set(tail_pushed)
    dead = ids(redis_client, k.dead)
    ready = set(ids(redis_client, k.ready))
    assert ready <= planned
    assert set(dead) >= (set(jobs) - planned) | set(late) | set(tail_pushed)
    redriven = {j for j in where if redrive_record(redis_client, "email", j) is not None}
    assert redriven <= planned - taken and len(redriven) == res.moved
    # unplanned old jobs keep their relative order
    old = [j for j in dead if j in set(jobs) and j not in planned]
    assert old == [j for j in reversed(jobs) if j not in planned]
    # a rerun takes what was skipped
    res2 = run_plan(lay, lay.plan(redrive_spec(flt="error = HTTP_503")), journal=False)
    assert res2.skipped == 0
    assert set(ids(redis_client, k.ready)) == planned | {j for j in late + tail_pushed
                                                         if envelope(redis_client, "email", j)["lastErrorCode"]
                                                         == "HTTP_503"}


@pytest.mark.parametrize("op", ["suppress", "purge"])
@pytest.mark.parametrize("seed", range(3))
def test_suppress_and_purge_windows_under_interference(redis_client, op, seed):
    rng = random.Random(100 + seed)
    k = ReliableListKeys("email")
    jobs = bulk_dead(redis_client, "email", rng.randrange(50, 300),
                     code_of=lambda i: rng.choice(["HTTP_503", "HTTP_400"]))
    lay = layout(redis_client)
    flt = compile_filter("error = HTTP_400")
    if op == "suppress":
        spec = OpSpec(Operation.SUPPRESS, "email", State.DEAD, State.SUPPRESSED, filter=flt, reason="r")
    else:
        spec = OpSpec(Operation.PURGE, "email", State.DEAD, None, filter=flt)
    plan = lay.plan(spec)
    planned = {j.job_id for j in plan.jobs}
    late: list[str] = []
    changed: set[str] = set()

    def interfere(done, total):
        if rng.random() < 0.4:
            late.extend(bulk_dead(redis_client, "email", rng.randrange(1, 3), prefix=f"late{len(late):03d}"))
        if rng.random() < 0.3:
            victim = rng.choice(sorted(planned))
            raw = redis_client.get(k.job(victim))
            if raw is not None and victim in ids(redis_client, k.dead):
                redis_client.set(k.job(victim), raw + b" ")
                changed.add(victim)

    res = run_plan(lay, plan, batch=rng.choice([3, 16, 64]), progress=interfere, journal=False)
    assert res.moved + res.skipped == plan.planned
    assert res.skipped == 0  # identity + position fence: a payload edited in place does not matter
    where = assert_consistent(redis_client, ["email"])
    dead = ids(redis_client, k.dead)
    assert dead[:len(late)] == list(reversed(late))
    assert [j for j in dead if j in set(jobs)] == [j for j in reversed(jobs) if j not in planned]
    gone = planned - set(dead)
    assert len(gone) == res.moved
    if op == "suppress":
        assert {_s(m) for m in redis_client.zrange(k.suppressed, 0, -1)} == gone
        assert set(where) == set(jobs) | set(late)
    else:
        assert set(where) == (set(jobs) | set(late)) - gone
        assert not any(redis_client.exists(k.job(j)) for j in gone)


def test_new_dead_letters_crowding_the_head_during_a_walk_keep_the_order(redis_client):
    # the window engine's hold is restored at the tail, never behind the new dead letters
    k = ReliableListKeys("email")
    jobs, lay, plan = planned_503_redrive(redis_client, 40, codes=("HTTP_503", "HTTP_400"))
    late: list[str] = []
    res = run_plan(lay, plan, batch=4, journal=False,
                   progress=lambda d, t: late.extend(simple_dead(redis_client, "email", 5, prefix=f"l{len(late)}")))
    assert res.moved == 20
    where = assert_consistent(redis_client, ["email"])
    assert set(where) == set(jobs) | set(late)
    assert ids(redis_client, k.dead) == list(reversed(late)) + list(reversed(jobs[1::2]))


def test_redrive_by_ids(redis_client, run):
    k = ReliableListKeys("email")
    jobs = simple_dead(redis_client, "email", 10)
    code, out, err = run("redrive", "email", "--ids", jobs[2], "--ids", jobs[7], "--ids", "job_nope", "--yes",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 2
    assert sorted(ids(redis_client, k.ready)) == [jobs[2], jobs[7]]
    assert ids(redis_client, k.dead) == [j for j in reversed(jobs) if j not in (jobs[2], jobs[7])]


# -- sharded and priority queues -----------------------------------------------------------------


def test_sharded_queue(redis_client, run):
    truth = load_scenario(redis_client, "dlq-spike", queue="shq", shards=4, size=400, seed=6)
    tags = shard_tags("shq", 4)
    dead = truth.ids_by_state["dead"]
    want = {i for i in dead if envelope(redis_client, truth.tag_of(i), i).get("lastErrorCode") == "HTTP_503"}
    code, out, err = run("redrive", "shq", "--filter", "error = HTTP_503", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == len(want) > 0
    where = assert_consistent(redis_client, tags)   # every id still on its own shard
    for job_id in want:
        assert where[job_id] == ReliableListKeys(truth.tag_of(job_id)).ready
    assert sum(redis_client.llen(ReliableListKeys(t).dead) for t in tags) == len(dead) - len(want)
    # suppress / unsuppress / purge across shards
    assert run("suppress", "shq", "--filter", "error = HTTP_400", "--reason", "r", "--yes")[0] == 0
    assert run("purge", "shq", "--state", "suppressed", "--no-export", "--yes")[0] == 0
    assert sum(redis_client.zcard(ReliableListKeys(t).suppressed) for t in tags) == 0
    assert_consistent(redis_client, tags)


def test_priority_queue_redrive_goes_to_the_lowest_priority_by_default(redis_client, run):
    k = ReliableListKeys("pq")
    jobs = simple_dead(redis_client, "pq", 6, priorities=3)
    code, out, err = run("redrive", "pq", "--ids", jobs[0], "--ids", jobs[1], "--yes")
    assert code == 0, err
    assert sorted(ids(redis_client, k.ready_priority(2))) == sorted(jobs[:2])
    code, out, err = run("redrive", "pq", "--priority", "0", "--limit", "2", "--yes")
    assert code == 0, err
    assert sorted(ids(redis_client, k.ready_priority(0))) == sorted(jobs[2:4])
    before = snapshot(redis_client)
    code, out, err = run("redrive", "pq", "--priority", "3", "--yes")
    assert code == 2 and "p0..p2" in err
    assert snapshot(redis_client) == before
    assert redis_client.exists(k.ready) == 0
    assert_consistent(redis_client, ["pq"])


def test_priority_queue_promote_and_requeue(redis_client, run):
    truth = load_scenario(redis_client, "stuck-workers", queue="pq", priorities=3, size=150, seed=9)
    k = ReliableListKeys("pq")
    p1_before = redis_client.llen(k.ready_priority(1))
    code, out, err = run("requeue", "pq", "--stuck", "--priority", "1", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == len(truth.stuck_ids)
    assert redis_client.llen(k.ready_priority(1)) == p1_before + len(truth.stuck_ids)
    p2_before = redis_client.llen(k.ready_priority(2))
    code, out, err = run("promote", "pq", "--yes", "--json")
    assert code == 0, err
    assert redis_client.llen(k.ready_priority(2)) == p2_before + len(truth.ids_by_state["scheduled"])
    assert_consistent(redis_client, ["pq"])


def test_apply_results_reference_the_plan(redis_client):
    """payload_sha1 matches Lua's redis.sha1hex: the fence is the same on both sides."""
    redis_client.set("x", b"\x00\xffbytes")
    sha = redis_client.eval("return redis.sha1hex(redis.call('GET', KEYS[1]))", 1, "x")
    assert _s(sha) == payload_sha1(b"\x00\xffbytes")
