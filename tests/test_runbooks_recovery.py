"""The recovery runbooks (noisy-tenant), run end to end on a reproduction
of their incident, as ``tests/test_runbooks.py`` does for the others."""

from __future__ import annotations

import random

from jobctl.keys import ReliableListKeys
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.protocol import Producer, Worker, now_ms
from helpers import claim_and_ack
from test_runbooks import check_ok, run_book, status_of, steps_journaled


def _enqueue(client, rng, created: int, n: int, prefix: str, tenant_of) -> list[tuple[str, str]]:
    """``n`` ready jobs ``<prefix>0000..`` on email, job ``i`` of tenant
    ``tenant_of(i)`` created at ``created + i``; ``(id, tenant)`` pairs, oldest first."""
    producer = Producer(client, "email")
    ids = []
    for i in range(n):
        job_id, tenant = f"{prefix}{i:04d}", tenant_of(i)
        producer.enqueue(new_envelope(job_id, "webhook.deliver", tenant, created + i, rng))
        ids.append((job_id, tenant))
    return ids


def test_noisy_tenant(redis_url, redis_client, capsys):
    # one tenant floods the queue: 3 of every 4 ready jobs are t1's
    created = now_ms() - 600_000
    ids = _enqueue(redis_client, random.Random(5), created, 400, "n", lambda i: "t1" if i % 4 else f"t{2 + i % 3}")
    t1 = [j for j, t in ids if t == "t1"]
    others = [j for j, t in ids if t != "t1"]
    before = status_of(redis_url, "email", capsys)
    assert before["ready"] == 400 and before["paused"] == 0

    # without --yes: the pause is a dry run, the verification is only reported
    assert run_book(redis_url, "noisy-tenant", "email", yes=False) == 0
    assert status_of(redis_url, "email", capsys)["paused"] == 0

    assert run_book(redis_url, "noisy-tenant", "email") == 0
    mid = status_of(redis_url, "email", capsys)
    assert (mid["paused"], mid["ready"]) == (len(t1), len(others))
    assert check_ok(redis_url, "email", capsys)

    # the other tenants drain: a worker takes only their jobs
    worker = Worker(redis_client, "email")
    served = claim_and_ack(worker)
    assert served == others

    assert run_book(redis_url, "noisy-tenant", "email", "--step", "resume") == 0
    after = status_of(redis_url, "email", capsys)
    assert (after["paused"], after["ready"]) == (0, len(t1))
    k = ReliableListKeys("email")
    assert [x.decode() for x in reversed(redis_client.lrange(k.ready, 0, -1))] == t1  # oldest first
    assert check_ok(redis_url, "email", capsys)
    served = claim_and_ack(worker)
    assert served == t1
    assert {s["step"] for s in steps_journaled("noisy-tenant")} >= {"pause", "verify-paused", "resume"}


def test_retire_or_split_queue(redis_url, redis_client, capsys):
    rng = random.Random(6)
    created = now_ms() - 600_000
    ids = _enqueue(redis_client, rng, created, 120, "m", lambda i: ("t1", "t2", "t3")[i % 3])
    Producer(redis_client, "email-v2").enqueue(new_envelope("keep", "webhook.deliver", "t9", created, rng))
    t1 = [j for j, t in ids if t == "t1"]

    assert run_book(redis_url, "retire-or-split-queue", "email", yes=False) == 0  # dry runs
    assert status_of(redis_url, "email", capsys)["ready"] == 120

    assert run_book(redis_url, "retire-or-split-queue", "email") == 0
    src, dst = ReliableListKeys("email"), ReliableListKeys("email-v2")
    assert [x.decode() for x in reversed(redis_client.lrange(dst.ready, 0, -1))] == ["keep"] + t1
    assert status_of(redis_url, "email", capsys)["ready"] == 80

    assert run_book(redis_url, "retire-or-split-queue", "email", "--step", "retire") == 0
    assert redis_client.llen(src.ready) == 0
    assert redis_client.llen(dst.ready) == 121
    assert check_ok(redis_url, "email-v2", capsys)
    assert {s["step"] for s in steps_journaled("retire-or-split-queue")} >= {"split", "verify", "retire"}


def test_unsupported_payload_version(redis_url, redis_client, capsys, tmp_path):
    import orjson

    from jobctl.ops.journal import read_local
    from test_operations import dead_letter_jobs

    specs = [(f"u{i:03d}", "webhook.deliver", "t1", "SERIALIZATION_ERROR") for i in range(12)]
    ids = dead_letter_jobs(redis_client, "email", specs)
    k = ReliableListKeys("email")
    originals = {job_id: redis_client.get(k.job(job_id)) for job_id in ids}
    transform = tmp_path / "v3.toml"
    transform.write_text('bump_version = true\n[rename]\n"payload.endpointId" = "payload.endpoint"\n')
    assert run_book(redis_url, "unsupported-payload-version", "email", "--set", f"transform={transform}",
                    yes=False) == 0  # dry runs: the verification is only reported
    assert status_of(redis_url, "email", capsys)["dead"] == 12
    assert run_book(redis_url, "unsupported-payload-version", "email", "--set", f"transform={transform}") == 0
    st = status_of(redis_url, "email", capsys)
    assert (st["dead"], st["ready"]) == (0, 12)
    for job_id in ids:
        doc = orjson.loads(redis_client.get(k.job(job_id)))
        before = orjson.loads(originals[job_id])
        # rewritten by the transform only: the redrive keeps the attempts (and the envelope)
        assert doc["jobVersion"] == before["jobVersion"] + 1 and "endpoint" in doc["payload"]
        assert doc["attempt"] == before["attempt"]
    assert check_ok(redis_url, "email", capsys)
    assert {s["step"] for s in steps_journaled("unsupported-payload-version")} >= {"transform", "redrive", "verify"}

    # the rollback puts every original back, byte for byte, where the job is now (ready: no worker took it)
    op = next(e["id"] for e in read_local(100) if e.get("operation") == "transform")
    assert run_book(redis_url, "unsupported-payload-version", "email", "--step", "rollback",
                    "--set", f"operation={op}") == 0
    assert {job_id: redis_client.get(k.job(job_id)) for job_id in ids} == originals
    assert status_of(redis_url, "email", capsys)["ready"] == 12
    assert check_ok(redis_url, "email", capsys)
