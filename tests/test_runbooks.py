"""Every shipped runbook, run end to end on a reproduction of its incident.

Each test puts a queue on the real test server in the incident's state (a
fixtures scenario, or a small setup through the fixtures' protocol
Producer/Worker/Scheduler), runs ``jobctl runbook run NAME --queue Q --yes``
exactly as an operator would, and checks that the runbook's own verification
passed and that the queue ends healthy by jobctl's independent reads.
"""

from __future__ import annotations

import random
import time

import orjson
import pytest
import redis

from jobctl.cli.main import main
from jobctl.keys import ReliableListKeys
from jobctl.ops.journal import read_local
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.ids import new_job_id
from jobctl_fixtures.protocol import Producer, Scheduler, Worker, now_ms
from jobctl_fixtures.scenarios import load_scenario

MIN = 60_000


def status_of(url: str, queue: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["--url", url, "status", queue, "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)["queues"][0]


def check_ok(url: str, queue: str, capsys) -> bool:
    capsys.readouterr()
    code = main(["--url", url, "check", queue, "--json"])
    doc = orjson.loads(capsys.readouterr().out)
    return code == 0 and doc["ok"]


def run_book(url: str, name: str, queue: str, *extra: str, yes: bool = True) -> int:
    return main(["--url", url, "runbook", "run", name, "--queue", queue, *(["--yes"] if yes else []), *extra])


def steps_journaled(name: str) -> list[dict]:
    return [e for e in read_local(10_000) if e.get("operation") == "runbook-step" and e.get("runbook") == name]


def drain_ready(client, tag: str) -> int:
    """Healthy workers catch up: claim and ack every ready job."""
    worker = Worker(client, tag)
    n = 0
    while (job := worker.claim()) is not None:
        worker.ack(job.job_id)
        n += 1
    return n


# -- dlq-spike --------------------------------------------------------------------


def test_dlq_spike(redis_url, redis_client, capsys):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=400, seed=11)
    before = status_of(redis_url, "email", capsys)
    assert before["dead"] == truth.expected["dead"] > 100

    # Without --yes: every mutating step is a dry run, nothing changes.
    assert run_book(redis_url, "dlq-spike", "email", yes=False) == 0
    after_dry = status_of(redis_url, "email", capsys)
    assert (after_dry["dead"], after_dry["suppressed"]) == (before["dead"], 0)

    # The incident's ready backlog is 15 minutes old: the fenced redrive
    # steps are skipped by their guard, so the verification fails (exit 7).
    assert run_book(redis_url, "dlq-spike", "email", "--set", "rate=5000") == 7
    mid = status_of(redis_url, "email", capsys)
    permanent = sum(n for (_, code), n in truth.dead_breakdown.items()
                    if code in ("HTTP_400", "DEADLINE_EXCEEDED"))
    assert mid["suppressed"] == permanent > 0
    assert mid["dead"] == before["dead"] - permanent

    # Workers catch up; the runbook, run again, redrives the rest.
    drain_ready(redis_client, "email")
    assert run_book(redis_url, "dlq-spike", "email", "--set", "rate=5000") == 0
    end = status_of(redis_url, "email", capsys)
    assert end["dead"] == 0 and end["stuck"] == 0
    assert end["suppressed"] == permanent
    assert end["ready"] == before["dead"] - permanent
    assert end["oldest_ready_age_ms"] < 5 * MIN
    assert check_ok(redis_url, "email", capsys)

    results = {(e["run_id"], e["step"]): e["result"] for e in steps_journaled("dlq-spike")}
    assert sorted(set(results.values())) == ["dry-run", "not-met", "ok", "skipped"]
    assert len({run for run, _ in results}) == 3


# -- stuck-processing ------------------------------------------------------------------


def test_stuck_processing(redis_url, redis_client, capsys):
    truth = load_scenario(redis_client, "stuck-workers", queue="billing", size=300, seed=12)
    assert status_of(redis_url, "billing", capsys)["stuck"] == len(truth.stuck_ids) > 0

    assert run_book(redis_url, "stuck-processing", "billing") == 0

    end = status_of(redis_url, "billing", capsys)
    assert end["stuck"] == 0
    assert end["processing"] == truth.expected["processing"] - len(truth.stuck_ids)
    assert end["ready"] == truth.expected["ready"] + len(truth.stuck_ids)
    keys = ReliableListKeys("billing")
    ready = {i.decode() for i in redis_client.lrange(keys.ready, 0, -1)}
    assert set(truth.stuck_ids) <= ready
    assert check_ok(redis_url, "billing", capsys)


# -- scheduler-lag ------------------------------------------------------------------


def test_scheduler_lag(redis_url, redis_client, capsys):
    truth = load_scenario(redis_client, "scheduler-lag", queue="reports", size=300, seed=13)
    before = status_of(redis_url, "reports", capsys)
    assert before["scheduled_overdue"] == len(truth.overdue_ids) > 0
    assert before["scheduled_overdue_max_age_ms"] > 30 * MIN

    assert run_book(redis_url, "scheduler-lag", "reports", "--set", "rate=100000") == 0

    end = status_of(redis_url, "reports", capsys)
    assert end["scheduled_overdue"] == 0
    # only the due jobs moved: every delayed job still waits for its time
    assert end["scheduled"] == before["scheduled"] - len(truth.overdue_ids)
    assert end["ready"] == before["ready"] + len(truth.overdue_ids)
    assert check_ok(redis_url, "reports", capsys)


# -- retry-storm ----------------------------------------------------------------------


def make_retry_storm(client, tag: str) -> dict[str, list[str]]:
    """A downstream failing with HTTP 503 for half an hour: an early batch of
    webhook deliveries ran out of attempts (dead), a later batch is on its
    3rd attempt, waiting out a Retry-After."""
    rng = random.Random(21)
    now = now_ms()
    producer, worker, scheduler = Producer(client, tag), Worker(client, tag, rng=rng), Scheduler(client, tag)
    t0 = now - 30 * MIN
    batches: dict[str, list[str]] = {"early": [], "late": []}

    def enqueue(batch: str, n: int, at: int) -> None:
        for i in range(n):
            jid = new_job_id(at + i, rng)
            producer.enqueue(new_envelope(jid, "webhook.deliver", f"tenant_{1 + i % 5}", at + i, rng), now=at + i)
            batches[batch].append(jid)

    enqueue("early", 30, t0)
    for rnd in range(6):
        t = t0 + rnd * 2 * MIN + 1_000
        if rnd == 3:
            enqueue("late", 20, t - 500)
        while scheduler.promote_due(t):
            pass
        while (job := worker.claim(now=t)) is not None:
            if rnd == 5:  # the downstream starts answering 429 Retry-After: 15 min
                worker.fail(job, "HTTP_429", now=t, retry_after_ms=now + 15 * MIN - t)
            else:
                worker.fail(job, "HTTP_503", now=t)
    return batches


def test_retry_storm(redis_url, redis_client, capsys):
    batches = make_retry_storm(redis_client, "webhooks")
    before = status_of(redis_url, "webhooks", capsys)
    assert before["dead"] == len(batches["early"]) and before["scheduled"] == len(batches["late"])
    capsys.readouterr()
    assert main(["--url", redis_url, "attempts", "webhooks", "--state", "scheduled", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["counts"] == {"3": len(batches["late"])}

    assert run_book(redis_url, "retry-storm", "webhooks", "--set", "rate=5000") == 0

    end = status_of(redis_url, "webhooks", capsys)
    assert end["dead"] == 0 and end["stuck"] == 0
    assert end["ready"] == len(batches["early"])
    # the retries still wait out their backoff; nothing promoted them early
    assert end["scheduled"] == len(batches["late"]) and end["scheduled_overdue"] == 0
    # attempts kept: one more failure sends a redriven job straight back to the DLQ
    worker = Worker(redis_client, "webhooks")
    job = worker.claim()
    assert job.envelope["attempt"] == job.envelope["maxAttempts"]
    assert worker.fail(job, "HTTP_503") == "DEAD_LETTERED"
    assert check_ok(redis_url, "webhooks", capsys)


# -- poison-message -------------------------------------------------------------------


def make_poison(client, tag: str) -> dict[str, list[str]]:
    """Invoice emails with a producer bug: some enqueued with a jobVersion the
    workers do not support (SERIALIZATION_ERROR on the first attempt), some
    with invalid payloads (HTTP_400); plus good jobs, and one job that died
    of an outage (HTTP_503), which is not poison."""
    rng = random.Random(22)
    now = now_ms()
    producer, worker = Producer(client, tag), Worker(client, tag, rng=rng)
    ids: dict[str, list[str]] = {"good": [], "version": [], "invalid": [], "outage": [], "pending": []}
    t = now - 20 * MIN
    plan = ["good"] * 20 + ["version"] * 4 + ["invalid"] * 3 + ["outage"]
    rng.shuffle(plan)
    for kind in plan:
        t += 10_000
        jid = new_job_id(t, rng)
        env = new_envelope(jid, "invoice.email.send", "tenant_2", t, rng)
        if kind == "version":
            env["jobVersion"] = 99
        if kind == "outage":
            env["maxAttempts"] = 1
        producer.enqueue(env, now=t)
        job = worker.claim(now=t + 100)
        assert job.job_id == jid
        if kind == "good":
            worker.ack(jid)
        else:
            worker.fail(job, {"version": "SERIALIZATION_ERROR", "invalid": "HTTP_400",
                              "outage": "HTTP_503"}[kind], now=t + 200)
        ids[kind].append(jid)
    for i in range(5):  # fresh work waiting
        jid = new_job_id(now - 1000 + i, rng)
        producer.enqueue(new_envelope(jid, "invoice.email.send", "tenant_1", now - 1000 + i, rng))
        ids["pending"].append(jid)
    return ids


def test_poison_message(redis_url, redis_client, capsys):
    ids = make_poison(redis_client, "invoices")
    poison = len(ids["version"]) + len(ids["invalid"])
    assert status_of(redis_url, "invoices", capsys)["dead"] == poison + len(ids["outage"])

    assert run_book(redis_url, "poison-message", "invoices") == 0

    end = status_of(redis_url, "invoices", capsys)
    assert end["suppressed"] == poison
    assert end["dead"] == len(ids["outage"])  # not poison: left for the dlq-spike runbook
    keys = ReliableListKeys("invoices")
    assert {i.decode() for i in redis_client.zrange(keys.suppressed, 0, -1)} == set(ids["version"] + ids["invalid"])
    info = orjson.loads(redis_client.hget(keys.suppressed_info, ids["version"][0]))
    assert "runbook poison-message" in info["reason"] and info["by"] == "tester@ci"
    assert check_ok(redis_url, "invoices", capsys)


# -- redis-failover ---------------------------------------------------------------------


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_redis_failover(redis_server, capsys):
    """A replica is promoted while a worker's claim is half replicated: the
    LMOVE reached the replica, the ZADD of its visibility deadline did not.
    On the new primary those jobs are in processing without a deadline, which
    no reaper would ever take; `jobctl check` finds them, the runbook repairs
    and requeues them."""
    from jobctl.server import EmbeddedServer

    kind = redis_server.kind if redis_server.kind in ("redis", "valkey") else "auto"
    with EmbeddedServer(kind=kind) as old, EmbeddedServer(kind=kind) as new:
        primary = redis.Redis.from_url(old.url)
        replica = redis.Redis.from_url(new.url)
        try:
            primary.config_set("repl-diskless-sync-delay", 0)  # no 5 s wait for more replicas
            replica.replicaof("127.0.0.1", old.port)
            _wait_for(lambda: replica.info("replication").get("master_link_status") == "up")
            truth = load_scenario(primary, "healthy", queue="email", size=200, seed=14)
            keys = ReliableListKeys("email")
            torn = [primary.lmove(keys.ready, keys.processing, "RIGHT", "LEFT").decode() for _ in range(3)]
            assert primary.wait(1, 5000) == 1
            replica.replicaof("NO", "ONE")  # the failover
            # written to the old primary after the failover: lost
            primary.zadd(keys.deadline, {job_id: now_ms() + 30_000 for job_id in torn})
            Producer(primary, "email").enqueue(new_envelope("job_lost", "webhook.deliver", "tenant_1",
                                                            now_ms(), random.Random(1)))

            capsys.readouterr()
            assert main(["--url", new.url, "check", "email", "--json"]) == 7
            found = orjson.loads(capsys.readouterr().out)["queues"][0]
            assert found["counts"] == {"missing_deadline": 3}

            assert run_book(new.url, "redis-failover", "email") == 0

            end = status_of(new.url, "email", capsys)
            assert end["stuck"] == 0
            assert end["processing"] == truth.expected["processing"]
            assert end["ready"] == truth.expected["ready"]
            assert set(torn) <= {i.decode() for i in replica.lrange(keys.ready, 0, -1)}
            assert check_ok(new.url, "email", capsys)
            repairs = [e for e in read_local(100) if e.get("operation") == "check --repair"]
            assert repairs and repairs[0]["moved"] == 3
        finally:
            primary.close()
            replica.close()


# -- purge-with-export -----------------------------------------------------------------


def _export_available() -> bool:
    from jobctl.cli.main import cli

    purge = cli.commands.get("purge")
    return "export" in cli.commands and purge is not None and any(
        "--export-to" in p.opts for p in purge.params)


@pytest.mark.xfail(not _export_available(), reason="export not yet available", strict=False)
def test_purge_with_export(redis_url, redis_client, tmp_path, capsys):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=300, seed=15)
    now = now_ms()
    keys = ReliableListKeys("email")
    dead = [i.decode() for i in redis_client.lrange(keys.dead, 0, -1)]
    envs = [orjson.loads(redis_client.get(keys.job(i))) for i in dead]
    old = {e["jobId"] for e in envs if now - e["lastAttemptAtEpochMs"] >= 60 * MIN}
    assert 0 < len(old) < truth.expected["dead"]
    out = tmp_path / "export"

    assert run_book(redis_url, "purge-with-export", "email", "--set", "older_than=1h",
                    "--set", f"export_dir={out}") == 0

    end = status_of(redis_url, "email", capsys)
    assert end["dead"] == truth.expected["dead"] - len(old)
    left = {i.decode() for i in redis_client.lrange(keys.dead, 0, -1)}
    assert not (left & old)
    assert (out / "dead" / "_manifest.json").is_file()
    assert check_ok(redis_url, "email", capsys)
