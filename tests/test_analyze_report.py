"""The triage report says which group made the spike (deaths per hour of
the top job type x error code groups), writes a capped table whole as
Parquet beside it, and renders a self-contained HTML page."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from jobctl.analyze.report_html import render_html
from jobctl.cli.main import main
from jobctl.keys import ReliableListKeys

pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

K = ReliableListKeys("spiky")
HOUR = 3_600_000
BASE = 1_795_000_000_000 // HOUR * HOUR
#: (job type, error code, hour offset, jobs): the spike is hour 2, led by pay x HTTP_503
SHAPE = [("pay", "HTTP_503", 0, 3), ("mail", "SMTP_421", 0, 4), ("pay", "HTTP_503", 2, 30),
         ("mail", "SMTP_421", 2, 9), ("ship", "TIMEOUT", 2, 5), ("ship", "TIMEOUT", 3, 2), ("pay", "BAD", 3, 1)]


def _load(client) -> None:
    n = 0
    for job_type, code, hour, jobs in SHAPE:
        for _ in range(jobs):
            job_id = f"j{n:04d}"
            n += 1
            client.set(K.job(job_id), orjson.dumps({
                "jobId": job_id, "jobType": job_type, "jobVersion": 1, "tenantId": f"tenant_{n % 3}",
                "createdAtEpochMs": BASE - HOUR, "attempt": 3, "maxAttempts": 3, "payload": {},
                "lastAttemptAtEpochMs": BASE + hour * HOUR + n, "lastErrorCode": code, "lastErrorMessage": "x"}))
            client.lpush(K.dead, job_id)


def test_the_report_names_the_group_behind_the_spike(spark, redis_url, redis_client, tmp_path, capsys,
                                                     monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setattr("jobctl.analyze.job._MAX_GROUPS", 2)  # the type x code table is capped
    _load(redis_client)
    assert main(["--url", redis_url, "export", "spiky", "--out", str(tmp_path / "x")]) == 0
    assert main(["analyze", str(tmp_path / "x"), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    report = orjson.loads((tmp_path / "r" / "report.json").read_bytes())
    assert report["spike"] == {"hour_ms": BASE + 2 * HOUR, "jobs": 44, "job_type": "pay", "error_code": "HTTP_503",
                               "group_jobs": 30}
    assert "pay x HTTP_503 made 30 of them" in err
    truth = Counter()
    for job_type, code, hour, jobs in SHAPE:  # the top groups listed (2 here: the table is capped at 2)
        if (job_type, code) in {("pay", "HTTP_503"), ("mail", "SMTP_421")}:
            truth[(job_type, code, BASE + hour * HOUR)] += jobs
    assert {(t["job_type"], t["error_code"], t["hour_ms"]): t["jobs"] for t in report["group_trend"]} == truth
    tc = report["by_type_code"]
    assert tc["listed"] == 2 and tc["total"] == 4 and tc["file"] == "tables/by_type_code"
    whole = pq.read_table(tmp_path / "r" / "tables" / "by_type_code").to_pylist()
    assert len(whole) == 4 and sum(r["jobs"] for r in whole) == report["rows"] == 54
    md = (tmp_path / "r" / "report.md").read_text()
    assert "busiest hour" in md and "tables/by_type_code (Parquet)" in md
    html = (tmp_path / "r" / "report.html").read_text()
    assert "<svg" in html and "pay x HTTP_503" in html.replace("</b>", "").replace("<b>", "")
    assert "<script" not in html and "src=" not in html and "href=" not in html  # nothing fetched


def test_the_html_report_escapes_what_it_shows():
    report = {
        "export": {"queue": "q<1>", "snapshot_ms": BASE, "server": "redis://h"}, "rows": 3, "by_state": {"dead": 3},
        "malformed": 0, "spark": {"version": "4", "master": "local"},
        "spike": {"hour_ms": BASE, "jobs": 3, "job_type": "<b>", "error_code": "E&1", "group_jobs": 2},
        "deaths_per_hour": [{"hour_ms": BASE, "jobs": 3}],
        "group_trend": [{"job_type": "<b>", "error_code": "E&1", "hour_ms": BASE, "jobs": 2}],
        "by_type_code": {"rows": [{"job_type": "<b>", "error_code": "E&1", "jobs": 2, "tenants": 1,
                                   "first_death_ms": BASE, "last_death_ms": BASE}],
                         "total": 2, "listed": 1, "more_jobs": 1, "file": "tables/by_type_code"},
        "by_tenant": {"rows": [], "total": 0, "listed": 0, "more_jobs": 0},
        "classes": [], "fingerprints": [], "fingerprints_total": 0, "fingerprints_more_jobs": 0,
        "attempts": [{"attempt": 1, "jobs": 3}],
        "redrive": {"planned": 0, "file": "redrive-plan.jsonl", "command": "jobctl redrive q --plan p"},
    }
    html = render_html(report)
    assert "&lt;b&gt;" in html and "E&amp;1" in html and "<b>&lt;b&gt;" in html and "q&lt;1&gt;" in html
    assert "1 more row(s) holding 1 job(s) not listed" in html and "tables/by_type_code" in html
