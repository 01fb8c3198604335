"""The ``sidekiq`` layout against Sidekiq itself, unmodified (Debian's
``ruby-sidekiq``): Sidekiq's own client (``perform_async``, ``perform_in``:
``tests/sidekiq/push.rb``) and worker (the ``sidekiq`` command, started
here) make the keys; jobctl reads them through the CLI, redrives, promotes
and purges; Sidekiq's own API (``tests/sidekiq/api.rb``) agrees on every
count afterwards.  Skipped without ruby and sidekiq, except in CI."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers import config_fixtures, queues_toml

HERE = Path(__file__).resolve().parent / "sidekiq"
FLAG = "sktest:flag"
BIG = 2 ** 63 - 1
NAMES = [f"{kind}-{n}" for kind in ("even", "odd") for n in range(4)]
EVEN = "error = 'ArgumentError'"  # the even jobs' failure (the odd ones raise IOError)
#: What a plan says of the version when a Sidekiq process runs (6.x writes no version in its info).
VERSION_NOTE = r"Sidekiq (\S+ \(a live process's info\)|version not in the live process's info)"
WAIT_S = 60  # the longest a BLPOP waits for Sidekiq's worker before the test fails
cfg, run = config_fixtures(queues_toml(sk={"layout": "sidekiq"}))


@pytest.fixture(scope="session")
def sidekiq_ready() -> None:
    """Skipped without ruby/sidekiq, except in CI (.ci/run installs ruby-sidekiq)."""
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if not shutil.which("ruby") or not shutil.which("sidekiq"):
        missing("ruby/sidekiq not found on PATH: the Sidekiq tests need ruby-sidekiq")
    proc = subprocess.run(["ruby", "-e", 'require "sidekiq"'], capture_output=True, text=True)
    if proc.returncode != 0:
        missing(f"ruby cannot load sidekiq: {proc.stderr.strip()[-300:]}")


def _ruby(redis_url: str, script: str, *args: str, **env: str) -> str:
    proc = subprocess.run(["ruby", str(HERE / script), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "REDIS_URL": redis_url, **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _push(redis_url: str, names: list[str], **env: str) -> dict[str, str]:
    """Sidekiq's own client: ``{name: jid}``."""
    return json.loads(_ruby(redis_url, "push.rb", json.dumps(names), str(BIG), **env))


def _counts(redis_url: str) -> dict[str, int]:
    """Sidekiq's own API: sizes of the dead, retry and schedule sets and of the ``work`` queue."""
    return json.loads(_ruby(redis_url, "api.rb", "counts"))


class SidekiqWorker:
    """The ``sidekiq`` command on the ``work`` queue (one thread), output in ``log``."""

    def __init__(self, redis_url: str, log: Path) -> None:
        self.redis_url, self.log, self.proc = redis_url, log, None

    def start(self) -> None:
        cmd = ["sidekiq", "-r", str(HERE / "jobs.rb"), "-q", "work", "-c", "1", "-t", "1"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, "REDIS_URL": self.redis_url})

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def wait(self, client, key: str, n: int) -> list[str]:
        """``n`` entries of the list ``key`` that the jobs push (BLPOP: no sleeps)."""
        out = []
        for _ in range(n):
            got = client.blpop(key, timeout=WAIT_S)
            assert got is not None, f"Sidekiq's worker did not push {key}: {self.log.read_text()[-2000:]}"
            out.append(got[1].decode())
        return out


@pytest.fixture
def worker(sidekiq_ready, redis_url, tmp_path):
    w = SidekiqWorker(redis_url, tmp_path / "sidekiq.log")
    yield w
    w.stop()


@pytest.fixture
def failed(worker, redis_url, redis_client) -> dict[str, str]:
    """8 jobs (``retry: 0``) that Sidekiq's worker (left running) sent to
    the dead set while the flag was set (it stays set); ``{name: jid}``."""
    redis_client.set(FLAG, 1)
    jids = _push(redis_url, NAMES)
    worker.start()
    assert sorted(worker.wait(redis_client, "sktest:died", len(NAMES))) == sorted(jids.values())
    redis_client.delete("sktest:ran")
    return jids


