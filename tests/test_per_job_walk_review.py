"""Review of the per-job walk with round trips in flight (review6)."""

from __future__ import annotations

import pytest

from jobctl.keys import JsonListKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops import window
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import TailRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.json_list import ADAPTER

JP = "rvj"
JK = JsonListKeys(JP)


def jl_layout(client):
    return layout_for(client, ADAPTER.queue_config(JP))


def jl_string(i: int) -> bytes:
    return b'{"id": "d%03d", "task": "t"}' % i


@pytest.mark.parametrize("ahead", [1, 2])
def test_json_list_duplicates_shifted_below_the_walk_are_counted_once_each(redis_client, monkeypatch, ahead):
    monkeypatch.setattr(window, "TAIL_AHEAD", ahead)
    dup = b'{"id": "dup", "task": "t"}'
    els = [jl_string(i) for i in range(5)] + [dup, dup] + [jl_string(i) for i in range(7, 20)]
    redis_client.rpush(JK.dead, *els)
    lay = jl_layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PURGE, JP, State.DEAD, None))
    assert not isinstance(plan.jobs, TailRange) and plan.planned == 20
    redis_client.lpop(JK.dead, 2)  # another client takes two jobs below the walk: the copies at 3 and 4
    res = run_plan(lay, plan, batch=4, journal=False)
    left = redis_client.lrange(JK.dead, 0, -1)
    assert left == [] and not redis_client.exists(JK.hold)
    assert res.moved + res.skipped + res.failed == 20
    assert res.moved == 18 and res.skipped == 2
