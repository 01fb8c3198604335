"""``jobctl migrate QUEUE --transform FILE`` / ``--rollback OPERATION`` on
the reliable-list layout (``jobctl/ops/transform.py``,
``jobctl/layouts/reliable_list_transform.py``, ``jobctl/lua/rl_transform.lua``)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.transform import load_transform
from helpers import cli_runner, write_config
from test_pause import enqueue, partition, tail_first

K = ReliableListKeys("email")

TRANSFORM = """
bump_version = true
delete = ["payloadRef"]

[set]
"payload.region" = "eu"

[rename]
"payload.endpointId" = "payload.endpoint"
"""


@pytest.fixture
def run(redis_url, tmp_path: Path, capsys):
    return cli_runner(capsys, redis_url, write_config(tmp_path, '[queues.email]\nlayout = "reliable-list"\n'))


@pytest.fixture
def tfile(tmp_path: Path) -> str:
    path = tmp_path / "v3.toml"
    path.write_text(TRANSFORM)
    return str(path)


def env(client, job_id: str) -> dict:
    return orjson.loads(client.get(K.job(job_id)))


def test_transform_in_place_then_roll_back(redis_client, run, tfile):
    ids = enqueue(redis_client, "email", 9)
    before = {i: redis_client.get(K.job(i)) for i in ids}
    order = tail_first(redis_client, K.ready)
    snap = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    code, out, err = run("migrate", "email", "--transform", tfile, "--filter", "tenant = t2", "--dry-run")
    assert code == 0, err
    assert '-  "jobVersion": 2,' in out and '+  "jobVersion": 3,' in out and '+    "region": "eu"' in out
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == snap  # nothing changed
    code, out, err = run("migrate", "email", "--transform", tfile, "--filter", "tenant = t2", "--yes", "--json")
    assert code == 0, err
    op = json.loads(out)["operation_id"]
    t2 = [i for i in ids if i in {"j0001", "j0004", "j0007"}]
    assert json.loads(out)["moved"] == 3
    for i in ids:
        doc = env(redis_client, i)
        if i in t2:
            assert doc["jobVersion"] == 3 and doc["payload"]["region"] == "eu" and "payloadRef" not in doc
            assert "endpoint" in doc["payload"] and "endpointId" not in doc["payload"]
        else:
            assert redis_client.get(K.job(i)) == before[i]
    assert tail_first(redis_client, K.ready) == order  # the jobs stay where they are
    partition(redis_client, ["email"])
    code, out, err = run("migrate", "email", "--rollback", op, "--yes", "--json")
    assert code == 0, out + err
    assert {i: redis_client.get(K.job(i)) for i in ids} == before
    assert redis_client.hlen(K.envelopes_before) == 0


def test_transform_is_fenced_to_the_planned_payload(redis_client, tfile):
    ids = enqueue(redis_client, "email", 4)
    lay = ReliableList(redis_client, QueueConfig("email"))
    spec = OpSpec(Operation.TRANSFORM, "email", State.READY, State.READY, filter=compile_filter("id ~ '*'"),
                  transform=load_transform(tfile))
    plan = lay.plan(spec)
    redis_client.set(K.job(ids[1]), b'{"jobId": "j0001", "jobVersion": 7}')  # the producer rewrote it
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 3 and res.skipped_reasons == {"changed": 1}
    assert env(redis_client, ids[1]) == {"jobId": "j0001", "jobVersion": 7}


@pytest.mark.parametrize("text, message", [
    ("nonsense = 1", "unknown key"),
    ("delete = 3", "delete a list"),
    ("bump_version = false", "changes nothing"),
    ("[set", "--transform"),
])
def test_bad_transformation_files_exit_2_and_change_nothing(redis_client, run, tmp_path, text, message):
    enqueue(redis_client, "email", 2)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    snap = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    code, out, err = run("migrate", "email", "--transform", str(path), "--yes")
    assert code == 2 and message in err and out == "" and err.count("\n") == 1
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == snap
