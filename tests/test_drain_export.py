"""``jobctl drain QUEUE --export-to DIR`` on a real server: the export is
written first (the files and manifest ``jobctl export`` writes), then exactly
the exported jobs whose fence holds leave the queue; a crash (injected
between take-out and delete, and a real kill -9) then a rerun finishes
without exporting a job twice or removing one the export does not hold."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from jobctl.export.manifest import load_manifest
from jobctl.export.reader import iter_rows
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list import migrate as reliable_list_migrate
from jobctl.model import State
from jobctl.ops.core import OperationCore
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation
from jobctl.session import Session
from jobctl_fixtures.envelopes import new_envelope
from jobctl_fixtures.protocol import Producer
from helpers import Killed, crash_on_script_call, wall_ms
from test_pause import enqueue, partition

QUEUES_TOML = """
[queues.email]
layout = "reliable-list"

[queues.email-v2]
layout = "reliable-list"

[queues.sg]
layout = "stream-group"
tag = "sg"
"""

SRC = ReliableListKeys("email")


@pytest.fixture
def cfg(tmp_path: Path) -> str:
    path = tmp_path / "jobctl.toml"
    path.write_text(QUEUES_TOML)
    return str(path)


@pytest.fixture
def run(redis_url, cfg, capsys):
    from jobctl.cli.main import main

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(["--url", redis_url, "--config", cfg, *args])
        out, err = capsys.readouterr()
        return code, out, err
    return _run


def exported(directory: Path) -> Counter:
    """``Counter(job id)`` of every row of the complete export in ``directory``."""
    m = load_manifest(directory)
    return Counter(job_id for job_id, in iter_rows(directory, m, ("job_id",)))


def in_redis(client, ids) -> set[str]:
    """The ids still in the queue: in a state, or their payload key."""
    where = partition(client, ["email"])
    left = {i for i in ids if i in where or client.exists(SRC.job(i))}
    assert client.llen(SRC.migrating) == 0 and client.hlen(SRC.migrating_info) == 0
    return left


def test_drain_export_to_empties_ready_into_an_export(redis_client, run, tmp_path):
    ids = enqueue(redis_client, "email", 60)
    producer, rng = Producer(redis_client, "email"), random.Random(1)
    producer.enqueue(new_envelope("later", "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=wall_ms() + 60_000))
    out_dir = tmp_path / "export"
    code, out, err = run("drain", "email", "--export-to", str(out_dir), "--export-format", "jsonl", "--yes",
                         "--batch", "7", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["operation"] == "drain" and doc["moved"] == 60 and doc["skipped"] == 0
    assert exported(out_dir) == Counter(ids)  # every drained job exactly once
    assert load_manifest(out_dir).selector["states"] == ["ready"]
    assert in_redis(redis_client, ids) == set()  # and Redis holds none of them
    assert redis_client.zrange(SRC.scheduled, 0, -1) == [b"later"]  # another state: untouched
    assert run("check", "email")[0] == 0
    entry = json.loads(redis_client.xrange(SRC.journal)[-1][1][b"entry"])
    assert entry["operation"] == "drain" and entry["moved"] == 60 and "--export-to" in entry["command"]
    # a second run with the same DIR: the export is complete, nothing left to drain
    code, out, err = run("drain", "email", "--export-to", str(out_dir), "--yes", "--json")
    assert code in (0, 8), err
    assert json.loads(out)["moved"] == 0 and exported(out_dir) == Counter(ids)


def test_drain_export_to_scheduled_and_fences(redis_client, run, tmp_path):
    rng, due = random.Random(2), wall_ms() + 3_600_000
    producer = Producer(redis_client, "email")
    for i in range(9):
        producer.enqueue(new_envelope(f"s{i}", "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=due + i))
    ready = enqueue(redis_client, "email", 4)
    out_dir = tmp_path / "sched"
    # export first (a dry run writes nothing: no export, no change)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    code, out, err = run("drain", "email", "--state", "scheduled", "--export-to", str(out_dir), "--dry-run")
    assert code == 0, err
    assert not out_dir.exists() or not any(out_dir.iterdir())
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before
    # an export written, then one job changes and one new job arrives before the drain's removal
    code, out, err = run("export", "email", "--state", "scheduled", "--out", str(out_dir), "--format", "jsonl")
    assert code == 0, err
    raw = json.loads(redis_client.get(SRC.job("s3")))
    raw["payload"] = {"changed": True}
    redis_client.set(SRC.job("s3"), json.dumps(raw))
    producer.enqueue(new_envelope("s9", "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=due + 9))
    code, out, err = run("drain", "email", "--state", "scheduled", "--export-to", str(out_dir), "--yes", "--json")
    assert code == 8, err  # PARTIAL: the changed job was skipped
    doc = json.loads(out)
    assert doc["moved"] == 8 and doc["skipped_reasons"] == {"changed since export": 1}
    assert exported(out_dir) == Counter(f"s{i}" for i in range(9))
    left = {m.decode() for m in redis_client.zrange(SRC.scheduled, 0, -1)}
    assert left == {"s3", "s9"}  # changed after the export, arrived after it: not removed
    assert in_redis(redis_client, [f"s{i}" for i in range(10)]) == {"s3", "s9"}
    assert redis_client.llen(SRC.ready) == len(ready)


def test_drain_refusals_change_nothing(redis_client, run, tmp_path):
    enqueue(redis_client, "email", 5)
    before = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    d = str(tmp_path / "x")
    for args in (("drain", "email"), ("drain", "email", "--to", "email-v2", "--export-to", d),
                 ("drain", "email", "--export-to", d, "--limit", "2"), ("drain", "sg", "--export-to", d),
                 ("drain", "nope", "--export-to", d)):
        code, out, err = run(*args, "--yes")
        assert code in (2, 5), (args, err)
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    assert {key: redis_client.dump(key) for key in redis_client.scan_iter()} == before
    assert not Path(d).exists() or not any(Path(d).iterdir())


def test_a_crash_between_take_out_and_delete_is_finished_by_a_rerun(redis_client, redis_url, cfg, run, tmp_path,
                                                                  monkeypatch):
    ids = enqueue(redis_client, "email", 40)
    # the third take-out crashes: taken out of the ready list, not deleted yet
    restore = crash_on_script_call(monkeypatch, reliable_list_migrate, "rl_migrate_out", 3)
    out_dir = tmp_path / "crash"
    with pytest.raises(Killed):
        run("drain", "email", "--export-to", str(out_dir), "--export-format", "jsonl", "--yes", "--batch", "6")
    left = [x.decode() for x in redis_client.lrange(SRC.migrating, 0, -1)]
    assert left and all(redis_client.exists(SRC.job(i)) for i in left)
    assert run("check", "email")[0] == 0  # migrating is one state of the source
    parts = load_manifest(out_dir).to_json()["parts"]
    # another export cannot take over the unfinished drain, nor can a migrate
    assert run("drain", "email", "--export-to", str(tmp_path / "other"), "--yes")[0] == 2
    assert run("migrate", "email", "email-v2", "--yes")[0] == 2
    restore()
    monkeypatch.chdir(tmp_path)  # the same DIR named relatively: the rerun is the same drain
    code, out, err = run("drain", "email", "--export-to", "crash", "--yes", "--json")
    assert code in (0, 8), err
    assert load_manifest(out_dir).to_json()["parts"] == parts  # not exported again
    assert exported(out_dir) == Counter(ids)
    assert in_redis(redis_client, ids) == set()


@pytest.mark.slow
def test_kill_9_mid_drain_then_rerun(redis_client, redis_url, cfg, tmp_path):
    ids = enqueue(redis_client, "email", 600)
    out_dir = tmp_path / "killed"
    env = dict(os.environ, JOBCTL_JOURNAL=str(tmp_path / "j.jsonl"))
    argv = [sys.executable, "-m", "jobctl.cli.main", "--url", redis_url, "--config", cfg, "drain", "email",
            "--export-to", str(out_dir), "--export-format", "jsonl", "--yes", "--batch", "5", "--rate", "200"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while redis_client.llen(SRC.ready) > 550 and proc.poll() is None and time.monotonic() < deadline:
            redis_client.ping()  # wait for the removal to be under way (the export is complete by then)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert 0 < redis_client.llen(SRC.ready) < 600
    res = subprocess.run(argv[:-4] + ["--batch", "50"], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode in (0, 8), res.stderr
    assert exported(out_dir) == Counter(ids)
    assert in_redis(redis_client, ids) == set()


def test_the_core_plans_a_drain_through_the_export_fence(redis_client, redis_url, cfg, tmp_path):
    """The TUI's path: OperationCore.prepare exports first, the plan is fenced to the export."""
    ids = enqueue(redis_client, "email", 12)
    session = Session(url=redis_url, config_file=cfg)
    notes: list[str] = []
    try:
        core = OperationCore(session)
        prepared = core.prepare(OpRequest(Operation.DRAIN, "email", source=State.READY,
                                          export_to=str(tmp_path / "core"), export_format="jsonl"),
                                note=notes.append)
        assert prepared.exported == str(tmp_path / "core") and prepared.typed_count
        assert prepared.plan.planned == 12 and "export in" in prepared.plan.describe()
        assert any("draining exactly those" in n for n in notes) and not any("purg" in n for n in notes)
        enqueue(redis_client, "email", 3, prefix="late")  # after the export: not drained
        out = core.apply(prepared)
    finally:
        session.close()
    assert out.result.moved == 12
    assert exported(tmp_path / "core") == Counter(ids)
    assert in_redis(redis_client, ids) == set() and redis_client.llen(SRC.ready) == 3


