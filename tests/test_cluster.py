"""jobctl on a real 3-primary Redis Cluster (plus 3 replicas), on Sentinel and
over TLS with client certificates (issue 13), every topology started once per
session from the server binary by :mod:`cluster_servers`.

The fixtures (``cluster``, ``cluster_url``, ``cc``, ``sentinel_deployment``,
``tls_server``) are in :mod:`cluster_servers`, shared through conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter

import pytest
import redis

import cluster_servers as cs
from helpers import queues_toml, wall_ms, write_config
from jobctl.cli.main import main
from jobctl.connection import Target, make_client
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl_fixtures.scenarios import load_scenario

STATUS_FIELDS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")


def run(capsys, url: str, cfg, *argv: str) -> tuple[int, object, str]:
    capsys.readouterr()
    code = main(["--url", url, *(["--config", str(cfg)] if cfg else []), *argv])
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err


def config(tmp_path, queues: dict[str, dict]) -> str:
    return write_config(tmp_path, queues_toml(**queues))


def tags_on_distinct_nodes(client, n: int, prefix: str = "q") -> list[str]:
    """``n`` single-queue tags owned by ``n`` different primaries."""
    found: dict[str, str] = {}
    i = 0
    while len(found) < n:
        tag = f"{prefix}{i}"
        found.setdefault(client.get_node_from_key("{" + tag + "}").name, tag)
        i += 1
    return list(found.values())


def all_ids(client, tags) -> Counter:
    """Every id in every state list/zset of the shards ``tags``, counted (a
    job present twice anywhere shows as 2)."""
    seen: Counter = Counter()
    for tag in tags:
        k = ReliableListKeys(tag)
        for key in (k.ready, k.processing, k.dead):
            seen.update(x.decode() for x in client.lrange(key, 0, -1))
        for key in (k.scheduled, k.suppressed):
            seen.update(x.decode() for x in client.zrange(key, 0, -1))
    return seen


def status_of(doc, queue):
    return next(q for q in doc["queues"] if q["queue"] == queue)


# -- status, discover, every operation on a cluster -----------------------------------


def test_cluster_status_equals_truth_and_discover_finds_every_queue(cc, cluster_url, tmp_path, capsys):
    now = wall_ms()
    sharded = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=3, now_ms=now)
    nodes = {cc.get_node_from_key("{" + t + "}").name for t in sharded.tags}
    assert len(nodes) == 3, "the 8 shard tags spread over the 3 primaries"
    singles = {tag: load_scenario(cc, scenario, queue=tag, size=60, seed=i, now_ms=now)
               for i, (tag, scenario) in enumerate(zip(tags_on_distinct_nodes(cc, 3),
                                                       ("stuck-workers", "scheduler-lag", "healthy")))}
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8},
                            **{t: {"layout": "reliable-list"} for t in singles}})
    code, doc, err = run(capsys, cluster_url, cfg, "status", "--json")
    assert code == 0, err
    for name, truth in {"email": sharded, **singles}.items():
        st = status_of(doc, name)
        assert {f: st[f] for f in STATUS_FIELDS} == {f: truth.expected[f] for f in STATUS_FIELDS}, name
        assert st["oldest_ready_since_ms"] == truth.expected["oldest_ready_since_ms"]
    assert "redis+cluster://" in doc["server"]
    # no config: discovery scans every primary
    code, doc, err = run(capsys, cluster_url, None, "discover", "--json")
    assert code == 0, err
    found = {q["name"] if "name" in q else q["queue"]: q for q in doc["queues"]}
    assert set(found) >= {"email", *singles}, found.keys()
    code, doc, err = run(capsys, cluster_url, None, "status", "--json")
    assert code == 0, err
    assert status_of(doc, "email")["dead"] == sharded.expected["dead"]
    assert all(status_of(doc, t)["ready"] == singles[t].expected["ready"] for t in singles)


def test_cluster_operations_conserve_every_job(cc, cluster_url, tmp_path, capsys):
    now = wall_ms()
    truth = load_scenario(cc, "dlq-spike", queue="email", shards=8, size=240, seed=5, now_ms=now)
    tags = shard_tags("email", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"email": {"layout": "reliable-list", "tag": "email", "shards": 8}})
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})

    dead = truth.expected["dead"]
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "email", "--yes", "--json", "--batch", "7")
    assert code == 0, err
    assert doc["result"]["moved"] == dead if "result" in doc else True
    code, st, err = run(capsys, cluster_url, cfg, "status", "--json")
    st = status_of(st, "email")
    assert (st["dead"], st["ready"]) == (0, truth.expected["ready"] + dead)
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})

    # the journal stream lives on the queue's node; check, metrics and inspect read every shard
    code, out, err = run(capsys, cluster_url, cfg, "journal", "email")
    assert code == 0 and "redrive" in str(out), err
    code, out, err = run(capsys, cluster_url, cfg, "check", "email")
    assert code == 0, (out, err)
    code, out, err = run(capsys, cluster_url, cfg, "metrics", "once")
    assert code == 0 and "jobctl_exporter_up 1" in out, err
    one = sorted(truth.ids_by_state["dead"])[0]
    code, out, err = run(capsys, cluster_url, cfg, "inspect", "email", one)
    assert code == 0 and one in str(out), err

    # promote every scheduled job, requeue the stuck ones (none here) -> still conserved
    code, _, err = run(capsys, cluster_url, cfg, "promote", "email", "--yes")
    assert code == 0, err
    assert status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "email")["scheduled_overdue"] == 0
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})


def test_cluster_requeue_export_purge(cc, cluster_url, tmp_path, capsys):
    now = wall_ms()
    stuck = load_scenario(cc, "stuck-workers", queue="jobs", shards=8, size=160, seed=2, now_ms=now)
    cfg = config(tmp_path, {"jobs": {"layout": "reliable-list", "tag": "jobs", "shards": 8,
                                     "visibility_timeout_ms": 30000}})
    tags = shard_tags("jobs", 8)
    every = set().union(*stuck.ids_by_state.values())
    code, _, err = run(capsys, cluster_url, cfg, "requeue", "jobs", "--stuck", "--yes", "--batch", "5")
    assert code == 0, err
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "jobs")
    assert st["stuck"] == 0 and st["ready"] == stuck.expected["ready"] + stuck.expected["stuck"]
    assert all_ids(cc, tags) == Counter({i: 1 for i in every})

    dlq = load_scenario(cc, "dlq-spike", queue="mail", shards=8, size=160, seed=4, now_ms=now)
    cfg = config(tmp_path, {"mail": {"layout": "reliable-list", "tag": "mail", "shards": 8}})
    out = tmp_path / "export"
    code, _, err = run(capsys, cluster_url, cfg, "export", "mail", "--out", str(out), "--format", "jsonl")
    assert code == 0, err
    exported = set()
    for part in out.rglob("*.jsonl"):
        exported |= {json.loads(line)["job_id"] for line in part.read_text().splitlines() if line.strip()}
    assert exported == dlq.ids_by_state["dead"]
    code, _, err = run(capsys, cluster_url, cfg, "purge", "mail", "--state", "dead", "--export-to", str(out), "--yes")
    assert code == 0, err
    remaining = all_ids(cc, shard_tags("mail", 8))
    assert set(remaining) == set().union(*dlq.ids_by_state.values()) - dlq.ids_by_state["dead"]
    assert max(remaining.values()) == 1


def test_hash_tagged_prefix_makes_an_untagged_layout_operable(cc, cluster_url, tmp_path, capsys):
    """docs/layouts.md: a json-list prefix that is a hash tag (``{jl}``) puts
    every key in one slot: no note, and operations run."""
    from jobctl.keys import JsonListKeys

    k = JsonListKeys("{jl}")
    assert len({cc.keyslot(x) for x in (k.pending, k.dead, k.processing, k.attempts, k.suppressed)}) == 1
    for n in range(5):
        cc.rpush(k.dead, json.dumps({"id": f"d{n}", "task": "charge_card"}))
    cfg = config(tmp_path, {"jl": {"layout": "json-list", "tag": "{jl}", "visibility_timeout_ms": 300000}})
    code, doc, err = run(capsys, cluster_url, cfg, "status", "--json")
    assert code == 0 and not status_of(doc, "jl")["warnings"], (err, doc)
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "jl", "--yes")
    assert code == 0, err
    assert (cc.llen(k.dead), cc.llen(k.pending)) == (0, 5)


def test_tui_core_on_a_cluster(cc, cluster_url, tmp_path):
    """The TUI's headless core (refresh, triage, jobs, inspect, journal) on a sharded queue."""
    from jobctl.dashboard import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    truth = load_scenario(cc, "dlq-spike", queue="tui", shards=8, size=160, seed=11, now_ms=wall_ms())
    cfg = config(tmp_path, {"tui": {"layout": "reliable-list", "tag": "tui", "shards": 8}})
    session = Session(config_file=cfg, url=cluster_url)
    try:
        dash = Dashboard(session)
        snap = dash.refresh()
        row = snap.row("tui")
        assert row.error is None and row.status.dead == truth.expected["dead"]
        tri = dash.triage("tui")
        assert {(g.job_type, g.error): g.count for g in tri.groups} == truth.dead_breakdown
        page = dash.jobs("tui", State.DEAD, limit=500)
        assert {j.job_id for j in page.records} == truth.ids_by_state["dead"]
        one = sorted(truth.ids_by_state["dead"])[0]
        assert dash.inspect("tui", one).job_id == one
        assert dash.journal("tui") == []
    finally:
        session.close()


