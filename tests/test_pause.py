"""``jobctl pause`` / ``resume`` / ``hold`` on the reliable-list layout
(``jobctl/layouts/reliable_list/pause.py``, ``jobctl/lua/rl_pause_move.lua``,
``jobctl/cli/recovery_cmds.py``) against a real server, with the fixtures'
producers and workers (seed 000 sections 7-8) as the other teams' services.

Every check reads the keys back itself (:func:`partition`: each id in
exactly one state key, the paused info hash the same set as the paused list).
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.layouts.reliable_list.pause import add_hold, hold_spec
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.ids import shard_index
from jobctl_fixtures.protocol import Producer, Worker
from helpers import claim_and_ack, cli_runner, queues_toml, wall_ms, write_config

RL = {"layout": "reliable-list"}
QUEUES_TOML = queues_toml(email=RL, shq={**RL, "shards": 3}, pq={**RL, "priorities": 2},
                          sg={"layout": "stream-group", "tag": "sg"})

TENANTS = ("t1", "t2", "t3")


@pytest.fixture
def run(redis_url, tmp_path: Path, capsys):
    """``run(*args)`` -> (exit code, stdout, stderr) of ``jobctl --url .. --config .. args``."""
    return cli_runner(capsys, redis_url, write_config(tmp_path, QUEUES_TOML))


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def enqueue(client, tag: str, n: int, *, prefix: str = "j", shards: int | None = None,
            priorities: int | None = None, start: int = 0) -> list[str]:
    """``n`` ready jobs ``<prefix>0000..`` of tenants t1, t2, t3 in turn, oldest first."""
    rng = random.Random(n)
    tags = shard_tags(tag, shards)
    producers = [Producer(client, t, priorities=priorities) for t in tags]
    created = wall_ms() - 3_600_000
    out = []
    for i in range(start, start + n):
        job_id = f"{prefix}{i:04d}"
        env = new_envelope(job_id, "webhook.deliver", TENANTS[i % 3], created + i, rng)
        if priorities:
            env["priority"] = i % priorities
        producers[shard_index(job_id, len(tags)) if shards else 0].enqueue(env)
        out.append(job_id)
    return out


def partition(client, tags: list[str], priorities: int | None = None) -> dict[str, list[str]]:
    """id -> every state key holding it; asserts each id is in exactly one
    and the paused info hash holds exactly the paused ids."""
    where: dict[str, list[str]] = defaultdict(list)
    for tag in tags:
        k = ReliableListKeys(tag)
        lists = [k.ready, k.processing, k.dead, k.paused] + [k.ready_priority(p) for p in range(priorities or 0)]
        for key in lists:
            for x in client.lrange(key, 0, -1):
                where[_s(x)].append(key)
        for key in (k.scheduled, k.suppressed):
            for x in client.zrange(key, 0, -1):
                where[_s(x)].append(key)
        paused = {_s(x) for x in client.lrange(k.paused, 0, -1)}
        assert {_s(x) for x in client.hkeys(k.paused_info)} == paused
    twice = {i: keys for i, keys in where.items() if len(keys) != 1}
    assert not twice, f"ids not in exactly one state: {list(twice.items())[:3]}"
    return where


def tail_first(client, key: str) -> list[str]:
    """A list's ids from the served end (tail) to the head."""
    return [_s(x) for x in reversed(client.lrange(key, 0, -1))]


def tenant_of(job_id: str, prefix: str = "j") -> str:
    return TENANTS[int(job_id[len(prefix):]) % 3]


# -- plan, dry run, apply, resume ----------------------------------------------------

