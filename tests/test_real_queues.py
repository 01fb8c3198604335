"""Issue 12's real-queue cases, one test each (items 1-5 and 8-11; 6 and 7
belong to the operations' engine): what jobctl must say about queues
written by real worker code, whose config is incomplete or whose DLQ loses
jobs by itself."""

from __future__ import annotations

import json
import re
import uuid

import pytest
import redis

from jobctl.cli.main import main
from jobctl.exitcodes import ExitCode
from jobctl.keys import HashJobKeys, JsonListKeys, ReliableListKeys
from jobctl.session import Session
from jobctl_fixtures.layouts import hash_job as hj_fixture
from jobctl_fixtures.layouts import json_list as jl_fixture
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, run_with_config


def write(tmp_path, text: str) -> str:
    path = tmp_path / "jobctl.toml"
    path.write_text(text)
    return str(path)


# -- 1. unknown config keys -----------------------------------------------------------------------


@pytest.mark.parametrize("text,fragment", [
    ("[queues.jobs]\nlayout = \"hash-job\"\nvisibility_ms = 1000\n",
     "unknown key 'visibility_ms' (did you mean 'visibility_timeout_ms'?)"),
    ("[queues.jobs]\nlayout = \"json-list\"\nmax_attempts = 3\n", "did you mean 'max_retries'?"),
    ("[queues.email]\ntag = \"\"\n", "tag must not be empty"),
    ("[queues.email]\ntag = \"{email}\"\n", "must not contain '{' or '}'"),
    ("[queues.email]\nshards = 100000000\n", "shards must be an integer from 1 to 1,024"),
])
def test_1_config_keys_are_checked(capsys, redis_url, tmp_path, text, fragment):
    code, out, err = run_with_config(capsys, redis_url, write(tmp_path, text), "status")
    assert code == ExitCode.USAGE and fragment in err and len(err.strip().splitlines()) == 1, err


# -- 2. the visibility timeout is explicit ----------------------------------------------------------


def test_2_visibility_timeout_is_explicit(capsys, redis_url, redis_client, tmp_path):
    hj_fixture.load_scenario(redis_client, "stuck-workers", queue="jobs", size=40, seed=1)
    cfg = tmp_path / "found.toml"
    code, out, err = cli(capsys, "--url", redis_url, "discover", "--write-config", str(cfg))
    assert code == 0, err
    text = cfg.read_text()
    assert "# visibility_timeout_ms MUST be set" in text and "# visibility_timeout_ms = 5000" in text
    # the written catalogue loads; every command relying on the default says so
    code, doc, err = run_with_config(capsys, redis_url, str(cfg), "status", "jobs", "--json")
    assert code == 0 and doc["queues"][0]["visibility_default_ms"] == 5000
    assert "visibility_timeout_ms is not configured" in err
    code, out, err = run_with_config(capsys, redis_url, str(cfg), "requeue", "jobs", "--stuck", "--dry-run")
    assert code == ExitCode.USAGE and "--visibility-timeout" in err
    code, out, err = run_with_config(capsys, redis_url, str(cfg), "requeue", "jobs", "--stuck", "--dry-run",
                                     "--visibility-timeout", "2m")
    assert code == 0, err
    # configured: no warning
    cfg.write_text(text.replace("# visibility_timeout_ms = 5000", "visibility_timeout_ms = 120000"))
    code, doc, err = run_with_config(capsys, redis_url, str(cfg), "status", "jobs", "--json")
    assert code == 0 and doc["queues"][0]["visibility_default_ms"] is None and "not configured" not in err


# -- 3. a catalogue entry that does not explain the keys ----------------------------------------------


