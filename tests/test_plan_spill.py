"""Plan state spilled to a temporary file (jobctl.ops.spill, issue 11: peak RSS
must not grow with the DLQ): JobColumns and a SpillList behave exactly as in
memory once spilled (every accessor, any index); nothing is written below the
threshold; a hash-job redrive and purge and a filtered reliable-list redrive
plan and apply the same with spilling forced on (tiny chunks)."""

from __future__ import annotations

import hashlib
import random

import pytest

from jobctl.config import QueueConfig
from jobctl.layouts.reliable_list.lean_plan import plan_dead_filtered
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.filter import compile_filter
from jobctl.model import State
from jobctl.ops import spill
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import JobColumns, PlannedJob, PredicateRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.spill import SpillList
from conftest import force_spill
from test_lua_predicate import K as PK, NOW as PNOW, _load, _spec
from test_window_engine import HJ, hj_failed, hj_layout, hj_run, ids  # noqa: F401 - hj_run: a fixture


def _no_spill(monkeypatch) -> None:
    """The default thresholds (even under ``JOBCTL_TEST_SPILL=1``)."""
    for name, value in (("JOB_CHUNK", 65_536), ("JOB_SPILL_AT", 131_072), ("ITEM_CHUNK", 512),
                        ("ITEM_SPILL_AT", 1024)):
        monkeypatch.setattr(spill, name, value)


def _unfiltered(op: str) -> OpSpec:
    """A hash-job operation from dead on every job, planned per job (a filter
    every job matches: an unfiltered plan is a tail range, nothing to spill)."""
    return OpSpec(Operation(op), "jobs", State.DEAD, State.READY if op == "redrive" else None,
                  filter=compile_filter("id ~ '*'"))


def _jobs(n: int) -> list[PlannedJob]:
    out = []
    for i in range(n):
        sha = hashlib.sha1(str(i).encode()).hexdigest() if i % 3 else ""
        if i % 10 == 5:
            sha = "not a sha1"  # kept as is (the side table)
        out.append(PlannedJob(job_id=f"id-é{i}" * (i % 4 + 1), shard=i % 3, position=None if i % 5 == 0 else 2 * i,
                              score=None if i % 2 else i, sha1=sha))
    return out


def _columns(jobs: list[PlannedJob]) -> JobColumns:
    cols = JobColumns()
    for j in jobs:
        if j.score is None and len(j.sha1) in (0, 40) and j.job_id.endswith("0"):
            cols.add(j.job_id, j.shard, j.position, bytes.fromhex(j.sha1) if j.sha1 else bytes(20))
        else:
            cols.append(j)
    return cols


def test_spilled_job_columns_read_back_exactly(spill_forced):
    jobs = _jobs(100)
    cols = _columns(jobs)
    assert cols.spilled == 99 and len(cols) == 100  # chunks of 3 in the file, the 100th in memory
    assert list(cols) == jobs and cols[:] == jobs and cols[5:50:3] == jobs[5:50:3] and cols[-1] == jobs[-1]
    order = list(range(100))
    random.Random(7).shuffle(order)
    for n in order + list(range(100)):  # any index, cached chunks or not
        j = jobs[n]
        assert cols[n] == j and cols[n - 100] == j
        assert (cols.job_id(n), cols.position(n), cols.shard(n), cols.sha1(n)) == (j.job_id, j.position, j.shard, j.sha1)
    for name in ("job_id", "position", "shard", "sha1"):  # each accessor first on a chunk not looked up last
        get = getattr(cols, name)
        assert [get(n) for n in order] == [getattr(jobs[n], name) for n in order]
    with pytest.raises(IndexError):
        cols[100]
    with pytest.raises(IndexError):
        cols[-101]