def test_pause_then_resume_restores_order_and_records_who_when_why(redis_client, run):
    ids = enqueue(redis_client, "email", 60)
    k = ReliableListKeys("email")
    code, out, err = run("pause", "email", "--filter", "tenant = t1", "--reason", "noisy tenant", "--yes",
                         "--batch", "7", "--json")
    assert code == 0, err
    doc = json.loads(out)
    t1 = [i for i in ids if tenant_of(i) == "t1"]
    assert doc["moved"] == len(t1) == doc["plan"]["planned"]
    assert tail_first(redis_client, k.paused) == t1  # oldest at the served end, in order
    assert tail_first(redis_client, k.ready) == [i for i in ids if tenant_of(i) != "t1"]
    info = json.loads(redis_client.hget(k.paused_info, t1[0]))
    assert info["reason"] == "noisy tenant" and info["from"] == k.ready and info["by"] and info["at_ms"] > 0
    partition(redis_client, ["email"])
    # a worker now takes only the others
    worker = Worker(redis_client, "email")
    taken = [worker.claim().job_id for _ in range(5)]
    assert all(tenant_of(i) != "t1" for i in taken)
    code, out, err = run("resume", "email", "--yes", "--batch", "5")
    assert code == 0, err
    # resumed jobs are served next, in their original order, before the others
    assert tail_first(redis_client, k.ready)[:len(t1)] == t1
    assert redis_client.exists(k.paused, k.paused_info) == 0
    where = partition(redis_client, ["email"])
    assert set(where) == set(ids)


