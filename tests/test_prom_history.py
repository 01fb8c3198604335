"""The dashboard's history read back from Prometheus (core, no Redis): the
query_range URL, the matrix reply turned into samples, and every bad reply
or unreachable server as one :class:`PrometheusError` line."""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest

from jobctl.dashboard.history import QueueHistory, Sample
from jobctl.errors import UsageError
from jobctl.dashboard.prom_history import (MAX_POINTS, SERIES, PrometheusError, load_history, parse_matrix,
                                           query_url)
from prom_server import RECORDED_REPLY, prometheus_server

T0 = 1_790_000_000_000
REPLY = json.loads(RECORDED_REPLY.read_text())
TIMES = [T0 - 3 * 3_600_000 + 36_000 * k for k in (0, 1, 2, 100, 299)]


def test_series_are_the_exporters_gauges() -> None:
    assert SERIES == {"redis_job_ready_depth": "ready", "redis_job_scheduled_depth": "scheduled",
                      "redis_job_processing_depth": "processing", "redis_job_stuck_depth": "stuck",
                      "redis_job_dead_depth": "dead", "redis_job_oldest_ready_age_ms": "oldest_ready_age_ms"}


def test_query_url_asks_for_the_shown_queues_in_at_most_300_points() -> None:
    url = query_url("http://prom:9090/", ["email", "a.b"], now_ms=T0)
    parts = urllib.parse.urlsplit(url)
    assert parts.path == "/api/v1/query_range"
    q = dict(urllib.parse.parse_qsl(parts.query))
    assert q["step"] == "36s" and float(q["end"]) - float(q["start"]) == 10_800
    assert 10_800 / 36 <= MAX_POINTS
    assert 'queue=~"a\\\\.b|email"' in q["query"] and "redis_job_dead_depth" in q["query"]
    for bad in ("redis://x:6379", "http://", "prom:9090", "http://h:port"):
        with pytest.raises(UsageError, match="expected http"):
            query_url(bad, ["email"], now_ms=T0)


def test_a_bad_url_flag_is_one_line_exit_2(capsys) -> None:
    from jobctl.cli.main import main

    code = main(["--url", "redis://127.0.0.1:1/0", "tui", "--prometheus-url", "ftp://prom"])
    err = capsys.readouterr().err
    assert code == 2 and "expected http://host:port" in err and len(err.strip().splitlines()) == 1, err


def test_matrix_to_samples() -> None:
    got = parse_matrix(REPLY, ["email", "billing"])
    assert set(got) == {"email", "billing"}  # "elsewhere" was not asked for
    email = got["email"]
    assert [s.at_ms for s in email] == TIMES
    assert email[0] == Sample(TIMES[0], ready=40, scheduled=0, processing=0, stuck=0, dead=120,
                              oldest_ready_age_ms=60_000)
    assert email[1].ready == 0 and email[1].oldest_ready_age_ms is None  # nothing ready: no age
    assert [s.dead for s in got["billing"]] == [5, 5, 6, 7, 9]


def test_nan_points_are_left_out() -> None:
    reply = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "redis_job_dead_depth", "queue": "q"}, "values": [[1.5, "NaN"], [2.5, "7"]]}]}}
    assert parse_matrix(reply, ["q"]) == {"q": [Sample(2500, 0, 0, 0, 0, 7, None)]}


@pytest.mark.parametrize("reply, words", [
    ([], "not a JSON object"),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "status 'error': parse error"),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, "no range matrix"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"values": []}]}}, "lacks"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {}, "values": [["x"]]}]}}, "not \\[time"),
])
def test_bad_replies(reply, words) -> None:
    with pytest.raises(PrometheusError, match=words):
        parse_matrix(reply, ["q"])


def test_load_history_over_http() -> None:
    with prometheus_server() as (base, asked):
        got = load_history(base, ["email"], now_ms=T0)
    assert [s.dead for s in got["email"]] == [120, 180, 260, 900, 1480]
    assert len(asked) == 1 and asked[0].startswith("/api/v1/query_range?")


@pytest.mark.parametrize("status, body, words", [
    (500, b"oops", "answered HTTP 500"),
    (200, b"<html>", "not JSON"),
])
def test_load_history_failures(status, body, words) -> None:
    with prometheus_server(body, status=status) as (base, _):
        with pytest.raises(PrometheusError, match=words) as info:
            load_history(base, ["email"], now_ms=T0)
    assert "\n" not in str(info.value)


def test_unreachable() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(PrometheusError, match="unreachable"):
        load_history(f"http://127.0.0.1:{port}", ["email"], now_ms=T0, timeout_s=2)


def test_older_samples_go_before_the_live_samples() -> None:
    h = QueueHistory(maxlen=4)
    older = parse_matrix(REPLY, ["email"])["email"]
    assert h.prepend(older) == 5 and [s.at_ms for s in h.samples] == TIMES  # room for them beside 4 new ones
    h2 = QueueHistory()
    h2.prepend(older[3:])
    assert h2.prepend(older) == 3  # only those older than the first sample held
    assert [s.at_ms for s in h2.samples] == TIMES


def test_profile_field(tmp_path) -> None:
    from jobctl.config import load_config
    from jobctl.errors import ConfigError

    path = tmp_path / "jobctl.toml"
    path.write_text('[profiles.ops]\nurl = "redis://h:6379"\nprometheus_url = "http://prom:9090"\n')
    assert load_config(path).profiles["ops"].prometheus_url == "http://prom:9090"
    path.write_text('[profiles.ops]\nurl = "redis://h:6379"\nprometheus_url = 9090\n')
    with pytest.raises(ConfigError, match="prometheus_url must be a string"):
        load_config(path)


def test_prepended_samples_go_once_maxlen_new_ones_came() -> None:
    from jobctl.model import QueueStatus

    h = QueueHistory(maxlen=4)
    h.prepend(parse_matrix(REPLY, ["email"])["email"])
    for i in range(4):
        h.add(QueueStatus(queue="email", layout="reliable-list", now_ms=T0 + i))
    assert len(h.samples) == 9 and h.samples[0].at_ms == TIMES[0]
    h.add(QueueStatus(queue="email", layout="reliable-list", now_ms=T0 + 4))
    assert len(h.samples) == 9 and h.samples[0].at_ms == TIMES[1]


def test_a_reply_recorded_from_prometheus() -> None:
    """A reply of Prometheus 2.42 (scraping ``jobctl metrics serve`` every
    second while email's DLQ grew) to the query :func:`query_url` builds:
    every gauge of :data:`SERIES` for the three queues, 1 s apart."""
    reply = json.loads((RECORDED_REPLY.parent / "prometheus_query_range_real.json").read_text())
    assert {r["metric"]["__name__"] for r in reply["data"]["result"]} == set(SERIES)
    got = parse_matrix(reply, ["email", "billing", "reports"])
    assert sorted(got) == ["billing", "email", "reports"]
    email = [s.dead for s in got["email"]]
    assert len(email) == 28 and email == sorted(email) and (email[0], email[-1]) == (7, 147)
    assert all(b.at_ms - a.at_ms == 1000 for a, b in zip(got["email"], got["email"][1:]))
