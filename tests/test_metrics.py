"""The Prometheus exporter against a real server: a scrape of the demo's
queues returns every gauge with the values `jobctl status --json` reports,
the attempt histograms match `jobctl attempts`, the journal counters count
jobctl's operations, and a scrape's cost does not grow with the depth."""

from __future__ import annotations

import urllib.request
from collections import defaultdict

import orjson
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from jobctl.cli import demo_cmd
from jobctl.cli.main import main
from jobctl.metrics import ATTEMPT_BUCKETS, STATUS_GAUGES, JobctlCollector, exposition, start_exporter
from jobctl.metrics import snapshot as snapshot_mod
from jobctl.metrics.breakdown import dead_breakdown
from jobctl.model import State
from jobctl.runbook import Library
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario


def samples(text: str) -> dict[str, dict[tuple, float]]:
    """``{sample name: {sorted label items: value}}`` of an exposition."""
    out: dict[str, dict[tuple, float]] = defaultdict(dict)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def q(queue: str, **extra: str) -> tuple:
    return tuple(sorted({"queue": queue, "layout": "reliable-list", **extra}.items()))


def _demo_config(tmp_path) -> str:
    lines = []
    for name, qc in demo_cmd.demo_catalogue("").items():
        lines += [f"[queues.{name}]", f'layout = "{qc.layout}"', f'tag = "{qc.base_tag}"']
        if qc.shards:
            lines.append(f"shards = {qc.shards}")
    path = tmp_path / "jobctl.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_scrape_of_the_demo_matches_status(redis_url, redis_client, tmp_path, capsys):
    demo_cmd._load(redis_client, demo_cmd.demo_catalogue(""), 2000, 7)
    config = _demo_config(tmp_path)
    session = Session(config_file=config, url=redis_url)
    collector = JobctlCollector(session, interval_s=0.0)
    server, _thread = start_exporter(collector, host="127.0.0.1", port=0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=30) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            body = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        session.close()
    got = samples(body)
    capsys.readouterr()
    assert main(["--config", config, "--url", redis_url, "status", "--json"]) == 0
    status = orjson.loads(capsys.readouterr().out)["queues"]
    assert [s["queue"] for s in status] == [name for name, *_ in demo_cmd.DEMO_QUEUES]

    assert got["jobctl_exporter_up"][()] == 1.0
    for st in status:
        name = st["queue"]
        for metric, field, _help in STATUS_GAUGES:
            value = got[metric][q(name)]
            if field.endswith("age_ms"):
                # read a moment before `status`: same job, so older by that moment only
                expected = st[field] or 0
                assert 0 <= expected - value <= 10_000, (name, metric, value, expected)
            else:
                assert value == st[field], (name, metric)
        assert got["redis_job_status_errors"][q(name)] == 0

        capsys.readouterr()
        for state in ("dead", "scheduled"):
            assert main(["--config", config, "--url", redis_url, "attempts", name, "--state", state, "--json"]) == 0
            hist = orjson.loads(capsys.readouterr().out)
            counts = {int(k): v for k, v in hist["counts"].items()}
            assert not hist["sampled"]
            for le in ATTEMPT_BUCKETS:
                assert got["redis_job_attempts_bucket"][q(name, state=state, le=str(le))] == \
                    sum(v for k, v in counts.items() if k <= le)
            assert got["redis_job_attempts_count"][q(name, state=state)] == sum(counts.values()) == \
                st[state] - hist["unknown"]
            assert got["redis_job_attempts_sum"][q(name, state=state)] == sum(k * v for k, v in counts.items())
            assert got["redis_job_attempts_sampled"][q(name, state=state)] == 0
        by_pair = {dict(k)["tenant"] + "/" + dict(k)["job_type"]: v
                   for k, v in got["redis_job_dead_by_type_tenant"].items() if dict(k)["queue"] == name}
        assert sum(by_pair.values()) == st["dead"] and by_pair
        assert got["redis_job_dead_breakdown_sampled"][q(name)] == 0

    # the planted DLQ: webhook.deliver/HTTP_503/tenant_3 is the largest group of the dlq-spike queues
    email = {dict(k)["tenant"] + "/" + dict(k)["job_type"]: v
             for k, v in got["redis_job_dead_by_type_tenant"].items() if dict(k)["queue"] == "email"}
    assert max(email, key=email.get) == "tenant_3/webhook.deliver"
    info = got["jobctl_redis_info"]
    assert len(info) == 1 and dict(next(iter(info)))["role"] == "master"


def test_counters_of_jobctl_operations(redis_url, redis_client, capsys):
    load_scenario(redis_client, "dlq-spike", queue="email", size=200, seed=3)
    session = Session(url=redis_url)
    collector = JobctlCollector(session, interval_s=0.0)
    try:
        first = samples(exposition(collector).decode())
        assert "jobctl_operations_total" not in first or not first["jobctl_operations_total"]
        assert main(["--url", redis_url, "suppress", "email", "--filter", "error = HTTP_400", "--reason", "t",
                     "--yes"]) == 0
        assert main(["--url", redis_url, "redrive", "email", "--filter", "error = HTTP_503", "--yes"]) == 0
        assert main(["--url", redis_url, "runbook", "run", "stuck-processing", "--queue", "email", "--yes"]) == 0
        capsys.readouterr()
        got = samples(exposition(collector).decode())
        ops = {dict(k)["operation"]: v for k, v in got["jobctl_operations_total"].items()}
        moved = {dict(k)["operation"]: v for k, v in got["jobctl_operation_jobs_moved_total"].items()}
        steps = len([s for s in Library().load("stuck-processing").steps if not s.manual])
        assert ops == {"suppress": 1, "redrive": 1, "runbook-step": steps}
        assert moved["suppress"] > 0 and moved["redrive"] > 0 and moved["runbook-step"] == 0
        assert got["redis_job_suppressed_depth"][q("email")] == moved["suppress"]
        # incremental: an unchanged journal adds nothing
        again = samples(exposition(collector).decode())
        assert again["jobctl_operations_total"] == got["jobctl_operations_total"]
    finally:
        session.close()


