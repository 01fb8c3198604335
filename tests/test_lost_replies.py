"""The count of a run whose connection dropped with calls in flight is
exact: a call whose reply was lost may have run, so its jobs are re-read
in jobctl's own keys (the redrive record, the suppressed info) or where
the operation leaves a trace (a purged payload is gone) before the count is
reported and journaled."""

from __future__ import annotations

import os
import threading
import time

from pathlib import Path

import orjson
import pytest
import redis

from jobctl.errors import ConnectionFailed
from jobctl.filter import compile_filter
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from test_tail_walk_ahead import FLT, K, setup_walk

OPS = {
    "redrive": (Operation.REDRIVE, State.READY),
    "suppress": (Operation.SUPPRESS, State.SUPPRESSED),
    "purge": (Operation.PURGE, None),
}


#: a script that keeps the server busy for 300 ms (the calls sent meanwhile queue up); Valkey's
#: TIME stands still inside a script, so the loop also ends after a million turns (~1 s there)
BUSY = "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] for i = 1, 1000000 do " \
       "t = redis.call('TIME') if t[1] * 1e6 + t[2] - s > 300000 then return i end end return -1"


def _kill_after_its_calls_ran(client) -> None:
    """Make the server run the engine's next round trip and then, in the
    same turn of its event loop (before it writes the replies), kill the
    engine's connections: the calls ran, their replies are lost."""
    me = client.client_id()
    victims = [int(c["id"]) for c in client.client_list() if int(c["id"]) != me]
    kw = client.connection_pool.connection_kwargs
    busy = redis.Redis(host=kw["host"], port=kw["port"])
    killer = redis.Redis(host=kw["host"], port=kw["port"])
    busy.ping()  # both connected now: their commands go out at once
    killer.ping()
    sending = threading.Event()

    def run_busy():
        sending.set()
        busy.eval(BUSY, 0)

    def kill():
        time.sleep(0.1)  # after the engine sent its next round trip, while the server is busy
        for v in victims:
            killer.client_kill_filter(_id=v)

    threading.Thread(target=run_busy, daemon=True).start()
    sending.wait()
    time.sleep(0.05)  # the server is running the busy script before the engine sends again
    threading.Thread(target=kill, daemon=True).start()


def _killing_at_first_result(client):
    """A progress callback that runs :func:`_kill_after_its_calls_ran` at the first result."""
    calls: list[int] = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            _kill_after_its_calls_ran(client)
    return progress


def _gone_from_dead(client, jobs) -> int:
    left = set(client.lrange(K.dead, 0, -1)) | set(client.lrange(K.hold, 0, -1))
    return sum(1 for j in jobs if j.encode() not in left)


@pytest.mark.parametrize("flt", [None, FLT], ids=["tail", "filtered"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_moves_whose_replies_were_lost_are_counted(redis_client, monkeypatch, op, flt):
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 400)
    operation, target = OPS[op]
    extra = {"filter": compile_filter(flt)} if flt else {}
    reason = {"reason": "t"} if operation is Operation.SUPPRESS else {}
    spec = OpSpec(operation, "email", State.DEAD, target, **extra, **reason)
    with pytest.raises(ConnectionFailed) as err:
        run_plan(lay, lay.plan(spec), batch=10, progress=_killing_at_first_result(redis_client))
    moved = _gone_from_dead(redis_client, jobs)
    assert 0 < moved < len(want)
    assert f"stopped after {moved:,} of" in str(err.value), (moved, str(err.value))
    local = [orjson.loads(line) for line in Path(os.environ["JOBCTL_JOURNAL"]).read_bytes().splitlines()]
    assert local[-1]["moved"] == moved, "the journal counts every move"


@pytest.mark.parametrize("flt", [None, FLT], ids=["tail", "filtered"])
def test_a_purge_does_not_count_dangling_ids_of_lost_calls(redis_client, monkeypatch, flt):
    """Every third dead job has lost its payload (dangling): the script
    leaves it dead, so a lost call's dangling ids are not counted purged."""
    jobs, want, lay = setup_walk(redis_client, monkeypatch, flt, 400)
    for j in jobs[::3]:
        redis_client.delete(K.job(j))
    extra = {"filter": compile_filter(flt)} if flt else {}
    spec = OpSpec(Operation.PURGE, "email", State.DEAD, None, **extra)
    with pytest.raises(ConnectionFailed) as err:
        run_plan(lay, lay.plan(spec), batch=10, progress=_killing_at_first_result(redis_client), journal=False)
    moved = _gone_from_dead(redis_client, jobs)
    assert f"stopped after {moved:,} of" in str(err.value), (moved, str(err.value))
