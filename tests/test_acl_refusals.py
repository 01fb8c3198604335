"""A write or read the ACL refuses is an error (exit 4, one line naming the
key or the command), never a warning with exit 0: a user allowed a sharded
queue's shards (``~queue:{fo:*}:*``) but not its journal
(``queue:{fo}:jobctl:journal``) redrives and purges nothing, and ``status``
over several queues shows the readable ones and names the refused one."""

from __future__ import annotations

import json

import pytest

from helpers import cli_runner, queues_toml, wall_ms, write_config
from jobctl_fixtures.scenarios import load_scenario
from test_operations import snapshot

USER, PASSWORD = "jobctl-shards-only", "shards-only"
JOURNAL = "queue:{fo}:jobctl:journal"


@pytest.fixture
def loaded(redis_client):
    """Queue ``fo`` (2 shards, dead jobs) and queue ``other``."""
    now = wall_ms()
    fo = load_scenario(redis_client, "dlq-spike", queue="fo", shards=2, size=60, seed=3, now_ms=now)
    load_scenario(redis_client, "healthy", queue="other", size=20, seed=4, now_ms=now)
    return fo


@pytest.fixture
def run(tmp_path, capsys, redis_client, redis_url, loaded):
    """``run(*args)`` -> ``(code, out, err)`` of the CLI as a user whose keys
    are ``~queue:{fo:*}:* ~job:{fo:*}:*`` (every command allowed)."""
    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["queue:{fo:*}:*", "job:{fo:*}:*"], channels=["*"])
    cfg = write_config(tmp_path, queues_toml(fo={"layout": "reliable-list", "tag": "fo", "shards": 2},
                                             other={"layout": "reliable-list"}))
    yield cli_runner(capsys, redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1), cfg)
    redis_client.acl_deluser(USER)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("argv", [("redrive", "fo", "--yes"), ("purge", "fo", "--state", "dead", "--no-export",
                                                                  "--yes")], ids=lambda a: a[0])
def test_a_refused_journal_stops_the_operation_before_any_job_moves(redis_client, run, argv):
    before = snapshot(redis_client)
    code, out, err = run(*argv)
    assert code == 4, (out, err)
    line = one_line(err)
    assert f"may not write {JOURNAL}" in line and "warning" not in line
    assert snapshot(redis_client) == before, "nothing moved, nothing journaled"


def test_the_journal_read_refused_names_the_key(run):
    code, out, err = run("journal", "fo")
    assert code == 4
    assert f"may not read {JOURNAL}" in one_line(err)


def test_status_over_several_queues_reports_each(run, loaded):
    code, out, err = run("status", "--json")
    assert code == 4
    doc = json.loads(out)
    assert [q["queue"] for q in doc["queues"]] == ["fo"]
    assert doc["queues"][0]["dead"] == loaded.expected["dead"]
    assert [r["queue"] for r in doc["refused"]] == ["other"]
    assert "may not read queue:{other}:" in doc["refused"][0]["error"]
    assert "queue other:" in one_line(err) and "may not read queue:{other}:" in err
    code, out, err = run("status")
    assert code == 4 and "fo" in out and "queue other:" in one_line(err)
    code, out, err = run("status", "fo")
    assert code == 0, err


def test_a_refused_command_is_named(redis_client, redis_url, tmp_path, capsys, loaded):
    """A user without XADD: the preflight names the command."""
    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True,
                             commands=["+@all", "-xadd", "-xtrim"], keys=["*"], channels=["*"])
    cfg = write_config(tmp_path, queues_toml(fo={"layout": "reliable-list", "tag": "fo", "shards": 2}))
    run = cli_runner(capsys, redis_url.replace("redis://", f"redis://{USER}:{PASSWORD}@", 1), cfg)
    before = snapshot(redis_client)
    code, out, err = run("redrive", "fo", "--yes")
    assert code == 4 and "may not run XTRIM" in one_line(err), err
    assert snapshot(redis_client) == before
    redis_client.acl_deluser(USER)


def test_a_journal_refused_after_the_move_is_an_error_naming_the_local_entry(redis_client, tmp_path):
    """The ACL changes between the preflight and the entry: exit 4 saying
    what moved and that the entry is only in the local file."""
    import redis

    from jobctl.errors import AccessDenied
    from jobctl.ops.journal import journal_path, write_entry

    redis_client.acl_setuser(USER, enabled=True, passwords=[f"+{PASSWORD}"], reset=True, commands=["+@all"],
                             keys=["queue:{fo:*}:*"], channels=["*"])
    kw = redis_client.connection_pool.connection_kwargs
    client = redis.Redis(host=kw["host"], port=kw["port"], username=USER, password=PASSWORD)
    try:
        with pytest.raises(AccessDenied, match="local journal") as err:
            write_entry(client, JOURNAL, {"operation": "redrive", "queue": "fo", "moved": 3})
        assert f"may not write {JOURNAL}" in str(err.value) and "redrive moved 3" in str(err.value)
        assert json.loads(journal_path().read_text().splitlines()[-1])["moved"] == 3
        assert not redis_client.exists(JOURNAL)
    finally:
        client.close()
        redis_client.acl_deluser(USER)
