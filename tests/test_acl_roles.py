"""The reader, operator and exporter ACL lines of docs/acl.md, read from the
page (so it cannot drift): each role's commands succeed, a command outside
the role is refused with exit 4 and one line naming the key or command,
and a refused operation changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import cli_runner, queues_toml, wall_ms, write_config
from jobctl_fixtures.scenarios import load_scenario
from test_operations import snapshot

DOC = Path(__file__).resolve().parent.parent / "docs" / "acl.md"
#: What a refusal names: a command, or a key with the access missing.
NAMED = re.compile(r"permission denied(?: at \S+)?: this user may not (run [A-Z_|]+|read \S+|write \S+)")


def acl_lines() -> dict[str, list[str]]:
    """``{role: the ACL SETUSER words after the user name}`` of docs/acl.md."""
    roles = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"^ACL SETUSER jobctl-(\w+) (.+)$", line.strip())
        if m:
            roles[m.group(1)] = m.group(2).split()
    return roles


def password(rules: list[str]) -> str:
    return next(r[1:] for r in rules if r.startswith(">"))


@pytest.fixture
def as_role(tmp_path, capsys, redis_client, redis_url):
    """``as_role(role)`` -> ``run(*args)`` giving ``(code, out, err)`` of the
    CLI as that role's user, created from its line; queue ``email`` (2
    shards, the one the lines name) and ``other`` (not granted) loaded."""
    now = wall_ms()
    load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=80, seed=7, now_ms=now)
    load_scenario(redis_client, "dlq-spike", queue="other", size=30, seed=8, now_ms=now)
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 2},
                                             other={"layout": "reliable-list"}))
    lines, made = acl_lines(), []

    def make(role: str):
        rules = lines[role]
        redis_client.execute_command("ACL", "SETUSER", f"jobctl-{role}", *rules)
        made.append(f"jobctl-{role}")
        url = redis_url.replace("redis://", f"redis://jobctl-{role}:{password(rules)}@", 1)
        return cli_runner(capsys, url, cfg)
    yield make
    for user in made:
        redis_client.acl_deluser(user)


def refused(redis_client, run, *argv: str) -> str:
    """Run ``argv``, which the role may not: exit 4, one line naming the
    key or command, nothing changed.  Returns what the line names."""
    before = snapshot(redis_client)
    code, out, err = run(*argv)
    lines = err.strip().splitlines()
    assert code == 4 and len(lines) == 1, (argv, code, err)
    m = NAMED.search(lines[0])
    assert m, lines[0]
    assert snapshot(redis_client) == before, argv
    return m.group(1)


def test_the_page_has_the_three_roles():
    assert set(acl_lines()) == {"reader", "operator", "exporter"}


def test_reader(redis_client, as_role):
    run = as_role("reader")
    dead_id = redis_client.lindex("queue:{email:00}:dead", 0).decode()
    for argv in (("status", "email"), ("ls", "email", "--state", "dead"), ("inspect", "email", dead_id),
                 ("attempts", "email"), ("check", "email"), ("journal", "email"),
                 ("redrive", "email", "--dry-run", "--yes")):
        code, out, err = run(*argv)
        assert code == 0, (argv, err)
    assert refused(redis_client, run, "redrive", "email", "--yes") == "run XTRIM"
    assert refused(redis_client, run, "purge", "email", "--state", "dead", "--no-export", "--yes") == "run XTRIM"
    assert refused(redis_client, run, "status", "other").startswith("read queue:{other}:")
    assert refused(redis_client, run, "ls", "other", "--state", "dead") == "read queue:{other}:dead"
    assert refused(redis_client, run, "inspect", "other", "job_x") == "read job:{other}:job_x"


def test_operator(redis_client, as_role, tmp_path):
    run = as_role("operator")
    dead = redis_client.llen("queue:{email:00}:dead") + redis_client.llen("queue:{email:01}:dead")
    for argv in (("status", "email"), ("redrive", "email", "--limit", "3", "--yes"),
                 ("purge", "email", "--state", "dead", "--dry-run", "--yes"),
                 ("purge", "email", "--state", "dead", "--no-export", "--limit", "2", "--yes"),
                 ("suppress", "email", "--filter", 'error = "HTTP_400"', "--reason", "noise", "--yes"),
                 ("unsuppress", "email", "--yes"),
                 ("pause", "email", "--reason", "deploy", "--yes"), ("resume", "email", "--yes"),
                 ("purge", "email", "--state", "dead", "--export-to", str(tmp_path / "exp"), "--yes")):
        code, out, err = run(*argv)
        assert code == 0, (argv, err)
    assert redis_client.llen("queue:{email:00}:dead") + redis_client.llen("queue:{email:01}:dead") == 0
    code, out, err = run("journal", "email", "--json")
    ops = [e["operation"] for e in json.loads(out)["entries"]]
    assert code == 0 and ops.count("redrive") == 1 and ops.count("purge") == 2, ops
    assert dead > 5
    assert refused(redis_client, run, "redrive", "other", "--yes").startswith("read queue:{other}:")
    assert refused(redis_client, run, "status", "other").startswith("read queue:{other}:")


def test_exporter(redis_client, as_role, tmp_path):
    run = as_role("exporter")
    for argv in (("export", "email", "--out", str(tmp_path / "dead")),
                 ("export", "email", "--state", "ready", "--state", "scheduled", "--state", "processing",
                  "--state", "suppressed", "--format", "jsonl", "--out", str(tmp_path / "all")),
                 ("export", "email", "--filter", 'error ~ "HTTP_5*"', "--out", str(tmp_path / "http"))):
        code, out, err = run(*argv)
        assert code == 0, (argv, err)
    assert refused(redis_client, run, "journal", "email") == "run XREVRANGE"
    assert refused(redis_client, run, "status", "email").startswith("run ")
    assert refused(redis_client, run, "redrive", "email", "--yes").startswith("run ")


def test_status_watch_names_each_refused_queue_and_goes_on(as_role, monkeypatch):
    """``status --watch`` over a granted and a refused queue: every refresh
    shows the granted one and names the refused one; Ctrl-C ends it, exit 0."""
    from jobctl.cli import read_cmds

    run = as_role("reader")
    refreshes = iter(range(2))

    def sleep(_seconds):
        if next(refreshes, None) is None:
            raise KeyboardInterrupt  # Ctrl-C after the second refresh

    monkeypatch.setattr(read_cmds.time, "sleep", sleep)
    code, out, err = run("status", "email", "other", "--watch", "1", "--json")
    docs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert code == 0 and len(docs) == 3, (code, err)
    for doc in docs:
        assert [q["queue"] for q in doc["queues"]] == ["email"]
        [refusal] = doc["refused"]
        assert refusal["queue"] == "other" and NAMED.search(refusal["error"]), refusal
