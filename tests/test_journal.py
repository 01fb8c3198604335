"""The audit journal (``jobctl/ops/journal.py``, ``jobctl journal``): every
applied operation appends one entry to the queue's capped Redis stream and
to the local JSONL file (``$JOBCTL_JOURNAL``), with secrets removed."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.keys import JOURNAL_STREAM_MAXLEN, ReliableListKeys
from jobctl.model import State
from jobctl.ops import walk as walk_driver
from jobctl.ops.walk import driver
from jobctl.ops.engine import run_plan
from jobctl.ops.journal import command_line, journal_path
from jobctl.ops.spec import Operation, OpSpec
from test_operations import cfg, layout, run, simple_dead, wall_ms  # noqa: F401 - fixtures
from jobctl_fixtures.scenarios import load_scenario

PASSWORD = "Sup3r-s3cret/pw:x"
ENTRY_FIELDS = {"id", "operation", "queue", "operator", "host", "command", "server", "filter", "planned",
                "moved", "skipped", "failed", "started_ms", "ended_ms"}


def stream_entries(client, queue: str = "email") -> list[dict]:
    return [orjson.loads(fields[b"entry"]) for _, fields in client.xrange(ReliableListKeys(queue).journal)]


def local_entries() -> list[dict]:
    path = Path(os.environ["JOBCTL_JOURNAL"])
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.fixture
def secret_url(redis_client, redis_url):
    """The test server's URL for an ACL user whose password is PASSWORD."""
    redis_client.acl_setuser("jobctl-ops", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"],
                             channels=["*"], commands=["+@all"])
    parts = urlsplit(redis_url)
    netloc = f"jobctl-ops:{quote(PASSWORD, safe='')}@{parts.hostname}:{parts.port}"
    try:
        yield urlunsplit(parts._replace(netloc=netloc))
    finally:
        redis_client.acl_deluser("jobctl-ops")


def test_applied_operation_is_journaled_without_secrets(redis_client, secret_url, cfg, capsys):  # noqa: F811
    simple_dead(redis_client, "email", 6)
    assert journal_path() == Path(os.environ["JOBCTL_JOURNAL"])
    argv = ["--url", secret_url, "--config", cfg, "redrive", "email", "--filter",
            f"error = HTTP_503 or tenant = '{PASSWORD}'", "--yes", "--json"]
    t0 = wall_ms()
    code = main(argv)
    out, err = capsys.readouterr()
    t1 = wall_ms()
    assert code == 0, err
    res = json.loads(out)
    [entry] = stream_entries(redis_client)
    [local] = local_entries()
    assert entry == local
    assert ENTRY_FIELDS <= set(entry)
    assert entry["id"] == res["operation_id"] and entry["operation"] == "redrive" and entry["queue"] == "email"
    assert entry["operator"] == "tester@ci" and entry["host"] == socket.gethostname()
    assert (entry["planned"], entry["moved"], entry["skipped"], entry["failed"]) == (3, 3, 0, 0)
    assert t0 <= entry["started_ms"] <= entry["ended_ms"] <= t1
    assert entry["filter"].startswith("error = HTTP_503 or tenant = ")
    assert "redrive email --filter" in entry["command"] and "--yes" in entry["command"]
    assert "jobctl-ops:***@" in entry["command"] and "jobctl-ops:***@" in entry["server"]
    assert entry["breakdown"] == [["webhook.deliver", "HTTP_503", 3]]
    # the password appears nowhere, raw or URL-quoted, in the stream or the file
    raw_stream = b"".join(f[b"entry"] for _, f in redis_client.xrange(ReliableListKeys("email").journal))
    raw_file = Path(os.environ["JOBCTL_JOURNAL"]).read_bytes()
    for secret in (PASSWORD, quote(PASSWORD, safe="")):
        assert secret.encode() not in raw_stream and secret.encode() not in raw_file
        assert secret not in err


def test_command_line_redacts_url_forms():
    line = command_line(["/usr/bin/jobctl", "--url", f"redis://u:{PASSWORD}@h:1/0", "redrive", "q",
                         f"--url=rediss://:{PASSWORD}@h:2/0", f"redis://x:{PASSWORD}@h"])
    # the password holds an unescaped "/": the URL does not parse cleanly, so everything
    # between the scheme and the last "@" is masked (issue 12)
    assert PASSWORD not in line and line.startswith("jobctl --url redis://***@h:1/0 redrive q")


