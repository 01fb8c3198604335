"""``jobctl migrate QUEUE --transform FILE`` / ``--rollback OPERATION`` on
the reliable-list layout (``jobctl/ops/transform.py``,
``jobctl/layouts/reliable_list/transform.py``, ``jobctl/lua/rl_transform.lua``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest
import redis

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.layouts.reliable_list.transform import kept_layers
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.transform import load_transform
from jobctl.scripts import script
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


# -- stacked transformations: rollbacks newest first, byte for byte ----------

T1 = '[set]\n"payload.region" = "eu"\n'
T2 = 'bump_version = true\n[rename]\n"payload.endpointId" = "payload.endpoint"\n'
BIG = {"max": 2**63 - 1, "min": -2**63, "odd": 2**53 + 1, "u64": 2**64 - 1}


def keyspace(client) -> dict:
    """Every key's DUMP (the whole keyspace: nothing may change unnoticed)."""
    return {key: client.dump(key) for key in client.scan_iter()}


def enqueue_big(client, n: int) -> dict[str, bytes]:
    """``n`` ready jobs whose payloads hold 64-bit integers, stored indented
    (not as orjson would write them); id -> the stored envelope bytes."""
    ids = enqueue(client, "email", n)
    out = {}
    for i in ids:
        doc = env(client, i)
        doc["payload"]["big"] = dict(BIG)
        raw = json.dumps(doc, indent=1).encode()
        client.set(K.job(i), raw)
        out[i] = raw
    return out


def transform_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def op_of(run, *args) -> str:
    code, out, err = run("migrate", "email", *args, "--yes", "--json")
    assert code == 0, out + err
    return json.loads(out)["operation_id"]


