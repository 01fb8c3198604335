"""A per-job call's jobs packed in one format each (the common case) are
the same RESP bytes as packed part by part."""

from __future__ import annotations

import hashlib

import redis

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops.plan import JobColumns, PlannedJob
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.walk.per_job import Jobs, PerJobWalk, shard_orders


def _walk(src, jobs: Jobs) -> PerJobWalk:
    return PerJobWalk(src, "redrive-x host 1", jobs, shard_orders(jobs)[0], bytearray(len(jobs)), len(jobs),
                      batch=10, depth=2, now_fn=lambda: 1)


def _columns() -> JobColumns:
    cols = JobColumns()
    for i, job_id in enumerate(["a", "job:é", "bad-\udcff-id", "x" * 300, "0"]):
        sha = "" if i == 3 else hashlib.sha1(job_id.encode("utf-8", "surrogateescape")).hexdigest()
        cols.append(PlannedJob(job_id=job_id, shard=0, position=None if i == 4 else 7 * i, score=None, sha1=sha))
    return cols


def test_one_format_a_job_packs_what_bulk_packs_part_by_part(redis_url):
    client = redis.Redis.from_url(redis_url, single_connection_client=True)
    spec = OpSpec(Operation.REDRIVE, "q", State.DEAD, State.READY, filter=compile_filter("id ~ '*'"))
    try:
        for layout in ("reliable-list", "hash-job"):
            src = layout_for(client, QueueConfig(name="q", layout=layout)).sources(spec)[0]
            jobs = Jobs(_columns())
            fast, slow = _walk(src, jobs), _walk(src, jobs)
            slow.blobs = False
            assert fast.blobs, layout
            assert [fast.frag(i, {}) for i in range(len(jobs))] == [slow.frag(i, {}) for i in range(len(jobs))]
    finally:
        client.close()


def test_shard_orders_read_from_columns_equal_those_read_job_by_job():
    cols = JobColumns()
    for i, (shard, pos) in enumerate([(2, 5), (0, 9), (2, 1), (0, 3), (1, None), (2, 8)]):
        cols.append(PlannedJob(job_id=f"j{i}", shard=shard, position=pos, score=None, sha1=""))
    planned = list(cols)
    assert {k: list(v) for k, v in shard_orders(Jobs(cols)).items()} == \
        {k: list(v) for k, v in shard_orders(Jobs(planned)).items()} == {2: [2, 0, 5], 0: [3, 1], 1: [4]}


def test_one_shard_in_order_is_a_range_however_large_the_spilled_plan(monkeypatch):
    from jobctl.ops import spill

    monkeypatch.setattr(spill, "JOB_CHUNK", 4)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", 8)
    cols = JobColumns()
    for i in range(50):
        cols.append(PlannedJob(job_id=f"j{i}", shard=3, position=None if i == 0 else i, score=None, sha1=""))
    assert cols.spilled and shard_orders(Jobs(cols)) == {3: range(50)}


def test_columns_that_do_not_match_are_refused_before_any_is_added():
    import pytest
    from array import array

    cols = JobColumns()
    for ids, ends, positions, digests in [(b"ab", array("q", [1]), array("q", [0, 1]), None),
                                          (b"ab", array("q", [1, 3]), array("q", [0, 1]), None),
                                          (b"ab", array("q", [1, 2]), array("q", [0, 1]), bytes(20))]:
        with pytest.raises(ValueError):
            cols.add_many(ids, ends, 0, positions, digests)
    assert len(cols) == 0
