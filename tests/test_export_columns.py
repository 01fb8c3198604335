"""The export's column paths (:mod:`jobctl.export.columns`, and Parquet's
:mod:`jobctl.export.arrow_columns`): built straight from the stored values,
they must give exactly the rows :func:`~jobctl.export.rows.record_row`
gives, and hand every window they do not take to the next path.  Real test
server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import orjson
import pyarrow as pa
import pytest

from jobctl.config import QueueConfig
from jobctl.export import arrow_columns
from jobctl.export.arrow_columns import window_record_batch
from jobctl.export.columns import ColumnBatch, window_columns
from jobctl.export.exporter import run_export
from jobctl.export.manifest import load_manifest
from jobctl.export.reader import iter_rows
from jobctl.export.parquet_writer import rows_to_table
from jobctl.export.rows import record_row
from jobctl.export.schema import column_index
from jobctl.keys import ReliableListKeys
from jobctl.layouts import layout_for
from jobctl.model import State

from test_export import GOLDEN_DEAD, NOW, _env, _expected_rows, _layout, _load_golden

K = ReliableListKeys("cols")

#: values the fast path takes (clean envelopes, odd but well-typed contents)
CLEAN = [
    orjson.dumps(_env("job_c1")),
    orjson.dumps(_env("job_c2", tenantId="tenant_\u00e9\u4e2d", payload={"note": "a\nb \"q\""}, traceId=None)),
    orjson.dumps(_env("job_c3", redrivenAtEpochMs=NOW - 1, redriveCount=2, stackTraceHash="x", other=None)),
    orjson.dumps(_env("job_c4", redriveCount=2.0, redrivenAtEpochMs="yesterday")),  # typed as record_row does
    orjson.dumps(_env("job_c5", payload=None, nextAttemptAtEpochMs=NOW, jobVersion=-(1 << 63))),
    orjson.dumps(_env("job_c6", payload=[1, "two", None], createdAtEpochMs=-62_135_596_800_000)),
    b'  {"jobId": "job_c7", "jobType": "t", "createdAtEpochMs": 1}  ',
]
#: values it must leave to the record path (each makes its window odd)
ODD = [
    orjson.dumps(_env("job_o1", attempt=3.0)),              # parse_envelope turns it into 3
    orjson.dumps(_env("job_o2", attempt=True)),             # a problem
    orjson.dumps(_env("job_o3", jobId=17)),                 # jobId as a number: made a string
    orjson.dumps(_env("job_o4", createdAtEpochMs=10**17)),  # out of the timestamp range
    orjson.dumps(_env("job_o5", jobVersion=1 << 63)),        # out of int64
    orjson.dumps(_env("job_o6", redriveCount=1 << 63)),      # extra out of int64
    orjson.dumps({"jobId": "job_o7"}),                      # missing fields
    b"[1, 2]",                                              # not an object
    b'{"jobId": "job_o9", "x": "\xff"}',                    # not UTF-8
    b"",                                                    # empty value
    None,                                                   # dangling id
    orjson.dumps(_env("job_o12", attempt=1.5)),             # Arrow's int conversion would truncate it
    orjson.dumps(_env("job_o13", createdAtEpochMs=float(NOW))),  # an integral float: made an int
    orjson.dumps(_env("job_o14", maxAttempts=0)).replace(b'"maxAttempts":0', b'"maxAttempts":18446744073709551616'),  # past 64 bits: a float
    orjson.dumps(_env("job_o15", lastErrorCode=503)),        # a number where text belongs
    orjson.dumps(_env("job_o16", jobType=None)),             # a required field null
]


def _fill(client, values: list[bytes | None], prefix: str) -> list[str]:
    ids = []
    for n, raw in enumerate(values):
        job_id = f"{prefix}{n}"
        if raw is not None:
            client.set(K.job(job_id), raw)
        client.lpush(K.dead, job_id)
        ids.append(job_id)
    return ids


def _windows(client, batch: int):
    return list(layout_for(client, QueueConfig(name="cols", tag="cols")).iter_raw_windows(State.DEAD, batch=batch))


def test_clean_window_gives_record_rows(redis_client):
    _fill(redis_client, CLEAN, "c")
    [w] = _windows(redis_client, 100)
    cols = window_columns(w, "cols", "reliable-list")
    assert cols is not None and cols.n == len(CLEAN) and cols.malformed == 0
    assert list(cols.rows()) == [record_row(r) for r in w.records()]


def test_clean_window_gives_the_record_rows_as_arrow(redis_client):
    _fill(redis_client, CLEAN, "c")
    [w] = _windows(redis_client, 100)
    rb = window_record_batch(w, "cols", "reliable-list")
    expected = [record_row(r) for r in w.records()]
    assert rb is not None and rb.num_rows == len(CLEAN)
    assert pa.Table.from_batches([rb]).equals(rows_to_table(expected))
    cols = ColumnBatch(rb.num_rows, [], arrow=rb)
    assert list(cols.rows()) == expected and cols.malformed == 0


def test_zset_window_gives_the_record_rows_as_arrow(redis_client):
    for n, raw in enumerate(CLEAN):
        redis_client.set(K.job(f"z{n}"), raw)
        redis_client.zadd(K.suppressed, {f"z{n}": NOW - n})
    [w] = list(layout_for(redis_client, QueueConfig(name="cols", tag="cols")).iter_raw_windows(State.SUPPRESSED))
    rb = window_record_batch(w, "cols", "reliable-list")
    assert rb is not None
    assert pa.Table.from_batches([rb]).equals(rows_to_table([record_row(r) for r in w.records()]))


@pytest.mark.parametrize("raw", ODD, ids=[f"odd{n}" for n in range(len(ODD))])
def test_odd_value_leaves_the_window_to_records(redis_client, raw):
    _fill(redis_client, [CLEAN[0], raw, CLEAN[1]], "o")
    [w] = _windows(redis_client, 100)
    assert window_columns(w, "cols", "reliable-list") is None
    assert window_record_batch(w, "cols", "reliable-list") is None


def test_payload_holding_the_separator_is_serialised_row_by_row(redis_client, tmp_path):
    """The Arrow path serialises a window's payloads in one call, cut at a
    separator string: a payload that holds it sends the window on."""
    values = [CLEAN[0], orjson.dumps(_env("job_s1", payload=[1, arrow_columns._SEP_TEXT, 2])), CLEAN[1]]
    _fill(redis_client, values, "s")
    [w] = _windows(redis_client, 100)
    assert window_record_batch(w, "cols", "reliable-list") is None
    assert list(window_columns(w, "cols", "reliable-list").rows()) == [record_row(r) for r in w.records()]
    layout = layout_for(redis_client, QueueConfig(name="cols", tag="cols"))
    res = run_export(layout, tmp_path / "s", fmt="parquet", snapshot_ms=NOW, server="s")
    assert list(iter_rows(tmp_path / "s", res.manifest)) == [record_row(r) for r in w.records()]


def test_undecodable_id_leaves_the_window_to_records(redis_client):
    redis_client.set(K.job("ok"), CLEAN[0])
    redis_client.set(K.job("bad\udcff".encode("utf-8", "surrogateescape")), CLEAN[1])
    redis_client.lpush(K.dead, b"ok", b"bad\xff")
    [w] = _windows(redis_client, 100)
    assert window_columns(w, "cols", "reliable-list") is None
    assert window_record_batch(w, "cols", "reliable-list") is None


def test_windows_match_iter_batches(redis_client):
    _fill(redis_client, CLEAN + ODD, "m")
    layout = layout_for(redis_client, QueueConfig(name="cols", tag="cols"))
    raw = [[(r.job_id, r.position, r.raw) for r in w.records()] for w in layout.iter_raw_windows(State.DEAD, batch=4)]
    parsed = [[(r.job_id, r.position, r.raw) for r in b] for b in layout.iter_batches(State.DEAD, batch=4)]
    assert raw == parsed and len(raw) == -(-len(CLEAN + ODD) // 4)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
@pytest.mark.parametrize("batch", [1, 3])
def test_mixed_windows_export_the_record_rows(redis_client, tmp_path, fmt, batch):
    """Windows of one job: the clean ones take the column path, the golden
    file's odd ones the record path; batches of 3 mix both in a window."""
    _load_golden(redis_client)
    res = run_export(_layout(redis_client), tmp_path / "x", states=[State.DEAD, State.SUPPRESSED], fmt=fmt,
                     snapshot_ms=NOW, server="s", batch=batch)
    assert res.manifest.rows == len(GOLDEN_DEAD) + 1
    assert list(iter_rows(tmp_path / "x", res.manifest)) == _expected_rows(redis_client)
    assert res.manifest.malformed == sum(1 for r in _expected_rows(redis_client) if r[column_index("malformed")])


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_clean_and_odd_export_round_trip(redis_client, tmp_path, fmt):
    _fill(redis_client, CLEAN * 3 + ODD + CLEAN, "r")
    layout = layout_for(redis_client, QueueConfig(name="cols", tag="cols"))
    res = run_export(layout, tmp_path / "y", fmt=fmt, snapshot_ms=NOW, server="s", batch=5,
                     writer_options={"row_group_rows": 4} if fmt == "parquet" else None)
    expected = [record_row(r) for b in layout.iter_batches(State.DEAD) for r in b]
    assert list(iter_rows(tmp_path / "y", res.manifest)) == expected
    load_manifest(tmp_path / "y")  # every part's SHA-256 (hashed as written, row group by row group) verified