def test_untagged_layout_on_a_cluster_reads_and_refuses_operations(cc, cluster_url, tmp_path, capsys):
    """json-list keys (``jobs:pending``, ``jobs:dead``...) carry no hash tag:
    its own workers' LMOVE cannot run on a cluster either, so the queue is
    written with single-key commands."""
    from jobctl.keys import JsonListKeys

    k = JsonListKeys("jobs")
    assert len({cc.keyslot(x) for x in (k.pending, k.dead, k.processing, k.attempts)}) > 1
    for n in range(4):
        cc.lpush(k.pending, json.dumps({"id": f"p{n}", "task": "send_email"}))
    for n in range(6):
        cc.rpush(k.dead, json.dumps({"id": f"d{n}", "task": "charge_card"}))
        cc.hset(k.errors, f"d{n}", "card declined")
    cfg = config(tmp_path, {"jl": {"layout": "json-list", "tag": "jobs"}})
    before = {key: cc.dump(key) for key in cc.scan_iter()}
    code, doc, err = run(capsys, cluster_url, cfg, "status", "--json")
    assert code == 0, err
    st = status_of(doc, "jl")
    assert (st["ready"], st["dead"]) == (4, 6)
    assert any("span" in w and "slots" in w for w in st["warnings"]), st["warnings"]
    for argv in (["redrive", "jl", "--yes"], ["purge", "jl", "--state", "dead", "--no-export", "--yes"],
                 ["requeue", "jl", "--ids", "p0", "--yes"]):
        code, out, err = run(capsys, cluster_url, cfg, *argv)
        assert code == 2, (argv, err)
        errors = [line for line in err.splitlines() if line and "warning:" not in line]
        assert len(errors) == 1 and "Redis Cluster" in errors[0] and "CROSSSLOT" not in err, err
    assert {key: cc.dump(key) for key in cc.scan_iter()} == before
    code, out, err = run(capsys, cluster_url, cfg, "ls", "jl", "--state", "dead")
    assert code == 0 and "d0" in out, err
    code, _, err = run(capsys, cluster_url, cfg, "export", "jl", "--out", str(tmp_path / "x"), "--format", "jsonl")
    assert code == 0, err
    code, doc, err = run(capsys, cluster_url, None, "discover", "--json")
    assert code == 0, err
    jl = [q for q in doc["queues"] if q["layout"] == "json-list"]
    assert jl and "slots" in jl[0]["cluster_note"], doc