def test_retire_runbook_archives_a_queue_into_exports(redis_url, redis_client, tmp_path, capsys):
    """The "retire or split a queue" runbook's `archive` step: drain --export-to, scheduled then ready."""
    from test_runbooks import run_book, steps_journaled

    ready = enqueue(redis_client, "email", 30)
    rng, due = random.Random(3), wall_ms() + 3_600_000
    producer = Producer(redis_client, "email")
    for i in range(5):
        producer.enqueue(new_envelope(f"s{i}", "webhook.deliver", "t1", wall_ms(), rng, not_before_ms=due + i))
    out_dir = tmp_path / "retired"
    assert run_book(redis_url, "retire-or-split-queue", "email", "--step", "archive", "--set",
                    f"export_dir={out_dir}", yes=False) == 0  # a dry run: nothing exported, nothing removed
    assert redis_client.llen(SRC.ready) == 30 and not out_dir.exists()
    assert run_book(redis_url, "retire-or-split-queue", "email", "--step", "archive", "--set",
                    f"export_dir={out_dir}") == 0
    assert exported(out_dir / "ready") == Counter(ready)
    assert exported(out_dir / "scheduled") == Counter(f"s{i}" for i in range(5))
    assert in_redis(redis_client, ready + [f"s{i}" for i in range(5)]) == set()
    assert "archive" in {s["step"] for s in steps_journaled("retire-or-split-queue")}


