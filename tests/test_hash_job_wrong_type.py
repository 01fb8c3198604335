"""One hash-job job key of the wrong Redis type (a string or a list at
``queue:jobs:job:X`` while X is on the failed list) holds only its own job,
through the CLI: ``ls --state dead`` lists every job and names the key in
that job's problem; ``export`` writes every job, that one as a row flagged
malformed whose problem names the key; ``redrive`` (unfiltered, filtered,
dry run) moves every other job and counts that one as failed (exit 8),
leaving it and its key as they were."""

from __future__ import annotations

import json

import pytest

from jobctl.export.manifest import load_manifest
from jobctl.export.reader import iter_rows
from jobctl.keys import HashJobKeys
from jobctl_fixtures.layouts.hash_job import load_scenario
from helpers import cli_runner, queues_toml, write_config

Q = "jobs"
K = HashJobKeys(Q)
NOW = 1_795_000_000_000


@pytest.fixture(params=["string", "list"])
def broken(request, redis_client, redis_url, tmp_path, capsys):
    """``(run, failed ids tail first, the wrong-typed id)``: a dlq-spike
    hash-job queue whose middle failed job's key holds a ``request.param``."""
    load_scenario(redis_client, "dlq-spike", queue=Q, size=80, now_ms=NOW)
    failed = [x.decode() for x in reversed(redis_client.lrange(K.failed, 0, -1))]
    bad = failed[len(failed) // 2]
    redis_client.delete(K.job(bad))
    if request.param == "string":
        redis_client.set(K.job(bad), "not a hash")
    else:
        redis_client.rpush(K.job(bad), "not", "a", "hash")
    run = cli_runner(capsys, redis_url, write_config(tmp_path, queues_toml(jobs={"layout": "hash-job"})))
    return run, failed, bad


def _dangling(client, ids: list[str]) -> set[str]:
    return {i for i in ids if not client.exists(K.job(i))}


def test_ls_lists_every_dead_job_and_names_the_wrong_typed_key(broken):
    run, failed, bad = broken
    code, out, err = run("ls", Q, "--state", "dead", "--limit", "1000", "--json")
    assert code == 0, err
    rows = json.loads(out)
    rows = rows["jobs"] if isinstance(rows, dict) else rows
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == set(failed)
    assert K.job(bad) in json.dumps(by_id[bad]) and "wrong" in json.dumps(by_id[bad]).lower()
    code, out, err = run("ls", Q, "--state", "dead", "--limit", "1000")
    assert code == 0, err
    assert K.job(bad) in out.replace("\n", "") or bad in out


def test_export_writes_every_job_and_flags_the_wrong_typed_one(broken, redis_client, tmp_path):
    run, failed, bad = broken
    out_dir = tmp_path / "export"
    code, out, err = run("export", Q, "--state", "dead", "--out", str(out_dir), "--format", "jsonl")
    assert code in (0, 8), err  # as for a malformed envelope
    cols = ("job_id", "malformed", "problems")
    rows = [dict(zip(cols, r)) for r in iter_rows(out_dir, load_manifest(out_dir), cols)]
    ids = [r["job_id"] for r in rows]
    assert sorted(ids) == sorted(failed) and len(ids) == len(set(ids))
    row = next(r for r in rows if r["job_id"] == bad)
    assert row["malformed"] is True and K.job(bad) in row["problems"]
    assert all(not r["malformed"] for r in rows if r["job_id"] not in _dangling(redis_client, failed) | {bad})


@pytest.mark.parametrize("extra", [[], ["--filter", "type = webhook or type = email"]])
def test_redrive_moves_the_others_and_counts_the_wrong_typed_job_as_failed(broken, redis_client, extra):
    run, failed, bad = broken
    kind = redis_client.type(K.job(bad))
    dangling = _dangling(redis_client, failed)
    code, out, err = run("redrive", Q, *extra, "--dry-run")
    assert code == 0, err
    assert "wrongtype" in out and redis_client.type(K.job(bad)) == kind  # the plan says it; nothing written
    code, out, err = run("redrive", Q, *extra, "--yes")
    assert code == 8, (out, err)
    assert "wrongtype" in out and "failed 1" in out, (out, err)
    left = [x.decode() for x in redis_client.lrange(K.failed, 0, -1)]
    pending = {x.decode() for x in redis_client.lrange(K.pending, 0, -1)}
    assert bad in left and bad not in pending and redis_client.type(K.job(bad)) == kind
    moved = set(failed) - set(left)
    if not extra:
        assert moved == set(failed) - dangling - {bad}
    else:
        assert moved and all(json.loads(redis_client.hget(K.job(i), "payload"))["kind"] in ("webhook", "email")
                             for i in moved)
        assert all(json.loads(redis_client.hget(K.job(i), "payload"))["kind"] not in ("webhook", "email")
                   for i in left if i != bad and i not in dangling)
    assert moved <= pending


def test_check_reports_the_wrong_typed_key_as_that_jobs_finding(broken, redis_client):
    run, failed, bad = broken
    code, out, err = run("check", Q, "--json")
    assert code == 7, (out, err)
    found = [p for p in json.loads(out)["queues"][0]["problems"] if p["kind"] == "wrong_type_payload"]
    assert [p["id"] for p in found] == [bad] and K.job(bad) in found[0]["detail"]
