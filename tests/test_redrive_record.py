"""jobctl's redrive record is kept for its retention and then dropped
(jobctl/ops/redrive_record.py; docs/layouts.md "Where a redrive is
recorded"): one hash per queue shard and UTC day, read over the last
RETENTION_DAYS days, UNLINKed by the next walk past that, and set to expire
as a backstop."""

from __future__ import annotations

import json

import orjson

from jobctl.keys import JsonListKeys, ReliableListKeys
from jobctl.ops.redrive_record import (DAY_MS, EXPIRE_AFTER_MS, RETENTION_DAYS, UNLINK_DAYS, lookup, read_keys,
                                       record_key, stale_keys)
from test_operations import (  # noqa: F401 - fixtures
    cfg, ids, run, simple_dead, wall_ms,
)

K = ReliableListKeys("email")


def test_keys_are_utc_days_newest_first():
    now = 1_795_000_000_000  # 2026-11-18T...Z
    assert record_key(K, now) == "queue:{email}:jobctl:redriven:2026-11-18"
    days = read_keys(K, now)
    assert len(days) == RETENTION_DAYS + 1 and days[0] == record_key(K, now)
    assert days[-1] == record_key(K, now - RETENTION_DAYS * DAY_MS)
    stale = stale_keys(K, now)
    assert len(stale) == UNLINK_DAYS and not set(stale) & set(days)
    assert stale[0] == record_key(K, now - (RETENTION_DAYS + 1) * DAY_MS)
    assert JsonListKeys("jobs").redriven("2026-11-18") == "jobs:jobctl:redriven:2026-11-18"


def test_a_redrive_writes_todays_record_with_its_expiry(redis_client, run):
    jobs = simple_dead(redis_client, "email", 10)
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    key = record_key(K, wall_ms())
    recs = redis_client.hgetall(key)
    assert {k.decode() for k in recs} == set(jobs)
    assert {orjson.loads(v)[0] for v in recs.values()} == {json.loads(out)["operation_id"]}
    assert EXPIRE_AFTER_MS - 600_000 < redis_client.pttl(key) <= EXPIRE_AFTER_MS


def test_older_days_count_and_stale_days_are_unlinked(redis_client, run):
    [job_id] = simple_dead(redis_client, "email", 1)
    now = wall_ms()
    kept = record_key(K, now - 3 * DAY_MS)          # within the retention: read and summed
    stale = record_key(K, now - (RETENTION_DAYS + 2) * DAY_MS)  # past it: the next walk unlinks it
    oldest = record_key(K, now - (RETENTION_DAYS + 1 + UNLINK_DAYS) * DAY_MS)  # past the unlink days
    redis_client.hset(kept, job_id, orjson.dumps(["op-old", now - 3 * DAY_MS, 2]))
    redis_client.hset(stale, mapping={job_id: orjson.dumps(["op-stale", now - 9 * DAY_MS, 5]), "other": "x"})
    redis_client.hset(oldest, "other", "x")
    assert lookup(redis_client, K, job_id, now) == {"operation": "op-old", "at_ms": now - 3 * DAY_MS, "count": 2}

    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    op = json.loads(out)["operation_id"]
    rec = lookup(redis_client, K, job_id, wall_ms())
    assert rec["operation"] == op and rec["count"] == 3  # today's 1 + 2 three days ago; the stale 5 not read
    assert not redis_client.exists(stale)               # unlinked by the walk
    assert redis_client.exists(kept) and redis_client.exists(oldest)  # kept; left to its own expiry

    code, out, err = run("inspect", "email", job_id, "--json")
    assert code == 0, err
    assert json.loads(out)["meta"]["redriven"] == rec


def test_a_record_of_an_earlier_day_still_sets_the_ready_age(redis_client, run):
    """A job redriven two days ago has been ready since then, not since its
    envelope's timestamps (status's oldest ready age)."""
    [job_id] = simple_dead(redis_client, "email", 1, now=wall_ms() - 5 * DAY_MS)  # failed 5 days ago
    assert run("redrive", "email", "--yes")[0] == 0
    now = wall_ms()
    redis_client.delete(*read_keys(K, now))
    at = now - 2 * DAY_MS
    redis_client.hset(record_key(K, at), job_id, orjson.dumps(["op-x", at, 1]))
    code, out, err = run("status", "email", "--json")
    assert code == 0, err
    [entry] = [q for q in json.loads(out)["queues"] if q["queue"] == "email"]
    assert entry["oldest_ready_since_ms"] == at


def test_the_undated_record_of_earlier_versions_joins_the_retention(redis_client, run):
    """The one hash jobctl kept for all time before the record was kept by
    day becomes today's: read, and counted on, for the retention, then
    unlinked like any stale day."""
    [job_id] = simple_dead(redis_client, "email", 1)
    now = wall_ms()
    redis_client.hset(K.redriven_undated, mapping={job_id: orjson.dumps(["op-before", now - DAY_MS, 4]),
                                                   "older-job": orjson.dumps(["op-before", now - DAY_MS, 1])})
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    today = record_key(K, wall_ms())
    assert not redis_client.exists(K.redriven_undated)
    assert orjson.loads(redis_client.hget(today, "older-job"))[0] == "op-before"
    assert EXPIRE_AFTER_MS - 600_000 < redis_client.pttl(today) <= EXPIRE_AFTER_MS
    rec = lookup(redis_client, K, job_id, wall_ms())
    assert rec["operation"] == json.loads(out)["operation_id"] and rec["count"] == 5  # the 4 before + this one
    assert today in stale_keys(K, wall_ms() + (RETENTION_DAYS + 1) * DAY_MS)


def test_an_undated_record_still_written_by_an_earlier_jobctl_is_left(redis_client, run):
    """Today's hash exists (this jobctl ran today) and an earlier jobctl
    wrote the undated one since: nothing of it is lost, a later day's walk
    moves it."""
    jobs = simple_dead(redis_client, "email", 2)
    assert run("redrive", "email", "--ids", jobs[0], "--yes")[0] == 0
    redis_client.hset(K.redriven_undated, "by-old-jobctl", orjson.dumps(["op-old", wall_ms(), 1]))
    assert run("redrive", "email", "--ids", jobs[1], "--yes")[0] == 0
    assert redis_client.hget(K.redriven_undated, "by-old-jobctl") is not None
    assert {k.decode() for k in redis_client.hkeys(record_key(K, wall_ms()))} == set(jobs)


def test_inspect_shows_the_record_in_words_cli_and_tui(redis_client, run):
    """`jobctl inspect` (text) and the TUI's job inspector say how often and
    by which operation a job was redriven, from jobctl's record."""
    from rich.console import Console

    from jobctl.config import QueueConfig
    from jobctl.layouts.reliable_list.layout import ReliableList
    from jobctl_tui.inspector import facts_table

    [job_id] = simple_dead(redis_client, "email", 1)
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    op = json.loads(out)["operation_id"]
    code, out, err = run("inspect", "email", job_id)
    assert code == 0, err
    assert f"1 time(s), last by {op} at " in " ".join(out.split())

    record = ReliableList(redis_client, QueueConfig("email")).inspect(job_id)
    console = Console(record=True, width=200)
    console.print(facts_table(record, wall_ms()))
    text = console.export_text()
    assert "redriven" in text and f"1 time(s), last by {op} at " in text