def test_drain_export_to_under_a_live_worker_pool(redis_client, run, tmp_path):
    """Workers keep claiming while the queue is drained: each job is either
    claimed by a worker or removed by the drain, never both; every removed
    job is in the export (exactly once), and Redis holds none at the end."""
    import threading

    import redis as redis_py

    from jobctl_fixtures.protocol import Worker

    ids = enqueue(redis_client, "email", 1500)
    stop, claimed, lock = threading.Event(), [], threading.Lock()

    def work() -> None:
        worker = Worker(redis_py.Redis(connection_pool=redis_client.connection_pool), "email")
        while not stop.is_set():
            job = worker.claim(block_s=0.05)
            if job is not None:
                with lock:
                    claimed.append(job.job_id)
                worker.ack(job.job_id)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        code, out, err = run("drain", "email", "--export-to", str(tmp_path / "live"), "--export-format", "jsonl",
                             "--yes", "--batch", "16", "--json")
        assert code in (0, 8), err
        deadline = time.monotonic() + 30
        while redis_client.llen(SRC.ready) and time.monotonic() < deadline:
            time.sleep(0.01)  # the workers take what the drain left (arrived after the export's walk)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    doc = json.loads(out)
    # only jobs a worker claimed first (one acknowledged between the plan's list
    # read and its payload read has no payload left: "changed since export")
    assert set(doc["skipped_reasons"]) <= {"moved", "no longer ready", "changed since export"}
    entry = json.loads(redis_client.xrange(SRC.journal)[-1][1][b"entry"])
    moved = Path(entry["moved_ids_file"]).read_text().split() if entry["moved_ids_file"] else []
    assert len(moved) == doc["moved"] > 0
    in_export = exported(tmp_path / "live")
    assert max(in_export.values()) == 1 and set(moved) <= set(in_export)
    assert not set(moved) & set(claimed)
    assert Counter(moved + claimed) == Counter(ids)  # every job exactly once: drained or served
    assert in_redis(redis_client, ids) == set()
