"""The reader, operator and exporter ACL lines of docs/acl.md on a Redis
Cluster (3 primaries + 3 replicas, the users created on every node, as
the page says): each role's commands succeed, a command outside the role
is refused with exit 4 and one line naming the key or command, and a
refused operation changes nothing."""

from __future__ import annotations

import json

import pytest

from helpers import cli_runner, queues_toml, wall_ms, write_config
from jobctl_fixtures.scenarios import load_scenario
from test_acl_roles import acl_lines, password, refused


@pytest.fixture
def as_role(tmp_path, capsys, cc, cluster_url):
    """``as_role(role, *drop)`` -> ``run(*args)`` as that role's user, created
    on every node from its line less the rules ``drop``; queues ``email``
    (2 shards) and ``other``."""
    now = wall_ms()
    load_scenario(cc, "dlq-spike", queue="email", shards=2, size=80, seed=7, now_ms=now)
    load_scenario(cc, "dlq-spike", queue="other", size=30, seed=8, now_ms=now)
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 2},
                                             other={"layout": "reliable-list"}))
    lines, made = acl_lines(), []
    nodes = [cc.get_redis_connection(n) for n in cc.get_nodes()]

    def make(role: str, *drop: str):
        rules = [r for r in lines[role] if r not in drop]
        for node in nodes:
            node.execute_command("ACL", "SETUSER", f"jobctl-{role}", *rules)
        made.append(f"jobctl-{role}")
        scheme, rest = cluster_url.split("://", 1)
        return cli_runner(capsys, f"{scheme}://jobctl-{role}:{password(rules)}@{rest}", cfg)
    yield make
    for user in made:
        for node in nodes:
            node.execute_command("ACL", "DELUSER", user)


def _dead(cc) -> int:
    return cc.llen("queue:{email:00}:dead") + cc.llen("queue:{email:01}:dead")


def test_reader_on_a_cluster(cc, as_role):
    run = as_role("reader")
    dead_id = cc.lindex("queue:{email:00}:dead", 0).decode()
    for argv in (("status", "email"), ("ls", "email", "--state", "dead"), ("inspect", "email", dead_id),
                 ("attempts", "email"), ("check", "email"), ("journal", "email"),
                 ("redrive", "email", "--dry-run", "--yes")):
        code, out, err = run(*argv)
        assert code == 0, (argv, err)
    assert refused(cc, run, "redrive", "email", "--yes") == "run XTRIM"
    assert refused(cc, run, "status", "other").startswith("read queue:{other}:")
    assert refused(cc, run, "inspect", "other", "job_x") == "read job:{other}:job_x"


def test_operator_on_a_cluster(cc, as_role, tmp_path):
    run = as_role("operator")
    assert _dead(cc) > 5
    for argv in (("status", "email"), ("redrive", "email", "--limit", "3", "--yes"),
                 ("suppress", "email", "--filter", 'error = "HTTP_400"', "--reason", "noise", "--yes"),
                 ("unsuppress", "email", "--yes"),
                 ("purge", "email", "--state", "dead", "--export-to", str(tmp_path / "exp"), "--yes")):
        code, out, err = run(*argv)
        assert code == 0, (argv, err)
    assert _dead(cc) == 0
    code, out, err = run("journal", "email", "--json")
    ops = [e["operation"] for e in json.loads(out)["entries"]]
    assert code == 0 and ops.count("redrive") == 1 and ops.count("purge") == 1, ops
    assert refused(cc, run, "redrive", "other", "--yes").startswith("read queue:{other}:")


def test_exporter_on_a_cluster(cc, as_role, tmp_path):
    run = as_role("exporter")
    code, out, err = run("export", "email", "--out", str(tmp_path / "dead"))
    assert code == 0, err
    assert refused(cc, run, "journal", "email") == "run XREVRANGE"
    assert refused(cc, run, "redrive", "email", "--yes").startswith("run ")


def test_without_the_slot_map_a_cluster_connection_is_refused_naming_it(cc, as_role):
    run = as_role("reader", "+cluster|slots")
    assert refused(cc, run, "status", "email") == "run CLUSTER|SLOTS"
