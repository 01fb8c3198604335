"""Review of the forked per-primary walks (jobctl.ops.walk.processes,
parallel): behaviour checks on a real 3-primary cluster."""

from __future__ import annotations

from collections import Counter

from helpers import wall_ms
from jobctl.config import QueueConfig
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.scenarios import load_scenario
from test_cluster import all_ids


def _plan_rows(plan):
    jobs = plan.jobs
    return sorted((jobs.job_id(n), jobs.shard(n), jobs.position(n), jobs.sha1(n)) for n in range(len(jobs)))


def test_the_forked_plan_equals_the_plan_made_in_one_process_spilled_and_with_sha1(cc, monkeypatch):
    """--reset-attempts (SHA1 per job) and a plan past the spill threshold:
    the forked plan lists the same jobs, fences, windows walked and
    set-asides as the one made in one process, and applying it (walkers
    reading the spilled columns) moves each planned job once."""
    from jobctl.filter import compile_filter
    from jobctl.ops import spill
    from jobctl.ops.walk import parallel, processes

    monkeypatch.setattr(spill, "JOB_CHUNK", 64)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", 128)
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=2400, seed=15, now_ms=wall_ms())
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    cc.lpush(ReliableListKeys(tags[3]).dead, "dangling-3")
    lay = ReliableList(cc, QueueConfig("email", tag="email", shards=8))
    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, reset_attempts=True,
                  filter=compile_filter("id ~ '*[02468ACEGJMPRTVXZ]'"))
    real, used = parallel.plan_in_parallel, []

    def spied(*args):
        used.append(real(*args))
        return used[-1]

    monkeypatch.setattr(parallel, "plan_in_parallel", spied)
    forked = lay.plan(spec)
    assert used and used[0] is not None, "planned in forked processes"
    monkeypatch.setattr(processes, "FORKS", False)
    monkeypatch.setattr(parallel, "FORKS", False)
    alone = lay.plan(spec)
    monkeypatch.undo()
    assert forked.planned > 128 and forked.jobs.spilled > 0
    assert _plan_rows(forked) == _plan_rows(alone)
    assert all(row[3] for row in _plan_rows(forked)), "a SHA1 per job"
    assert (forked.scanned, forked.walked, dict(forked.breakdown)) == (alone.scanned, alone.walked,
                                                                       dict(alone.breakdown))
    assert sorted(forked.dangling) == sorted(alone.dangling) == ["dangling-3"]
    assert sorted(forked.malformed) == sorted(alone.malformed)
    monkeypatch.setattr(spill, "JOB_CHUNK", 64)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", 128)
    res = run_plan(lay, forked, batch=7, journal=False)
    assert (res.moved, res.skipped, res.failed) == (forked.planned, 0, 0)
    assert all_ids(cc, tags) == Counter({i: 1 for i in every | {"dangling-3"}})
    assert not any(cc.exists(ReliableListKeys(t).hold) for t in tags)


def test_jobctl_errors_raised_in_a_forked_task_keep_their_type_message_and_exit_code():
    import pytest

    from jobctl import errors
    from jobctl.exitcodes import ExitCode
    from jobctl.ops.walk.processes import FORKS, run_forked

    if not FORKS:
        pytest.skip("tasks run in threads where fork is not used")
    raised = [errors.ConnectionFailed("gone"), errors.DataError("WRONGTYPE x"), errors.Busy("lease held"),
              errors.AccessDenied("NOPERM", what="write queue:{t}:jobctl:journal"),
              errors.JobctlError("odd", exit_code=ExitCode.PARTIAL)]
    for exc in raised:
        def task(halted, exc=exc):
            yield 1
            raise exc

        with pytest.raises(type(exc)) as got:
            list(run_forked([task], ["n"], None))
        assert (str(got.value), got.value.exit_code) == (str(exc), exc.exit_code)
        assert getattr(got.value, "what", None) == getattr(exc, "what", None)