def test_unreachable_server_reports_down(capsys):
    session = Session(url="redis://127.0.0.1:1/0", timeout_s=0.5)
    lines = []
    collector = JobctlCollector(session, interval_s=0.0, log=lines.append)
    got = samples(exposition(collector).decode())
    assert got["jobctl_exporter_up"][()] == 0.0
    assert "redis_job_ready_depth" not in got
    assert lines and "error" in lines[0]
    assert main(["--url", "redis://127.0.0.1:1/0", "--timeout", "0.5", "metrics", "once"]) == 3
    out = capsys.readouterr().out
    assert "jobctl_exporter_up 0.0" in out


def test_scrapes_are_cached_for_the_interval(redis_url, redis_client):
    load_scenario(redis_client, "healthy", queue="email", size=50, seed=4)
    t = [0.0]
    session = Session(url=redis_url)
    collector = JobctlCollector(session, interval_s=5.0, clock=lambda: t[0])
    try:
        a = collector.snapshot()
        redis_client.lpush("queue:{email}:ready", "extra-id")
        t[0] = 4.9
        assert collector.snapshot() is a
        t[0] = 5.0
        b = collector.snapshot()
        assert b is not a and b.queues[0].status.ready == a.queues[0].status.ready + 1
    finally:
        session.close()


def _commands_per_scrape(client, collector) -> int:
    before = sum(v["calls"] for k, v in client.info("commandstats").items())
    collector.snapshot()
    after = sum(v["calls"] for k, v in client.info("commandstats").items())
    return after - before - 1  # minus the INFO of `before`


def test_scrape_cost_does_not_grow_with_depth(redis_url, redis_client):
    """With the slow metrics cached, a refresh costs the same number of
    commands for 100 jobs as for 5,000; the slow metrics read at most their
    bound of envelopes whatever the depth."""
    costs = []
    admin = redis.Redis.from_url(redis_url)
    try:
        for size in (100, 5_000):
            admin.flushall()
            load_scenario(redis_client, "dlq-spike", queue="email", size=size, seed=5)
            session = Session(url=redis_url)
            collector = JobctlCollector(session, interval_s=0.0, slow_interval_s=3600.0)
            try:
                collector.snapshot()  # computes and caches the slow metrics
                admin.config_resetstat()
                costs.append(_commands_per_scrape(admin, collector))
            finally:
                session.close()
    finally:
        admin.close()
    assert costs[0] == costs[1] and costs[0] < 40, costs
    print("commands per refresh:", costs)


def test_slow_metrics_are_bounded(redis_url, redis_client, monkeypatch):
    load_scenario(redis_client, "dlq-spike", queue="email", size=3_000, seed=6)
    session = Session(url=redis_url)
    try:
        layout = session.layout("email")
        depth = layout.depth(State.DEAD)
        assert depth > 600
        b = dead_breakdown(layout, bound=500)
        assert b.sampled and b.read <= 500
        assert abs(sum(b.counts.values()) - depth) <= depth * 0.05
        monkeypatch.setattr(snapshot_mod, "HISTOGRAM_BOUND", 100)
        collector = JobctlCollector(session, interval_s=0.0)
        got = samples(exposition(collector).decode())
        assert got["redis_job_attempts_sampled"][q("email", state="dead")] == 1
        assert got["redis_job_attempts_count"][q("email", state="dead")] == pytest.approx(depth, rel=0.05)
    finally:
        session.close()


def test_a_broken_queue_does_not_hide_the_others(redis_url, redis_client, tmp_path):
    load_scenario(redis_client, "healthy", queue="good", size=40, seed=7)
    redis_client.lpush("queue:{bad}:ready", "j1")
    redis_client.set("queue:{bad}:dead", "not a list")
    config = tmp_path / "jobctl.toml"
    config.write_text('[queues.good]\nlayout = "reliable-list"\n[queues.bad]\nlayout = "reliable-list"\n')
    session = Session(config_file=str(config), url=redis_url)
    lines: list[str] = []
    collector = JobctlCollector(session, interval_s=0.0, log=lines.append)
    try:
        got = samples(exposition(collector).decode())
        samples(exposition(collector).decode())
    finally:
        session.close()
    assert got["jobctl_exporter_up"][()] == 1.0
    assert got["redis_job_status_errors"][q("bad")] >= 1 and got["redis_job_status_errors"][q("good")] == 0
    assert got["redis_job_ready_depth"][q("good")] > 0
    assert got["redis_job_attempts_count"][q("good", state="dead")] >= 0
    assert len(lines) == 1 and "queue bad" in lines[0]  # logged once, not on every refresh
