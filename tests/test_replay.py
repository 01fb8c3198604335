"""``jobctl replay`` on the stream-group layout (``jobctl/layouts/
stream_group_replay.py``, ``jobctl/lua/sg_replay.lua``): acknowledged
history re-added once, with ``replayOf``; pending and undelivered entries
left alone."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from jobctl.keys import StreamGroupKeys
from helpers import cli_runner, queues_toml, write_config

K = StreamGroupKeys("ev")
GROUP = "workers"


@pytest.fixture
def run(redis_url, tmp_path: Path, capsys):
    toml = queues_toml(ev={"layout": "stream-group", "tag": "ev"}, email={"layout": "reliable-list"})
    return cli_runner(capsys, redis_url, write_config(tmp_path, toml))


def history(client, n: int, acked: int, pending: int) -> list[str]:
    """``n`` entries carrying their job (jobId, jobType, payload); the first
    ``acked`` delivered and acknowledged, the next ``pending`` delivered only."""
    client.xgroup_create(K.stream, GROUP, id="0", mkstream=True)
    ids = []
    for i in range(n):
        tenant = "t1" if i % 2 else "t2"
        payload = orjson.dumps({"tenantId": tenant, "n": i}).decode()
        ids.append(client.xadd(K.stream, {"jobId": f"e{i:03d}", "jobType": "report.render", "tenantId": tenant,
                                          "payload": payload}, id=f"{1_700_000_000_000 + i}-0").decode())
    got = client.xreadgroup(GROUP, "w1", {K.stream: ">"}, count=acked + pending)
    delivered = [e[0].decode() for e in got[0][1]]
    client.xack(K.stream, GROUP, *delivered[:acked])
    return ids


def replays(client) -> list[dict]:
    return [{k.decode(): v.decode() for k, v in f.items()} for _, f in client.xrange(K.stream)
            if b"replayOf" in f]


def test_replay_twice_replays_once(redis_client, run):
    ids = history(redis_client, 30, acked=20, pending=5)
    code, out, err = run("replay", "ev", "--from", ids[4], "--to", ids[27], "--filter", "tenant = t1",
                         "--yes", "--json", "--batch", "3")
    assert code == 0, err
    doc = json.loads(out)
    # acknowledged = entries 0..19; in range 4..19; tenant t1 = odd ones
    want = [ids[i] for i in range(4, 20) if i % 2]
    assert doc["moved"] == len(want)
    got = replays(redis_client)
    assert [r["replayOf"] for r in got] == want
    assert all(r["jobId"] == f"e{int(r['replayOf'].split('-')[0]) - 1_700_000_000_000:03d}" for r in got)
    assert redis_client.xlen(K.stream) == 30 + len(want)
    code, out, err = run("replay", "ev", "--from", ids[4], "--to", ids[27], "--filter", "tenant = t1",
                         "--yes", "--json")
    assert code in (0, 8), err
    doc = json.loads(out)
    assert doc["moved"] == 0 and doc["skipped_reasons"] == {"replayed": len(want)}
    assert len(replays(redis_client)) == len(want)  # replayed once
    entries = [json.loads(f[b"entry"]) for _, f in redis_client.xrange(K.journal)]
    assert [e["operation"] for e in entries] == ["replay", "replay"]


def test_dry_run_changes_nothing_and_bad_input(redis_client, run):
    ids = history(redis_client, 6, acked=6, pending=0)
    before = redis_client.xrange(K.stream)
    code, out, err = run("replay", "ev", "--from", "0", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["plan"]["planned"] == 6
    assert redis_client.xrange(K.stream) == before and not redis_client.exists(K.replayed)
    for args in (("replay", "ev", "--from", "yesterday-ish"), ("replay", "email", "--from", "0"),
                 ("replay", "ev")):
        code, out, err = run(*args, "--yes")
        assert code == 2 and out == "" and "Traceback" not in err, (args, err)
    assert redis_client.xrange(K.stream) == before
    assert ids