def _json(run, *args) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _status(run) -> dict:
    return _json(run, "status", "sk")["queues"][0]


def _layout(redis_client):
    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    return layout_for(redis_client, QueueConfig(name="sk", layout="sidekiq"))


def test_status_ls_and_inspect_read_sidekiq_keys(run, failed, redis_url):
    _push(redis_url, ["later-0", "later-1"], SKTEST_IN="3600")
    st = _status(run)
    assert (st["layout"], st["ready"], st["dead"], st["scheduled"]) == ("sidekiq", 0, 8, 2)
    assert st["next_due_ms"] > st["now_ms"]
    counts = _counts(redis_url)
    assert (counts["dead"], counts["schedule"], counts["work"]) == (st["dead"], st["scheduled"], st["ready"])
    jobs = _json(run, "ls", "sk", "--state", "dead", "--limit", "50")["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted(failed.values())
    doc = _json(run, "inspect", "sk", failed["even-0"])
    assert doc["state"] == "dead" and doc["envelope"]["args"] == ["even-0", BIG]
    assert doc["envelope"]["error_class"] == "ArgumentError" and doc["meta"]["sidekiq_queue"] == "work"
    assert abs(doc["meta"]["dead_since_ms"] - doc["envelope"]["failed_at"] * 1000) < 1  # seconds shown as ms
    assert _json(run, "attempts", "sk", "--state", "dead")["counts"] == {"0": 8}  # retry_count of a first failure
    later = _json(run, "ls", "sk", "--state", "scheduled")["jobs"]
    assert {j["meta"]["state_key"] for j in later} == {"schedule"} and len(later) == 2


def test_redrive_filtered_while_the_worker_runs_each_once(run, failed, redis_client, redis_url, worker):
    code, out, err = run("redrive", "sk", "--filter", EVEN, "--dry-run")
    assert code == 0, err
    assert re.search(VERSION_NOTE, " ".join(out.split())), out  # the running worker's version (6.x names none)
    assert _counts(redis_url)["dead"] == 8  # a dry run writes nothing
    redis_client.delete(FLAG)
    assert _json(run, "redrive", "sk", "--filter", EVEN, "--yes")["moved"] == 4
    assert sorted(worker.wait(redis_client, "sktest:ran", 4)) == [n for n in NAMES if n.startswith("even-")]
    for name in NAMES:
        runs = redis_client.get(f"sktest:count:{name}")
        if name.startswith("even-"):
            assert runs == b"1", name  # processed exactly once
            assert redis_client.get(f"sktest:arg:{name}") == f"Integer:{BIG}".encode()  # the 64-bit int arrived
        else:
            assert runs is None, name
    counts = _counts(redis_url)
    assert (counts["dead"], counts["work"]) == (4, 0) == (_status(run)["dead"], _status(run)["ready"])
    left = {j["id"] for j in _json(run, "ls", "sk", "--state", "dead")["jobs"]}
    assert left == {failed[n] for n in NAMES if n.startswith("odd-")}
    (_, entry), = redis_client.xrange("jobctl:sidekiq:journal")
    assert re.search(VERSION_NOTE, json.loads(entry[b"entry"])["plan_note"])


def test_a_job_that_died_again_since_the_plan_is_not_redriven_twice(failed, redis_client, redis_url, worker):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "sk", State.DEAD, State.READY))
    assert len(plan.jobs) == 8
    _ruby(redis_url, "api.rb", "retry", failed["odd-0"])  # Sidekiq's own retry wins the race...
    assert worker.wait(redis_client, "sktest:died", 1) == [failed["odd-0"]]  # ...and the job died again
    redis_client.delete(FLAG)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 7 and res.skipped_reasons == {"gone": 1}
    worker.wait(redis_client, "sktest:ran", 7 + 1)  # the 7, and odd-0's failed run by Sidekiq's own retry
    runs = {name: redis_client.get(f"sktest:count:{name}") for name in NAMES}
    assert runs.pop("odd-0") is None and set(runs.values()) == {b"1"}  # never processed twice
    assert _counts(redis_url)["dead"] == 1 and redis_client.llen("queue:work") == 0