def test_dry_run_changes_nothing_and_nothing_matches_is_ok(redis_client, run):
    enqueue(redis_client, "email", 10)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    code, out, err = run("pause", "email", "--filter", "tenant = t2", "--reason", "x", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["plan"]["planned"] == 3
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before
    code, _, err = run("resume", "email", "--yes")
    assert code == 0 and "nothing to do" in err


@pytest.mark.parametrize("args", [
    ("pause", "email", "--reason", ""),
    ("pause", "email"),
    ("pause", "email", "--reason", "x", "--filter", "tenant ="),
    ("pause", "email", "--reason", "x", "--hold", "--state", "scheduled"),
    ("pause", "email", "--reason", "x", "--hold", "--limit", "3"),
])
def test_bad_input_exits_2_and_changes_nothing(redis_client, run, args):
    enqueue(redis_client, "email", 6)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    code, out, err = run(*args, "--yes")
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before


def test_layouts_that_cannot_hold_jobs_back_refuse(redis_client, run):
    code, out, err = run("pause", "sg", "--reason", "x", "--yes")
    assert code == 2 and "not supported for layout stream-group" in err and err.count("\n") == 1


def test_read_only_refuses(redis_client, run):
    enqueue(redis_client, "email", 3)
    code, _, err = run("--read-only", "pause", "email", "--reason", "x", "--yes")
    assert code == 9, err
    assert redis_client.exists(ReliableListKeys("email").paused) == 0


def test_pause_scheduled_goes_back_with_its_due_time(redis_client, run):
    k = ReliableListKeys("email")
    rng = random.Random(1)
    due = wall_ms() + 3_600_000
    producer = Producer(redis_client, "email")
    for i in range(6):
        producer.enqueue(new_envelope(f"s{i}", "webhook.deliver", TENANTS[i % 3], wall_ms(), rng,
                                      not_before_ms=due + i))
    code, out, err = run("pause", "email", "--state", "scheduled", "--reason", "x", "--yes")
    assert code == 0, err
    assert redis_client.zcard(k.scheduled) == 0 and redis_client.llen(k.paused) == 6
    code, out, err = run("ls", "email", "--state", "paused", "--json")
    assert code == 0 and len(json.loads(out)["jobs"]) == 6
    code, out, err = run("resume", "email", "--yes")
    assert code == 0, err
    assert {_s(m): int(s) for m, s in redis_client.zrange(k.scheduled, 0, -1, withscores=True)} == \
        {f"s{i}": due + i for i in range(6)}
    partition(redis_client, ["email"])


def test_sharded_and_priority_queues_round_trip(redis_client, run):
    ids = enqueue(redis_client, "shq", 40, shards=3)
    tags = shard_tags("shq", 3)
    before = {t: tail_first(redis_client, ReliableListKeys(t).ready) for t in tags}
    assert run("pause", "shq", "--reason", "all", "--yes")[0] == 0
    assert sum(redis_client.llen(ReliableListKeys(t).ready) for t in tags) == 0
    partition(redis_client, tags)
    code, out, _ = run("status", "shq", "--json")
    assert json.loads(out)["queues"][0]["paused"] == 40
    assert run("resume", "shq", "--yes")[0] == 0
    assert {t: tail_first(redis_client, ReliableListKeys(t).ready) for t in tags} == before
    assert set(partition(redis_client, tags)) == set(ids)

    enqueue(redis_client, "pq", 20, priorities=2, prefix="p")
    k = ReliableListKeys("pq")
    lists = [k.ready_priority(0), k.ready_priority(1)]
    before = {key: tail_first(redis_client, key) for key in lists}
    assert run("pause", "pq", "--filter", "tenant != t3", "--reason", "x", "--yes", "--batch", "3")[0] == 0
    assert run("resume", "pq", "--yes", "--batch", "4")[0] == 0
    after = {key: tail_first(redis_client, key) for key in lists}
    for key in lists:  # paused jobs back on their own priority list, before the unpaused ones, in order
        paused = [i for i in before[key] if tenant_of(i, "p") != "t3"]
        assert after[key] == paused + [i for i in before[key] if tenant_of(i, "p") == "t3"]
    partition(redis_client, ["pq"], priorities=2)


def test_status_check_inspect_and_metrics_see_the_paused_state(redis_client, run):
    enqueue(redis_client, "email", 9)
    assert run("pause", "email", "--filter", "tenant = t3", "--reason", "why", "--yes")[0] == 0
    code, out, err = run("check", "email")
    assert code == 0, out + err
    code, out, _ = run("inspect", "email", "j0002", "--json")
    doc = json.loads(out)
    assert doc["state"] == "paused" and doc["meta"]["paused"]["reason"] == "why"
    code, out, _ = run("status", "email", "--json")
    q = json.loads(out)["queues"][0]
    assert q["paused"] == 3 and q["ready"] == 6 and q["held_filters"] == []
    # a paused id also found in ready is in two states: check reports it
    redis_client.lpush(ReliableListKeys("email").ready, "j0002")
    code, out, _ = run("check", "email", "--json")
    assert code == 7 and "multiple_states" in out


# -- holds -------------------------------------------------------------------------

def test_hold_pauses_newly_ready_jobs_until_resume_lifts_it(redis_client, run):
    k = ReliableListKeys("email")
    enqueue(redis_client, "email", 9)
    code, _, err = run("pause", "email", "--filter", "tenant = t1", "--reason", "noisy", "--hold", "--cycles", "0",
                       "--yes")
    assert code == 0, err
    assert redis_client.llen(k.paused) == 3
    code, out, _ = run("status", "email", "--json")
    held = json.loads(out)["queues"][0]["held_filters"]
    assert [h["filter"] for h in held] == ["tenant = t1"] and held[0]["reason"] == "noisy"
    assert held[0]["age_ms"] >= 0 and held[0]["by"]
    new = enqueue(redis_client, "email", 9, start=100)
    code, out, err = run("hold", "run", "email", "--cycles", "1", "--interval", "0s", "--budget", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["paused"] == 2  # bounded per cycle
    assert run("hold", "run", "email", "--cycles", "1", "--interval", "0s")[0] == 0
    assert redis_client.llen(k.paused) == 6
    assert all(tenant_of(i) != "t1" for i in tail_first(redis_client, k.ready))
    code, _, err = run("resume", "email", "--filter", "tenant = t1", "--yes")
    assert code == 0 and "lifted" in err
    assert redis_client.hlen(k.holds) == 0
    code, _, err = run("hold", "run", "email", "--cycles", "1")
    assert code == 0 and "no hold" in err
    assert set(partition(redis_client, ["email"])) >= set(new)


def test_a_hold_cycle_moves_nothing_once_the_hold_is_gone(redis_client):
    enqueue(redis_client, "email", 6)
    lay = ReliableList(redis_client, QueueConfig("email"))
    hold = add_hold(lay, "tenant = t2", "x", "tester")
    plan = lay.plan(hold_spec(lay, hold, 100))
    assert plan.planned == 2
    redis_client.hdel(ReliableListKeys("email").holds, hold["id"])  # resume lifted it meanwhile
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {"unheld": 2}
    assert redis_client.llen(ReliableListKeys("email").paused) == 0


# -- fences and resumability ---------------------------------------------------------

def test_apply_is_fenced_to_the_payload_and_to_claims(redis_client):
    ids = enqueue(redis_client, "email", 30)
    k = ReliableListKeys("email")
    lay = ReliableList(redis_client, QueueConfig("email"))
    spec = OpSpec(Operation.PAUSE, "email", State.READY, State.PAUSED, filter=compile_filter("tenant = t1"),
                  reason="x")
    plan = lay.plan(spec)
    t1 = [i for i in ids if tenant_of(i) == "t1"]
    assert plan.planned == 10
    redis_client.set(k.job(t1[3]), b'{"jobId": "changed"}')  # a producer rewrote it
    worker = Worker(redis_client, "email")
    claimed = [worker.claim().job_id for _ in range(4)]  # takes t1[0] and t1[1]
    res = run_plan(lay, plan, batch=3, journal=False)
    assert res.moved == 7 and res.skipped_reasons == {"changed": 1, "moved": 2}
    assert set(tail_first(redis_client, k.paused)) == set(t1) - {t1[0], t1[1], t1[3]}
    assert t1[0] in claimed and t1[1] in claimed
    partition(redis_client, ["email"])


def test_interrupted_pause_and_resume_finish_on_rerun(redis_client, run):
    ids = enqueue(redis_client, "email", 90)
    k = ReliableListKeys("email")
    lay = ReliableList(redis_client, QueueConfig("email"))
    spec = OpSpec(Operation.PAUSE, "email", State.READY, State.PAUSED, filter=compile_filter("tenant != t3"),
                  reason="x")
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] >= 2

    res = run_plan(lay, lay.plan(spec), batch=8, stop=stop, journal=False)
    assert res.interrupted and 0 < res.moved < 60
    partition(redis_client, ["email"])
    assert run("pause", "email", "--filter", "tenant != t3", "--reason", "x", "--yes")[0] == 0
    paused = [i for i in ids if tenant_of(i) != "t3"]
    assert tail_first(redis_client, k.paused) == paused
    res = run_plan(lay, lay.plan(OpSpec(Operation.RESUME, "email", State.PAUSED, State.READY)), batch=8,
                   stop=lambda: True, journal=False)
    assert res.interrupted
    partition(redis_client, ["email"])
    assert run("resume", "email", "--yes")[0] == 0
    assert tail_first(redis_client, k.ready)[:len(paused)] == paused
    assert set(partition(redis_client, ["email"])) == set(ids)


def test_journaled(redis_client, run, tmp_path, monkeypatch):
    enqueue(redis_client, "email", 6)
    assert run("pause", "email", "--filter", "tenant = t1", "--reason", "journal me", "--yes")[0] == 0
    entries = [json.loads(f[b"entry"]) for _, f in redis_client.xrange(ReliableListKeys("email").journal)]
    assert entries[-1]["operation"] == "pause" and entries[-1]["moved"] == 2
    assert entries[-1]["reason"] == "journal me" and entries[-1]["target"] == "paused"


# -- a live worker pool --------------------------------------------------------------

class _Pool:
    """Worker threads claiming (BLMOVE, seed 000 s.8) and acknowledging every
    job; ``claims`` lists (id, pause_done flag at claim time) in claim order."""

    def __init__(self, client, tag: str, threads: int = 2) -> None:
        self.client, self.tag = client, tag
        self.stop = threading.Event()
        self.paused_done = threading.Event()
        self.claims: list[tuple[str, bool]] = []
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.threads = [threading.Thread(target=self._work, daemon=True) for _ in range(threads)]

    def _work(self) -> None:
        import redis

        client = redis.Redis(connection_pool=self.client.connection_pool)
        worker = Worker(client, self.tag)
        while not self.stop.is_set():
            done_before = self.paused_done.is_set()
            job = worker.claim(block_s=0.05)
            if job is None:
                with self.lock:
                    self.idle.notify_all()
                continue
            with self.lock:
                self.claims.append((job.job_id, done_before))
            worker.ack(job.job_id)

    def __enter__(self) -> "_Pool":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)

    def wait_empty(self, key: str, timeout: float = 30) -> None:
        with self.lock:
            assert self.idle.wait_for(lambda: self.client.llen(key) == 0, timeout), "workers did not drain"


