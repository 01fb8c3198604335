"""``jobctl analyze``: the PySpark triage on small fixture exports with exact
expected aggregates, the rules file, fingerprints, the dlq-spike acceptance
(the demo's DLQ, exported and analysed, names the planted error groups with
their exact counts) and plan-then-redrive end to end.

One SparkSession serves the whole test session (``spark`` fixture, local[2]);
``jobctl analyze`` run in-process reuses it.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from jobctl.analyze.fingerprint import NORMALISERS, fingerprint_id, normalise
from jobctl.analyze.rules import glob_regex, load_rules, pattern_regex
from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.errors import UsageError
from jobctl.export.exporter import run_export
from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.plan import payload_sha1
from helpers import redrive_records
from test_fingerprint import TABLE as FINGERPRINT_TABLE

pytest.importorskip("pyspark")
pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

NOW = 1_795_000_000_000
T0 = NOW - 3 * 3_600_000
S, M, H, D = 1_000, 60_000, 3_600_000, 86_400_000
K = ReliableListKeys("triage")


def _env(job_id, jt, version, tenant, code, message, attempt, max_attempts, created, died, *, idem=True,
         deadline="default", **extra):
    doc = {"jobId": job_id, "jobType": jt, "jobVersion": version, "tenantId": tenant,
           "idempotencyKey": f"{jt}:{tenant}:{job_id}" if idem else None, "createdAtEpochMs": created,
           "deadlineEpochMs": created + D if deadline == "default" else deadline, "attempt": attempt,
           "maxAttempts": max_attempts, "payload": {"n": 1}, "lastAttemptAtEpochMs": died,
           "lastErrorCode": code, "lastErrorMessage": message}
    doc.update(extra)
    return orjson.dumps(doc)


WD, IE, RG = "webhook.deliver", "invoice.email.send", "report.generate"
#: (id, state, raw) of the triage fixture: 12 dead, 1 suppressed.
TRIAGE = [
    ("t01", "dead", _env("t01", WD, 2, "tenant_1", "HTTP_503", "upstream 10.0.0.1 unavailable after 3012 ms",
                         5, 5, T0, T0 + 30 * S)),
    ("t02", "dead", _env("t02", WD, 2, "tenant_1", "HTTP_503", "upstream 10.0.0.2 unavailable after 15 ms",
                         5, 5, T0 + M, T0 + M + 10 * M)),
    ("t03", "dead", _env("t03", WD, 2, "tenant_2", "HTTP_429", "rate limited, retry after 30s", 5, 5, T0,
                         T0 + 2 * M, idem=False)),
    ("t04", "dead", _env("t04", IE, 3, "tenant_1", "HTTP_400", "invalid field invoiceId=invoice_987", 1, 8, T0,
                         T0 + 2 * H)),
    ("t05", "dead", _env("t05", IE, 3, "tenant_1", "HTTP_400", "invalid field invoiceId=invoice_12", 1, 8, T0,
                         T0 + H)),
    ("t06", "dead", _env("t06", IE, 3, "tenant_2", "SERIALIZATION_ERROR",
                         "incompatible payload version 2 (job 7f3a9c1e5b2d4f60)", 0, 8, T0, T0 + 5 * S)),
    ("t07", "dead", _env("t07", RG, 1, "tenant_3", "DEADLINE_EXCEEDED", "Job deadline passed", 2, 3, NOW - 2 * D,
                         NOW - 2 * D + 25 * H)),
    ("t08", "dead", _env("t08", RG, 1, "tenant_3", "HTTP_503", "upstream 10.0.0.9 unavailable after 7 ms", 3, 3,
                         T0, T0 + 20 * M, deadline=NOW - H)),
    ("t09", "suppressed", _env("t09", WD, 2, "tenant_1", "HTTP_503", "upstream 10.0.0.3 unavailable after 99 ms",
                               5, 5, T0, T0 + 50 * S)),
    ("t10", "dead", b'{"jobId": "t10", "jobType": "webhook.deliver", "tena'),
    ("t11", "dead", _env("t11", WD, 2, "tenant_2", "PERMISSION_DENIED",
                         'token for endpoint_7 revoked,\n "see" console', 1, 5, T0, T0 + 8 * H)),
    ("t12", "dead", _env("t12", WD, 2, "tenant_1", "WEIRD", None, 1, 5, NOW - 10 * D, NOW - D, deadline=None)),
    ("t13", "dead", _env("t13", WD, 2, "tenant_1", "HTTP_503", "upstream 10.0.0.4 unavailable after 1 ms", 5, 5,
                         T0, T0 + 40 * S, redriveCount=1, redrivenAtEpochMs=T0 + 20 * S)),
]


def _load_triage(client) -> None:
    for job_id, state, raw in TRIAGE:
        client.set(K.job(job_id), raw)
        if state == "dead":
            client.lpush(K.dead, job_id)
        else:
            client.zadd(K.suppressed, {job_id: NOW - M})


@pytest.fixture
def triage_exports(redis_client, tmp_path):
    """The triage fixture exported in every format, snapshot pinned at NOW."""
    _load_triage(redis_client)
    layout = layout_for(redis_client, QueueConfig(name="triage"))
    out = {}
    for fmt in ("parquet", "jsonl", "csv"):
        run_export(layout, tmp_path / fmt, states=[State.DEAD, State.SUPPRESSED], fmt=fmt, snapshot_ms=NOW,
                   server="redis://127.0.0.1:6379/0")
        out[fmt] = str(tmp_path / fmt)
    return out


# -- the job on the triage fixture ------------------------------------------------------

def test_every_format_reads_the_same(spark, triage_exports):
    from pyspark.testing import assertDataFrameEqual

    from jobctl.analyze.job import read_export, spark_schema

    frames = {fmt: read_export(spark, path)[0] for fmt, path in triage_exports.items()}
    assert frames["parquet"].schema == spark_schema()
    assert frames["parquet"].count() == 13
    assertDataFrameEqual(frames["jsonl"], frames["parquet"])
    assertDataFrameEqual(frames["csv"], frames["parquet"])  # multi-line, quoted message included


def test_exact_aggregates(spark, triage_exports):
    from pyspark.sql import Row
    from pyspark.testing import assertDataFrameEqual

    from jobctl.analyze import job

    df, m = job.read_export(spark, triage_exports["parquet"])
    assert m.snapshot_ms == NOW
    G = Row("job_type", "error_code", "tenant", "job_version", "jobs", "first_death_ms", "last_death_ms")
    assertDataFrameEqual(job.group_counts(df), [
        G(WD, "HTTP_503", "tenant_1", 2, 4, T0 + 30 * S, T0 + 11 * M),
        G(IE, "HTTP_400", "tenant_1", 3, 2, T0 + H, T0 + 2 * H),
        G(IE, "SERIALIZATION_ERROR", "tenant_2", 3, 1, T0 + 5 * S, T0 + 5 * S),
        G(RG, "DEADLINE_EXCEEDED", "tenant_3", 1, 1, NOW - 2 * D + 25 * H, NOW - 2 * D + 25 * H),
        G(RG, "HTTP_503", "tenant_3", 1, 1, T0 + 20 * M, T0 + 20 * M),
        G(WD, "HTTP_429", "tenant_2", 2, 1, T0 + 2 * M, T0 + 2 * M),
        G(WD, "PERMISSION_DENIED", "tenant_2", 2, 1, T0 + 8 * H, T0 + 8 * H),
        G(WD, "WEIRD", "tenant_1", 2, 1, NOW - D, NOW - D),
        G(None, None, None, None, 1, None, None),
    ], checkRowOrder=True)
    from jobctl.analyze.rollups import capped_table, fine_groups, tenant_rollup, type_code_rollup

    fine = fine_groups(df)
    tc, tn = capped_table(type_code_rollup(fine), 100), capped_table(tenant_rollup(fine), 100)
    assert sum(r["jobs"] for r in tc["rows"]) == sum(r["jobs"] for r in tn["rows"]) == 13
    assert (tc["total"], tc["more_jobs"], tn["total"]) == (9, 0, 4)
    assert tc["rows"][0] == {"job_type": WD, "error_code": "HTTP_503", "jobs": 4, "tenants": 1,
                             "first_death_ms": T0 + 30 * S, "last_death_ms": T0 + 11 * M}
    assert tn["rows"][0]["tenant"] == "tenant_1" and tn["rows"][0]["jobs"] == 7
    cut = capped_table(type_code_rollup(fine), 2)  # a capped table says exactly what it leaves out
    assert (cut["total"], cut["listed"], cut["more_jobs"]) == (9, 2, 13 - 4 - 2)
    A = Row("attempt", "jobs")
    assertDataFrameEqual(job.attempt_histogram(df), [A(0, 1), A(1, 4), A(2, 1), A(3, 1), A(5, 5), A(None, 1)],
                         checkRowOrder=True)
    B = Row("bucket_index", "bucket", "jobs")
    assertDataFrameEqual(job.age_buckets(df), [
        B(0, "< 1m", 4), B(1, "1m-5m", 1), B(2, "5m-15m", 1), B(3, "15m-1h", 1), B(4, "1h-6h", 2),
        B(5, "6h-24h", 1), B(6, "1d-7d", 1), B(7, ">= 7d", 1), B(8, "unknown", 1)], checkRowOrder=True)
    stats = job.age_stats(df)
    assert (stats["known"], stats["min_ms"], stats["max_ms"]) == (12, 5 * S, 9 * D)
    C = Row("class", "rule", "redrive", "jobs")
    classified = job.classify(df, load_rules(), NOW)
    assertDataFrameEqual(job.class_counts(classified), [
        C("retryable", "transient-downstream", True, 4),
        C("permanent", "incompatible-payload", False, 1),
        C("permanent", "permission-denied", False, 1),
        C("expired-deadline", "deadline-exceeded", False, 1),
        C("expired-deadline", "deadline-passed", False, 1),
        C("bad-input", "validation-failed", False, 2),
        C("bad-input", "malformed-envelope", False, 1),
        C("needs-idempotency", "transient-without-idempotency-key", False, 1),
        C("unclassified", None, False, 1),
    ], checkRowOrder=True)
    plan = [r.asDict() for r in job.redrive_plan(classified).collect()]
    assert sorted(p["id"] for p in plan) == ["t01", "t02", "t13"]  # t09 is suppressed, not dead
    raws = {i: raw for i, _, raw in TRIAGE}
    assert all(p["payload_sha1"] == payload_sha1(raws[p["id"]]) and p["rule"] == "transient-downstream"
               and p["queue"] == "triage" for p in plan)


def test_fingerprints(spark, triage_exports):
    from jobctl.analyze import job

    df, _ = job.read_export(spark, triage_exports["jsonl"])
    rows = [r.asDict() for r in job.fingerprints(df).collect()]
    assert [(r["pattern"], r["jobs"]) for r in rows] == [
        ("upstream <ip> unavailable after <duration>", 5),
        ("invalid field invoiceId=invoice_<n>", 2),
        (None, 2),
        ("Job deadline passed", 1),
        ("incompatible payload version <n> (job <hex>)", 1),
        ("rate limited, retry after <duration>", 1),
        ('token for endpoint_<n> revoked, "see" console', 1),
    ]
    top = rows[0]
    assert top["fingerprint"] == fingerprint_id(top["pattern"])
    assert top["error_codes"] == ["HTTP_503"] and top["job_types"] == [RG, WD]
    assert (top["first_seen_ms"], top["first_id"]) == (T0 + 30 * S, "t01")
    assert (top["last_seen_ms"], top["last_id"]) == (T0 + 20 * M, "t08")
    assert top["first_message"] == "upstream 10.0.0.1 unavailable after 3012 ms"
    assert rows[2]["error_codes"] == ["WEIRD"] and rows[2]["first_id"] == "t12"


def test_spark_and_python_fingerprints_agree(spark):
    from pyspark.sql import functions as F

    from jobctl.analyze.fingerprint import fingerprint_column, normalise_column

    messages = ["order 123e4567-e89b-12d3-a456-426614174000 failed for bob@example.com",
                "POST 192.168.1.20:8443 took 1.25s", "ptr 0xDEADbeef at job_01JZ4SZ3MXWZK7WQR0STV9Q3WZ",
                "trace 0af7651916cd43dd8448eb211c80319c\t\tretry  later ", "HTTP_503 from endpoint_8",
                "v3 abc123 deadbeef 12345678 x" * 10, "", "   ", *(m for m, _ in FINGERPRINT_TABLE)]
    df = spark.createDataFrame([(m,) for m in messages], "m string")
    got = df.select(normalise_column(F.col("m")).alias("p")).withColumn("f", fingerprint_column(F.col("p"))).collect()
    assert [(r["p"], r["f"]) for r in got] == [(normalise(m), fingerprint_id(normalise(m))) for m in messages]
    assert normalise("ptr 0xDEADbeef at job_01JZ4SZ3MXWZK7WQR0STV9Q3WZ") == "ptr <hex> at job_<id>"
    assert len(NORMALISERS) == 10
    codes = ["TOKEN_EXPIRED", "JOB_EXPIRED", "NOTEXPIRED", "HTTP_503", "READ_TIMED_OUT", "a.TIMEOUT"]
    pats = ("<EXPIRED>", "HTTP_5*", "<TIMED_OUT>", "<TIMEOUT>")
    got = spark.createDataFrame([(c,) for c in codes], "c string").select(
        F.col("c").rlike(pattern_regex(pats)).alias("m")).collect()
    assert [r["m"] for r in got] == [bool(re.search(pattern_regex(pats), c)) for c in codes] \
        == [True, True, False, True, True, True]


# -- rules -------------------------------------------------------------------------------

def test_default_rules_load_and_validation(tmp_path):
    rules = load_rules()
    assert rules.source == "default"
    names = [r.name for r in rules.rules]
    assert names[0] == "malformed-envelope" and names[-1] == "transient-downstream"
    assert [r.name for r in rules.rules if r.redrive] == ["transient-downstream"]
    assert glob_regex("HTTP_5*") == r"(?s)^(?:HTTP_5.*)$" and glob_regex("a?b.c") == r"(?s)^(?:a.b\.c)$"
    assert glob_regex("E[!0-9]*", "X") == r"(?s)^(?:E[^0-9].*|X)$"
    bad = tmp_path / "r.toml"
    for text, message in [
        ('[[rule]]\nname = "x"\nclass = "nope"\n', "'class' must be one of"),
        ('[[rule]]\nname = "x"\nclass = "permanent"\ncolour = "red"\n', "unknown key 'colour'"),
        ('[[rule]]\nname = "x"\nclass = "permanent"\n[[rule]]\nname = "x"\nclass = "permanent"\n', "two rules"),
        ('[[rule]]\nclass = "permanent"\n', "'name' is required"),
        ('[[rule]]\nname = "x"\nclass = "permanent"\nerror_code = 3\n', "error_code: expected a string"),
        ('[[rule]]\nname = "x"\nclass = "permanent"\nmalformed = "yes"\n', "expected true or false"),
        ('[[rule]\n', "bad TOML"), ('version = 2\n', "version 2"),
    ]:
        bad.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_rules(bad)


def test_spark_submit_entry_point_with_custom_rules(spark, triage_exports, tmp_path, capsys):
    from jobctl.analyze.job import main as job_main

    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n'
                     '[[rule]]\nname = "fixed-serializer"\nclass = "permanent"\nredrive = true\n'
                     'error_code = "SERIALIZATION_*"\njob_version = [3]\n'
                     '[[rule]]\nname = "rest"\nclass = "unclassified"\n')
    out = tmp_path / "report"
    assert job_main([triage_exports["csv"], "--out", str(out), "--rules", str(rules)]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["redrive_planned"] == 1 and summary["class_totals"]["permanent"] == 1
    plan = [orjson.loads(line) for line in (out / "redrive-plan.jsonl").read_bytes().splitlines()]
    assert [(p["id"], p["rule"]) for p in plan] == [("t06", "fixed-serializer")]
    report = orjson.loads((out / "report.json").read_bytes())
    assert report["rules"]["source"] == str(rules) and report["export"]["format"] == "csv"
    for table in (report["by_type_code"]["rows"], report["by_tenant"]["rows"], report["groups"]):
        assert sum(r["jobs"] for r in table) == report["rows"] == 13  # every job in every rollup


def test_analyze_refuses_incomplete_or_missing_exports(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "r")]) == 5
    assert "no _manifest.json" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path)]) == 2
    assert main(["analyze", "--default-rules"]) == 0
    assert "[[rule]]" in capsys.readouterr().out


# -- acceptance: the demo's DLQ ------------------------------------------------------------

def test_demo_dlq_export_and_analyze_name_the_planted_groups(spark, redis_url, redis_client, tmp_path, capsys):
    from jobctl.cli.demo_cmd import _load, demo_catalogue
    from jobctl_fixtures.catalog import JOB_TYPES
    from jobctl_fixtures.scenarios import DLQ_SPIKE_DEAD, SCENARIOS, apportion

    size = 2000
    _load(redis_client, demo_catalogue(""), size, 7)  # what `jobctl demo` loads (email: dlq-spike, 4 shards)
    email_size = max(100, int(size * 0.5))
    mix = SCENARIOS["dlq-spike"].mix
    dead = dict(zip(mix, apportion(email_size, list(mix.values()))))["dead"]
    assert dead == sum(redis_client.llen(ReliableListKeys(t).dead) for t in shard_tags("email", 4))
    planted = {(jt, code, tenant): n for (jt, code, tenant, _), n
               in zip(DLQ_SPIKE_DEAD, apportion(dead, [w for *_, w in DLQ_SPIKE_DEAD]))}

    export_dir, report_dir = tmp_path / "dlq", tmp_path / "report"
    assert main(["--url", redis_url, "export", "email", "--out", str(export_dir)]) == 0
    assert main(["analyze", str(export_dir), "--out", str(report_dir), "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    report = orjson.loads((report_dir / "report.json").read_bytes())
    assert report["rows"] == dead and report["malformed"] == 0
    found = {(g["job_type"], g["error_code"], g["tenant"]): g["jobs"] for g in report["groups"]}
    assert found == planted
    assert all(g["job_version"] == JOB_TYPES[g["job_type"]].version for g in report["groups"])
    md = (report_dir / "report.md").read_text()
    for (jt, code, tenant), n in planted.items():
        assert f"| {jt} | {code} | {tenant} | {JOB_TYPES[jt].version} | {n:,} |" in md
    assert "webhook.deliver" in out and "redrive plan" in out
    retry_codes = {"HTTP_503", "HTTP_429"}
    assert report["class_totals"]["retryable"] == sum(n for (_, c, _), n in planted.items() if c in retry_codes)
    assert report["redrive"]["planned"] == report["class_totals"]["retryable"]


# -- plan, then redrive, end to end ----------------------------------------------------------

def test_plan_then_redrive_skips_jobs_changed_since_the_export(spark, redis_url, redis_client, tmp_path, capsys):
    from jobctl_fixtures.scenarios import load_scenario

    truth = load_scenario(redis_client, "dlq-spike", queue="spike", size=300, seed=2)
    keys = ReliableListKeys("spike")
    export_dir, report_dir = tmp_path / "dlq", tmp_path / "report"
    assert main(["--url", redis_url, "export", "spike", "--out", str(export_dir), "--format", "jsonl"]) == 0
    capsys.readouterr()
    assert main(["analyze", str(export_dir), "--out", str(report_dir), "--json"]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    plan_path = Path(summary["files"]["redrive_plan"])
    plan = [orjson.loads(line) for line in plan_path.read_bytes().splitlines()]
    expected = sorted(i for i in truth.ids_by_state["dead"]
                      if orjson.loads(redis_client.get(keys.job(i)))["lastErrorCode"] in ("HTTP_503", "HTTP_429"))
    assert sorted(p["id"] for p in plan) == expected and len(plan) == summary["redrive_planned"] > 3

    changed, gone, purged = plan[0]["id"], plan[1]["id"], plan[2]["id"]
    doc = orjson.loads(redis_client.get(keys.job(changed)))
    doc["attempt"] += 1  # a worker touched it after the export
    redis_client.set(keys.job(changed), orjson.dumps(doc))
    assert main(["--url", redis_url, "redrive", "spike", "--ids", gone, "--yes"]) == 0
    assert main(["--url", redis_url, "purge", "spike", "--state", "dead", "--filter", f"id = {purged}",
                 "--no-export", "--yes"]) == 0
    capsys.readouterr()
    rc = main(["--url", redis_url, "redrive", "spike", "--plan", str(plan_path), "--yes", "--json"])
    assert rc == 8
    res = orjson.loads(capsys.readouterr().out)
    assert res["moved"] == len(plan) - 3 and res["skipped"] == 3
    assert res["skipped_reasons"] == {"changed since export": 1, "no longer dead": 2}
    ready = {x.decode() for x in redis_client.lrange(keys.ready, 0, -1)}
    moved = {p["id"] for p in plan} - {changed, purged}
    assert moved <= ready
    dead_now = {x.decode() for x in redis_client.lrange(keys.dead, 0, -1)}
    assert dead_now == (truth.ids_by_state["dead"] - moved - {purged})
    # the redrive is recorded in jobctl's redrive record: [operation id, at (epoch ms), count]
    assert orjson.loads(redrive_records(redis_client, keys)[plan[3]["id"].encode()])[2] == 1


def test_empty_export(spark, redis_url, tmp_path, capsys):
    assert main(["--url", redis_url, "export", "triage", "--out", str(tmp_path / "e")]) == 5  # no such queue yet
    from jobctl.export.manifest import Manifest

    m = Manifest(selector={"queue": "triage", "layout": "reliable-list", "states": ["dead"], "filter": "",
                           "format": "parquet"}, source={"server": None}, snapshot_ms=NOW, started_ms=NOW,
                 complete=True, scanned={"dead": 0})
    (tmp_path / "e").mkdir()
    m.save(tmp_path / "e")
    assert main(["analyze", str(tmp_path / "e"), "--out", str(tmp_path / "r"), "--json"]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["rows"] == 0 and summary["redrive_planned"] == 0 and summary["classes"] == []
    assert (tmp_path / "r" / "redrive-plan.jsonl").read_bytes() == b""
    assert "# DLQ triage: triage" in (tmp_path / "r" / "report.md").read_text()