def test_sidekiqs_own_retry_all_racing_jobctl_processes_each_job_once(failed, redis_client, redis_url, worker):
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "sk", State.DEAD, State.READY))
    redis_client.delete(FLAG)
    _ruby(redis_url, "api.rb", "retry_all")  # Sidekiq's own bulk retry empties the dead set first
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped_reasons == {"gone": 8}
    worker.wait(redis_client, "sktest:ran", 8)
    assert {redis_client.get(f"sktest:count:{n}") for n in NAMES} == {b"1"}
    assert _counts(redis_url)["dead"] == 0 and redis_client.llen("queue:work") == 0


def test_the_pushed_bytes_are_the_stored_ones_but_the_two_fields(failed, redis_client, worker):
    worker.stop()
    before = {m for m in redis_client.zrange("dead", 0, -1)}
    lay = _layout(redis_client)
    from jobctl.model import State
    from jobctl.ops.engine import run_plan
    from jobctl.ops.spec import Operation, OpSpec

    assert run_plan(lay, lay.plan(OpSpec(Operation.REDRIVE, "sk", State.DEAD, State.READY)), journal=False).moved == 8
    pushed = redis_client.lrange("queue:work", 0, -1)
    by_jid = {json.loads(m)["jid"]: m for m in before}
    for raw in pushed:
        new = json.loads(raw)
        old_raw = by_jid[new["jid"]]
        old = json.loads(old_raw)
        assert new["retry_count"] == old["retry_count"] - 1 and new["enqueued_at"] > old["enqueued_at"]
        assert {k: v for k, v in new.items() if k not in ("retry_count", "enqueued_at")} == \
            {k: v for k, v in old.items() if k not in ("retry_count", "enqueued_at")}
        assert str(BIG).encode() in raw and raw.startswith(old_raw.split(b'"enqueued_at"')[0])
    assert redis_client.smembers("queues") == {b"work"}


def test_redrive_bytes_edit_only_their_spans():
    from jobctl.layouts.sidekiq.edit import edit_by_scan, redrive_bytes

    raw = (b'{"class":"A","args":[9223372036854775807,123456789012345678901234567890,"a/b","\\u00e9",1.10,'
           b'{"retry_count":7}],"retry_count":3,"enqueued_at":1795836864.6819763,"x":"\xc3\xa9"}')
    out = redrive_bytes(raw, 1795836999123)
    assert out == raw.replace(b'"retry_count":3', b'"retry_count":2').replace(b"1795836864.6819763", b"1795836999.123")
    assert redrive_bytes(raw, 1795836999123, reset_attempts=True) == \
        raw.replace(b'"retry_count":3,', b"").replace(b"1795836864.6819763", b"1795836999.123")
    assert edit_by_scan(raw, 1795836999123) == out  # past 64 bits orjson refuses: the scan edits it
    ms = b'{"class":"A","created_at":1795836864681,"retry_count":0}'  # Sidekiq 8: epoch ms
    assert redrive_bytes(ms, 1795836999123) == b'{"class":"A","created_at":1795836864681,"retry_count":-1,' \
                                                b'"enqueued_at":1795836999123}'


def _name(row: dict) -> str:
    return json.loads(row["raw"])["args"][0]


