"""The hash-job fence field list has one source, ``hash_job.FENCE_FIELDS``:
the requeue and suppressed-move scripts receive it as an argument (issue 10),
so the plan's fence and the script's re-check cover the same fields."""

from __future__ import annotations

import pytest
import redis

from jobctl.keys import HashJobKeys
from jobctl.layouts.hash_job import layout as hj_layout
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl_fixtures.layouts.hash_job import load_scenario
from test_layout_hash_job import NOW, Q, VT, layout, queue

#: A fence over fewer fields than the default one: ``attempts`` is left out.
NARROW = ("status", "claim_token", "claimed_at_ms")


def test_requeue_fences_the_fields_python_names(redis_client, monkeypatch):
    monkeypatch.setattr(hj_layout, "FENCE_FIELDS", NARROW)
    q = queue(redis_client)
    for _ in range(2):
        q.enqueue({"kind": "email"}, now=NOW - 5 * VT)
    a, b = (q.claim(now=NOW - 2 * VT) for _ in range(2))
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REQUEUE, Q, State.PROCESSING, State.READY, stuck_only=True), NOW)
    k = HashJobKeys(Q)
    redis_client.hset(k.job(a.id), "attempts", 99)          # outside the narrow fence: still moves
    redis_client.hset(k.job(b.id), "claim_token", "other")  # inside it: changed
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 1 and res.skipped_reasons == {"changed": 1}
    assert redis_client.lindex(k.pending, 0).decode() == a.id


def test_unsuppress_fences_the_fields_python_names(redis_client, monkeypatch):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=20, now_ms=NOW)
    ids = sorted(exp["ids_by_state"]["dead"] - exp["dangling_ids"])[:2]
    lay = layout(redis_client)
    spec = OpSpec(Operation.SUPPRESS, Q, State.DEAD, State.SUPPRESSED, ids=tuple(ids), reason="known bad")
    assert run_plan(lay, lay.plan(spec), journal=False).moved == 2
    monkeypatch.setattr(hj_layout, "FENCE_FIELDS", NARROW)
    plan = lay.plan(OpSpec(Operation.UNSUPPRESS, Q, State.SUPPRESSED, State.DEAD))
    k = HashJobKeys(Q)
    redis_client.hset(k.job(ids[0]), "attempts", 99)        # outside the narrow fence: still moves
    redis_client.hset(k.job(ids[1]), "status", "pending")   # inside it: changed
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 1 and res.skipped_reasons == {"changed": 1}


@pytest.mark.parametrize("name,keys,args", [
    ("hj_requeue", ["processing", "pending"], [10, NOW, "", 0]),
    ("hj_suppressed_move", ["suppressed", "suppressed_info", "failed"], ["purge", "", 0]),
])
def test_an_empty_fence_field_list_is_refused(redis_client, name, keys, args):
    k = HashJobKeys(Q)
    with pytest.raises(redis.exceptions.ResponseError, match="^BADARG fence fields"):
        script(redis_client, name)(keys=[getattr(k, key) for key in keys], args=args)