def test_journal_command_lists_entries_newest_first(redis_client, run):  # noqa: F811
    simple_dead(redis_client, "email", 6)
    simple_dead(redis_client, "shq:01", 2, prefix="sh")
    _, out1, _ = run("suppress", "email", "--filter", "error = HTTP_400", "--reason", "known", "--yes", "--json")
    _, out2, _ = run("redrive", "email", "--yes", "--json")
    _, out3, _ = run("redrive", "shq", "--yes", "--json")
    first, second, third = (json.loads(o)["operation_id"] for o in (out1, out2, out3))

    code, out, err = run("journal", "email", "--json")
    assert code == 0, err
    entries = json.loads(out)["entries"]
    assert [e["id"] for e in entries] == [second, first]
    assert entries[1]["reason"] == "known" and entries[1]["operation"] == "suppress"
    code, out, err = run("journal", "--json")       # every queue of the catalogue
    assert [e["id"] for e in json.loads(out)["entries"]] == [third, second, first]
    assert json.loads(out)["entries"][0]["queue"] == "shq"
    assert redis_client.exists(ReliableListKeys("shq").journal) == 1   # the logical queue's stream
    code, out, err = run("journal", "email", "--limit", "1", "--json")
    assert [e["id"] for e in json.loads(out)["entries"]] == [second]
    code, out, err = run("journal", "email", "--local", "--json")
    assert [e["id"] for e in json.loads(out)["entries"]] == [second, first]
    code, out, err = run("journal", "email")
    assert code == 0 and first in out and second in out and "suppress" in out
    code, out, err = run("journal", "nosuch")
    assert code == 5 and "nosuch" in err


def test_dry_runs_and_no_ops_are_not_journaled(redis_client, run):  # noqa: F811
    simple_dead(redis_client, "email", 3)
    assert run("redrive", "email", "--dry-run")[0] == 0
    assert run("redrive", "email", "--filter", "tenant = nobody", "--yes")[0] == 0
    assert run("redrive", "email")[0] == 2          # refused: no --yes without a terminal
    assert redis_client.exists(ReliableListKeys("email").journal) == 0
    assert local_entries() == []


def test_interrupted_run_is_journaled(redis_client, monkeypatch):
    monkeypatch.setattr(driver, "ROUND_TRIP_POSITIONS", 40)  # 8 calls of 5 a round trip
    simple_dead(redis_client, "email", 100, codes=("HTTP_503",))
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY))
    calls = []
    res = run_plan(lay, plan, batch=5, progress=lambda d, t: calls.append(d), stop=lambda: len(calls) >= 2,
                   argv=["jobctl", "redrive", "email", "--yes"])
    assert res.interrupted
    [entry] = stream_entries(redis_client)
    # stopped between round trips: the window calls of the first one (8 of 5 jobs) and of the one
    # already in flight behind it (walk_driver.TAIL_AHEAD) all count
    moved = 5 * walk_driver.tail_depth(None, 5) * walk_driver.TAIL_AHEAD
    assert entry["interrupted"] is True and entry["moved"] == res.moved == moved and entry["planned"] == 100
    assert entry["command"] == "jobctl redrive email --yes"
    assert local_entries() == [entry]


def test_journal_stream_is_capped(redis_client, run):  # noqa: F811
    key = ReliableListKeys("email").journal
    pipe = redis_client.pipeline(transaction=False)
    for n in range(JOURNAL_STREAM_MAXLEN + 500):
        pipe.xadd(key, {"entry": orjson.dumps({"id": f"old-{n}", "ended_ms": n})})
    pipe.execute()
    simple_dead(redis_client, "email", 2)
    code, out, err = run("redrive", "email", "--yes", "--json")
    assert code == 0, err
    length = redis_client.xlen(key)
    assert JOURNAL_STREAM_MAXLEN <= length <= JOURNAL_STREAM_MAXLEN + 200   # MAXLEN ~ trims whole nodes
    newest = orjson.loads(redis_client.xrevrange(key, count=1)[0][1][b"entry"])
    assert newest["id"] == json.loads(out)["operation_id"]


def test_journal_names_every_job_a_requeue_stuck_moved(redis_client, run):  # noqa: F811
    """Issue 12 item 7: `requeue --stuck` has no ids on its command line; the
    entry gives a sample and a file with every moved id (bytes exact)."""
    truth = load_scenario(redis_client, "stuck-workers", size=200, seed=2)
    assert truth.stuck_ids
    code, out, err = run("requeue", "email", "--stuck", "--yes", "--json")
    assert code == 0, err
    entry = local_entries()[-1]
    assert entry["operation"] == "requeue" and entry["moved"] == len(truth.stuck_ids)
    assert set(entry["moved_sample"]) <= truth.stuck_ids and entry["moved_sample"]
    moved = Path(entry["moved_ids_file"]).read_bytes().decode().split()
    assert sorted(moved) == sorted(truth.stuck_ids)
    assert stream_entries(redis_client)[-1]["moved_ids_file"] == entry["moved_ids_file"]
