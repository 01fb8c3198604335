"""``jobctl status`` against queues the fixtures loaded, compared field by field
with the scenario's ground truth (``jobctl_fixtures.truth.GroundTruth``), and
the ``status --json`` contract of README.md."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from jobctl.keys import ReliableListKeys, shard_tags
from jobctl_fixtures.scenarios import SCENARIOS, load_scenario
from jobctl_fixtures.truth import EXPECTED_FIELDS
from helpers import cli, wall_ms

README = Path(__file__).resolve().parents[1] / "README.md"
SIZE = 400

#: (id, shards, priorities) of the queue shapes every scenario is loaded in.
SHAPES = [
    ("plain", None, None),
    ("sharded", 4, None),
    ("priorities", None, 3),
    ("sharded-priorities", 4, 3),
]


def write_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "jobctl.toml"
    path.write_text(text)
    return str(path)


def queue_toml(name: str, tag: str | None = None, shards: int | None = None,
               priorities: int | None = None) -> str:
    lines = [f"[queues.{name}]", 'layout = "reliable-list"']
    if tag:
        lines.append(f'tag = "{tag}"')
    if shards:
        lines.append(f"shards = {shards}")
    if priorities:
        lines.append(f"priorities = {priorities}")
    return "\n".join(lines) + "\n"


def assert_matches_truth(entry: dict, truth) -> None:
    """Every ground-truth field, one by one, plus the two derived ages."""
    exp = truth.expected
    now = entry["now_ms"]
    assert now >= truth.now_ms  # the status is read after the load
    mismatches = {}
    for name in EXPECTED_FIELDS:
        if name == "oldest_overdue_due_ms":
            continue
        if entry[name] != exp[name]:
            mismatches[name] = (entry[name], exp[name])
    overdue = exp["oldest_overdue_due_ms"]
    want_overdue_age = None if overdue is None else now - overdue
    if entry["scheduled_overdue_max_age_ms"] != want_overdue_age:
        mismatches["scheduled_overdue_max_age_ms"] = (entry["scheduled_overdue_max_age_ms"], want_overdue_age)
    since = exp["oldest_ready_since_ms"]
    want_ready_age = None if since is None else now - since
    if entry["oldest_ready_age_ms"] != want_ready_age:
        mismatches["oldest_ready_age_ms"] = (entry["oldest_ready_age_ms"], want_ready_age)
    assert not mismatches, f"status vs ground truth (got, expected): {mismatches}"
    assert entry["shards"] == len(truth.tags)
    # next_deadline_ms is not in the ground truth: check it against the margins
    # the scenarios keep (in-flight deadlines >= now + 1 h).
    if exp["processing"] > exp["stuck"]:
        assert entry["next_deadline_ms"] is not None and entry["next_deadline_ms"] > now
    else:
        assert entry["next_deadline_ms"] is None


@pytest.mark.parametrize("shape,shards,priorities", SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_status_json_matches_ground_truth_with_catalogue(
        capsys, tmp_path, redis_client, redis_url, scenario, shape, shards, priorities):
    truth = load_scenario(redis_client, scenario, queue="email", shards=shards, priorities=priorities,
                          size=SIZE, seed=11, now_ms=wall_ms())
    cfg = write_config(tmp_path, queue_toml("email", shards=shards, priorities=priorities))
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["catalogue"] == "config"
    assert "discovered" not in err
    [entry] = doc["queues"]
    assert entry["queue"] == "email" and entry["layout"] == "reliable-list"
    assert_matches_truth(entry, truth)


@pytest.mark.parametrize("shape,shards,priorities", SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_status_json_matches_ground_truth_by_discovery(
        capsys, redis_client, redis_url, scenario, shape, shards, priorities):
    truth = load_scenario(redis_client, scenario, queue="email", shards=shards, priorities=priorities,
                          size=SIZE, seed=12, now_ms=wall_ms())
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    assert "no queue catalogue: discovered 1 reliable-list queue(s)" in err
    doc = json.loads(out)
    assert doc["catalogue"] == "discovered"
    [entry] = doc["queues"]
    assert entry["queue"] == "email"
    assert_matches_truth(entry, truth)


def test_status_with_malformed_envelopes_matches_truth(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "dlq-spike", size=SIZE, seed=5, malformed=24, now_ms=wall_ms())
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    assert_matches_truth(json.loads(out)["queues"][0], truth)


def test_several_queues_in_the_order_asked(capsys, tmp_path, redis_client, redis_url):
    now = wall_ms()
    t_email = load_scenario(redis_client, "healthy", queue="email", size=200, seed=1, now_ms=now)
    t_hooks = load_scenario(redis_client, "stuck-workers", queue="webhooks", shards=4, size=200, seed=2,
                            now_ms=now)
    # the catalogue name differs from the hash tag
    cfg = write_config(tmp_path, queue_toml("mail", tag="email") + queue_toml("hooks", tag="webhooks", shards=4))
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "status", "--json", "hooks", "mail")
    assert code == 0, err
    entries = json.loads(out)["queues"]
    assert [e["queue"] for e in entries] == ["hooks", "mail"]
    assert entries[0]["now_ms"] == entries[1]["now_ms"]  # one instant for the whole document
    assert_matches_truth(entries[0], t_hooks)
    assert_matches_truth(entries[1], t_email)


def test_sharded_queue_sums_its_shards(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "dlq-spike", shards=4, size=SIZE, seed=3, now_ms=wall_ms())
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    [entry] = json.loads(out)["queues"]
    assert entry["shards"] == 4
    assert len(truth.counts_by_tag) == 4
    for state in ("ready", "scheduled", "processing", "dead", "suppressed"):
        per_shard = [truth.counts_by_tag[t].get(state, 0) for t in shard_tags("email", 4)]
        assert sum(per_shard) == entry[state], state
    # every shard holds part of the queue, none all of it
    dead = [truth.counts_by_tag[t]["dead"] for t in shard_tags("email", 4)]
    assert all(0 < n < entry["dead"] for n in dead)
    raw = sum(redis_client.llen(ReliableListKeys(t).dead) for t in shard_tags("email", 4))
    assert raw == entry["dead"]


def test_empty_catalogue_queue_is_all_zeros(capsys, tmp_path, redis_url):
    cfg = write_config(tmp_path, queue_toml("idle") + queue_toml("wide", shards=3, priorities=2))
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "status", "--json")
    assert code == 0, err
    entries = json.loads(out)["queues"]
    assert [e["queue"] for e in entries] == ["idle", "wide"]
    for e in entries:
        for name in ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed"):
            assert e[name] == 0, name
        for name in ("oldest_ready_age_ms", "oldest_ready_since_ms", "scheduled_overdue_max_age_ms",
                     "next_due_ms", "next_deadline_ms"):
            assert e[name] is None, name
        assert e["warnings"] == [] and e["errors"] == []
    assert entries[0]["ready_by_priority"] == {}
    assert entries[1]["ready_by_priority"] == {"p0": 0, "p1": 0}
    assert entries[1]["shards"] == 3


def test_empty_keyspace_without_catalogue(capsys, redis_url):
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    assert json.loads(out)["queues"] == []
    assert "discovered 0 reliable-list queue(s)" in err


def test_oldest_ready_uses_the_latest_ready_since_field(capsys, redis_client, redis_url):
    """A retried job became ready when it was due, a redriven one when redriven."""
    now = wall_ms()
    k = ReliableListKeys("email")
    envs = {
        "old-but-retried": {"jobId": "old-but-retried", "jobType": "t", "createdAtEpochMs": now - 3_600_000,
                            "nextAttemptAtEpochMs": now - 60_000, "attempt": 1},
        "redriven": {"jobId": "redriven", "jobType": "t", "createdAtEpochMs": now - 7_200_000,
                     "redrivenAtEpochMs": now - 5_000},
    }
    for job_id, env in envs.items():
        redis_client.set(k.job(job_id), orjson.dumps(env))
    redis_client.lpush(k.ready, "old-but-retried", "redriven")  # old-but-retried at the claim end
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    entry = json.loads(out)["queues"][0]
    assert entry["oldest_ready_since_ms"] == now - 60_000
    assert entry["oldest_ready_age_ms"] == entry["now_ms"] - (now - 60_000)
    redis_client.rpop(k.ready)  # now the redriven job is at the claim end
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert json.loads(out)["queues"][0]["oldest_ready_since_ms"] == now - 5_000


def test_malformed_claim_end_is_a_warning(capsys, redis_client, redis_url):
    k = ReliableListKeys("email")
    redis_client.set(k.job("bad"), b'{"jobId": "bad", "jobType":')
    redis_client.lpush(k.ready, "bad")
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    entry = json.loads(out)["queues"][0]
    assert entry["ready"] == 1
    assert entry["oldest_ready_since_ms"] is None and entry["oldest_ready_age_ms"] is None
    assert len(entry["warnings"]) == 1 and "bad JSON" in entry["warnings"][0]
    assert "warning: queue email:" in err and "bad JSON" in err
    assert "Traceback" not in err


# -- the JSON contract -----------------------------------------------------------


def _readme_fields() -> dict[str, str]:
    """``field -> type`` from README's "status --json contract" table."""
    text = README.read_text()
    section = text.split("## The `status --json` contract", 1)[1].split("\n## ", 1)[0]
    fields: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            fields[name] = cells[1]
    return fields


