"""The headless side of the TUI (jobctl.dashboard).  The import boundary (the
core never imports textual, the TUI never imports redis) is tests/test_imports.py."""

from __future__ import annotations

import pytest

from jobctl.config import Config, QueueConfig
from jobctl.dashboard import (
    DEFAULT_SLO, DUE_BUCKETS, Dashboard, Level, QueueHistory, Slo, Threshold, due_distribution,
    equivalent_command, find_jobs, group_filter_text, processing_by_deadline, triage,
)
from jobctl.errors import ConfigError, ConnectionFailed
from jobctl.filter import compile_filter
from jobctl.model import JobRecord, QueueStatus, State, parse_envelope
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario

T0 = 1_790_000_000_000


# -- SLO ------------------------------------------------------------------------------


def test_slo_from_options_parses_durations_tables_and_defaults() -> None:
    slo = Slo.from_options({"slo": {"oldest_ready_age": "5m", "dead": {"warn": 100, "breach": 1000},
                                    "dead_growth": 50}})
    assert slo.thresholds["oldest_ready_age"] == Threshold(breach=300_000)
    assert slo.thresholds["dead"] == Threshold(warn=100, breach=1000)
    assert slo.thresholds["stuck"] == DEFAULT_SLO["stuck"]
    st = QueueStatus(queue="q", layout="reliable-list", now_ms=T0, dead=150, stuck=0,
                     oldest_ready_age_ms=301_000)
    from jobctl.dashboard import slo_values

    levels = slo.evaluate(slo_values(st, dead_growth=10.0))
    assert levels["dead"] is Level.WARN
    assert levels["oldest_ready_age"] is Level.BREACH
    assert levels["dead_growth"] is Level.OK
    assert levels["stuck"] is Level.OK
    assert Slo.from_options({"slo": {"oldest_ready_age": 90}}).thresholds["oldest_ready_age"].breach == 90_000


@pytest.mark.parametrize("raw, message", [
    ({"slo": {"latency": 5}}, "unknown metric 'latency'"),
    ({"slo": {"dead": -1}}, "dead must be a number >= 0"),
    ({"slo": {"oldest_ready_age": "5 minutes"}}, "oldest_ready_age"),
    ({"slo": {"dead": {"critical": 5}}}, "unknown key 'critical'"),
    ({"slo": 5}, "must be a table"),
])
def test_slo_errors_are_config_errors(raw, message) -> None:
    with pytest.raises(ConfigError, match=message):
        Slo.from_options(raw, where="[queues.email.slo]")


def test_dashboard_rejects_a_bad_slo_at_start(tmp_path) -> None:
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text('[queues.email]\ntag = "email"\n[queues.email.slo]\ndead = "many"\n')
    with pytest.raises(ConfigError, match=r"\[queues\.email\.slo\]: dead"):
        Dashboard(Session(config_file=str(cfg), url="redis://127.0.0.1:1/0"))


# -- history ------------------------------------------------------------------------------


def _status(at: int, dead: int, ready: int = 0) -> QueueStatus:
    return QueueStatus(queue="q", layout="reliable-list", now_ms=at, dead=dead, ready=ready)


def test_history_growth_rate_over_the_trailing_window() -> None:
    h = QueueHistory(maxlen=10)
    assert h.dead_growth_per_min() is None
    h.add(_status(T0, 100))
    assert h.dead_growth_per_min() is None
    h.add(_status(T0 + 500, 150))
    assert h.dead_growth_per_min() is None  # under a second apart
    h.add(_status(T0 + 30_000, 130))
    assert h.dead_growth_per_min() == pytest.approx(60.0)  # +30 in 30 s
    h.add(_status(T0 + 120_000, 70))  # window: the last 60 s -> falls back to the previous sample
    assert h.dead_growth_per_min() == pytest.approx(-40.0)
    for i in range(20):
        h.add(_status(T0 + 200_000 + i * 1000, 0, ready=i))
    assert len(h.samples) == 10
    assert h.series("ready") == list(range(10, 20))


# -- triage, due distribution, processing order (real server) -----------------------------