def test_job_columns_read_while_they_fill_and_spill(spill_forced):
    jobs = _jobs(40)
    cols = JobColumns()
    for n, j in enumerate(jobs):
        cols.append(j)
        for m in (n, 0, n // 2, n):  # the in-memory columns, then a spilled chunk, then back
            assert (cols.job_id(m), cols.position(m), cols.shard(m), cols.sha1(m)) == (
                jobs[m].job_id, jobs[m].position, jobs[m].shard, jobs[m].sha1)
    assert list(cols) == jobs


def test_job_columns_below_the_threshold_write_nothing(monkeypatch):
    monkeypatch.setattr(spill, "JOB_CHUNK", 512)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", 1024)
    jobs = _jobs(1000)
    cols = _columns(jobs)
    assert cols.spilled == 0 and cols._file._file is None and list(cols) == jobs


def test_job_columns_spill_from_their_threshold_in_whole_chunks(monkeypatch):
    monkeypatch.setattr(spill, "JOB_CHUNK", 4)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", 10)
    jobs = _jobs(30)
    cols = JobColumns()
    for n, j in enumerate(jobs, 1):
        cols.append(j)
        assert cols.spilled == (0 if n < 10 else n // 4 * 4)  # then one chunk each time one fills
    assert list(cols) == jobs


def test_a_spill_list_is_a_list(spill_forced):
    items = [(str(i), bytes([i]) * (i % 5), b"x" * i) for i in range(21)]
    s, ref = SpillList(items), list(items)
    assert s.spilled == 20 and s == ref and s[:] == ref and s[3:17:4] == ref[3:17:4] and len(s) == 21
    assert [s[n] for n in range(-21, 21)] == [ref[n] for n in range(-21, 21)]
    for n in (4, -1, 0, 20):  # in the file and in memory
        s[n] = ref[n] = ("changed", b"", str(n).encode())
    assert s == ref
    del s[11:]
    del ref[11:]
    assert s == ref and len(s) == 11
    s.extend(items[:6])
    ref += items[:6]
    assert s == ref
    del s[0:]
    assert s == [] and len(s) == 0
    with pytest.raises(IndexError):
        s[0]
    with pytest.raises(TypeError):
        del s[2:4]


def test_a_spill_list_below_its_threshold_writes_nothing(monkeypatch):
    monkeypatch.setattr(spill, "ITEM_CHUNK", 8)
    monkeypatch.setattr(spill, "ITEM_SPILL_AT", 16)
    s = SpillList([("d", b"b", b"i")] * (spill.ITEM_SPILL_AT - 1))
    assert s.spilled == 0 and s._file._file is None


@pytest.mark.parametrize("op", ["redrive", "purge"])
def test_hash_job_plan_and_apply_with_spilling_forced(redis_client, monkeypatch, op):
    _, jobs = hj_failed(redis_client, 60)
    lay = hj_layout(redis_client)
    spec = _unfiltered(op)
    _no_spill(monkeypatch)
    ref = lay.plan(spec)
    force_spill(monkeypatch)
    plan = lay.plan(spec)
    assert isinstance(plan.jobs, JobColumns) and plan.jobs.spilled >= 57 and not ref.jobs.spilled
    assert list(plan.jobs) == list(ref.jobs) and plan.planned == 60
    res = run_plan(lay, plan, journal=False, batch=7)
    assert (res.moved, res.skipped, res.failed) == (60, 0, 0)
    assert ids(redis_client, HJ.failed) == []
    if op == "redrive":
        assert ids(redis_client, HJ.pending) == list(reversed(jobs))  # the oldest failure at the served tail
    else:
        assert not any(redis_client.exists(HJ.job(j)) for j in jobs)
    assert lay.check().ok


def test_hash_job_cli_with_spilling_forced_skips_what_changed(redis_client, hj_run, spill_forced):
    _, jobs = hj_failed(redis_client, 40)
    code, out, _ = hj_run("redrive", "jobs", "--dry-run")
    assert code == 0 and "40" in out and ids(redis_client, HJ.failed) == list(reversed(jobs))
    lay = hj_layout(redis_client)
    plan = lay.plan(_unfiltered("redrive"))
    assert plan.jobs.spilled
    redis_client.hset(HJ.job(jobs[10]), "attempts", "7")  # a worker rewrote it: its fence changed
    res = run_plan(lay, plan, journal=False, batch=5)
    assert res.moved == 39 and res.skipped == 1 and jobs[10] in ids(redis_client, HJ.failed)


@pytest.mark.parametrize("text", ["tenant = t1", "error = HTTP_503 or attempts >= 4"])
def test_filtered_redrive_with_spilling_forced(redis_client, monkeypatch, text):
    _load(redis_client, 700)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    spec = _spec(text)
    ref = plan_dead_filtered(lay, spec, PNOW)
    _no_spill(monkeypatch)
    unspilled = lay.plan(spec, now=PNOW)
    force_spill(monkeypatch)
    plan = lay.plan(spec, now=PNOW)
    assert isinstance(plan.jobs, PredicateRange)
    [windows] = plan.jobs.windows.values()
    assert isinstance(windows, SpillList) and windows.spilled > 0
    assert windows == list(unspilled.jobs.windows[0]) and not unspilled.jobs.windows[0].spilled
    expected = [j.job_id for j in ref.jobs]
    assert [(j.job_id, j.position) for j in plan.jobs] == [(j.job_id, j.position) for j in ref.jobs]
    assert [j.job_id for j in plan.jobs[:3]] == expected[:3] and plan.breakdown == ref.breakdown
    dead_before = ids(redis_client, PK.dead)
    res = run_plan(lay, plan, journal=False, batch=37 if text == "tenant = t1" else None)
    assert (res.moved, res.skipped, res.failed) == (len(expected), 0, 0)
    assert sorted(ids(redis_client, PK.ready)) == sorted(expected)
    assert ids(redis_client, PK.dead) == [x for x in dead_before if x not in expected]


def test_filtered_redrive_of_changed_windows_names_the_planned_jobs(redis_client, spill_forced):
    dead = _load(redis_client, 300)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    plan = lay.plan(_spec("tenant = t1"), now=PNOW)
    assert plan.jobs.windows[0].spilled
    planned = [j.job_id for j in plan.jobs]
    redis_client.rpop(PK.dead)  # every position shifts: every window changed
    redis_client.set(PK.job(dead[0]), b"{}")
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped == len(planned) and set(res.skipped_sample) <= set(planned)
