"""Operations racing other clients: a live worker pool, a second jobctl,
``kill -9`` and a dropped connection.  Afterwards the keys are read back
directly (not through ``jobctl check``): every job in exactly one state,
nothing lost, nothing moved twice, and a rerun of the same command finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from jobctl.exitcodes import ExitCode
import pytest

from jobctl.keys import ReliableListKeys
from jobctl_fixtures.live import LivePool
from test_operations import (  # noqa: F401 - fixtures
    assert_consistent, bulk_dead, cfg, envelope, ids, run, simple_dead, wall_ms,
)
from helpers import redrive_records

K = ReliableListKeys("email")
FILTER = "error = HTTP_503"


def code_of(i: int) -> str:
    """Bulk jobs: 5 in 6 failed with HTTP_503 (redriven), 1 in 6 with HTTP_400 (stays dead)."""
    return "HTTP_400" if i % 6 == 5 else "HTTP_503"


def jobctl(redis_url: str, cfg: str, *args: str) -> subprocess.Popen:  # noqa: F811
    """``jobctl`` in a child process (it inherits the test's $JOBCTL_JOURNAL)."""
    return subprocess.Popen([sys.executable, "-m", "jobctl.cli.main", "--url", redis_url, "--config", cfg, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_until(cond, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def assert_redriven_exactly_once(client, jobs: list[str]) -> None:
    """Every matching job is in ready once, redriven once; the others dead, in order."""
    want = [j for n, j in enumerate(jobs) if code_of(n) == "HTTP_503"]
    ready = ids(client, K.ready)
    assert len(ready) == len(set(ready)) == len(want)
    assert set(ready) == set(want)
    recs = redrive_records(client, K)  # jobctl's redrive record: [op, at_ms, count]
    counts = {orjson.loads(recs[j.encode()])[2] for j in want}
    assert counts == {1}, counts
    assert set(ids(client, K.dead)) == {j for n, j in enumerate(jobs) if code_of(n) == "HTTP_400"}


def started_redrive(client, redis_url: str, cfg: str, moved: int) -> tuple[list[str], subprocess.Popen]:
    """3,000 bulk dead jobs (see :func:`code_of`) and a ``redrive`` of the
    HTTP_503 ones at 500 jobs/s, batch 50, in a child process, returned once
    ``moved`` jobs are ready: ``(jobs, proc)``.  The child is killed when it
    does not get that far."""
    jobs = bulk_dead(client, "email", 3_000, code_of=code_of)
    proc = jobctl(redis_url, cfg, "redrive", "email", "--filter", FILTER, "--yes", "--rate", "500",
                  "--batch", "50")
    try:
        wait_until(lambda: client.llen(K.ready) >= moved, what="the redrive to start")
    except BaseException:
        proc.kill()
        proc.communicate(timeout=30)
        raise
    return jobs, proc


def assert_rerun_finishes(client, run, jobs: list[str], moved_before: int) -> None:
    """The same redrive again moves the rest of the 2,500 HTTP_503 jobs, each
    redriven exactly once."""
    code, out, err = run("redrive", "email", "--filter", FILTER, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 2_500 - moved_before
    assert_redriven_exactly_once(client, jobs)


@pytest.mark.slow
def test_redrive_100k_dead_jobs_while_a_worker_pool_runs(redis_client, redis_url, run):  # noqa: F811
    started = time.monotonic()
    jobs = bulk_dead(redis_client, "email", 120_000, code_of=code_of, prefix="bulk")
    loaded = time.monotonic()
    planned = {j for n, j in enumerate(jobs) if code_of(n) == "HTTP_503"}
    assert len(planned) == 100_000
    pool = LivePool(redis_url, queue="email", scenario="dlq-spike", rate=300, workers=2, seed=3)
    with pool:
        wait_until(lambda: pool.counters["dead"] >= 3, what="the pool to dead-letter jobs")
        code, out, err = run("redrive", "email", "--filter", f"{FILTER} and id ~ 'bulk_*'", "--yes", "--json")
        time.sleep(0.3)   # the pool keeps claiming redriven jobs for a moment
    applied = time.monotonic()
    assert not pool.running and pool.counters["errors"] == 0, pool.last_error
    assert code == 0, err
    res = json.loads(out)
    assert (res["planned"], res["moved"], res["skipped"], res["failed"]) == (100_000, 100_000, 0, 0)
    counters = pool.counters
    assert counters["claimed"] > 0 and counters["dead"] > 0

    where = assert_consistent(redis_client, ["email"])   # exactly one state each, payloads, deadlines
    # nothing lost, nothing duplicated: every job is still there unless a worker acked it
    assert len(where) == len(jobs) + counters["enqueued"] - counters["acked"]
    assert set(jobs) - set(where) <= planned              # only redriven jobs can have been acked since
    # only planned jobs were redriven, each once; dead letters of the pool never
    op = res["operation_id"]
    keys = list(where)
    redriven = set()
    recs = redrive_records(redis_client, K)
    for n in range(0, len(keys), 10_000):
        chunk = keys[n:n + 10_000]
        for job_id, raw in zip(chunk, [recs.get(j.encode() if isinstance(j, str) else j) for j in chunk]):
            if raw is not None:
                assert orjson.loads(raw)[0] == op and orjson.loads(raw)[2] == 1
                redriven.add(job_id)
    assert redriven <= planned
    assert len(redriven) + len(planned - set(where)) == 100_000   # redriven and still here, or acked
    # the jobs that stayed dead keep their order; the pool's dead letters are newer than all of them
    dead = ids(redis_client, K.dead)
    stayed = [j for n, j in reversed(list(enumerate(jobs))) if code_of(n) == "HTTP_400"]
    stayed_set = set(stayed)
    assert [j for j in dead if j in stayed_set] == stayed
    timing = f"load {loaded - started:.1f}s, redrive {applied - loaded:.1f}s, total {time.monotonic() - started:.1f}s"
    print(timing)
    assert time.monotonic() - started < 120, timing   # ~25 s on an idle 2-core machine


def test_two_redrives_of_the_same_dlq_at_once(redis_client, redis_url, cfg, run):  # noqa: F811
    jobs = bulk_dead(redis_client, "email", 3_600, code_of=code_of)
    args = ("redrive", "email", "--filter", FILTER, "--yes", "--json", "--rate", "1000", "--batch", "50")
    first, second = jobctl(redis_url, cfg, *args), jobctl(redis_url, cfg, *args)
    results, refused = [], []
    for proc in (first, second):
        out, err = proc.communicate(timeout=60)
        if proc.returncode == ExitCode.BUSY:  # the lease: a second operation on the same DLQ is refused
            assert out == b"" and len(err.decode().strip().splitlines()) == 1, err.decode()
            assert "is running on" in err.decode()
            refused.append(proc)
            continue
        assert proc.returncode in (0, 8), err.decode()
        results.append(json.loads(out))
    assert len(results) >= 1
    assert_consistent(redis_client, ["email"])
    # the runs never moved the same job: together at most the whole DLQ
    assert sum(r["moved"] for r in results) <= 3_000
    assert all(r["failed"] == 0 for r in results)
    # no job still dead is reported as skipped
    assert all(r["skipped"] == 0 for r in results), results
    # and one rerun finishes the work
    code, out, err = run("redrive", "email", "--filter", FILTER, "--yes", "--json")
    assert code == 0, err
    assert sum(r["moved"] for r in results) + json.loads(out)["moved"] == 3_000
    assert_redriven_exactly_once(redis_client, jobs)
    assert_consistent(redis_client, ["email"])


def test_kill_9_mid_redrive_then_rerun(redis_client, redis_url, cfg, run):  # noqa: F811
    jobs, proc = started_redrive(redis_client, redis_url, cfg, 500)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    moved_before = redis_client.llen(K.ready)
    assert 500 <= moved_before < 2_500
    assert_consistent(redis_client, ["email"])
    assert_rerun_finishes(redis_client, run, jobs, moved_before)
    code, out, err = run("redrive", "email", "--filter", FILTER, "--yes")
    assert code == 0 and "nothing to do" in err


def test_connection_dropped_mid_redrive(redis_client, redis_url, cfg, run):  # noqa: F811
    jobs, proc = started_redrive(redis_client, redis_url, cfg, 400)
    try:
        victims = [c["id"] for c in redis_client.client_list() if c.get("name") == "jobctl"]
        assert victims
        for client_id in victims:
            redis_client.client_kill_filter(_id=client_id)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 3, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("jobctl: error: redrive email stopped after ") and "run the same command" in lines[-1]
    assert all(not line.startswith("Traceback") for line in lines)
    assert_consistent(redis_client, ["email"])
    moved_before = redis_client.llen(K.ready)
    assert 0 < moved_before < 2_500
    # the local journal kept the story even though the server was unreachable for it
    local = [orjson.loads(line) for line in Path(os.environ["JOBCTL_JOURNAL"]).read_bytes().splitlines()]
    assert local[-1]["error"] and local[-1]["interrupted"] is False
    # a call whose reply the kill cut off did run: its jobs are re-read and counted
    assert local[-1]["moved"] == moved_before
    assert_rerun_finishes(redis_client, run, jobs, moved_before)


def test_ctrl_c_stops_between_batches_and_a_rerun_finishes(redis_client, redis_url, cfg, run):  # noqa: F811
    jobs, proc = started_redrive(redis_client, redis_url, cfg, 300)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err.decode()
    assert "interrupted: run the same command again to finish" in out.decode()
    assert "Traceback" not in err.decode()
    assert_consistent(redis_client, ["email"])
    moved_before = redis_client.llen(K.ready)
    # stopped cleanly: the jobs that stay dead are still in their order
    stays = [j for n, j in reversed(list(enumerate(jobs))) if code_of(n) == "HTTP_400"]
    stays_set = set(stays)
    assert [j for j in ids(redis_client, K.dead) if j in stays_set] == stays
    assert_rerun_finishes(redis_client, run, jobs, moved_before)


def test_check_repair_on_a_live_queue_loses_nothing(redis_client, redis_url, run):  # noqa: F811
    """The windowed reads of `check` see a live queue move; its repairs must
    re-check and leave such transient "problems" alone."""
    from jobctl_fixtures.scenarios import load_scenario

    truth = load_scenario(redis_client, "healthy", size=3_000, seed=5)
    pool = LivePool(redis_url, queue="email", scenario="dlq-spike", rate=400, workers=3, seed=9,
                    visibility_ms=200)
    with pool:
        for _ in range(4):
            code, out, err = run("check", "email", "--repair", "--yes", "--json")
            assert code in (0, 7), err
    assert pool.counters["errors"] == 0, pool.last_error
    where = assert_consistent(redis_client, ["email"])
    assert len(where) == truth.size + pool.counters["enqueued"] - pool.counters["acked"]
    code, out, err = run("check", "email")
    assert code == 0, out
