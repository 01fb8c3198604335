"""A job a live worker took between the plan and the apply is the expected
race, not a failure: the operation exits 0 and says how many; exit 8 stays
for jobs that truly failed or were skipped for another reason."""

from __future__ import annotations

import random

import pytest

from jobctl.exitcodes import ExitCode
from jobctl.model import State
from jobctl.ops.core import OperationCore
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation
from jobctl.session import Session
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.protocol import Producer, Worker
from helpers import wall_ms

REQUESTS = {
    "pause": lambda: OpRequest(Operation.PAUSE, "email", reason="incident"),
    "drain": lambda: OpRequest(Operation.MIGRATE, "email", destination="spare"),
}


@pytest.fixture
def session(redis_url, tmp_path):
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text('[queues.email]\nlayout = "reliable-list"\n[queues.spare]\nlayout = "reliable-list"\n')
    s = Session(url=redis_url, config_file=str(cfg))
    yield s
    s.close()


@pytest.mark.parametrize("op", sorted(REQUESTS))
def test_jobs_a_worker_took_since_the_plan_are_counted_not_failed(redis_client, session, op):
    now = wall_ms()
    producer, rng = Producer(redis_client, "email"), random.Random(7)
    for n in range(50):
        producer.enqueue(new_envelope(f"job_{n:03d}", "webhook.deliver", "tenant_1", now - 1000 + n, rng), now=now)
    core = OperationCore(session)
    prepared = core.prepare(REQUESTS[op]())
    assert prepared.plan.planned == 50
    worker = Worker(redis_client, "email")
    taken = [worker.claim() for _ in range(10)]  # a live worker between the plan and the apply
    assert all(taken)
    out = core.apply(prepared)
    res = out.result
    assert (res.moved, res.skipped, res.failed, res.raced) == (40, 10, 0, 10), res.skipped_reasons
    assert out.exit_code is ExitCode.OK
    assert "taken by a worker since the plan: 10" in out.summary()