def test_3_unexplained_keys_are_warned(capsys, redis_url, redis_client, tmp_path):
    load_scenario(redis_client, "healthy", queue="email", priorities=3, size=60, seed=2)
    cfg = write(tmp_path, "[queues.email]\ntag = \"email\"\n")  # no priorities
    code, doc, err = run_with_config(capsys, redis_url, cfg, "status", "email", "--json")
    assert code == 0
    st = doc["queues"][0]
    assert ReliableListKeys("email").ready_priority(0) in st["unexplained_keys"]
    assert any("does not explain" in w for w in st["warnings"]) and "does not explain" in err
    code, out, err = run_with_config(capsys, redis_url, cfg, "check", "email")
    assert "does not explain" in err
    # the status model the TUI reads carries the same
    session = Session(url=redis_url, config_file=cfg)
    try:
        assert session.layout("email").status_report().unexplained_keys
    finally:
        session.close()
    cfg = write(tmp_path, "[queues.email]\ntag = \"email\"\npriorities = 3\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "status", "email", "--json")
    assert doc["queues"][0]["unexplained_keys"] == [] and "does not explain" not in err


# -- 4. discovery of real queues ------------------------------------------------------------------------


def test_4_discovery_of_real_queues(capsys, redis_url, redis_client):
    # hash-job whose job hashes all expired: only completed/failed lists left
    hj_fixture.load_scenario(redis_client, "dlq-spike", queue="expired", size=40, seed=3)
    for key in redis_client.scan_iter(match="queue:expired:job:*"):
        redis_client.delete(key)
    # json-list with only <prefix>:pending (workers down, backlog growing)
    for n in range(5):
        redis_client.rpush("backlog:pending", json.dumps({"id": f"j{n}", "task": "t"}))
    # drained json-list: only its bookkeeping hashes
    redis_client.hset("drained:attempts", "j1", 1)
    redis_client.hset("drained:errors", "j1", "boom")
    # a drained reliable-list queue: every state key gone, jobctl's journal of it left
    redis_client.xadd(ReliableListKeys("gone").journal, {"operation": "redrive"})
    # a big hash-job queue: evidence capped
    hj_fixture.load_scenario(redis_client, "healthy", queue="big", size=200, seed=4)
    code, out, err = cli(capsys, "--url", redis_url, "discover", "--json")
    assert code == 0, err
    rows = {q["queue"]: q for q in json.loads(out)["queues"]}
    assert rows["expired"]["layout"] == "hash-job"
    assert rows["backlog"]["layout"] == "json-list"
    assert rows["drained"]["layout"] == "json-list"
    assert rows["gone"]["layout"] == "reliable-list"
    assert len(rows["big"]["evidence"]) <= 20 < rows["big"]["evidence_total"]
    assert rows["big"]["evidence"][0].startswith("queue:big:") and ":job:" not in rows["big"]["evidence"][0]


# -- 5. the ls error column of hash-job and json-list ------------------------------------------------------


def test_5_ls_shows_the_error_message(capsys, redis_url, redis_client, tmp_path):
    hj_fixture.load_scenario(redis_client, "dlq-spike", queue="hj", size=30, seed=5)
    jl_fixture.load_scenario(redis_client, "dlq-spike", prefix="jl", size=30, seed=5)
    cfg = write(tmp_path, "[queues.hj]\nlayout = \"hash-job\"\nvisibility_timeout_ms = 5000\n"
                          "[queues.jl]\nlayout = \"json-list\"\ntag = \"jl\"\nvisibility_timeout_ms = 300000\n")
    newest = redis_client.lindex(HashJobKeys("hj").failed, 0).decode()
    message = redis_client.hget(HashJobKeys("hj").job(newest), "last_error").decode()
    code, out, err = run_with_config(capsys, redis_url, cfg, "ls", "hj", "--state", "dead", "--limit", "1")
    assert code == 0 and message[:20] in out, (message, out)
    errors = {v.decode() for v in redis_client.hvals(JsonListKeys("jl").errors)}
    code, out, err = run_with_config(capsys, redis_url, cfg, "ls", "jl", "--state", "dead", "--limit", "50")
    assert code == 0 and any(e[:20] in out for e in errors), out


# -- 8. dangling and duplicate dead entries, history depth ---------------------------------------------------


def test_8_dead_entries_and_history(capsys, redis_url, redis_client, tmp_path):
    load_scenario(redis_client, "dlq-spike", queue="email", size=60, seed=6)
    dead = ReliableListKeys("email").dead
    redis_client.lpush(dead, "ghost-1", "ghost-2", "ghost-2")
    some = redis_client.lindex(dead, -1)
    redis_client.rpush(dead, some)  # a duplicate of a real dead job
    hj_fixture.load_scenario(redis_client, "healthy", queue="hj", size=40, seed=6)
    cfg = write(tmp_path, "[queues.email]\ntag = \"email\"\n"
                          "[queues.hj]\nlayout = \"hash-job\"\nvisibility_timeout_ms = 5000\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "status", "--json")
    rows = {q["queue"]: q for q in doc["queues"]}
    email = rows["email"]
    assert (email["dead_dangling"], email["dead_duplicates"]) == (3, 2)
    assert email["dead_audited"] == email["dead"] == redis_client.llen(dead)
    assert "3 dangling id(s)" in err
    assert rows["hj"]["history"] == redis_client.llen(HashJobKeys("hj").completed) > 0
    assert email["history"] is None


# -- 9. DLQ loss warnings ---------------------------------------------------------------------------------


def test_9_dlq_loss_warnings(capsys, redis_url, redis_client, tmp_path):
    load_scenario(redis_client, "dlq-spike", queue="email", size=60, seed=7)
    keys = ReliableListKeys("email")
    ids = [x.decode() for x in redis_client.lrange(keys.dead, 0, -1)]
    for job_id in ids[:5]:  # the reference workers' 300 s TTL on failed payloads
        redis_client.pexpire(keys.job(job_id), 300_000)
    cap = len(ids)  # the reference workers' LTRIM cap, reached
    cfg = write(tmp_path, f"[queues.email]\ntag = \"email\"\ndead_cap = {cap}\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "status", "email", "--json")
    st = doc["queues"][0]
    assert st["dead_expiring"] == 5 and 0 < st["dead_min_ttl_ms"] <= 300_000
    assert st["dead_cap"] == cap
    assert "DLQ payloads about to expire" in err and "DLQ at its cap" in err and "export the DLQ now" in err
    # the exporter: a gauge and the alert's inputs
    code, out, err = run_with_config(capsys, redis_url, cfg, "metrics", "once")
    assert re.search(r'^jobctl_dlq_expiring_jobs\{layout="reliable-list",queue="email"\} 5\.0$', out, re.M), out
    assert re.search(r'^jobctl_dlq_at_cap\{layout="reliable-list",queue="email"\} 1\.0$', out, re.M)
    # the runbook step the alert points at is guarded by the same status fields
    from jobctl.runbook import Library

    step = next(s for s in Library().load("dlq-spike").steps if s.name == "export-now")
    assert "dead_expiring" in step.guard.text


# -- 10. check re-checks each finding atomically ------------------------------------------------------------


def test_10_a_job_moving_between_reads_is_not_a_problem(capsys, redis_url, redis_client, tmp_path, monkeypatch):
    load_scenario(redis_client, "healthy", queue="email", size=60, seed=8)
    keys = ReliableListKeys("email")
    from jobctl.layouts.reliable_list import check as rlc

    original = rlc._read_list
    moved = []

    def read_then_claim(client, key):  # a worker claims the oldest ready job right after the walk read it
        ids = original(client, key)
        if key == keys.ready and not moved:
            job = redis_client.lmove(keys.ready, keys.processing, "RIGHT", "LEFT")
            redis_client.zadd(keys.deadline, {job: 9_999_999_999_999})
            moved.append(job.decode())
        return ids

    monkeypatch.setattr(rlc, "_read_list", read_then_claim)
    cfg = write(tmp_path, "[queues.email]\ntag = \"email\"\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "check", "email", "--json")
    assert moved and code == 0, doc
    assert doc["queues"][0]["transient"] >= 1 and doc["queues"][0]["problems"] == []


def test_10_repair_of_a_dangling_processing_id_removes_its_deadline(capsys, redis_url, redis_client, tmp_path):
    load_scenario(redis_client, "healthy", queue="email", size=60, seed=9)
    keys = ReliableListKeys("email")
    redis_client.lpush(keys.processing, "gone")
    redis_client.zadd(keys.deadline, {"gone": 1})
    cfg = write(tmp_path, "[queues.email]\ntag = \"email\"\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "check", "email", "--repair", "--yes", "--json")
    assert redis_client.lpos(keys.processing, "gone") is None
    assert redis_client.zscore(keys.deadline, "gone") is None  # no second pass needed
    code, doc, err = run_with_config(capsys, redis_url, cfg, "check", "email", "--json")
    assert code == 0 and doc["ok"], doc


# -- 11. the exporter and the +info ACL ---------------------------------------------------------------------


def test_11_metrics_without_info_acl_says_so(capsys, redis_url, redis_client, monkeypatch):
    load_scenario(redis_client, "healthy", queue="email", size=20, seed=10)
    user, password = f"jobctl-noinfo-{uuid.uuid4().hex[:6]}", "pw-noinfo-1"
    redis_client.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all", "-info")
    try:
        host_port = redis_url.split("//", 1)[1]
        url = f"redis://{user}:{password}@{host_port}"
        code, out, err = cli(capsys, "--url", url, "metrics", "once")
        assert code != ExitCode.FAILURE and "+info" in err, err
        import jobctl.metrics as metrics

        def never(*a, **k):  # serve must refuse before it listens
            raise AssertionError("metrics serve started without +info")

        monkeypatch.setattr(metrics, "start_exporter", never)
        code, out, err = cli(capsys, "--url", url, "metrics", "serve", "--port", "0")
        assert code == ExitCode.AUTH and "+info" in err, err
    finally:
        redis_client.execute_command("ACL", "DELUSER", user)


def test_10_hash_job_claim_between_reads_is_not_a_problem(capsys, redis_url, redis_client, tmp_path, monkeypatch):
    hj_fixture.load_scenario(redis_client, "healthy", queue="hj", size=40, seed=11)
    keys = HashJobKeys("hj")
    from jobctl.layouts.hash_job import check as hjc

    original = hjc.walk_list
    moved = []

    def walk_then_claim(client, key, **kwargs):  # a worker claims right after the walk read pending
        yield from original(client, key, **kwargs)
        if key == keys.pending and not moved:
            job = redis_client.lmove(keys.pending, keys.processing, "RIGHT", "LEFT")
            redis_client.hset(keys.job(job.decode()), mapping={"status": "processing",
                                                               "claimed_at_ms": 9_999_999_999_999})
            moved.append(job.decode())

    monkeypatch.setattr(hjc, "walk_list", walk_then_claim)
    cfg = write(tmp_path, "[queues.hj]\nlayout = \"hash-job\"\nvisibility_timeout_ms = 5000\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "check", "hj", "--json")
    assert moved, err
    q = doc["queues"][0]
    assert q["transient"] >= 1 and not [p for p in q["problems"] if p["id"] == moved[0]], q


def test_10_json_list_claim_between_reads_is_not_a_problem(capsys, redis_url, redis_client, tmp_path, monkeypatch):
    """Seed 002's claim is two commands (BLMOVE, then ZADD of the claim
    time): a check reading between them sees a job in two states and
    without a claim time.  Neither is reported."""
    jl_fixture.load_scenario(redis_client, "healthy", prefix="jl", size=40, seed=12)
    keys = JsonListKeys("jl")
    from jobctl.layouts.json_list import check as jlc

    walk_list, walk_zset = jlc.walk_list, jlc.walk_zset
    moved = []

    def list_then_claim(client, key, **kwargs):
        yield from walk_list(client, key, **kwargs)
        if key == keys.pending and not moved:
            moved.append(redis_client.lmove(keys.pending, keys.processing, "RIGHT", "LEFT"))

    def times_then_stamp(client, key, **kwargs):
        yield from walk_zset(client, key, **kwargs)
        if key == keys.processing_times and moved:
            job_id = json.loads(moved[0])["id"]
            redis_client.zadd(keys.processing_times, {job_id: 9_999_999_999.0})

    monkeypatch.setattr(jlc, "walk_list", list_then_claim)
    monkeypatch.setattr(jlc, "walk_zset", times_then_stamp)
    cfg = write(tmp_path, "[queues.jl]\nlayout = \"json-list\"\ntag = \"jl\"\nvisibility_timeout_ms = 300000\n")
    code, doc, err = run_with_config(capsys, redis_url, cfg, "check", "jl", "--json")
    assert moved, err
    q = doc["queues"][0]
    job_id = json.loads(moved[0])["id"]
    assert q["transient"] >= 2 and not [p for p in q["problems"] if p["id"] == job_id], q


def test_9_a_dlq_pinned_at_an_unconfigured_cap_is_seen(redis_url, redis_client):
    """The reference workers LPUSH + LTRIM the failed list to 50: its length
    stays put while new failures arrive.  Two samples of one process (the
    exporter, the TUI, status --watch) see it without any dead_cap."""
    load_scenario(redis_client, "dlq-spike", queue="email", size=60, seed=13)
    keys = ReliableListKeys("email")
    session = Session(url=redis_url)
    try:
        layout = session.layout("email")
        first = layout.status_report()
        assert not first.dead_pinned
        redis_client.lpush(keys.dead, "new-failure")
        redis_client.ltrim(keys.dead, 0, first.dead - 1)  # the workers' cap
        second = layout.status_report()
        assert second.dead == first.dead and second.dead_pinned
        assert any(w.startswith("DLQ pinned at") for w in second.warnings)
        from jobctl.metrics.families import families
        from jobctl.metrics.snapshot import QueueSnapshot, Snapshot

        snap = Snapshot(taken_at=0.0, queues=[QueueSnapshot(queue=layout.queue, layout="reliable-list",
                                                            status=second)])
        at_cap = next(f for f in families(snap) if f.name == "jobctl_dlq_at_cap")
        assert [s.value for s in at_cap.samples] == [1.0]
    finally:
        session.close()
