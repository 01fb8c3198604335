"""Reads of lists that live workers change while they are read.

Workers pop the ready list's tail and acknowledge (delete the payload)
while ``export`` and ``status`` read: a job that moves while it is read is
read once or left out as moved, never twice, never flagged as missing its
payload; the oldest ready job is always known while jobs are ready.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from jobctl.keys import ReliableListKeys
from jobctl_fixtures.live import LivePool, with_behaviour
from jobctl_fixtures.scenarios import load_scenario
from helpers import config_fixtures, queues_toml

cfg, run = config_fixtures(queues_toml(email={"layout": "reliable-list"}))

#: workers that ack at once: the payload goes right after the claim
FAST = with_behaviour("healthy", ack=1.0, retry=0.0, dead=0.0, crash=0.0, delayed=0.0, run_ms=(0, 0))


@pytest.fixture
def busy(redis_client, redis_url):
    """20,000 ready jobs and a pool of workers taking them as fast as they can."""
    load_scenario(redis_client, "healthy", queue="email", size=20_000, seed=5)
    pool = LivePool(redis_url, queue="email", behaviour=FAST, rate=200, workers=3, block_s=0.05, seed=5)
    with pool:
        yield pool
    assert pool.last_error is None, pool.last_error


def test_an_export_under_workers_reads_each_job_once(busy, redis_client, run, tmp_path):
    ready = ReliableListKeys("email").ready
    before = set(redis_client.lrange(ready, 0, -1))
    code, out, err = run("export", "email", "--state", "ready", "--out", str(tmp_path / "x"), "--format", "jsonl",
                         "--batch", "100")
    assert code == 0, (out, err)
    rows = [json.loads(line) for p in sorted((tmp_path / "x").glob("part-*.jsonl")) for line in p.open()]
    busy.stop()
    assert busy.counters["acked"] > 100, "the workers took jobs while the export read"
    stayed = {i.decode() for i in before & set(redis_client.lrange(ready, 0, -1))}
    assert stayed - {r["job_id"] for r in rows} == set(), "every job that stayed ready is exported"
    dup = [i for i, n in Counter(r["job_id"] for r in rows).items() if n > 1]
    assert dup == [], f"{len(dup)} job(s) exported twice"
    missing = [r["job_id"] for r in rows if "missing payload key" in json.dumps(r.get("problems") or r)]
    assert missing == [], f"{len(missing)} row(s) flagged missing payload key while a worker took them"


def test_status_under_workers_knows_the_oldest_ready_job(busy, run):
    for _ in range(20):
        code, out, err = run("status", "email", "--json")
        assert code == 0, err
        st = json.loads(out)["queues"][0]
        assert not [w for w in st["warnings"] if "oldest ready" in w], st["warnings"]
        if st["ready"]:
            assert st["oldest_ready_age_ms"] is not None