def test_group_filter_text_round_trips_through_the_filter_language() -> None:
    env = parse_envelope(b'{"jobId":"a","jobType":"we\\"ird type","createdAtEpochMs":1,"lastErrorCode":"E 1"}')
    rec = JobRecord(queue="q", layout="reliable-list", shard="q", job_id="a", state=State.DEAD, envelope=env)
    assert compile_filter(group_filter_text('we"ird type', "E 1")).matches(rec, T0)
    assert not compile_filter(group_filter_text('we"ird type', "E 2")).matches(rec, T0)
    env2 = parse_envelope(b'{"jobId":"b","jobType":"t","createdAtEpochMs":1}')
    rec2 = JobRecord(queue="q", layout="reliable-list", shard="q", job_id="b", state=State.DEAD, envelope=env2)
    assert compile_filter(group_filter_text("t", None)).matches(rec2, T0)
    assert not compile_filter(group_filter_text("t", None)).matches(rec, T0)


def _session(url: str, **queues: QueueConfig) -> Session:
    s = Session(url=url)
    s._config = Config(queues=queues)
    return s


def test_triage_groups_match_the_ground_truth(redis_client, redis_url) -> None:
    truth = load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=800, seed=3, now_ms=T0,
                          malformed=6)
    s = _session(redis_url, email=QueueConfig("email", shards=2))
    try:
        tri = triage(s.layout("email"), now=T0)
        assert {(g.job_type, g.error): g.count for g in tri.groups} == truth.dead_breakdown
        assert tri.malformed == 3
        assert tri.depth == truth.expected["dead"]
        assert not tri.sampled
        counts = [g.count for g in tri.groups]
        assert counts == sorted(counts, reverse=True)
        for g in tri.groups:
            assert g.first_seen_ms <= g.last_seen_ms <= T0
            assert sum(g.tenants.values()) == g.count
        # filtered triage: only the matching jobs are grouped
        flt = compile_filter("tenant = tenant_3")
        sub = triage(s.layout("email"), now=T0, flt=flt)
        assert sub.matched == truth.dead_by_tenant["tenant_3"]
        # sampled beyond the bound, counts scaled to the depth
        sampled = triage(s.layout("email"), now=T0, exact_bound=10)
        assert sampled.sampled and sum(g.count for g in sampled.groups) + sampled.malformed == \
            pytest.approx(truth.expected["dead"], abs=len(sampled.groups) + 1)
    finally:
        s.close()


def test_due_distribution_and_processing_order(redis_client, redis_url) -> None:
    truth = load_scenario(redis_client, "scheduler-lag", queue="reports", size=500, seed=4, now_ms=T0)
    load_scenario(redis_client, "stuck-workers", queue="billing", shards=3, size=500, seed=5, now_ms=T0)
    s = _session(redis_url, reports=QueueConfig("reports"), billing=QueueConfig("billing", shards=3))
    try:
        due = due_distribution(s.layout("reports"), T0)
        assert [label for label, _ in due.counts] == [b[0] for b in DUE_BUCKETS]
        assert due.total == truth.expected["scheduled"]
        assert dict(due.counts)["overdue"] == truth.expected["scheduled_overdue"]
        assert dict(due.counts)["< 1m"] == 0  # the scenario keeps 10 min clear of now

        billing = s.layout("billing")
        st = billing.status(now=T0)
        recs = processing_by_deadline(billing, limit=1000)
        assert len(recs) == st.processing
        deadlines = [r.deadline_ms for r in recs]
        assert deadlines == sorted(deadlines)
        stuck = [r for r in recs if r.deadline_ms < T0]
        assert len(stuck) == st.stuck and stuck == recs[:st.stuck]
        assert all(r.envelope.ok and r.state is State.PROCESSING for r in recs[:50])
        assert len(processing_by_deadline(billing, limit=7)) == 7
    finally:
        s.close()


def test_find_jobs_with_and_without_a_filter(redis_client, redis_url) -> None:
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=400, seed=6, now_ms=T0)
    s = _session(redis_url, email=QueueConfig("email"))
    try:
        lay = s.layout("email")
        page = find_jobs(lay, State.DEAD, now=T0, limit=10)
        assert len(page.records) == 10 and not page.complete
        flt = compile_filter('type = "webhook.deliver" and error = "HTTP_503"')
        page = find_jobs(lay, State.DEAD, flt=flt, now=T0, limit=1000)
        assert page.complete and len(page.records) == truth.dead_breakdown[("webhook.deliver", "HTTP_503")]
        since = [r.meta["dead_since_ms"] for r in page.records]
        assert since == sorted(since, reverse=True)  # newest dead first, as the unfiltered list
        page = find_jobs(lay, State.DEAD, flt=flt, now=T0, limit=5)
        assert len(page.records) == 5 and not page.complete
    finally:
        s.close()