# -- failover during a redrive, then a rerun: every job exactly once -------------------


def _fire_after_first(inner, action, fired: list[bool]):
    """``inner``'s items, ``action()`` run once (``fired``) after the first."""
    try:
        for result in inner:
            yield result
            if not fired:
                fired.append(True)
                action()
    finally:
        close = getattr(inner, "close", None)
        if close:
            close()


def _in_walk_of_primary(monkeypatch, port: int, action) -> None:
    """Run ``action()`` once, after the first batch of the walk of the
    primary on ``port`` itself: walks forked per primary run ahead of the
    caller (up to their credit), so a hook in the caller may come after
    that primary's walk already ended."""
    import jobctl.ops.walk.parallel as parallel

    original = parallel._group_results

    def group_results(group, *args, **kwargs):
        results = original(group, *args, **kwargs)
        if parallel.primary_name(group[0]).rsplit(":", 1)[1] != str(port):
            return results
        return _fire_after_first(results, action, [])

    monkeypatch.setattr(parallel, "_group_results", group_results)


def _after_first_batch(monkeypatch, action):
    """Run ``action()`` once, after the first script call (or pipelined round
    trip) of the next operation, whether the layout applies it itself or the
    window engine drives it."""
    import jobctl.ops.engine as engine
    from jobctl.layouts.reliable_list.layout import ReliableList

    fired: list[bool] = []

    def once(inner):
        return _fire_after_first(inner, action, fired)

    original_apply, original_drive = ReliableList.apply, engine.drive
    monkeypatch.setattr(ReliableList, "apply",
                        lambda self, plan, *, batch=None: once(original_apply(self, plan, batch=batch)))
    monkeypatch.setattr(engine, "drive", lambda *a, **k: once(original_drive(*a, **k)))