def test_two_transforms_roll_back_newest_first_to_the_original_bytes(redis_client, run, tmp_path):
    originals = enqueue_big(redis_client, 9)
    t1, t2 = transform_file(tmp_path, "t1.toml", T1), transform_file(tmp_path, "t2.toml", T2)
    op1 = op_of(run, "--transform", t1, "--filter", "tenant = t2")  # 3 of the 9 jobs
    after1 = {i: redis_client.get(K.job(i)) for i in originals}
    assert sum(after1[i] != originals[i] for i in originals) == 3
    assert all(env(redis_client, i)["payload"]["big"] == BIG for i in originals)
    op2 = op_of(run, "--transform", t2)  # every job, over op1's live transform
    assert all(env(redis_client, i)["payload"]["big"] == BIG and "endpoint" in env(redis_client, i)["payload"]
               for i in originals)
    op_of(run, "--rollback", op2)
    assert {i: redis_client.get(K.job(i)) for i in originals} == after1
    op_of(run, "--rollback", op1)
    assert {i: redis_client.get(K.job(i)) for i in originals} == originals
    assert redis_client.hlen(K.envelopes_before) == 0
    code, out, err = run("migrate", "email", "--rollback", op1, "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 0  # nothing left to roll back


def test_rolling_back_the_older_transform_first_is_refused(redis_client, run, tmp_path):
    originals = enqueue_big(redis_client, 6)
    t1, t2 = transform_file(tmp_path, "t1.toml", T1), transform_file(tmp_path, "t2.toml", T2)
    op1 = op_of(run, "--transform", t1)
    op2 = op_of(run, "--transform", t2, "--filter", "tenant = t1")
    snap = keyspace(redis_client)
    code, out, err = run("migrate", "email", "--rollback", op1, "--yes")
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert op2 in err and "first" in err
    assert keyspace(redis_client) == snap  # nothing written
    op_of(run, "--rollback", op2)
    op_of(run, "--rollback", op1)
    assert {i: redis_client.get(K.job(i)) for i in originals} == originals
    assert redis_client.hlen(K.envelopes_before) == 0


def test_a_rollback_overtaken_by_a_newer_transform_writes_nothing(redis_client, run, tmp_path):
    """The rollback of op1 is planned while op1 is the newest transform; op2
    lands before it applies: the script (not only the plan) refuses each job."""
    originals = enqueue_big(redis_client, 4)
    t1, t2 = transform_file(tmp_path, "t1.toml", T1), transform_file(tmp_path, "t2.toml", T2)
    op1 = op_of(run, "--transform", t1)
    lay = ReliableList(redis_client, QueueConfig("email"))
    from jobctl.ops.transform import Rollback
    plan = lay.plan(OpSpec(Operation.TRANSFORM, "email", State.READY, State.READY, transform=Rollback(op1)))
    assert plan.planned == 4
    op2 = op_of(run, "--transform", t2)
    snap = keyspace(redis_client)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {f"transformed since by {op2}": 4}
    assert keyspace(redis_client) == snap
    op_of(run, "--rollback", op2)
    op_of(run, "--rollback", op1)
    assert {i: redis_client.get(K.job(i)) for i in originals} == originals


def test_a_second_transform_keeps_the_first_ones_originals(redis_client, tmp_path):
    """At the script: a transform over a job with a live transform pushes its
    kept envelope over the earlier one (never replaces it)."""
    originals = enqueue_big(redis_client, 1)
    (job_id, raw), = originals.items()
    call = script(redis_client, "rl_transform")
    keys = [K.envelopes_before, K.job(job_id)]
    mid, new = b'{"jobId": "j0000", "v": 1}', b'{"jobId": "j0000", "v": 2}'
    assert call(keys=keys, args=["apply", "op-a", 1, 1, job_id, sha1(raw), mid]) == [job_id.encode(), b"moved"]
    assert call(keys=keys, args=["apply", "op-b", 2, 1, job_id, sha1(mid), new]) == [job_id.encode(), b"moved"]
    layers = kept_layers(redis_client.hget(K.envelopes_before, job_id))
    assert [(x.operation, x.at_ms, x.after_sha1, x.before) for x in layers] == \
        [("op-b", 2, sha1(new), mid), ("op-a", 1, sha1(mid), raw)]
    assert call(keys=keys, args=["rollback", "op-a", 3, 1, job_id, "", ""]) == \
        [job_id.encode(), b"transformed since by op-b"]
    assert call(keys=keys, args=["rollback", "op-b", 3, 1, job_id, "", ""]) == [job_id.encode(), b"moved"]
    assert redis_client.get(K.job(job_id)) == mid
    assert call(keys=keys, args=["rollback", "op-a", 4, 1, job_id, "", ""]) == [job_id.encode(), b"moved"]
    assert redis_client.get(K.job(job_id)) == raw and redis_client.hlen(K.envelopes_before) == 0


# -- rl_transform.lua checks everything before its first write ---------------

def sha1(raw: bytes) -> str:
    return hashlib.sha1(raw).hexdigest()


def _two_jobs(client) -> tuple[list[str], list]:
    a, b = b'{"jobId": "a", "n": 9223372036854775807}', b'{"jobId": "b"}'
    client.set(K.job("a"), a)
    client.set(K.job("b"), b)
    return [K.envelopes_before, K.job("a"), K.job("b")], ["a", sha1(a), b'{"jobId": "a", "x": 1}',
                                                          "b", sha1(b), b'{"jobId": "b", "x": 1}']


@pytest.mark.parametrize("head, per_job", [
    (["resume", "op", 1, 2], None),          # unknown mode
    (["apply", "", 1, 2], None),             # no operation id
    (["apply", "op\nx", 1, 2], None),        # an operation id that would break the kept record
    (["apply", "op", "soon", 2], None),      # now not a number
    (["apply", "op", -1, 2], None),          # now negative
    (["apply", "op", 1, 3], None),           # job count does not match ARGV
    (["apply", "op", 1, "2x"], None),        # job count not a number
    (["apply", "op", 1, 2], ["a", "not-a-sha1", b"{}", "b", "", b"{}"]),
    (["apply", "op", 1, 2], ["a", sha1(b"x"), b"", "b", sha1(b"x"), b"{}"]),   # empty new envelope
    (["rollback", "op", 1, 2], ["a", sha1(b"x"), "", "b", "", ""]),            # rollback takes no sha1
    (["apply", "op", 1, 2], ["", sha1(b"x"), b"{}", "b", sha1(b"x"), b"{}"]),  # empty job id
])
def test_bad_arguments_write_nothing(redis_client, head, per_job):
    keys, jobs = _two_jobs(redis_client)
    snap = keyspace(redis_client)
    with pytest.raises(redis.exceptions.ResponseError, match="^BADARG"):
        script(redis_client, "rl_transform")(keys=keys, args=[*head, *(per_job or jobs)])
    assert keyspace(redis_client) == snap


def test_a_wrong_typed_keys_count_is_refused(redis_client):
    keys, jobs = _two_jobs(redis_client)
    snap = keyspace(redis_client)
    with pytest.raises(redis.exceptions.ResponseError, match="^BADARG"):
        script(redis_client, "rl_transform")(keys=keys[:2], args=["apply", "op", 1, 2, *jobs])
    assert keyspace(redis_client) == snap


@pytest.mark.parametrize("mode", ["apply", "rollback"])
def test_a_wrong_typed_kept_envelopes_hash_writes_nothing(redis_client, mode):
    keys, jobs = _two_jobs(redis_client)
    if mode == "rollback":
        call = script(redis_client, "rl_transform")
        call(keys=keys, args=["apply", "op", 1, 2, *jobs])
        redis_client.rename(K.envelopes_before, "kept")
        jobs = ["a", "", "", "b", "", ""]
    redis_client.set(K.envelopes_before, "not a hash")
    snap = keyspace(redis_client)
    with pytest.raises(redis.exceptions.ResponseError, match=f"^WRONGTYPE key {K.envelopes_before} holds a string"):
        script(redis_client, "rl_transform")(keys=keys, args=[mode, "op", 1, 2, *jobs])
    assert keyspace(redis_client) == snap


@pytest.mark.parametrize("mode", ["apply", "rollback"])
def test_a_wrong_typed_payload_key_fails_that_job_alone(redis_client, mode):
    keys, jobs = _two_jobs(redis_client)
    call = script(redis_client, "rl_transform")
    if mode == "rollback":
        call(keys=keys, args=["apply", "op", 1, 2, *jobs])
        jobs = ["a", "", "", "b", "", ""]
    redis_client.delete(K.job("b"))
    redis_client.rpush(K.job("b"), "a list")
    kept_b = redis_client.hget(K.envelopes_before, "b")
    reply = call(keys=keys, args=[mode, "op", 1, 2, *jobs])
    assert reply == [b"a", b"moved", b"b", b"wrongtype"]
    assert redis_client.lrange(K.job("b"), 0, -1) == [b"a list"]
    assert redis_client.hget(K.envelopes_before, "b") == kept_b


def test_cli_transform_over_a_wrong_typed_kept_hash_exits_6_and_writes_nothing(redis_client, run, tfile):
    enqueue(redis_client, "email", 3)
    redis_client.set(K.envelopes_before, "not a hash")
    snap = keyspace(redis_client)
    code, out, err = run("migrate", "email", "--transform", tfile, "--yes")
    assert code == 6 and err.count("\n") == 1 and K.envelopes_before in err, out + err
    assert "Traceback" not in err
    snap.pop(b"jobctl:journal", None)
    assert {k: v for k, v in keyspace(redis_client).items() if b"journal" not in k} == \
        {k: v for k, v in snap.items() if b"journal" not in k}


# -- a transformation changes only what it names -------------------------------

def test_numbers_the_transformation_does_not_name_keep_their_exact_text(redis_client, run, tmp_path):
    """Integers past 64 bits and decimals past a double's precision come out
    as they went in (not rounded through a double); an envelope with a
    duplicate key (whose value a re-encoding would drop) is not rewritten."""
    ids = enqueue(redis_client, "email", 3)
    literals = [b"18446744073709551617", b"-9223372036854775809", b"0.1000000000000000000001", b"1e400", b"2.50"]
    for i in ids[:2]:
        raw = redis_client.get(K.job(i))
        extra = b', "exact": [' + b", ".join(literals) + b"]}"
        redis_client.set(K.job(i), raw[:raw.rindex(b"}")] + extra)  # the last field: payload, an object
    dup = redis_client.get(K.job(ids[2]))
    redis_client.set(K.job(ids[2]), dup[:-1] + b', "tenantId": "t9"}')
    originals = {i: redis_client.get(K.job(i)) for i in ids}
    code, out, err = run("migrate", "email", "--transform", transform_file(tmp_path, "t1.toml", T1), "--yes", "--json")
    assert code == 8, out + err  # one job skipped
    res = json.loads(out)
    assert res["moved"] == 2 and res["skipped_reasons"] == {"malformed": 1}
    op = res["operation_id"]
    for i in ids[:2]:
        after = redis_client.get(K.job(i))
        assert b'"region":"eu"' in after and b'"exact":[' + b",".join(literals) + b"]" in after
    assert redis_client.get(K.job(ids[2])) == originals[ids[2]]
    op_of(run, "--rollback", op)
    assert {i: redis_client.get(K.job(i)) for i in ids} == originals


def test_a_rollback_sets_aside_jobs_workers_finished_or_rewrote_in_words(redis_client, run, tmp_path):
    """After a transform, a worker finished one job (its payload is gone)
    and rewrote another (a retry): the rollback plans neither, says why
    ("taken by a worker", "rewritten since the transform"), restores the
    rest byte for byte, and exits 8 for the one it could not restore."""
    originals = enqueue_big(redis_client, 6)
    op1 = op_of(run, "--transform", transform_file(tmp_path, "t1.toml", T1))
    done, retried = sorted(originals)[:2]
    redis_client.lrem(K.ready, 0, done)
    redis_client.delete(K.job(done))
    redis_client.set(K.job(retried), redis_client.get(K.job(retried)).replace(b'"attempt":0', b'"attempt":1'))
    code, out, err = run("migrate", "email", "--rollback", op1, "--yes", "--json")
    res = json.loads(out)
    assert code == 8, (out, err)
    assert (res["moved"], res["skipped"]) == (4, 2), res
    assert res["skipped_reasons"] == {"moved": 1, "rewritten since the transform": 1}
    for i in set(originals) - {done, retried}:
        assert redis_client.get(K.job(i)) == originals[i]
