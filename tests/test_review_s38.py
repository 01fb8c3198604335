"""Review of the per-job packing in one format, JobColumns.add_many /
shards_and_positions and the forked plan's columns: each fast path
gives what the per-job path gives (spilled columns, empty ids, positions
None/0, SHA1 present or not, side-table jobs)."""

from __future__ import annotations

import hashlib
import random
from array import array
from itertools import accumulate

import pytest
import redis

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.layouts import layout_for
from jobctl.model import State
from jobctl.ops import spill
from jobctl.ops.plan import JobColumns, PlannedJob
from jobctl.ops.spec import Operation, OpSpec
from jobctl.ops.walk.per_job import Jobs, PerJobWalk, shard_orders


def _rows(rng: random.Random, n: int, shard: int, sha: bool) -> list[tuple[str, int, int | None, bytes | None]]:
    """``n`` jobs of one shard: ids (some empty, some non-ASCII or
    surrogate-escaped), increasing positions (0 included), a digest each
    when ``sha``."""
    out, pos = [], rng.randrange(3)
    for _ in range(n):
        job_id = rng.choice(["", "a", "é" * rng.randrange(1, 4), "bad-\udcfe", f"j{rng.randrange(10**6)}"])
        out.append((job_id, shard, pos, hashlib.sha1(job_id.encode("utf-8", "surrogateescape")).digest()
                    if sha else None))
        pos += rng.randrange(1, 4)
    return out


def _fill_both(rng: random.Random, windows: int) -> tuple[JobColumns, JobColumns]:
    """The same jobs added one by one (``add``) and a window at a time
    (``add_many``), reading the latter back at random while it fills."""
    one, many = JobColumns(), JobColumns()
    for w in range(windows):
        rows = _rows(rng, rng.choice([0, 1, 2, 5, 11]), w % 3, sha=w % 2 == 0)
        for job_id, shard, pos, digest in rows:
            one.add(job_id, shard, pos, digest or bytes(20))
        ids = [r[0].encode("utf-8", "surrogateescape") for r in rows]
        digests = b"".join(r[3] for r in rows) if rows and rows[0][3] else None
        many.add_many(b"".join(ids), array("q", accumulate(map(len, ids))), w % 3, array("q", [r[2] for r in rows]),
                      digests)
        for n in rng.sample(range(len(many)), min(3, len(many))):  # the lookup cache moves while it fills
            assert (many.job_id(n), many.position(n), many.shard(n), many.sha1(n)) == \
                (one.job_id(n), one.position(n), one.shard(n), one.sha1(n))
    return one, many


@pytest.mark.parametrize("chunk, spill_at", [(3, 3), (4, 10), (65_536, 131_072)])
def test_add_many_gives_the_columns_add_gives_spilled_or_not(monkeypatch, chunk, spill_at):
    monkeypatch.setattr(spill, "JOB_CHUNK", chunk)
    monkeypatch.setattr(spill, "JOB_SPILL_AT", spill_at)
    one, many = _fill_both(random.Random(chunk), 60)
    assert len(one) == len(many) > 100 and one.spilled == many.spilled
    assert list(many) == list(one)
    order = list(range(len(one)))
    random.Random(1).shuffle(order)
    for name in ("job_id", "position", "shard", "sha1"):  # each accessor from a chunk not looked up last
        assert [getattr(many, name)(n) for n in order] == [getattr(one, name)(n) for n in order]
    def whole(cols):
        chunks = list(cols.shard_position_chunks())
        return [s for c in chunks for s in c[0]], [p for c in chunks for p in c[1]]

    assert whole(many) == whole(one)
    shards, positions = whole(one)
    assert shards == [j.shard for j in one] and positions == [j.position or 0 for j in one]


def _old_shard_orders(jobs: Jobs) -> dict:
    """shard_orders as it was before the columns were read a column at a time."""
    n = len(jobs)
    if all(jobs.shard(i) == jobs.shard(0) for i in range(n)):
        if all(jobs.position(i) <= jobs.position(i + 1) for i in range(n - 1)):
            return {jobs.shard(0): range(n)} if n else {}
        return {jobs.shard(0): array("q", sorted(range(n), key=jobs.position))}
    orders: dict = {}
    for i in range(n):
        orders.setdefault(jobs.shard(i), array("q")).append(i)
    for shard, order in orders.items():
        if any(jobs.position(order[i]) > jobs.position(order[i + 1]) for i in range(len(order) - 1)):
            orders[shard] = array("q", sorted(order, key=jobs.position))
    return orders


@pytest.mark.parametrize("seed", range(6))
def test_shard_orders_equal_those_read_job_by_job_spilled_with_side_table_jobs(spill_forced, seed):
    rng = random.Random(seed)
    cols = JobColumns()
    shards = [0] if seed % 2 else [0, 1, 2]
    for i in range(rng.randrange(0, 40)):
        sha = "odd" if i % 7 == 3 else ""  # kept in the side table
        cols.append(PlannedJob(job_id=f"j{i}", shard=rng.choice(shards), score=None, sha1=sha,
                               position=None if i % 9 == 4 else (i if seed < 2 else rng.randrange(50))))
    for jobs in (Jobs(cols), Jobs(list(cols))):
        got = {k: list(v) for k, v in shard_orders(jobs).items()}
        assert got == {k: list(v) for k, v in _old_shard_orders(jobs).items()}