def _redrive_through(monkeypatch, capsys, url: str, cfg, queue: str, action, tags, every) -> None:
    """Redrive ``queue`` in batches of 5 with ``action`` run after the first
    batch: exit 0 (the client followed) or 3 (stopped between calls, one line
    saying "run again"); the same command again finishes, and every job of
    ``every`` is then on the shards ``tags`` exactly once."""
    _after_first_batch(monkeypatch, action)
    code, _, err = run(capsys, url, cfg, "redrive", queue, "--yes", "--batch", "5")
    assert code in (0, 3), err  # MOVED followed, or stopped between calls with "run again"
    if code == 3:
        assert "run the same command again" in err and err.count("\n") == 1
    monkeypatch.undo()
    code, _, err = run(capsys, url, cfg, "redrive", queue, "--yes")
    assert code == 0, err
    fresh = make_client(Target(url, "test"))
    try:
        assert all_ids(fresh, tags) == Counter({i: 1 for i in every})
    finally:
        fresh.close()


@pytest.mark.slow
def test_cluster_failover_during_redrive_then_rerun(cluster, cc, cluster_url, tmp_path, capsys, monkeypatch):
    truth = load_scenario(cc, "dlq-spike", queue="fo", shards=8, size=200, seed=8, now_ms=wall_ms())
    tags = shard_tags("fo", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"fo": {"layout": "reliable-list", "tag": "fo", "shards": 8}})
    victim = cc.get_node_from_key("{" + tags[0] + "}")

    def failover():
        primary = cc.get_redis_connection(victim)
        primary.execute_command("WAIT", 1, 5000)  # what moved so far is on the replica
        replica_port = next(n.port for n in cluster.nodes
                            if n.client().info("replication").get("master_port") == victim.port)
        replica = redis.Redis(port=replica_port)
        replica.execute_command("CLUSTER FAILOVER")
        cs.wait_until(lambda: replica.info("replication")["role"] == "master", what="replica promoted")
        cs.wait_until(lambda: primary.info("replication")["role"] == "slave", what="old primary demoted")

    _redrive_through(monkeypatch, capsys, cluster_url, cfg, "fo", failover, tags, every)
    st = status_of(run(capsys, cluster_url, cfg, "status", "--json")[1], "fo")
    assert st["dead"] == 0 and st["ready"] == truth.expected["ready"] + truth.expected["dead"]