def _check_type(value, typ: str) -> bool:
    nullable = typ.endswith(" or null")
    base = typ.removesuffix(" or null")
    if value is None:
        return nullable
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "string":
        return isinstance(value, str)
    if base == "bool":
        return isinstance(value, bool)
    if base == "object":
        return isinstance(value, dict)
    if base == "list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    raise AssertionError(f"README type {typ!r} not understood by this test")


def test_readme_table_is_what_the_test_expects():
    fields = _readme_fields()
    assert len(fields) >= 19
    for name in ("queue", "layout", "ready", "scheduled", "scheduled_overdue", "processing", "stuck",
                 "dead", "suppressed", "oldest_ready_age_ms"):
        assert name in fields


@pytest.mark.parametrize("loaded", [True, False], ids=["loaded", "empty"])
def test_status_json_contract(capsys, tmp_path, redis_client, redis_url, loaded):
    if loaded:
        load_scenario(redis_client, "scheduler-lag", priorities=2, size=200, seed=4, now_ms=wall_ms())
    cfg = write_config(tmp_path, queue_toml("email", priorities=2))
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"catalogue", "server", "queues"}
    assert doc["server"] == redis_url
    assert isinstance(doc["queues"], list) and len(doc["queues"]) == 1
    entry = doc["queues"][0]
    for name in ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed"):
        assert type(entry[name]) is int, name
    if loaded:
        assert type(entry["oldest_ready_age_ms"]) is int and entry["ready"] > 0
        assert entry["scheduled_overdue"] > 0 and type(entry["scheduled_overdue_max_age_ms"]) is int
    else:
        assert entry["oldest_ready_age_ms"] is None
    for name, typ in _readme_fields().items():
        assert name in entry, f"README documents {name!r} but status --json lacks it"
        assert _check_type(entry[name], typ), f"{name}={entry[name]!r} is not {typ}"
    # the README example's keys exist too (fields are only ever added)
    example = re.search(r"```json\n(.*?)```", README.read_text().split("## The `status --json` contract")[1],
                        re.S).group(1)
    example_doc = json.loads(example)
    assert set(example_doc) <= set(doc)
    assert set(example_doc["queues"][0]) <= set(entry)