def _frags(src, cols: JobColumns, fast: bool) -> list:
    jobs = Jobs(cols)
    order = shard_orders(jobs)[0]
    walk = PerJobWalk(src, "redrive-x host 1", jobs, order, bytearray(len(jobs)), len(jobs), batch=10, depth=2,
                      now_fn=lambda: 1)
    assert walk.blobs
    walk.blobs = fast
    return [walk.frag(i, {}) for i in range(len(jobs))]


def _odd_columns() -> JobColumns:
    cols = JobColumns()
    for i in range(30):
        job_id = ["", "é", "bad-\udcff", "x" * 70, str(i)][i % 5]
        sha = ["", hashlib.sha1(b"%d" % i).hexdigest(), "not a sha1", "ABCDEF" * 6 + "0123"][i % 4]
        cols.append(PlannedJob(job_id=job_id, shard=0, position=None if i % 6 == 0 else 3 * i, score=None, sha1=sha))
    return cols


def test_one_format_packs_what_bulk_packs_on_spilled_columns_with_side_table_jobs(redis_url, spill_forced):
    """Spilled columns, empty ids, position None and 0, no SHA1, an
    upper-case SHA1 and one kept as is (the side table)."""
    client = redis.Redis.from_url(redis_url, single_connection_client=True)
    spec = OpSpec(Operation.REDRIVE, "q", State.DEAD, State.READY, filter=compile_filter("id ~ '*'"))
    try:
        for layout in ("reliable-list", "hash-job", "stream-group"):
            src = layout_for(client, QueueConfig(name="q", layout=layout)).sources(spec)[0]
            cols = _odd_columns()
            assert cols.spilled
            assert _frags(src, cols, True) == _frags(src, cols, False), layout
    finally:
        client.close()


def _parts(rng: random.Random, sha: bool) -> list[tuple]:
    """Windows as ``_scan_shards`` yields them: shards in turn, positions
    counted on, some ids set aside, some windows without a match."""
    parts = []
    for shard in range(3):
        start = 0
        for _ in range(rng.randrange(0, 6)):
            count = rng.randrange(0, 9)
            set_aside, matched = [], []
            for n in range(start, start + count):
                job_id = rng.choice(["", "é", "bad-\udcfd", f"j{shard}-{n}"])
                kind = rng.randrange(4)
                if kind == 0:
                    set_aside.append((n, job_id, rng.random() < 0.5))
                elif kind > 1:
                    digest = hashlib.sha1(job_id.encode("utf-8", "surrogateescape")).hexdigest() if sha else ""
                    matched.append((job_id, n, digest, (rng.choice("ab"), None)))
            parts.append((shard, start, count, set_aside, matched))
            start += count
    return parts


@pytest.mark.parametrize("seed", range(8))
def test_the_columns_merge_of_a_forked_plan_equals_the_merge_job_by_job(spill_forced, seed):
    import jobctl.layouts.reliable_list.lean_plan as lean
    from jobctl.ops.plan import Plan

    spec = OpSpec(Operation.REDRIVE, "q", State.DEAD, State.READY, filter=compile_filter("id ~ '*'"))
    parts = _parts(random.Random(seed), sha=seed % 2 == 0)
    one, many = (Plan(spec=spec, now_ms=1, jobs=JobColumns()) for _ in range(2))
    for part in parts:
        lean._merge(one, *part)
    for part in lean._as_columns(iter(parts), seed % 2 == 0):
        lean._merge_columns(many, *part)
    assert list(many.jobs) == list(one.jobs)
    assert (many.scanned, many.walked, many.breakdown, many.dangling, many.malformed) == \
        (one.scanned, one.walked, one.breakdown, one.dangling, one.malformed)


def _counting(label: str, limit: int, die_after: int | None = None):
    def task(halted):
        import os

        for n in range(limit):
            if halted():
                return
            yield (label, n, os.getpid())
            if n == die_after:
                os.kill(os.getpid(), 9)

    return task


def test_a_killed_child_among_live_ones_with_fds_reused_by_a_nested_run():
    """One child killed after its first item while another runs; each item
    the caller takes opens and closes a run of its own (its pipes reuse the
    numbers of closed ones): the other is halted, every item it sent
    arrives in order, then the dead child's error; no child left unreaped."""
    import os

    from jobctl.errors import ConnectionFailed
    from jobctl.ops.walk.processes import FORKS, run_forked

    if not FORKS:
        pytest.skip("tasks run in threads where fork is not used")
    got, pids = [], set()
    with pytest.raises(ConnectionFailed, match="dead-one"):
        for item in run_forked([_counting("k", 50, die_after=0), _counting("a", 60)], ["dead-one", "live"], None):
            got.append(item[:2])
            pids.add(item[2])
            inner = list(run_forked([_counting("i", 2)], ["inner"], None))
            assert [x[:2] for x in inner] == [("i", 0), ("i", 1)]
            pids.add(inner[0][2])
    live = [x for x in got if x[0] == "a"]
    assert ("k", 0) in got and live == [("a", n) for n in range(len(live))] and len(got) == len(live) + 1
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_closing_after_one_child_ended_drains_the_others():
    import os

    from jobctl.ops.walk.processes import FORKS, run_forked

    if not FORKS:
        pytest.skip("tasks run in threads where fork is not used")
    it = run_forked([_counting("s", 1), _counting("l", 10_000)], ["short", "long"], None)
    seen = [next(it) for _ in range(8)]
    it.close()
    for pid in {x[2] for x in seen}:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
