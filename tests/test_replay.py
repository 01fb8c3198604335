"""``jobctl replay`` on the stream-group layout (``jobctl/layouts/
stream_group_replay.py``, ``jobctl/lua/sg_replay.lua``): acknowledged
history re-added once, with ``replayOf``; pending and undelivered entries
left alone."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import redis

from jobctl.keys import StreamGroupKeys
from jobctl.scripts import script
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
    assert redis_client.xrange(K.stream) == before and not redis_client.exists(K.replay_record)
    for args in (("replay", "ev", "--from", "yesterday-ish"), ("replay", "email", "--from", "0"),
                 ("replay", "ev")):
        code, out, err = run(*args, "--yes")
        assert code == 2 and out == "" and "Traceback" not in err, (args, err)
    assert redis_client.xrange(K.stream) == before
    assert ids


def keyspace(client) -> dict[bytes, bytes]:
    """The whole keyspace as ``{key: DUMP}``."""
    return {k: client.dump(k) for k in client.scan_iter(count=1000)}


@pytest.mark.parametrize("bounds", [
    ("--from", "99999999999999999999-0"), ("--from", "99999999999999999999"), ("--from", "0-18446744073709551616"),
    ("--from", "0", "--to", "18446744073709551616-0"), ("--from", "1900-01-01T00:00:00Z"),
    ("--from", "1700000000005-0", "--to", "1700000000002-0"), ("--from", "5-3", "--to", "5-2"),
    ("--from", "1700000000005", "--to", "1700000000004"), ("--from", "2h", "--to", "3h"),
])
def test_bad_bounds_are_refused_in_one_line(redis_client, run, bounds):
    history(redis_client, 6, acked=6, pending=0)
    before = keyspace(redis_client)
    code, out, err = run("replay", "ev", *bounds, "--yes")
    assert code == 2 and out == "" and "Traceback" not in err, (bounds, err)
    assert len(err.strip().splitlines()) == 1, err
    assert keyspace(redis_client) == before


def test_bounds_of_one_entry_and_the_largest_id_are_accepted(redis_client, run):
    ids = history(redis_client, 6, acked=6, pending=0)
    code, out, err = run("replay", "ev", "--from", ids[2], "--to", ids[2], "--yes", "--json")
    assert code == 0 and json.loads(out)["moved"] == 1, err
    code, out, err = run("replay", "ev", "--from", "18446744073709551615-18446744073709551615", "--yes")
    assert code == 0, err  # nothing that late: nothing to do


def call_replay(client, n, *ids, keys=None):
    return script(client, "sg_replay")(keys=keys or [K.stream, K.replay_record, K.replayed], args=[n, *ids])


@pytest.mark.parametrize("key", [K.stream, K.replay_record, K.replayed])
@pytest.mark.parametrize("wrong", ["string", "hash"])
def test_script_refuses_a_wrong_typed_key_before_writing(redis_client, key, wrong):
    ids = history(redis_client, 4, acked=4, pending=0)
    call_replay(redis_client, 1, ids[0])  # a record to trim, a replay entry
    redis_client.delete(key)
    if wrong == "string":
        redis_client.set(key, "x")
    else:
        redis_client.hset(key, "f", "v")
    before = keyspace(redis_client)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        call_replay(redis_client, 3, ids[1], ids[2], ids[3])
    assert keyspace(redis_client) == before


@pytest.mark.parametrize("args", [
    ("x",), (-1,), (1.5, "1-0"), (3, "{0}", "{1}"), (1, "{0}", "{1}"), (2, "{0}", "abc"), (2, "{0}", "1-"),
    (2, "{0}", "99999999999999999999-0"), (2, "{0}", "0-18446744073709551616"), (2, "{0}", "-1-0"),
    (2, "{0}", "1-0-0"), (2, "{0}", ""),
])
def test_script_refuses_bad_arguments_before_writing(redis_client, args):
    ids = history(redis_client, 4, acked=4, pending=0)
    call_replay(redis_client, 1, ids[3])
    before = keyspace(redis_client)
    argv = [a.format(*ids) if isinstance(a, str) else a for a in args]
    with pytest.raises(redis.ResponseError, match="BADARG"):
        call_replay(redis_client, *argv)
    assert keyspace(redis_client) == before


def test_script_never_replays_a_replay_and_records_each_original_once(redis_client):
    ids = history(redis_client, 4, acked=4, pending=0)
    got = call_replay(redis_client, 2, ids[0], ids[0])
    assert [c.decode() for c in got[1::2]] == ["moved", "replayed"]
    (replay_id, fields), = redis_client.xrange(K.stream, f"({ids[-1]}", "+")
    assert fields[b"replayOf"] == ids[0].encode()
    got = call_replay(redis_client, 2, replay_id.decode(), ids[0])
    assert [c.decode() for c in got[1::2]] == ["is-replay", "replayed"]
    assert redis_client.xlen(K.stream) == 5


def test_script_honours_the_set_of_earlier_versions(redis_client):
    ids = history(redis_client, 2, acked=2, pending=0)
    redis_client.sadd(K.replayed, ids[0])
    got = call_replay(redis_client, 2, ids[0], ids[1])
    assert [c.decode() for c in got[1::2]] == ["replayed", "moved"]
    assert redis_client.smembers(K.replayed) == {ids[0].encode()}  # read, never written


def test_record_is_trimmed_to_the_entries_the_stream_still_holds(redis_client):
    ids = history(redis_client, 6, acked=6, pending=0)
    call_replay(redis_client, 4, *ids[:4])
    assert redis_client.zcard(K.replay_record) == 4
    # entries 0 and 1 are gone: so are their records, from the next call on
    redis_client.xtrim(K.stream, minid=ids[2], approximate=False)
    got = call_replay(redis_client, 2, ids[0], ids[4])
    assert [c.decode() for c in got[1::2]] == ["gone", "moved"]
    assert redis_client.zcard(K.replay_record) == 3
    got = call_replay(redis_client, 2, ids[2], ids[3])
    assert [c.decode() for c in got[1::2]] == ["replayed", "replayed"]
