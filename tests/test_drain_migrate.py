"""``jobctl migrate`` / ``jobctl drain`` between reliable-list queues
(``jobctl/layouts/reliable_list/migrate.py``, ``jobctl/lua/rl_migrate_*.lua``)
on a real server: order, payloads, due times, fences, and a crash (an
injected one between copy and delete, and a real kill -9) followed by a
rerun: every job in exactly one queue and one state."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list import migrate as reliable_list_migrate
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.protocol import Producer, Worker
from helpers import Killed, claim_and_ack, config_fixtures, crash_on_script_call, wall_ms
from test_pause import enqueue, partition, tail_first, tenant_of

QUEUES_TOML = """
[queues.email]
layout = "reliable-list"

[queues.email-v2]
layout = "reliable-list"

[queues.shq]
layout = "reliable-list"
shards = 2

[queues.sg]
layout = "stream-group"
tag = "sg"
"""

SRC, DST = ReliableListKeys("email"), ReliableListKeys("email-v2")


cfg, run = config_fixtures(QUEUES_TOML)


def both(client) -> dict[str, list[str]]:
    """id -> state keys over both queues; each id in exactly one (asserted)."""
    where = partition(client, ["email", "email-v2"])
    for k in (SRC, DST):
        assert client.llen(k.migrating) == 0 and client.hlen(k.migrating_info) == 0
    # a kill -9 between the delete out and the marker's HDEL leaves a marker:
    # harmless, its token (that run's operation id) never matches a later move
    assert client.hlen(DST.migrated_in) <= 50
    return where


def test_migrate_a_tenant_keeps_order_and_payloads(redis_client, run):
    ids = enqueue(redis_client, "email", 50)
    Producer(redis_client, "email-v2").enqueue(new_envelope("v2-old", "webhook.deliver", "t9", wall_ms(),
                                                            random.Random(0)))
    payloads = {i: redis_client.get(SRC.job(i)) for i in ids}
    code, out, err = run("migrate", "email", "email-v2", "--filter", "tenant = t2", "--yes", "--batch", "6",
                         "--json")
    assert code == 0, err
    t2 = [i for i in ids if tenant_of(i) == "t2"]
    assert json.loads(out)["moved"] == len(t2)
    assert tail_first(redis_client, DST.ready) == ["v2-old"] + t2  # after DST's own, oldest first
    assert tail_first(redis_client, SRC.ready) == [i for i in ids if tenant_of(i) != "t2"]
    assert all(redis_client.get(DST.job(i)) == payloads[i] for i in t2)
    assert not any(redis_client.exists(SRC.job(i)) for i in t2)
    where = both(redis_client)
    assert set(where) == set(ids) | {"v2-old"}
    assert run("check", "email")[0] == 0 and run("check", "email-v2")[0] == 0
    entries = [json.loads(f[b"entry"]) for _, f in redis_client.xrange(SRC.journal)]
    assert entries[-1]["operation"] == "migrate" and entries[-1]["moved"] == len(t2)


def test_drain_scheduled_keeps_due_times(redis_client, run):
    rng = random.Random(2)
    due = wall_ms() + 3_600_000
    producer = Producer(redis_client, "email")
    for i in range(7):
        producer.enqueue(new_envelope(f"s{i}", "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=due + i))
    enqueue(redis_client, "email", 3)
    code, _, err = run("drain", "email", "--state", "scheduled", "--to", "email-v2", "--yes")
    assert code == 0, err
    assert {m.decode(): int(s) for m, s in redis_client.zrange(DST.scheduled, 0, -1, withscores=True)} == \
        {f"s{i}": due + i for i in range(7)}
    assert redis_client.zcard(SRC.scheduled) == 0 and redis_client.llen(SRC.ready) == 3
    both(redis_client)


def test_dry_run_and_refusals_change_nothing(redis_client, run):
    enqueue(redis_client, "email", 5)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    assert run("migrate", "email", "email-v2", "--dry-run")[0] == 0
    for args in (("migrate", "email", "email"), ("migrate", "email", "shq"), ("migrate", "email", "sg"),
                 ("drain", "email"), ("migrate", "email", "nope")):
        code, out, err = run(*args, "--yes")
        assert code in (2, 5), (args, err)
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before


def test_an_id_taken_at_the_destination_goes_back(redis_client, run):
    ids = enqueue(redis_client, "email", 6)
    redis_client.set(DST.job(ids[2]), b'{"jobId": "another job"}')
    redis_client.lpush(DST.ready, ids[2])
    code, out, err = run("migrate", "email", "email-v2", "--yes", "--json")
    assert code == 8, err  # PARTIAL
    doc = json.loads(out)
    assert doc["moved"] == 5 and doc["skipped_reasons"] == {"conflict": 1}
    assert tail_first(redis_client, SRC.ready) == [ids[2]]
    assert redis_client.get(DST.job(ids[2])) == b'{"jobId": "another job"}'


def test_a_crash_between_copy_and_delete_is_finished_by_a_rerun(redis_client, run, monkeypatch):
    ids = enqueue(redis_client, "email", 40)
    # the copies are in, the source copies not deleted yet
    restore = crash_on_script_call(monkeypatch, reliable_list_migrate, "rl_migrate_out")
    lay = ReliableList(redis_client, QueueConfig("email"))
    spec = OpSpec(Operation.MIGRATE, "email", State.READY, State.READY, filter=compile_filter("tenant != t3"),
                  destination=ReliableList(redis_client, QueueConfig("email-v2")))
    with pytest.raises(Killed):
        run_plan(lay, lay.plan(spec), batch=8, journal=False)
    # the crash left jobs in both queues: in the source's migrating list and at the destination
    left = [x.decode() for x in redis_client.lrange(SRC.migrating, 0, -1)]
    assert left and all(redis_client.exists(DST.job(i)) for i in left)
    code, out, err = run("check", "email", "--json")
    assert code == 0, out  # migrating is one state of the source
    restore()
    code, out, err = run("migrate", "email", "email-v2", "--filter", "tenant != t3", "--yes", "--json")
    assert code == 0, err
    moved = [i for i in ids if tenant_of(i) != "t3"]
    where = both(redis_client)
    assert {i for i, (key,) in where.items() if key == DST.ready} == set(moved)
    assert redis_client.hlen(DST.migrated_in) == 0
    assert tail_first(redis_client, DST.ready) == moved  # order kept across the crash
    claimed = claim_and_ack(Worker(redis_client, "email-v2"))
    assert claimed == moved  # exactly once


@pytest.mark.slow
def test_kill_9_mid_migrate_then_rerun(redis_client, redis_url, cfg, tmp_path):
    ids = enqueue(redis_client, "email", 600)
    env = dict(os.environ, JOBCTL_JOURNAL=str(tmp_path / "j.jsonl"))
    argv = [sys.executable, "-m", "jobctl.cli.main", "--url", redis_url, "--config", cfg, "migrate", "email",
            "email-v2", "--yes", "--batch", "5", "--rate", "200"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while redis_client.llen(DST.ready) < 50 and proc.poll() is None and time.monotonic() < deadline:
            redis_client.ping()  # wait for the migration to be under way
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert 0 < redis_client.llen(DST.ready) < 600
    res = subprocess.run(argv[:-4] + ["--batch", "50"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    where = both(redis_client)
    assert {i for i, (key,) in where.items() if key == DST.ready} == set(ids)
    assert tail_first(redis_client, DST.ready) == ids


RESHARD_TOML = """
[queues.rs]
layout = "reliable-list"
shards = 2
shard_rule = "java-hashcode-floormod"
"""


def test_shard_rule_is_the_producers_rule():
    from jobctl.layouts.sharding import java_hashcode_floormod
    from jobctl_fixtures.ids import shard_index

    for i in range(500):
        job_id = f"job-{i}-x{i * 7919}"
        for n in (2, 3, 4, 64):
            assert java_hashcode_floormod(job_id, n) == shard_index(job_id, n)


@pytest.mark.parametrize("crash", [False, True])
def test_reshard_puts_every_job_in_its_new_shard(redis_client, redis_url, tmp_path, capsys, monkeypatch, crash):
    from jobctl.cli.main import main
    from jobctl_fixtures.ids import shard_index

    cfg = tmp_path / "rs.toml"
    cfg.write_text(RESHARD_TOML)
    ids = enqueue(redis_client, "rs", 80, shards=2)
    rng = random.Random(3)
    due = wall_ms() + 3_600_000
    for i in range(10):  # scheduled ones too, on the shard their id hashes to
        job_id = f"s{i:03d}"
        Producer(redis_client, f"rs:{shard_index(job_id, 2):02d}").enqueue(
            new_envelope(job_id, "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=due + i))
    new_tags = [f"rs:{i:02d}" for i in range(4)]
    if crash:
        restore = crash_on_script_call(monkeypatch, reliable_list_migrate, "rl_migrate_out", 2)
        with pytest.raises(Killed):
            main(["--url", redis_url, "--config", str(cfg), "reshard", "rs", "--shards", "4", "--yes",
                  "--batch", "5"])
        restore()
        assert any(redis_client.llen(ReliableListKeys(t).migrating) for t in new_tags[:2])
    for state in ("ready", "scheduled"):
        code = main(["--url", redis_url, "--config", str(cfg), "reshard", "rs", "--shards", "4", "--state", state,
                     "--yes", "--json"])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    where = partition(redis_client, new_tags)
    assert set(where) == set(ids) | {f"s{i:03d}" for i in range(10)}
    for job_id, (key,) in where.items():
        assert key.startswith(f"queue:{{rs:{shard_index(job_id, 4):02d}}}:"), (job_id, key)
        assert redis_client.exists(ReliableListKeys(f"rs:{shard_index(job_id, 4):02d}").job(job_id))
    for t in new_tags:
        k = ReliableListKeys(t)
        assert redis_client.llen(k.migrating) == 0
        for m, s in redis_client.zrange(k.scheduled, 0, -1, withscores=True):
            assert int(s) == due + int(m.decode()[1:])
    # the same logical queue, read with 4 shards, passes check
    cfg.write_text(RESHARD_TOML.replace("shards = 2", "shards = 4"))
    assert main(["--url", redis_url, "--config", str(cfg), "check", "rs"]) == 0
    capsys.readouterr()


def test_reshard_needs_the_shard_rule(redis_client, run):
    enqueue(redis_client, "shq", 6, shards=2)
    code, out, err = run("reshard", "shq", "--shards", "4", "--yes")
    assert code == 2 and "shard_rule" in err and out == ""


def test_deep_lists_stay_within_the_scripts_window(redis_client, run):
    """Windows over positions beyond the script's 4,096 (regression: a
    search window one SLACK wider than the script reads)."""
    from jobctl_fixtures.protocol import ProtocolScripts

    rng = random.Random(9)
    producer = Producer(redis_client, "email", scripts=ProtocolScripts.for_client(redis_client).load())
    created = wall_ms() - 3_600_000
    ids = []
    pipe = redis_client.pipeline(transaction=False)
    for i in range(9000):
        job_id = f"d{i:05d}"
        producer.enqueue(new_envelope(job_id, "webhook.deliver", ("t1", "t2", "t3")[i % 3], created + i, rng),
                         pipe=pipe)
        ids.append(job_id)
    pipe.execute()
    code, out, err = run("migrate", "email", "email-v2", "--filter", "tenant = t2", "--yes", "--json")
    assert code == 0, err
    t2 = [i for n, i in enumerate(ids) if n % 3 == 1]
    assert json.loads(out)["moved"] == len(t2) == 3000
    assert tail_first(redis_client, DST.ready) == t2
    code, out, err = run("pause", "email", "--filter", "tenant = t3", "--reason", "x", "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 3000, err
    assert tail_first(redis_client, SRC.paused) == [i for n, i in enumerate(ids) if n % 3 == 2]
    both(redis_client)


def test_drain_to_on_a_stream_group_queue_names_drain(redis_client, run):
    code, out, err = run("drain", "sg", "--to", "email", "--yes")
    assert code == 2, (out, err)
    assert "drain --to) is not supported for layout stream-group" in err, err
