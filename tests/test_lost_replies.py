"""The count of a run whose connection dropped with calls in flight is
exact: a call whose reply was lost may have run, so its jobs are re-read
in jobctl's own keys (the redrive record, the suppressed info) or where
the operation leaves a trace (a purged payload is gone) before the count is
reported and journaled."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import redis

from jobctl.errors import ConnectionFailed
from jobctl.filter import compile_filter
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from test_tail_walk_changes_and_errors import FLT, K, setup_walk

OPS = {
    "redrive": (Operation.REDRIVE, State.READY),
    "suppress": (Operation.SUPPRESS, State.SUPPRESSED),
    "purge": (Operation.PURGE, None),
}


def _losing_replies_after_first_result(monkeypatch):
    """A progress callback that, at the first result, arms a loss: the
    engine's next read of a reply first makes sure every call it sent on
    that connection has run (an ECHO sent behind them comes back), then
    drops the connection: the calls ran, their replies are lost. No timing
    is involved, so a loaded machine cannot let the run finish first."""
    armed: list[bool] = []
    parse = redis.Redis.parse_response

    def losing(self, conn, command, **kw):
        if armed and not armed[0]:
            armed[0] = True
            conn.send_command("ECHO", b"jobctl-test-marker")
            while True:
                try:
                    if conn.read_response() == b"jobctl-test-marker":
                        break
                except redis.exceptions.ResponseError:
                    continue  # an error reply of a call that ran
            conn.disconnect()
            raise redis.exceptions.ConnectionError("connection dropped by the test")
        return parse(self, conn, command, **kw)

    monkeypatch.setattr(redis.Redis, "parse_response", losing)

    def progress(done, total):
        if not armed:
            armed.append(False)
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
        run_plan(lay, lay.plan(spec), batch=10, progress=_losing_replies_after_first_result(monkeypatch))
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
        run_plan(lay, lay.plan(spec), batch=10, progress=_losing_replies_after_first_result(monkeypatch), journal=False)
    moved = _gone_from_dead(redis_client, jobs)
    assert f"stopped after {moved:,} of" in str(err.value), (moved, str(err.value))
