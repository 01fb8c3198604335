"""A layout is added in one package plus one registry line
(docs/architecture.md, "Adding a layout"): the toy layout of
``tests/toy_layout/`` (a ready list and a dead list of ids, one envelope
string per job) is registered, and ``status``, ``ls``, ``redrive``,
``purge`` and ``export`` run through the CLI against the real server, with
nothing else changed: the front ends, the config loader, the operations
core and the exporter read what it declares."""

from __future__ import annotations

import json

import pytest

import jobctl.layouts
from helpers import config_fixtures, queues_toml, wall_ms
from toy_layout.layout import ToyKeys

TAG = "toy"
K = ToyKeys(TAG)

cfg, run = config_fixtures(queues_toml(work={"layout": "toy-list", "tag": TAG, "max_attempts": 5}))


@pytest.fixture(autouse=True)
def toy_registered():
    """The one registry line (undone after the test: other tests see the real registry)."""
    jobctl.layouts.register("toy-list", "toy_layout.layout:ToyList")
    yield
    jobctl.layouts.unregister("toy-list")


def _envelope(job_id: str, job_type: str) -> bytes:
    now = wall_ms()
    return json.dumps({"jobId": job_id, "jobType": job_type, "attempt": 3, "maxAttempts": 3,
                       "createdAtEpochMs": now - 60_000, "lastAttemptAtEpochMs": now - 1_000,
                       "lastError": {"code": "E_TIMEOUT", "message": "timed out"},
                       "payload": {"n": job_id}}).encode()


@pytest.fixture
def loaded(redis_client) -> dict[str, list[str]]:
    """2 ready jobs and 6 dead ones (3 ``email``, 3 ``sms``), oldest pushed first."""
    ids = {"ready": ["r1", "r2"], "email": ["e1", "e2", "e3"], "sms": ["s1", "s2", "s3"]}
    for job_id in ids["ready"]:
        redis_client.set(K.job(job_id), _envelope(job_id, "email"))
        redis_client.lpush(K.ready, job_id)
    for job_type in ("email", "sms"):
        for job_id in ids[job_type]:
            redis_client.set(K.job(job_id), _envelope(job_id, job_type))
            redis_client.lpush(K.dead, job_id)
    return ids


def _status(run) -> dict:
    code, out, err = run("status", "work", "--json")
    assert code == 0, err
    doc = json.loads(out)
    return (doc["queues"] if isinstance(doc, dict) and "queues" in doc else doc)[0]


def test_status_and_ls(run, loaded):
    st = _status(run)
    assert (st["layout"], st["ready"], st["dead"]) == ("toy-list", 2, 6)
    code, out, err = run("ls", "work", "--state", "dead", "--limit", "10", "--json")
    assert code == 0, err
    jobs = json.loads(out)["jobs"]
    assert [j["id"] for j in jobs] == ["s3", "s2", "s1", "e3", "e2", "e1"]  # newest first
    code, out, err = run("ls", "work", "--state", "ready", "--json")
    assert code == 0 and [j["id"] for j in json.loads(out)["jobs"]] == ["r1", "r2"]  # next taken first


def test_redrive_moves_the_matching_dead_jobs_to_ready(run, loaded, redis_client):
    code, out, err = run("redrive", "work", "--filter", "type = 'email'", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 3
    assert sorted(x.decode() for x in redis_client.lrange(K.ready, 0, -1)) == ["e1", "e2", "e3", "r1", "r2"]
    assert sorted(x.decode() for x in redis_client.lrange(K.dead, 0, -1)) == ["s1", "s2", "s3"]
    st = _status(run)
    assert (st["ready"], st["dead"]) == (5, 3)


def test_a_job_changed_since_the_plan_is_skipped(redis_client, loaded):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    lay = layout_for(redis_client, QueueConfig(name="work", layout="toy-list", tag=TAG))
    plan = lay.plan(OpSpec(Operation.REDRIVE, "work", State.DEAD, State.READY))
    redis_client.set(K.job("e1"), _envelope("e1", "changed"))
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 5 and res.skipped_reasons == {"changed": 1}
    assert [x.decode() for x in redis_client.lrange(K.dead, 0, -1)] == ["e1"]


def test_purge_and_export(run, loaded, redis_client, tmp_path):
    out_dir = tmp_path / "dead"
    code, out, err = run("export", "work", "--state", "dead", "--out", str(out_dir), "--format", "jsonl")
    assert code == 0, err
    rows = [json.loads(line) for part in sorted(out_dir.glob("part-*.jsonl")) for line in part.read_text().splitlines()]
    assert sorted(r["job_id"] for r in rows) == ["e1", "e2", "e3", "s1", "s2", "s3"]
    assert {r["layout"] for r in rows} == {"toy-list"}
    code, out, err = run("purge", "work", "--state", "dead", "--filter", "type = 'sms'", "--no-export", "--yes",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 3
    assert sorted(x.decode() for x in redis_client.lrange(K.dead, 0, -1)) == ["e1", "e2", "e3"]
    assert redis_client.exists(K.job("s1"), K.job("s2"), K.job("s3")) == 0
    code, out, err = run("purge", "work", "--state", "dead", "--export-to", str(tmp_path / "rest"), "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["moved"] == 3 and redis_client.llen(K.dead) == 0


def test_declared_facts_are_what_the_front_ends_read(run, loaded):
    """Refusals come from the declarations: no pause (it holds no jobs), no
    replay."""
    code, _, err = run("pause", "work", "--reason", "x", "--yes")
    assert code == 2 and "pause is not supported for layout toy-list" in err
    code, _, err = run("replay", "work", "--from", "0", "--yes")
    assert code == 2 and "toy-list" in err


def test_config_options_come_from_the_declaration(capsys, redis_url, tmp_path):
    from helpers import cli_runner, write_config

    bad = write_config(tmp_path, queues_toml(work={"layout": "toy-list", "group": "g"}))
    code, _, err = cli_runner(capsys, redis_url, bad)("status", "work")
    assert code == 2 and "unknown key 'group'" in err
    over = write_config(tmp_path, queues_toml(work={"layout": "toy-list", "max_attempts": 101}))
    code, _, err = cli_runner(capsys, redis_url, over)("status", "work")
    assert code == 2 and "max_attempts must be an integer from 1 to 100" in err