@pytest.mark.slow
def test_cluster_node_hangs_mid_redrive_exit_3_then_rerun(cluster, cc, cluster_url, tmp_path, capsys, monkeypatch):
    """A primary stops answering between two script calls (SIGSTOP): the
    redrive stops with exit 3 and "run again"; after it answers again the
    rerun finishes; every job exactly once."""
    import signal

    truth = load_scenario(cc, "dlq-spike", queue="hang", shards=8, size=160, seed=12, now_ms=wall_ms())
    tags = shard_tags("hang", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"hang": {"layout": "reliable-list", "tag": "hang", "shards": 8}})
    port = cc.get_node_from_key("{" + tags[0] + "}").port
    proc = next(n.proc for n in cluster.nodes if n.port == port)
    _after_first_batch(monkeypatch, lambda: os.kill(proc.pid, signal.SIGSTOP))
    _in_walk_of_primary(monkeypatch, port, lambda: os.kill(proc.pid, signal.SIGSTOP))
    try:
        code, _, err = run(capsys, cluster_url, cfg, "--timeout", "1", "redrive", "hang", "--yes", "--batch", "2")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert code == 3, err
    assert "run the same command again" in err and err.count("\n") == 1, err
    monkeypatch.undo()
    cs.wait_until(lambda: redis.Redis(port=port, socket_timeout=1).ping(), what="node answers again")
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "hang", "--yes")
    assert code == 0, err
    fresh = make_client(Target(cluster_url, "test"))
    assert all_ids(fresh, tags) == Counter({i: 1 for i in every})
    fresh.close()


def _migrate_slot(cc, slot: int) -> None:
    """Move ``slot`` with its keys to another primary (IMPORTING/MIGRATING,
    MIGRATE, SETSLOT NODE on every primary): a resharding step."""
    primaries = cc.get_primaries()
    src_node = cc.nodes_manager.get_node_from_slot(slot)
    dst_node = next(n for n in primaries if n.name != src_node.name)
    src, dst = cc.get_redis_connection(src_node), cc.get_redis_connection(dst_node)
    src_id, dst_id = src.execute_command("CLUSTER MYID").decode(), dst.execute_command("CLUSTER MYID").decode()
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    while True:
        keys = src.execute_command("CLUSTER GETKEYSINSLOT", slot, 100)
        if not keys:
            break
        src.execute_command("MIGRATE", dst_node.host, dst_node.port, "", 0, 5000, "KEYS", *keys)
    for node in primaries:
        cc.get_redis_connection(node).execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


def test_resharding_during_redrive_is_followed(cc, cluster_url, tmp_path, capsys, monkeypatch):
    from jobctl.cluster import key_slot

    truth = load_scenario(cc, "dlq-spike", queue="rs", shards=8, size=160, seed=9, now_ms=wall_ms())
    tags = shard_tags("rs", 8)
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"rs": {"layout": "reliable-list", "tag": "rs", "shards": 8}})
    moved_slots = [key_slot("{" + t + "}") for t in tags[:3]]
    owners = [cc.nodes_manager.get_node_from_slot(slot).name for slot in moved_slots]
    _after_first_batch(monkeypatch, lambda: [_migrate_slot(cc, slot) for slot in moved_slots])
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "rs", "--yes", "--batch", "3")
    assert code in (0, 3), err  # MOVED followed (or a clean stop, then the rerun)
    monkeypatch.undo()
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "rs", "--yes")
    assert code == 0, err
    fresh = make_client(Target(cluster_url, "test"))
    assert all_ids(fresh, tags) == Counter({i: 1 for i in every})
    assert [fresh.nodes_manager.get_node_from_slot(slot).name for slot in moved_slots] != owners
    fresh.close()