_POOL_PROBE = """
import json, os, sys
import redis
from jobctl.config import QueueConfig
from jobctl.export.exporter import run_export
from jobctl.layouts import layout_for
layout = layout_for(redis.Redis.from_url(sys.argv[1]), QueueConfig(name="cols", tag="cols"))
res = run_export(layout, sys.argv[2], fmt="parquet", server="s", batch=4, writer_options={"row_group_rows": 4})
import pyarrow as pa  # loaded by the export
from jobctl.export.arrow_memory import ENCODER_POOL
others = {name: getattr(pa, name + "_memory_pool")().num_allocations()
          for name in pa.supported_memory_backends() if name not in ("system", ENCODER_POOL)}
print(json.dumps({"rows": res.manifest.rows, "default": pa.default_memory_pool().backend_name,
                  "encoder": ENCODER_POOL, "variable": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
                  "others": others}))
"""


def test_parquet_export_keeps_off_mimalloc(redis_client, redis_url, tmp_path):
    """A jobctl process's Parquet export (the column path with null payloads
    and extras, the record path, the encoding) takes its Arrow buffers from
    the system allocator and the encoder's default pool (jemalloc on Linux),
    never from pyarrow's own default, mimalloc, which kept freed buffers
    resident (``jobctl.export.arrow_memory``); the variable that chose the
    encoder's pool is gone again (child processes see the environment as it was)."""
    _fill(redis_client, CLEAN * 3 + ODD + CLEAN, "p")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", _POOL_PROBE, redis_url, str(tmp_path / "p")], env=env,
                         capture_output=True, text=True, check=True).stdout
    seen = orjson.loads(out)
    assert seen["rows"] == len(CLEAN) * 4 + len(ODD)
    assert seen["default"] == seen["encoder"]
    assert seen["variable"] is None
    assert seen["others"] and set(seen["others"].values()) == {0}


