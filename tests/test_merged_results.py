"""Results a forked walk merges into one message: counted as they would be
apart (a job id with a reason in two results is never merged), and those
a walk already had reach the caller when its process is killed while the
caller keeps up."""

from __future__ import annotations

import os
import signal

import pytest

from jobctl.errors import ConnectionFailed
from jobctl.ops.engine import RunResult, _count
from jobctl.ops.result import BatchResult, merged
from jobctl.ops.walk.processes import FORKS, ITEMS_A_MESSAGE, run_forked

pytestmark = pytest.mark.skipif(not FORKS, reason="tasks run in threads where fork is not used")


def _changed_then_moved() -> list[BatchResult]:
    """A dead list holding job X twice: one entry changed since the plan
    (exit 8), the other taken by a worker meanwhile (the expected race)."""
    return [BatchResult(skipped=["X"], reasons={"X": "changed"}, more=True),
            BatchResult(skipped=["X"], reasons={"X": "moved"})]


def test_a_job_id_with_a_reason_in_two_results_is_not_merged():
    a, b = _changed_then_moved()
    assert merged(a, b) is None
    assert merged(BatchResult(moved=["y"]), BatchResult(moved=["x"], more=True)) == \
        BatchResult(moved=["y", "x"], more=True)


def test_both_reasons_of_a_job_id_reach_the_count_through_a_forked_walk():
    def task(halted):
        yield from _changed_then_moved()

    apart, together = RunResult("redrive", "q", "op", 2), RunResult("redrive", "q", "op", 2)
    for br in _changed_then_moved():
        _count(apart, br)
    for br in run_forked([task], ["a"], None, merge=merged):
        _count(together, br)
    assert together.skipped_reasons == apart.skipped_reasons == {"changed": 1, "moved": 1}


def test_results_a_killed_walk_already_had_reach_a_caller_that_keeps_up():
    def task(halted):
        for n in range(3):
            yield BatchResult(moved=[f"j{n}"])
        os.kill(os.getpid(), signal.SIGKILL)
        yield BatchResult()

    def empty(halted):
        yield from ()

    for merge in (None, merged):
        got: list[BatchResult] = []
        with pytest.raises(ConnectionFailed):
            for br in run_forked([task, empty], ["a", "b"], None, merge=merge):
                got.append(br)
        assert sum(len(br.moved) for br in got) == 3, merge


def test_a_caller_that_falls_behind_gets_merged_messages_and_every_result():
    from jobctl.ops.walk.processes import CREDIT

    behind, go = os.pipe()

    def task(halted):
        for n in range(200):
            if n == CREDIT + 2:  # the credit is spent and results are being held: let the caller on
                os.write(go, b"x")
            yield BatchResult(moved=[f"j{n}"])

    got = []
    for br in run_forked([task], ["a"], None, merge=merged):
        got.append(br)
        if len(got) == 1:
            os.read(behind, 1)  # the caller is behind until the walk says it holds results
    os.close(behind), os.close(go)
    assert [i for br in got for i in br.moved] == [f"j{n}" for n in range(200)]
    assert len(got) < 200 and max(len(br.moved) for br in got) <= ITEMS_A_MESSAGE