def test_pause_a_tenant_under_a_live_worker_pool(redis_client, run):
    """No worker claims a paused job while paused; the others drain; resume
    restores the order; every job is claimed exactly once."""
    ids = enqueue(redis_client, "email", 1500)
    k = ReliableListKeys("email")
    with _Pool(redis_client, "email") as pool:
        code, out, err = run("pause", "email", "--filter", "tenant = t1", "--reason", "noisy", "--yes",
                             "--batch", "16", "--json")
        pool.paused_done.set()
        assert code in (0, 8), err
        doc = json.loads(out)
        paused = tail_first(redis_client, k.paused)
        assert doc["moved"] == len(paused) > 0
        assert set(doc["skipped_reasons"]) <= {"moved"}  # only jobs a worker claimed first
        pool.wait_empty(k.ready)  # the other tenants drain while t1 is paused
        with pool.lock:
            claimed_while_paused = [i for i, after in pool.claims if after]
        assert not set(claimed_while_paused) & set(paused)
        assert [i for i in ids if tenant_of(i) == "t1"][-len(paused):] == paused  # in order
        pool.stop.set()
    for t in pool.threads:
        t.join(5)
    assert run("resume", "email", "--yes", "--batch", "16")[0] == 0
    assert tail_first(redis_client, k.ready) == paused  # next served, original order
    rest = claim_and_ack(Worker(redis_client, "email"))
    assert rest == paused
    every = [i for i, _ in pool.claims] + rest
    assert Counter(every) == Counter(ids)  # exactly once
    partition(redis_client, ["email"])


