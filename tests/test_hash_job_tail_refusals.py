"""A redrive's write the server refuses in ``hj_tail.lua`` leaves that job
as it was: still failed, at its place on the failed list, off the pending
list, its TTL kept.  The refusals come from the ACL (a selector allowing
every key but one command, the root allowing every command on every key
but the refused ones): PERSIST and HSET refused on the job hashes, HSET
alone (a PERSIST already made is taken back), or LPUSH on the pending list
(the run's push refused before any hash is written)."""

from __future__ import annotations

import pytest
import redis

from jobctl.keys import HashJobKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.hash_job import ADAPTER, load_scenario

Q = "jobs"
NOW = 1_795_000_000_000
USER, PASSWORD = "hj-tail-refused", "pw-hj-tail"
K = HashJobKeys(Q)
# every key but the job hashes and the pending list, read and write
OTHERS = ["~queue:jobs:[^jp]*", "~queue:jobs:jobctl:*", "~[^q]*", "+@all"]
RULES = {
    "PERSIST and HSET refused": OTHERS + ["~queue:jobs:pending", "(+@all -persist -hset ~*)"],
    "HSET refused": OTHERS + ["~queue:jobs:pending", "(+@all -hset ~*)"],
    "LPUSH refused": OTHERS + ["~queue:jobs:job:*", "(+@all -lpush ~*)"],
}


@pytest.fixture
def as_user(redis_client, redis_url):
    """``as_user(rules)`` -> a client of a user with those ACL rules."""
    made = []

    def make(rules):
        redis_client.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", "&*", *rules)
        c = redis.Redis.from_url(redis_url, username=USER, password=PASSWORD)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
    redis_client.execute_command("ACL", "DELUSER", USER)


@pytest.mark.parametrize("rules", list(RULES), ids=lambda r: r.replace(" ", "-"))
def test_a_refused_write_leaves_each_job_as_it_was(redis_client, as_user, rules):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=60, now_ms=NOW)
    ids = [x.decode() for x in redis_client.lrange(K.failed, 0, -1)]
    live = [j for j in ids if j not in exp["dangling_ids"]]
    for j in live[:5]:  # most keep the TTL the redrive would drop (PERSIST), these have none
        redis_client.persist(K.job(j))
    before = {j: redis_client.hgetall(K.job(j)) for j in live}
    pending = redis_client.lrange(K.pending, 0, -1)
    with_ttl = {j for j in live if redis_client.pttl(K.job(j)) > 0}
    assert with_ttl == set(live[5:]) and with_ttl
    lay = layout_for(as_user(RULES[rules]), ADAPTER.queue_config(Q))
    plan = lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reason="r"))
    assert plan.planned == len(live)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.failed == len(live), res
    assert [x.decode() for x in redis_client.lrange(K.failed, 0, -1)] == ids
    assert redis_client.lrange(K.pending, 0, -1) == pending and redis_client.llen(K.hold) == 0
    assert {j: redis_client.hgetall(K.job(j)) for j in live} == before
    assert {j for j in live if redis_client.pttl(K.job(j)) > 0} == with_ttl