def test_an_operators_arrow_pool_wins(redis_client, redis_url, tmp_path):
    """``ARROW_DEFAULT_MEMORY_POOL`` set by the operator is left as it is."""
    _fill(redis_client, CLEAN, "q")
    env = dict(os.environ, ARROW_DEFAULT_MEMORY_POOL="system")
    out = subprocess.run([sys.executable, "-c", _POOL_PROBE, redis_url, str(tmp_path / "q")], env=env,
                         capture_output=True, text=True, check=True).stdout
    seen = orjson.loads(out)
    assert (seen["rows"], seen["default"], seen["variable"]) == (len(CLEAN), "system", "system")


def test_a_poison_job_goes_alone_and_its_window_is_parsed_once(redis_client, tmp_path, monkeypatch):
    """One poison job in a window of clean ones: only it is built record by
    record (one ``parse_envelope``), the clean runs around it keep the column
    path, each value is parsed once, and the rows come out in order."""
    from jobctl.export import window_runs as runs_module
    from jobctl.layouts.reliable_list import layout as rl_layout

    values = CLEAN * 4 + [b"{truncated", None, b"[1, 2]"] + CLEAN * 4
    _fill(redis_client, values, "p")
    layout = layout_for(redis_client, QueueConfig(name="cols", tag="cols"))
    expected = [record_row(r) for b in layout.iter_batches(State.DEAD) for r in b]
    parsed, loads = [], orjson.loads
    monkeypatch.setattr(rl_layout, "parse_envelope", lambda raw, _p=rl_layout.parse_envelope: parsed.append(raw) or _p(raw))
    monkeypatch.setattr(runs_module, "orjson", SimpleNamespace(loads=lambda raw: parsed.append(raw) or loads(raw),
                                                               JSONDecodeError=orjson.JSONDecodeError))
    res = run_export(layout, tmp_path / "p", fmt="parquet", snapshot_ms=NOW, server="s", batch=100)
    assert list(iter_rows(tmp_path / "p", res.manifest)) == expected
    assert res.manifest.malformed == 3
    assert len(parsed) == len(values) + 3  # every value once, plus the three poison ones on the record path