@pytest.mark.parametrize("raw", [
    b'{"args":[{"retry_count":5,"enqueued_at":3}],"created_at":1795836864.5,"enqueued_at":1795836864.6,"retry_count":0}',
    b'{"retry_count":3,"a":1,"enqueued_at":1}', b'{"a":1,"retry_count":3}', b'{"a":1,"retry_count":3,"b":[1]}',
    b'{"a":1}', b'{"created_at":1795836864681,"a":"\\/"}', b'{ "a" : 1 , "retry_count" : 2 }',
    b'{"a":"x\\"retry_count\\":1","retry_count":2}', b'{"a":[9223372036854775807, 1.10]}'])
@pytest.mark.parametrize("reset", [False, True])
def test_the_fast_edit_and_the_scan_agree(raw, reset):
    from jobctl.layouts.sidekiq.edit import edit_by_scan, redrive_bytes

    out = redrive_bytes(raw, 1795836999123, reset_attempts=reset)
    assert out == edit_by_scan(raw, 1795836999123, reset_attempts=reset)
    doc, new = json.loads(raw), json.loads(out)
    assert new.pop("enqueued_at") in (1795836999.123, 1795836999123) and new.pop("retry_count", None) == (
        None if reset or "retry_count" not in doc else doc["retry_count"] - 1)
    doc.pop("enqueued_at", None), doc.pop("retry_count", None)
    assert new == doc


def test_purge_exports_first_and_leaves_the_rest(run, failed, redis_url, redis_client, tmp_path):
    out = tmp_path / "dead"
    doc = _json(run, "purge", "sk", "--state", "dead", "--filter", "error = 'IOError'", "--export-to", str(out),
                "--yes")
    assert doc["moved"] == 4
    import pyarrow.parquet as pq

    rows = [r for part in sorted(out.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert {r["layout"] for r in rows} == {"sidekiq"}
    assert all(f'"args":["odd-{n}",{BIG}]' in r["raw"] for n, r in enumerate(sorted(rows, key=_name)))
    assert sorted(r["job_id"] for r in rows) == sorted(failed[n] for n in NAMES if n.startswith("odd-"))
    assert _counts(redis_url)["dead"] == 4 == _status(run)["dead"]
    gone = [failed[n].encode() for n in NAMES if n.startswith("odd-")]
    for key in redis_client.scan_iter(count=1000):  # no list, set or hash holds them (the journal is a stream)
        kind = redis_client.type(key)
        held = {b"zset": lambda: redis_client.zrange(key, 0, -1), b"list": lambda: redis_client.lrange(key, 0, -1),
                b"set": lambda: list(redis_client.smembers(key)), b"hash": lambda: list(redis_client.hvals(key)),
                }.get(kind, lambda: [])()
        assert not [g for g in gone if any(g in v for v in held)], key


@pytest.fixture
def key_events(redis_client):
    """Keyspace notifications of hash and sorted-set commands while the test
    runs (the server's setting restored after)."""
    before = redis_client.config_get("notify-keyspace-events")["notify-keyspace-events"]
    redis_client.config_set("notify-keyspace-events", "Khz")
    yield
    redis_client.config_set("notify-keyspace-events", before)


def test_promote_a_retry_runs_it_now(run, worker, redis_client, redis_url, key_events):
    redis_client.set(FLAG, 1)
    pubsub = redis_client.pubsub()
    pubsub.psubscribe("__keyspace@*__:retry")
    jids = _push(redis_url, ["retry-0", "retry-1"], SKTEST_RETRY="5")
    worker.start()
    _key_event(pubsub, b"zadd", 2)  # Sidekiq's retry handler added both
    pubsub.close()
    assert sorted(worker.wait(redis_client, "sktest:ran", 2)) == ["retry-0", "retry-1"]  # their failed runs
    assert _counts(redis_url)["retry"] == 2
    redis_client.delete(FLAG)
    flt = f"payload.args[0] = 'retry-1' and error = 'IOError'"
    assert _json(run, "promote", "sk", "--filter", flt, "--yes")["moved"] == 1
    assert worker.wait(redis_client, "sktest:ran", 1) == ["retry-1"]
    assert redis_client.get("sktest:count:retry-1") == b"1" and redis_client.get("sktest:count:retry-0") is None
    left = _json(run, "ls", "sk", "--state", "scheduled")["jobs"]
    assert [(j["id"], j["meta"]["state_key"]) for j in left] == [(jids["retry-0"], "retry")]


def test_malformed_members_are_reported_and_never_pushed(run, failed, redis_client):
    code, out, err = run("check", "sk", "--json")
    assert code == 0 and json.loads(out)["queues"][0]["ok"], err
    died = time.time()  # Sidekiq trims dead entries older than 180 days on every death
    redis_client.zadd("dead", {b"not json {": died})
    code, out, _ = run("check", "sk", "--json")
    assert code != 0 and json.loads(out)["queues"][0]["counts"] == {"malformed": 1}
    doc = _json(run, "redrive", "sk", "--filter", EVEN, "--yes")
    assert doc["moved"] == 4 and redis_client.zscore("dead", b"not json {") == died
    from jobctl.model import State
    from jobctl.ops.spec import Operation, OpSpec

    lay = _layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "sk", State.DEAD, State.READY))  # unfiltered: the lean walk
    assert plan.malformed == ["sha1:" + hashlib.sha1(b"not json {").hexdigest()] and plan.planned >= 4
    purge = lay.plan(OpSpec(Operation.PURGE, "sk", State.DEAD, None))  # a purge takes it (by its exact bytes)
    assert plan.malformed[0] in {j.job_id for j in purge.jobs}