def test_status_table_output(capsys, redis_client, redis_url):
    truth = load_scenario(redis_client, "stuck-workers", shards=4, size=SIZE, seed=9, now_ms=wall_ms())
    code, out, err = cli(capsys, "--url", redis_url, "status")
    assert code == 0, err
    assert "email" in out and "x4" in out
    header = next(line for line in out.splitlines() if "queue" in line and "ready" in line)
    for col in ("ready", "oldest ready", "scheduled", "overdue", "processing", "stuck", "dead", "suppressed"):
        assert col in header
    row = next(line for line in out.splitlines() if "email" in line)
    for name in ("ready", "processing", "stuck", "dead"):
        assert f"{truth.expected[name]:,}" in row, name
    assert "discovered" in err and "{" not in out  # a table, not JSON


def test_status_is_two_round_trips_whatever_the_depth(redis_client, redis_url, monkeypatch):
    """README: one refresh costs two pipelined round trips per queue."""
    import redis.client

    from jobctl.session import Session

    load_scenario(redis_client, "dlq-spike", shards=4, priorities=3, size=SIZE, seed=2, now_ms=wall_ms())
    session = Session(url=redis_url)
    layout = session.layout("email")
    calls = {"pipeline": 0, "command": 0}
    real_execute = redis.client.Pipeline.execute
    real_command = redis.Redis.execute_command

    def counting_execute(self, *a, **kw):
        calls["pipeline"] += 1
        return real_execute(self, *a, **kw)

    def counting_command(self, *a, **kw):
        calls["command"] += 1
        return real_command(self, *a, **kw)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counting_execute)
    monkeypatch.setattr(redis.Redis, "execute_command", counting_command)
    layout.status()
    session.close()
    assert calls == {"pipeline": 2, "command": 0}


# -- --watch -----------------------------------------------------------------------


def _json_docs(text: str) -> list[dict]:
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)


def test_status_watch_json_until_sigint(redis_client, redis_url):
    load_scenario(redis_client, "healthy", size=200, seed=1, now_ms=wall_ms())
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, "-m", "jobctl.cli.main", "--url", redis_url, "status",
                             "--watch", "0.2", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read1(65536), b"")),
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while b"".join(chunks).count(b'"catalogue"') < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # wait for three refreshes (0.2 s apart), then Ctrl-C
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        reader.join(timeout=10)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err
    docs = _json_docs(b"".join(chunks).decode())
    assert len(docs) >= 3
    assert all(d["queues"][0]["queue"] == "email" for d in docs)
    stamps = [d["queues"][0]["now_ms"] for d in docs]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
