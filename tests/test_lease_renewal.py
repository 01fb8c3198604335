"""A walk over several shards keeps every shard's lease while it runs: a
shard that waits for its turn, or one already walked, never looks
abandoned (its hold is given back as soon as its own walk ends), and the
last shard's walk still holds its lease however long the first took."""

from __future__ import annotations

import pytest

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import shard_tags
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops import lease, orphan_holds
from jobctl.ops.walk import lifecycle, per_job, tail
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.ids import shard_index
from test_operations import dead_letter_jobs

SHARDS = 2
TTL_MS = 1000  # scaled down from 30 s: each shard's walk below takes longer than this


@pytest.mark.parametrize("flt", [None, "error = HTTP_503"], ids=["tail", "filtered"])
def test_every_lease_lives_while_other_shards_are_walked(redis_client, monkeypatch, flt):
    for module in (lease, lifecycle, per_job, tail):
        monkeypatch.setattr(module, "LEASE_TTL_MS", TTL_MS)
    specs = [(f"job_{i:04d}", "webhook.deliver", "tenant_1", ("HTTP_503", "HTTP_400")[i % 2]) for i in range(160)]
    for n, tag in enumerate(shard_tags("email", SHARDS)):
        dead_letter_jobs(redis_client, tag, [s for s in specs if shard_index(s[0], SHARDS) == n])
    lay = ReliableList(redis_client, QueueConfig("email", shards=SHARDS))
    extra = {"filter": compile_filter(flt)} if flt else {}
    plan = lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, **extra))
    seen: list[list] = []
    res = run_plan(lay, plan, batch=5, rate=25, journal=False,  # 1.6-3.2 s a shard
                   progress=lambda done, total: seen.append(orphan_holds.find(lay)))
    assert (res.moved, res.failed, res.error) == (plan.planned, 0, None), res.to_json()
    assert not any(seen), [s for s in seen if s][:2]
