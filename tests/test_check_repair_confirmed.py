"""``jobctl check --repair`` repairs exactly the findings the operator
confirmed, journals them through the core's journal
(:func:`jobctl.ops.journal.repair_entry`), and over several queues reports
every repair it made before a later queue's error (then exits with it)."""

from __future__ import annotations

import json
import sys

import click
import orjson

from jobctl.keys import ReliableListKeys
from jobctl_fixtures.scenarios import load_scenario
from helpers import config_fixtures, queues_toml, wall_ms

A = ReliableListKeys("email")
B = ReliableListKeys("billing")
cfg, run = config_fixtures(queues_toml(email={"layout": "reliable-list"}, billing={"layout": "reliable-list"}))


def _one(truth, state: str) -> str:
    return sorted(truth.ids_by_state[state])[0]


def _journal(client, keys) -> list[dict]:
    return [orjson.loads(f[b"entry"]) for _, f in client.xrange(keys.journal)]


def test_repair_applies_only_the_confirmed_findings(redis_client, run, monkeypatch):
    truth = load_scenario(redis_client, "healthy", queue="email", size=120, seed=11)
    ready = sorted(truth.ids_by_state["ready"])
    redis_client.lpush(A.ready, ready[0])                  # a duplicate: the one finding shown
    asked = []

    def confirm(text, **kw):                               # the operator says yes to what was shown...
        asked.append(text)
        redis_client.zadd(A.deadline, {ready[1]: wall_ms() + 60_000})  # ...while a new finding appears
        return True

    monkeypatch.setattr(click, "confirm", confirm)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    code, out, err = run("check", "email", "--repair", "--json")
    assert len(asked) == 1 and asked[0].startswith("queue email on redis://"), asked  # names the server
    assert asked[0].endswith(": repair 1 problem(s)?"), asked
    [q] = json.loads(out)["queues"]
    assert code == 7, err                                  # the new finding is reported, not repaired
    assert [(p["kind"], p["repaired"]) for p in q["problems"]] == [("duplicate", True), ("stray_deadline", False)]
    assert [i.decode() for i in redis_client.lrange(A.ready, 0, -1)].count(ready[0]) == 1
    assert redis_client.zscore(A.deadline, ready[1]) is not None   # never confirmed: left alone
    [entry] = _journal(redis_client, A)
    assert (entry["operation"], entry["planned"], entry["moved"], entry["skipped"]) == ("check --repair", 1, 1, 0)
    assert entry["remaining"] == 1 and [r["kind"] for r in entry["repairs"]] == ["duplicate"]
    assert entry["layout"] == "reliable-list" and "check email --repair" in entry["command"]


def test_repairs_made_are_reported_before_a_later_queues_error(redis_client, run):
    truth = load_scenario(redis_client, "healthy", queue="email", size=120, seed=11)
    dup = _one(truth, "ready")
    redis_client.lpush(A.ready, dup)
    redis_client.hset(B.ready, "x", "y")                   # billing's ready list is a hash: exit 6
    code, out, err = run("check", "email", "billing", "--repair", "--yes")
    assert code == 6, (out, err)
    assert "email: 1 problem(s) (duplicate: 1); repaired 1" in out
    assert "fixed" in out and dup in out
    assert "billing" in err and "Traceback" not in err
    [entry] = _journal(redis_client, A)
    assert entry["moved"] == 1
    code, out, err = run("check", "email", "billing", "--repair", "--yes", "--json")
    doc = json.loads(out)
    assert code == 6 and doc["ok"] is False and doc["queues"][0]["queue"] == "email" and "billing" in doc["error"]