@pytest.mark.slow
def test_sentinel_failover_during_redrive_then_rerun(sentinel_deployment, tmp_path, capsys, monkeypatch):
    url = sentinel_deployment.url
    client = make_client(Target(url, "test"))
    client.flushall()
    truth = load_scenario(client, "dlq-spike", queue="sq", size=150, seed=6, now_ms=wall_ms())
    every = set().union(*truth.ids_by_state.values())
    cfg = config(tmp_path, {"sq": {"layout": "reliable-list", "tag": "sq"}})
    sentinel = sentinel_deployment.sentinels[0].client()
    service = cs.SENTINEL_SERVICE
    old = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", service)

    def failover():
        primary = redis.Redis(host=old[0].decode(), port=int(old[1]))
        primary.execute_command("WAIT", 1, 5000)
        cs.wait_until(lambda: sentinel.execute_command("SENTINEL", "FAILOVER", service), timeout_s=30,
                      what="SENTINEL FAILOVER accepted")  # NOGOODSLAVE until the replica's INFO is fresh
        cs.wait_until(lambda: sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", service) != old,
                      timeout_s=30, what="Sentinel failover")
        cs.wait_until(lambda: primary.info("replication")["role"] == "slave", timeout_s=30,
                      what="old primary demoted")

    _redrive_through(monkeypatch, capsys, url, cfg, "sq", failover, ["sq"], every)
    assert status_of(run(capsys, url, cfg, "status", "--json")[1], "sq")["dead"] == 0
    client.close()
    sentinel.close()


# -- TLS with a CA and client certificates ---------------------------------------------


def test_tls_with_ca_and_client_certificates(tls_server, tmp_path, capsys):
    certs = tls_server.extra["certs"]
    url = tls_server.url
    flags = ["--ca-cert", str(certs["ca"]), "--client-cert", str(certs["client_cert"]),
             "--client-key", str(certs["client_key"])]
    plain = tls_server.nodes[0].client()
    plain.flushall()
    load_scenario(plain, "healthy", queue="tq", size=20, seed=1, now_ms=wall_ms())
    capsys.readouterr()
    assert main(["--url", url, *flags, "status", "--json"]) == 0
    out, err = capsys.readouterr()
    assert status_of(json.loads(out), "tq")["ready"] > 0 and "warning" not in err
    # no client certificate: the server refuses the handshake -> unreachable, one line
    assert main(["--url", url, "--ca-cert", str(certs["ca"]), "status"]) == 3
    assert capsys.readouterr().err.count("\n") == 1
    # no CA: the self-made CA is not trusted -> unreachable
    assert main(["--url", url, "--client-cert", str(certs["client_cert"]), "--client-key",
                 str(certs["client_key"]), "status"]) == 3
    capsys.readouterr()
    # verification off: works, with a warning on stderr
    assert main(["--url", url, "--tls-insecure", "--client-cert", str(certs["client_cert"]), "--client-key",
                 str(certs["client_key"]), "status"]) == 0
    assert "verification is off" in capsys.readouterr().err
    # the profile form
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f'[profiles.tls]\nurl = "redis://127.0.0.1:{url.rsplit(":", 1)[1]}"\ntls = true\n'
                   f'ca_cert = "{certs["ca"]}"\nclient_cert = "{certs["client_cert"]}"\n'
                   f'client_key = "{certs["client_key"]}"\n')
    assert main(["--config", str(cfg), "--profile", "tls", "status"]) == 0
    assert main(["--url", url, "--ca-cert", str(tmp_path / "missing.pem"), "status"]) == 2
    plain.close()


# -- URLs, profiles and errors (issue 12's URL items included) ---------------------------


def _one_line(code, err, want):
    assert code == want, err
    assert err.count("\n") == 1 and err.startswith("jobctl: error: ") and "Traceback" not in err, err