def test_discover_recognises_sidekiq_keys(run, failed):
    code, out, err = run("discover", "--json")
    assert code == 0, err
    queues = json.loads(out)["queues"]
    assert [q["layout"] for q in queues if q["queue"] == "sidekiq"] == ["sidekiq"], queues


def test_the_dashboard_reads_a_sidekiq_instance(cfg, redis_url, failed):
    from jobctl.dashboard.facade import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    s = Session(config_file=cfg, url=redis_url)
    try:
        dash = Dashboard(s)
        assert dash.refresh().row("sk").status.dead == 8
        dash.queue_detail("sk")
        groups = dash.triage("sk").groups
        assert sorted((g.count, g.key) for g in groups)[0][0] == 4 and sum(g.count for g in groups) == 8
        assert len(dash.jobs("sk", State.DEAD).records) == 8
    finally:
        s.close()


@pytest.mark.parametrize("argv, op, source, kw", [
    (["suppress", "sk", "--reason", "noise", "--filter", "type = 'A'"], "SUPPRESS", "DEAD",
     {"reason": "noise", "filter_text": "type = 'A'"}),
    (["requeue", "sk", "--stuck"], "REQUEUE", "PROCESSING", {"stuck_only": True}),
    (["pause", "sk", "--reason", "x", "--filter", "type = 'A'"], "PAUSE", "READY",
     {"reason": "x", "filter_text": "type = 'A'"}),
    (["promote", "sk", "--priority", "1"], None, None, {}),
])
def test_what_sidekiq_cannot_do_is_refused_alike_by_the_cli_and_the_tui(cfg, redis_url, redis_client, capsys,
                                                                         argv, op, source, kw):
    from jobctl.cli.main import main
    from jobctl.dashboard import Dashboard
    from jobctl.errors import JobctlError
    from jobctl.model import State
    from jobctl.ops.spec import Operation
    from jobctl.session import Session
    from jobctl_tui.actions import ActionRequest

    code = main(["--url", redis_url, "--config", cfg, *argv, "--yes"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert redis_client.dbsize() == 0
    if op is None:
        return
    s = Session(config_file=cfg, url=redis_url)
    try:
        with pytest.raises(JobctlError) as info:
            Dashboard(s).prepare(ActionRequest(Operation[op], "sk", State[source], "parity", **kw).request())
    finally:
        s.close()
    assert str(info.value).splitlines()[0] in err and int(info.value.exit_code) == 2


def test_sidekiqs_keys_span_cluster_slots_so_cluster_mode_refuses_the_moves(redis_client):
    from jobctl.cluster import one_slot

    keys = _layout(redis_client).slot_keys()
    assert {"dead", "retry", "schedule", "queues"} <= set(keys) and not one_slot(keys)


def test_a_sidekiq_8_job_reads_its_millisecond_times():
    from jobctl.layouts.sidekiq.job import envelope_of

    env = envelope_of(b'{"class":"A","wrapped":"Mailer","jid":"j8","retry":true,"created_at":1795836864681,'
                      b'"failed_at":1795836867210,"retry_count":3,"error_class":"E","error_message":"m"}')
    assert (env.job_type, env.created_ms, env.last_attempt_ms, env.attempt, env.max_attempts) == (
        "Mailer", 1795836864681, 1795836867210, 3, 25)
    assert (env.last_error_code, env.last_error_message, env.job_id) == ("E", "m", "j8")


def _key_event(pubsub, event: bytes, n: int = 1) -> None:
    """Wait (keyspace notifications, at most WAIT_S) for ``n`` ``event`` s
    on the keys ``pubsub`` subscribed to: e.g. Sidekiq's heartbeat writing
    a work hash (``hset``), its retry handler adding a job to ``retry`` (``zadd``)."""
    deadline = time.monotonic() + WAIT_S
    while n and time.monotonic() < deadline:
        msg = pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        n -= bool(msg and msg["data"] == event)
    if n:
        pytest.fail(f"Sidekiq did not {event.decode()} in {WAIT_S} s")


def test_a_running_job_reads_as_processing(run, worker, redis_client, redis_url, key_events):
    pubsub = redis_client.pubsub()
    pubsub.psubscribe("__keyspace@*__:*:work*")  # Sidekiq 6: <identity>:workers, 7-8: <identity>:work
    jid = _ruby(redis_url, "api.rb", "hold", "held-0").strip()
    worker.start()
    assert worker.wait(redis_client, "sktest:started", 1) == ["held-0"]
    try:
        _key_event(pubsub, b"hset")
        st = _status(run)
        assert (st["processing"], st["ready"], st["stuck"]) == (1, 0, 0)
        jobs = _json(run, "ls", "sk", "--state", "processing")["jobs"]
        assert [(j["id"], j["envelope"]["class"], j["meta"]["sidekiq_queue"]) for j in jobs] == [
            (jid, "HoldUntilReleased", "work")]
        assert jobs[0]["meta"]["process"] in {k.decode() for k in redis_client.smembers("processes")}
        assert _json(run, "inspect", "sk", jid)["state"] == "processing"
    finally:
        redis_client.rpush("sktest:release", 1)
        pubsub.close()
    assert worker.wait(redis_client, "sktest:ran", 1) == ["held-0"]


@pytest.mark.parametrize("desc", [True, False])
def test_the_sets_are_walked_by_score_so_concurrent_deaths_and_trims_shift_nothing(redis_client, desc):
    from jobctl.layouts.sidekiq.walk import walk_by_score

    redis_client.zadd("z", {f"m{i}": 100 + i // 3 for i in range(300)})  # ties, as equal failure times
    seen: list[bytes] = []
    for n, (_, pairs) in enumerate(walk_by_score(redis_client, "z", desc=desc, batch=7)):
        seen += [m for m, _ in pairs]
        redis_client.zadd("z", {f"new{n}": 1000 + n})  # a death meanwhile (newest)
        redis_client.zpopmin("z")  # the cap trims the oldest
    kept = [m for m in seen if not m.startswith(b"new")]
    assert len(kept) == len(set(kept))  # never one member twice
    left = {m for m in redis_client.zrange("z", 0, -1) if not m.startswith(b"new")}
    assert left <= set(kept)  # every member there from start to end was seen