def test_dashboard_refresh_records_history_and_levels(redis_client, redis_url) -> None:
    load_scenario(redis_client, "dlq-spike", queue="email", size=300, seed=7, now_ms=T0)
    clock = [T0]
    s = _session(redis_url, email=QueueConfig("email", options={"slo": {"dead": {"warn": 50, "breach": 500}}}))
    dash = Dashboard(s, clock=lambda: clock[0])
    try:
        snap = dash.refresh()
        row = snap.row("email")
        assert row.status.dead == 90 and row.levels["dead"] is Level.WARN
        assert row.dead_growth_per_min is None and row.depth_series == [row.status.ready]
        redis_client.lpush("queue:{email}:dead", *[f"x{i}" for i in range(30)])
        clock[0] += 60_000
        row = dash.refresh().row("email")
        assert row.dead_growth_per_min == pytest.approx(30.0)
        assert len(row.depth_series) == 2
        assert dash.queue_detail("email").due.total == row.status.scheduled
        assert set(dash.histograms("email")) == {"ready", "scheduled", "processing", "dead"}
    finally:
        s.close()


def test_dashboard_translates_connection_errors() -> None:
    s = Session(url="redis://127.0.0.1:1/0", timeout_s=0.5)
    s._config = Config(queues={"q": QueueConfig("q")})
    dash = Dashboard(s)
    with pytest.raises(ConnectionFailed, match="cannot reach"):
        dash.refresh()
    with pytest.raises(ConnectionFailed):  # and again: nothing cached the failure
        dash.triage("q")


def test_equivalent_command_is_a_cli_command_line() -> None:
    from jobctl.ops.spec import Operation, OpSpec

    spec = OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY,
                  filter=compile_filter('type = "a b" and error = "E"'))
    assert equivalent_command(spec) == ["jobctl", "redrive", "email", "--filter",
                                        'type = "a b" and error = "E"']  # quoted once, by the journal
    spec = OpSpec(Operation.PURGE, "email", State.SUPPRESSED, None, ids=("j1",))
    assert equivalent_command(spec)[3:] == ["--state", "suppressed", "--no-export", "--ids", "j1"]


def _layout_adapters():
    from jobctl_fixtures.layouts import ADAPTERS

    return sorted(ADAPTERS)


@pytest.mark.parametrize("layout_name", _layout_adapters())
def test_dashboard_works_on_every_layout(redis_client, redis_url, layout_name) -> None:
    """The queue screen's reads on each layout: only the states it has."""
    from jobctl_fixtures.layouts import ADAPTERS

    adapter = ADAPTERS[layout_name]
    scenario = "dlq-spike" if "dlq-spike" in adapter.scenarios else adapter.scenarios[0]
    from jobctl.layouts.base import now_ms

    now = now_ms()  # layouts whose states depend on the clock read them at "now"
    expected = adapter.load(redis_client, scenario, queue="q", size=120, seed=5, now_ms=now)
    qc = adapter.queue_config("q")
    s = Session(url=redis_url)
    s._config = Config(queues={"q": qc})
    dash = Dashboard(s, clock=lambda: now)
    try:
        layout = s.layout("q")
        row = dash.refresh().row("q")
        assert row.error is None and row.status.ready == expected["ready"]
        detail = dash.queue_detail("q")
        if State.SCHEDULED in layout.states:
            assert detail.due.total == expected.get("scheduled", 0)
        else:
            assert detail.due.total == 0
        if State.PROCESSING in layout.states:
            assert len(detail.processing) == min(200, expected.get("processing", 0))
        hists = dash.histograms("q")
        assert set(hists) == {st.value for st in (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD)
                              if st in layout.states}
        tri = dash.triage("q")
        if State.DEAD in layout.states:
            assert sum(g.count for g in tri.groups) + tri.malformed == expected.get("dead", 0)
        else:
            assert tri.groups == []
        for st in layout.states:
            if st is State.HISTORY:
                continue
            page = dash.jobs("q", st, limit=5)
            assert len(page.records) == min(5, len(expected["ids_by_state"].get(st.value, ())))
    finally:
        s.close()