@pytest.mark.parametrize("db", ["99999999999999999999", "-1", "x1"])
def test_db_index_out_of_range_in_the_url_is_a_usage_error(redis_url, capsys, db):
    base = redis_url.rsplit("/", 1)[0]
    code = main(["--url", f"{base}/{db}", "status"])
    _one_line(code, capsys.readouterr().err, 2)


def test_db_index_beyond_the_servers_databases(redis_url, capsys):
    code = main(["--url", redis_url.rsplit("/", 1)[0] + "/4000", "status"])
    err = capsys.readouterr().err
    _one_line(code, err, 2)
    assert "db index" in err


@pytest.mark.parametrize("body, needle", [
    ("url = 5", "url must be a string"),
    ('url = "redis://h:1/0"\ncluster_nodes = ["h:1"]', "only one of"),
    ('sentinels = ["h:26379"]', "needs service"),
    ('cluster_nodes = []', "non-empty list"),
    ('url = "redis://h:1/0"\ntls_verify = "no"', "true or false"),
    ('url = "redis://h:1/0"\ndb = 99999999999', "db must be"),
    ('sentinels = ["h:1"]\nservice = "s"\ndb = -1', "db must be"),
    ('url = "redis://h:1/0"\ndb = 3', "db applies to a sentinels profile only"),
])
def test_bad_profiles_are_usage_errors(tmp_path, capsys, body, needle):
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f"[profiles.p]\n{body}\n")
    code = main(["--config", str(cfg), "--profile", "p", "status"])
    err = capsys.readouterr().err
    _one_line(code, err, 2)
    assert needle in err


def test_profile_forms_build_the_topology_url(tmp_path, monkeypatch):
    from jobctl.config import load_config
    from jobctl.connection import resolve_target

    monkeypatch.setenv("PW", "s3cr@t/pw")
    monkeypatch.setenv("SPW", "sentinel-secret")
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text('[profiles.c]\ncluster_nodes = ["10.0.0.1:7000", "10.0.0.2:7000"]\npassword_env = "PW"\n'
                   'tls = true\nusername = "ops"\n'
                   '[profiles.s]\nsentinels = ["10.0.0.5:26379"]\nservice = "jobs"\ndb = 2\n'
                   'sentinel_password_env = "SPW"\n')
    conf = load_config(str(cfg))
    c = resolve_target(conf, profile="c")
    assert c.topology.kind == "cluster" and c.topology.tls and c.topology.password == "s3cr@t/pw"
    assert c.topology.nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7000)) and c.topology.username == "ops"
    assert "s3cr" not in c.display and c.display.startswith("rediss+cluster://ops:***@10.0.0.1:7000,")
    s = resolve_target(conf, profile="s")
    assert (s.topology.kind, s.topology.service, s.topology.db) == ("sentinel", "jobs", 2)
    assert s.sentinel_password == "sentinel-secret" and "sentinel-secret" in s.secrets


