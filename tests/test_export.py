"""``jobctl export``: formats (golden files), manifest, checksums, malformed
envelopes, filters, resumption, and "export, then purge" / ``redrive --plan``
fences.  Every test runs on the real test server.

Regenerate the golden files after a deliberate format change with
``JOBCTL_UPDATE_GOLDEN=1 python3 -m pytest tests/test_export.py``.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.errors import DataError, UsageError
from jobctl.export import SCHEMA_VERSION
from jobctl.export.exporter import run_export
from jobctl.export.fence import manifest_fence, read_redrive_plan
from jobctl.export.manifest import MANIFEST_NAME, load_manifest
from jobctl.export.reader import iter_rows
from jobctl.export.rows import iso_ms, parse_iso_ms, record_row
from jobctl.export.schema import NAMES, column_index
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.plan import payload_sha1

GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("JOBCTL_UPDATE_GOLDEN"))
NOW = 1_795_000_000_000  # pinned snapshot time (epoch ms)
K = ReliableListKeys("golden")


def _env(job_id: str, **kw) -> dict:
    doc = {"jobId": job_id, "jobType": "webhook.deliver", "jobVersion": 2, "tenantId": "tenant_1",
           "idempotencyKey": f"webhook-delivery:tenant_1:{job_id}", "createdAtEpochMs": NOW - 3_600_000,
           "notBeforeEpochMs": None, "deadlineEpochMs": NOW + 82_800_000, "attempt": 5, "maxAttempts": 5,
           "traceId": "0af7651916cd43dd8448eb211c80319c", "correlationId": "order_456", "payloadRef": None,
           "payload": {"eventId": "evt_1", "endpointId": "endpoint_8"},
           "lastAttemptAtEpochMs": NOW - 600_000, "lastErrorCode": "HTTP_503",
           "lastErrorMessage": "upstream unavailable"}
    doc.update(kw)
    return doc


#: (id, raw value or None for a dangling id), dead list from tail (oldest) to head.
GOLDEN_DEAD: list[tuple[str, bytes | None]] = [
    ("job_g1", orjson.dumps(_env("job_g1", tenantId="tenant_\u00e9", payload={"note": "Zo\u00eb, \"q\"\nline 2"},
                                 lastErrorMessage="HTTP 503 from https://hooks.example/t/1, body: \"busy\"\nretry"))),
    ("job_g2", orjson.dumps(_env("job_g2", redrivenAtEpochMs=NOW - 900_000, redriveCount=1,
                                 redriveOperation="redrive-20261118T000000Z-1a2b3c4d", stackTraceHash="9f8e7d"))),
    ("job_g3", b'{"jobId": "job_g3", "jobType": "webhook.deliver", "createdAt'),       # bad JSON
    ("job_g4", b'{"jobId": "job_g4", "recipientName": "Ren\xe9"}'),                      # not UTF-8
    ("job_g5", orjson.dumps({"jobId": "job_g5", "payload": {"x": 1}})),                   # missing fields
    ("job_g6", None),                                                                    # dangling id
    ("job_g7", orjson.dumps(_env("job_g7", attempt="3"))),                                # wrong type
    ("job_g8", orjson.dumps(_env("job_g8", createdAtEpochMs=10**17))),                    # out of range
]
GOLDEN_SUPPRESSED = [("job_s1", orjson.dumps(_env("job_s1", lastErrorCode="HTTP_400",
                                                  lastErrorMessage="validation failed")), NOW - 5_000)]


def _load_golden(client) -> None:
    for job_id, raw in GOLDEN_DEAD:
        if raw is not None:
            client.set(K.job(job_id), raw)
        client.lpush(K.dead, job_id)
    for job_id, raw, score in GOLDEN_SUPPRESSED:
        client.set(K.job(job_id), raw)
        client.zadd(K.suppressed, {job_id: score})


def _layout(client, name: str = "golden", shards=None):
    return layout_for(client, QueueConfig(name=name, tag=name, shards=shards))


def _export(client, out: Path, fmt: str, **kw):
    kw.setdefault("states", [State.DEAD, State.SUPPRESSED])
    return run_export(_layout(client), out, fmt=fmt, snapshot_ms=NOW, server="redis://127.0.0.1:6379/0", **kw)


def _golden(name: str, data: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(data)
    assert path.exists(), f"missing golden file {path}: run with JOBCTL_UPDATE_GOLDEN=1"
    assert data == path.read_bytes(), f"{name} differs from the golden file (JOBCTL_UPDATE_GOLDEN=1 to accept)"


def _expected_rows(client) -> list[tuple]:
    layout = _layout(client)
    return [record_row(r) for s in (State.DEAD, State.SUPPRESSED) for b in layout.iter_batches(s) for r in b]


# -- formats -------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_round_trip_every_format(redis_client, tmp_path, fmt):
    _load_golden(redis_client)
    res = _export(redis_client, tmp_path / fmt, fmt)
    m = res.manifest
    assert m.complete and m.rows == 9 and m.counts == {"dead": 8, "suppressed": 1}
    assert [p.file for p in m.parts] == [f"part-00000.{fmt}"]
    back = list(iter_rows(tmp_path / fmt, m))
    assert back == _expected_rows(redis_client)
    assert len(back[0]) == len(NAMES)
    # the raw bytes survive exactly, UTF-8 or not
    raw_i, b64_i, id_i = column_index("raw"), column_index("raw_base64"), column_index("job_id")
    stored = {jid: raw for jid, raw in GOLDEN_DEAD}
    for row in back:
        if row[id_i] in stored:
            raw = row[raw_i].encode() if row[raw_i] is not None else (
                base64.b64decode(row[b64_i]) if row[b64_i] is not None else None)
            assert raw == stored[row[id_i]]


def test_golden_jsonl_and_csv(redis_client, tmp_path):
    _load_golden(redis_client)
    for fmt in ("jsonl", "csv"):
        _export(redis_client, tmp_path / fmt, fmt)
        _golden(f"export_v{SCHEMA_VERSION}.{fmt}", (tmp_path / fmt / f"part-00000.{fmt}").read_bytes())


def test_golden_parquet_schema_spark_readable(redis_client, tmp_path):
    import pyarrow.parquet as pq

    _load_golden(redis_client)
    _export(redis_client, tmp_path, "parquet")
    schema = pq.read_schema(tmp_path / "part-00000.parquet")
    text = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    _golden(f"export_v{SCHEMA_VERSION}.parquet-schema.txt", (text + "\n").encode())
    assert schema.metadata[b"jobctl.schema_version"] == str(SCHEMA_VERSION).encode()
    assert str(schema.field("created_at").type) == "timestamp[us, tz=UTC]"
    # the Parquet rows equal the JSONL golden rows, value for value
    jsonl = [orjson.loads(line) for line in (GOLDEN / f"export_v{SCHEMA_VERSION}.jsonl").read_bytes().splitlines()]
    table = pq.read_table(tmp_path / "part-00000.parquet").to_pylist()
    for want, got in zip(jsonl, table, strict=True):
        for name in NAMES:
            value = got[name]
            if hasattr(value, "timestamp"):
                value = iso_ms(int(value.timestamp() * 1000))
            assert value == want[name], name


def test_iso_ms_round_trip():
    for ms in (0, NOW, -1, 253_402_300_799_999, -62_135_596_800_000, 1_782_972_000_001):
        assert parse_iso_ms(iso_ms(ms)) == ms
    assert iso_ms(NOW) == "2026-11-18T11:06:40.000Z"


# -- malformed envelopes, filters ----------------------------------------------------

def test_malformed_envelopes_are_exported_and_flagged(redis_client, tmp_path):
    _load_golden(redis_client)
    m = _export(redis_client, tmp_path, "jsonl").manifest
    rows = {r["job_id"]: r for r in map(orjson.loads, (tmp_path / "part-00000.jsonl").read_bytes().splitlines())}
    assert m.malformed == 6 and sum(r["malformed"] for r in rows.values()) == 6
    assert rows["job_g3"]["raw"].startswith('{"jobId": "job_g3"') and rows["job_g3"]["problems"].startswith("bad JSON")
    assert rows["job_g4"]["raw"] is None
    assert base64.b64decode(rows["job_g4"]["raw_base64"]) == dict(GOLDEN_DEAD)["job_g4"]
    assert rows["job_g4"]["problems"] == "not UTF-8 at byte 41"
    assert "missing field jobType" in rows["job_g5"]["problems"] and rows["job_g5"]["payload_json"] == '{"x":1}'
    assert rows["job_g6"]["problems"] == "missing payload key" and rows["job_g6"]["raw_bytes"] is None
    assert rows["job_g7"]["attempt"] is None and rows["job_g7"]["problems"] == "field attempt is not an integer"
    assert rows["job_g8"]["created_at"] is None and "createdAtEpochMs is not a time" in rows["job_g8"]["problems"]
    assert not rows["job_g1"]["malformed"] and not rows["job_g2"]["malformed"]
    assert rows["job_g2"]["redrive_count"] == 1 and rows["job_g2"]["redriven_at"] == iso_ms(NOW - 900_000)
    assert orjson.loads(rows["job_g2"]["extra_json"])["stackTraceHash"] == "9f8e7d"
    assert rows["job_g1"]["payload_sha1"] == payload_sha1(dict(GOLDEN_DEAD)["job_g1"])


def test_filter_keeps_malformed_it_cannot_judge(redis_client, tmp_path):
    _load_golden(redis_client)
    m = _export(redis_client, tmp_path, "jsonl", states=[State.DEAD],
                flt=compile_filter('tenant = tenant_1')).manifest
    ids = [r[0] for r in iter_rows(tmp_path, m, ("job_id",))]
    # job_g2 matches; g3..g8 are malformed (kept, flagged); g1 (another tenant) is not taken
    assert ids == ["job_g2", "job_g3", "job_g4", "job_g5", "job_g6", "job_g7", "job_g8"]
    assert m.selector["filter"] == "tenant = tenant_1"
    # an id-only filter is judged for every job, malformed or not
    m = _export(redis_client, tmp_path / "ids", "jsonl", states=[State.DEAD],
                flt=compile_filter("id ~ 'job_g[12]'")).manifest
    assert [r[0] for r in iter_rows(tmp_path / "ids", m, ("job_id",))] == ["job_g1", "job_g2"]


# -- manifest and checksums -------------------------------------------------------

def test_manifest_records_selector_counts_and_checksums(redis_client, tmp_path):
    _load_golden(redis_client)
    _export(redis_client, tmp_path, "csv", part_rows=3, batch=3)
    doc = orjson.loads((tmp_path / MANIFEST_NAME).read_bytes())
    assert doc["kind"] == "jobctl-export" and doc["schema_version"] == SCHEMA_VERSION
    assert doc["selector"] == {"queue": "golden", "layout": "reliable-list", "states": ["dead", "suppressed"],
                               "filter": "", "format": "csv"}
    assert doc["source"]["server"] == "redis://127.0.0.1:6379/0" and doc["source"]["shards"] == ["golden"]
    assert doc["snapshot_ms"] == NOW and doc["snapshot_at"] == iso_ms(NOW) and doc["complete"]
    assert doc["counts"] == {"dead": 8, "suppressed": 1} and doc["rows"] == 9 and doc["malformed"] == 6
    assert [p["rows"] for p in doc["parts"]] == [3, 3, 3]  # parts close at batch ends
    assert [c["name"] for c in doc["columns"]] == list(NAMES)
    import hashlib

    for p in doc["parts"]:
        data = (tmp_path / p["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == p["sha256"] and len(data) == p["bytes"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    load_manifest(tmp_path)  # verifies
    part = tmp_path / doc["parts"][1]["file"]
    part.write_bytes(part.read_bytes().replace(b"golden", b"GOLDEN", 1))
    with pytest.raises(DataError, match="SHA-256 differs"):
        load_manifest(tmp_path)
    part.unlink()
    with pytest.raises(DataError, match="missing"):
        load_manifest(tmp_path)


def _dead_queue(client, n: int, tag: str = "bulk") -> list[str]:
    keys = ReliableListKeys(tag)
    ids = [f"job_{i:05d}" for i in range(n)]
    pipe = client.pipeline(transaction=False)
    for i, job_id in enumerate(ids):
        pipe.set(keys.job(job_id), orjson.dumps(_env(job_id, tenantId=f"tenant_{i % 3}")))
        pipe.lpush(keys.dead, job_id)
    pipe.execute()
    return ids


class _StopAfter:
    def __init__(self, calls: int) -> None:
        self.calls = calls

    def __call__(self, scanned: int, exported: int) -> None:
        self.calls -= 1
        if self.calls == 0:
            raise KeyboardInterrupt


def test_interrupted_export_resumes_without_duplicates(redis_client, tmp_path):
    ids = _dead_queue(redis_client, 100)
    layout = _layout(redis_client, "bulk")
    with pytest.raises(KeyboardInterrupt):
        run_export(layout, tmp_path, fmt="parquet", part_rows=20, batch=10, progress=_StopAfter(5))
    m = load_manifest(tmp_path, complete=False)
    assert not m.complete and len(m.parts) == 2 and m.progress["batches"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [MANIFEST_NAME, "part-00000.parquet", "part-00001.parquet"]
    with pytest.raises(DataError, match="incomplete"):
        load_manifest(tmp_path)
    notes: list[str] = []
    res = run_export(layout, tmp_path, fmt="parquet", part_rows=20, batch=10, note=notes.append)
    assert res.resumed and res.skipped_batches == 4 and res.restarted is None
    assert "resuming" in notes[0]
    m = load_manifest(tmp_path)
    assert m.rows == 100 and len(m.parts) == 5 and m.snapshot_ms == res.manifest.snapshot_ms
    assert [r[0] for r in iter_rows(tmp_path, m, ("job_id",))] == ids
    again = run_export(layout, tmp_path, fmt="parquet", part_rows=20, batch=10)
    assert again.already_complete and again.manifest.rows == 100


def test_resume_starts_over_when_the_source_shifted(redis_client, tmp_path):
    ids = _dead_queue(redis_client, 60)
    layout = _layout(redis_client, "bulk")
    with pytest.raises(KeyboardInterrupt):
        run_export(layout, tmp_path, fmt="jsonl", part_rows=10, batch=10, progress=_StopAfter(3))
    redis_client.rpop(ReliableListKeys("bulk").dead)  # the oldest dead job left (redriven elsewhere)
    res = run_export(layout, tmp_path, fmt="jsonl", part_rows=10, batch=10)
    assert res.restarted and not res.resumed
    m = load_manifest(tmp_path)
    assert [r[0] for r in iter_rows(tmp_path, m, ("job_id",))] == ids[1:]


def test_out_dir_holding_something_else_is_refused(redis_client, tmp_path):
    _load_golden(redis_client)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        _export(redis_client, tmp_path / "a", "jsonl")
    _export(redis_client, tmp_path / "b", "jsonl")
    with pytest.raises(UsageError, match="holds another export"):
        _export(redis_client, tmp_path / "b", "csv")


# -- the CLI ---------------------------------------------------------------------

def test_cli_export(redis_url, redis_client, tmp_path, capsys):
    _load_golden(redis_client)
    out = tmp_path / "e"
    assert main(["--url", redis_url, "export", "golden", "--state", "dead", "--state", "suppressed",
                 "--out", str(out), "--format", "jsonl", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["rows"] == 9 and doc["counts"] == {"dead": 8, "suppressed": 1} and doc["complete"]
    assert main(["--url", redis_url, "export", "golden", "--state", "dead", "--state", "suppressed",
                 "--out", str(out), "--format", "jsonl"]) == 0
    io = capsys.readouterr()
    assert "already holds this export" in io.err and io.out.startswith("exported 9 job(s) of golden")
    assert main(["--url", redis_url, "export", "golden", "--out", str(tmp_path / "x"), "--filter", "tenant ="]) == 2
    assert "filter" in capsys.readouterr().err
    assert main(["--url", redis_url, "export", "nope", "--out", str(tmp_path / "y")]) == 5
    # read-only mode allows an export: it writes files, not Redis
    assert main(["--url", redis_url, "--read-only", "export", "golden", "--out", str(tmp_path / "z")]) == 0


# -- fences: export then purge, redrive --plan ------------------------------------------

def test_export_then_purge_purges_exactly_the_exported_ids(redis_url, redis_client, tmp_path, capsys):
    ids = _dead_queue(redis_client, 30)
    keys = ReliableListKeys("bulk")
    out = tmp_path / "dlq"
    assert main(["--url", redis_url, "purge", "bulk", "--state", "dead", "--yes"]) == 2
    assert "--export-to" in capsys.readouterr().err
    assert main(["--url", redis_url, "export", "bulk", "--out", str(out), "--filter", "tenant != tenant_2"]) == 0
    exported = set(manifest_fence(out, "bulk", State.DEAD))
    assert exported == {i for n, i in enumerate(ids) if n % 3 != 2}
    # after the export: one exported job changes, a new job dies
    changed = ids[0]
    redis_client.set(keys.job(changed), orjson.dumps(_env(changed, attempt=6)))
    redis_client.set(keys.job("job_new"), orjson.dumps(_env("job_new")))
    redis_client.lpush(keys.dead, "job_new")
    capsys.readouterr()
    rc = main(["--url", redis_url, "purge", "bulk", "--state", "dead", "--export-to", str(out), "--yes", "--json"])
    assert rc == 8  # one job skipped: changed since the export
    res = orjson.loads(capsys.readouterr().out)
    assert res["moved"] == len(exported) - 1 and res["skipped_reasons"] == {"changed since export": 1}
    left = {x.decode() for x in redis_client.lrange(keys.dead, 0, -1)}
    assert left == (set(ids) - exported) | {changed, "job_new"}
    assert all(redis_client.exists(keys.job(i)) == (i in left) for i in ids)


def test_purge_export_to_exports_first(redis_url, redis_client, tmp_path, capsys):
    ids = _dead_queue(redis_client, 12)
    out = tmp_path / "auto"
    rc = main(["--url", redis_url, "purge", "bulk", "--state", "dead", "--filter", "tenant = tenant_1",
               "--export-to", str(out), "--export-format", "jsonl", "--yes"])
    assert rc == 0
    m = load_manifest(out)
    assert m.format == "jsonl" and m.rows == 4 and m.selector["filter"] == "tenant = tenant_1"
    left = {x.decode() for x in redis_client.lrange(ReliableListKeys("bulk").dead, 0, -1)}
    assert left == {i for n, i in enumerate(ids) if n % 3 != 1}
    assert main(["--url", redis_url, "purge", "bulk", "--state", "dead", "--no-export",
                 "--export-to", str(out), "--yes"]) == 2


def test_redrive_plan_fence_without_spark(redis_url, redis_client, tmp_path, capsys):
    ids = _dead_queue(redis_client, 10)
    keys = ReliableListKeys("bulk")
    raws = dict(zip(ids, redis_client.mget([keys.job(i) for i in ids])))
    plan = tmp_path / "redrive-plan.jsonl"
    chosen = ids[:6]
    plan.write_bytes(b"".join(orjson.dumps({"queue": "bulk", "id": i, "payload_sha1": payload_sha1(raws[i]),
                                            "rule": "t", "class": "retryable"}) + b"\n" for i in chosen)
                     + orjson.dumps({"queue": "other", "id": "x", "payload_sha1": "0"}) + b"\n")
    assert read_redrive_plan(plan, "bulk") == {i: payload_sha1(raws[i]) for i in chosen}
    with pytest.raises(UsageError, match="for queue"):
        read_redrive_plan(plan, "email")
    redis_client.set(keys.job(ids[0]), b'{"changed": true}')  # changed since the export
    redis_client.lrem(keys.dead, 1, ids[1])                     # no longer dead
    rc = main(["--url", redis_url, "redrive", "bulk", "--plan", str(plan), "--yes", "--json"])
    assert rc == 8
    res = orjson.loads(capsys.readouterr().out)
    assert res["moved"] == 4 and res["skipped"] == 2
    assert res["skipped_reasons"] == {"changed since export": 1, "no longer dead": 1}
    assert res["plan"]["fence_skipped"] == 2
    ready = {x.decode() for x in redis_client.lrange(keys.ready, 0, -1)}
    assert ready == set(ids[2:6])
    assert {x.decode() for x in redis_client.lrange(keys.dead, 0, -1)} == {ids[0]} | set(ids[6:])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"queue": "bulk"}\n')
    assert main(["--url", redis_url, "redrive", "bulk", "--plan", str(bad), "--yes"]) == 6


def test_help_imports_neither_pyarrow_nor_pyspark():
    import subprocess
    import sys

    code = ("import sys\nfrom jobctl.cli.main import main\nfor argv in (['--help'], ['export', '--help'], "
            "['analyze', '--help'], ['purge', '--help']):\n    main(argv)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_purge_export_to_refuses_limit(redis_url, redis_client, tmp_path, capsys):
    """The export holds every matching job: a --limit would purge fewer than it
    archived, so the combination is refused before anything is written."""
    _dead_queue(redis_client, 6)
    before = redis_client.lrange(ReliableListKeys("bulk").dead, 0, -1)
    out = tmp_path / "limited"
    rc = main(["--url", redis_url, "purge", "bulk", "--state", "dead", "--export-to", str(out),
               "--limit", "2", "--yes"])
    assert rc == 2
    assert "--limit" in capsys.readouterr().err
    assert not out.exists()
    assert redis_client.lrange(ReliableListKeys("bulk").dead, 0, -1) == before