def test_exporter_gauges_paused_and_held(redis_client, redis_url, run):
    from jobctl.metrics import JobctlCollector, exposition
    from jobctl.session import Session
    from test_metrics import q, samples

    enqueue(redis_client, "email", 9)
    assert run("pause", "email", "--filter", "tenant = t1", "--reason", "x", "--hold", "--cycles", "0",
               "--yes")[0] == 0
    session = Session(url=redis_url)
    try:
        got = samples(exposition(JobctlCollector(session, interval_s=0.0)).decode())
    finally:
        session.close()
    assert got["redis_job_paused_depth"][q("email")] == 3
    assert got["redis_job_held_filters"][q("email")] == 1
    assert got["redis_job_migrating_depth"][q("email")] == 0


def test_hold_run_says_each_cycle_and_exits_130_on_ctrl_c(redis_client, run, monkeypatch):
    """A cycle that paused jobs prints a line with its totals; Ctrl-C (a real
    SIGINT, sent once the first cycle is done) stops the loop after that
    cycle with exit 130, the hold left recorded."""
    import os
    import signal

    from jobctl.cli import recovery_cmds

    k = ReliableListKeys("email")
    enqueue(redis_client, "email", 9)
    code, _, err = run("pause", "email", "--filter", "tenant = t1", "--reason", "noisy", "--hold", "--cycles", "0",
                       "--yes")
    assert code == 0, err
    enqueue(redis_client, "email", 9, start=100)
    cycle = recovery_cmds._CycleReport.cycle

    def cycle_then_press(self, done, total):
        cycle(self, done, total)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C once the first cycle is reported

    monkeypatch.setattr(recovery_cmds._CycleReport, "cycle", cycle_then_press)
    code, out, err = run("hold", "run", "email", "--interval", "0s")
    assert code == 130, err
    assert "paused 3 newly ready job(s)" in err and "cycle 1 at " in err
    assert "interrupted after 1 cycle(s) on email, 3 job(s) paused in all" in err
    assert redis_client.hlen(k.holds) == 1 and redis_client.llen(k.paused) == 6


def test_hold_ls_has_a_header_and_the_age_of_each_hold(redis_client, run):
    enqueue(redis_client, "email", 3)
    code, out, err = run("hold", "ls", "email")
    assert code == 0 and out == "" and "no hold on email" in err
    code, _, err = run("pause", "email", "--filter", "tenant = t1", "--reason", "noisy", "--hold", "--cycles", "0",
                       "--yes")
    assert code == 0, err
    code, out, err = run("hold", "ls", "email")
    assert code == 0, err
    assert "holds on email: 1" in out
    for word in ("id", "filter", "by", "since", "age", "reason", "tenant = t1", "noisy", "hold-"):
        assert word in out
    assert " ms " in out or " s " in out  # the age, in the shared formatter's words


def test_hold_ls_shows_filter_and_reason_as_typed(redis_client, run):
    """Square brackets in a filter or a reason are text, not rich markup."""
    enqueue(redis_client, "email", 3)
    code, _, err = run("pause", "email", "--filter", 'error = "[bold]"', "--reason", "see [red] ticket",
                       "--hold", "--cycles", "0", "--yes")
    assert code == 0, err
    code, out, err = run("hold", "ls", "email")
    assert code == 0, err
    assert 'error = "[bold]"' in out and "see [red] ticket" in out