@pytest.mark.parametrize("url, shown", [
    ("redis://weird:ss/w:rd#?%&=x@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
    ("redis://u:p@ss@h:1/0", "redis://***@h:1/0"),
    ("redis+cluster://u:pw@h1:1,h2:2", "redis+cluster://u:***@h1:1,h2:2"),
    ("redis+sentinel://h:26379/svc/0?sentinel_password=topsecret", "redis+sentinel://h:26379/svc/0?sentinel_password=***"),
])
def test_masking(url, shown):
    from jobctl.connection import redact_url

    assert redact_url(url) == shown


@pytest.mark.parametrize("url", ["redis+sentinel://127.0.0.1:1", "redis+cluster://127.0.0.1:1/3",
                                 "redis+cluster://h:notaport", "redis://h1:1,h2:2/0"])
def test_bad_topology_urls(capsys, url):
    _one_line(main(["--url", url, "status"]), capsys.readouterr().err, 2)


def test_cluster_url_on_a_single_server_and_unreachable_topologies(redis_url, capsys):
    host_port = redis_url.split("://", 1)[1].split("/", 1)[0]
    code = main(["--url", f"redis+cluster://{host_port}", "status"])
    err = capsys.readouterr().err
    _one_line(code, err, 2)
    assert "not a Redis Cluster node" in err
    for url in ("redis+cluster://127.0.0.1:1", "redis+sentinel://127.0.0.1:1/svc/0"):
        _one_line(main(["--url", url, "status"]), capsys.readouterr().err, 3)


@pytest.mark.parametrize("url", ["rediss+cluster://127.0.0.1:1", "rediss+sentinel://127.0.0.1:1/svc/0",
                                 "rediss://127.0.0.1:1/0"])
def test_tls_options_on_every_topology_build_a_client(tls_server, capsys, url):
    """Every topology takes the TLS options (no TypeError from a client
    class): an unreachable server is exit 3, one line."""
    certs = tls_server.extra["certs"]
    code = main(["--url", url, "--ca-cert", str(certs["ca"]), "--client-cert", str(certs["client_cert"]),
                 "--client-key", str(certs["client_key"]), "status"])
    err = capsys.readouterr().err
    _one_line(code, err, 3)
    assert "cannot reach" in err


@pytest.mark.parametrize("layout", ["rq", "sidekiq", "celery", "bullmq"])
def test_foreign_layout_across_slots_reads_and_refuses_operations(layout, cc, cluster_url, tmp_path, capsys):
    """A library's queue whose keys carry no common hash tag (RQ, Sidekiq,
    Celery; BullMQ without a ``{prefix}``): status works and names the
    spread; a redrive is refused at plan time with one line, nothing written."""
    cfg = config(tmp_path, {"fq": {"layout": layout}})
    cc.set("unrelated", "1")
    before = {key: cc.dump(key) for key in cc.scan_iter()}
    code, doc, err = run(capsys, cluster_url, cfg, "status", "--json")
    assert code == 0, err
    assert any("span" in w and "slots" in w for w in status_of(doc, "fq")["warnings"]), doc
    code, _, err = run(capsys, cluster_url, cfg, "redrive", "fq", "--yes")
    errors = [line for line in err.splitlines() if line and "warning:" not in line]
    assert code == 2 and len(errors) == 1 and "Redis Cluster" in errors[0] and "CROSSSLOT" not in err, err
    assert {key: cc.dump(key) for key in cc.scan_iter()} == before


def test_bullmq_with_a_hash_tagged_prefix_redrives_on_a_cluster(cc, cluster_url, tmp_path, capsys):
    """BullMQ's ``{prefix}`` puts a queue in one slot: the plan's fence reads
    and the moves (every key in KEYS) run there, each failed job moved once."""
    p = "{bq}:work:"
    cc.hset(p + "meta", mapping={"version": "bullmq:6.7.0", "opts.maxLenEvents": "10000"})
    for i in range(1, 31):
        cc.hset(f"{p}{i}", mapping={"name": "send", "data": '{"id64":9223372036854775807}', "opts": "{}",
                                    "timestamp": "1700000000000", "priority": "0", "atm": "1",
                                    "finishedOn": str(1700000001000 + i), "failedReason": "boom"})
        cc.zadd(p + "failed", {str(i): 1700000001000 + i})
    cfg = config(tmp_path, {"work": {"layout": "bullmq", "prefix": "{bq}"}})
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "work", "--filter", "id ~ '1*'", "--yes", "--json")
    assert code == 0 and doc["moved"] == 11, err  # 1, 10..19: the filtered plan's reads run in the slot too
    code, doc, err = run(capsys, cluster_url, cfg, "redrive", "work", "--yes", "--json")
    assert code == 0 and doc["moved"] == 19, err
    assert sorted(int(x) for x in cc.lrange(p + "wait", 0, -1)) == list(range(1, 31))
    assert cc.zcard(p + "failed") == 0 and cc.hget(p + "1", "data") == b'{"id64":9223372036854775807}'
