"""Jobs a killed operation left in jobctl's hold lists are never hidden.

A window walk sets aside, in jobctl's hold list of the shard it walks, the
dead jobs it pops and does not move, and puts them back when that shard's
walk ends.  A kill -9 just before that leaves them in the hold.  Then:

* the same command run again gives back every such hold, on every shard,
  before it plans (not only on the shards where it still has jobs to move);
* ``check`` reports each jobctl-owned key holding jobs with no live
  operation (exit 7) and ``check --repair`` gives them back;
* ``status`` says how many dead jobs are held so.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from jobctl.keys import ReliableListKeys, shard_tags
from helpers import config_fixtures, queues_toml
from jobctl_fixtures.ids import shard_index
from test_operations import dead_letter_jobs

SHARDS = 4
cfg, run = config_fixtures(queues_toml(email={"layout": "reliable-list", "shards": SHARDS}))

#: a child that runs the CLI and dies by SIGKILL at the moment the walk would give its holds back
KILLED_AT_GIVE_BACK = """
import os, signal, sys
from jobctl.ops.walk import driver
def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)
driver.give_back = die
from jobctl.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _shard_keys():
    return [ReliableListKeys(tag) for tag in shard_tags("email", SHARDS)]


def _held(client) -> int:
    return sum(client.llen(k.hold) for k in _shard_keys())


def _dead(client) -> list[list[bytes]]:
    return [client.lrange(k.dead, 0, -1) for k in _shard_keys()]


@pytest.fixture
def crashed(redis_client, redis_url, cfg):
    """400 dead jobs over 4 shards; a filtered redrive of half of them
    killed (SIGKILL) after its walk, before it gave its holds back.
    Returns the dead lists expected once every hold is back (per shard:
    the HTTP_400 jobs in their order) and the number of held jobs."""
    specs = [(f"job_{i:04d}", "webhook.deliver", "tenant_1", ("HTTP_503", "HTTP_400")[i % 2]) for i in range(400)]
    for n, tag in enumerate(shard_tags("email", SHARDS)):
        dead_letter_jobs(redis_client, tag, [s for s in specs if shard_index(s[0], SHARDS) == n])
    before = _dead(redis_client)
    argv = ["--url", redis_url, "--config", cfg, "redrive", "email", "--filter", "error = HTTP_503", "--yes"]
    child = subprocess.run([sys.executable, "-c", KILLED_AT_GIVE_BACK, *argv], capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    held = _held(redis_client)
    assert held > 0, "the kill left the non-matching jobs of the shard it was walking in its hold"
    expected = [[i for i in ids if int(i.rsplit(b"_", 1)[1]) % 2] for ids in before]  # HTTP_400: odd numbers
    return expected, held, before


def test_the_rerun_gives_back_every_hold(redis_client, run, crashed):
    expected, held, _ = crashed
    code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes")
    assert code == 0, (out, err)
    assert _held(redis_client) == 0, "no job stays in a jobctl-owned key after exit 0"
    assert _dead(redis_client) == expected, "every non-matching job is back in its dead list, in order"
    assert "gave back" in err and f"{held}" in err, err


def test_a_dry_run_says_so_and_writes_nothing(redis_client, run, crashed):
    _, held, _ = crashed
    code, out, err = run("redrive", "email", "--dry-run")
    assert code == 0, (out, err)
    assert _held(redis_client) == held
    assert f"{held}" in err and "hold lists" in err, err


def test_check_reports_and_repairs_an_orphaned_hold(redis_client, run, crashed):
    code, out, err = run("check", "email", "--json")
    assert code == 7, (out, err)
    findings = [f for f in json.loads(out)["queues"][0]["problems"] if f["kind"] == "orphaned_hold"]
    expected, held, _ = crashed
    assert len(findings) == sum(1 for k in _shard_keys() if redis_client.llen(k.hold)), out
    assert sum(int(f["detail"].split()[0].replace(",", "")) for f in findings) == held
    code, out, err = run("check", "email", "--repair", "--yes")
    assert code == 0, (out, err)
    assert _held(redis_client) == 0
    moved = {x for k in _shard_keys() for x in redis_client.lrange(k.ready, 0, -1)}
    assert _dead(redis_client) == [[i for i in ids if i not in moved] for ids in crashed[2]], "back in order"
    code, out, err = run("check", "email")
    assert code == 0, (out, err)


def test_status_counts_held_jobs_where_they_are(redis_client, run, crashed):
    code, out, err = run("status", "email", "--json")
    assert code == 0, (out, err)
    _, held, _ = crashed
    doc = json.loads(out)
    st = doc["queues"][0] if isinstance(doc, dict) else doc[0]
    moved = sum(redis_client.llen(k.ready) for k in _shard_keys())
    assert st["dead"] == 400 - moved, "held jobs are still counted as dead"
    assert st.get("held") == held, json.dumps(st)[:2000]
    assert any("hold lists" in w and f"{held}" in w for w in st["warnings"]), st["warnings"]


def test_the_rerun_gives_back_every_hold_while_workers_run(redis_client, redis_url, run, crashed):
    """The same, with a live producer and workers dead-lettering new jobs at
    the dead lists' heads while the rerun gives the holds back."""
    from jobctl_fixtures.live import LivePool
    from test_operations import assert_consistent

    expected, held, _ = crashed
    with LivePool(redis_url, queue="email", shards=SHARDS, scenario="dlq-spike", rate=300, workers=2,
                  seed=4) as pool:
        code, out, err = run("redrive", "email", "--filter", "error = HTTP_503", "--yes", "--rate", "400")
        assert code == 0, (out, err)
    assert pool.last_error is None and pool.counters["claimed"] > 0
    assert _held(redis_client) == 0, "no job stays in a jobctl-owned key after exit 0"
    for ids, want in zip(_dead(redis_client), expected):  # the held jobs back at the tail, in order
        assert ids[len(ids) - len(want):] == want
    assert_consistent(redis_client, shard_tags("email", SHARDS))
