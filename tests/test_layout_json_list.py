"""The json-list layout (seed 002) on a real server: claim times in seconds,
the stuck rule against the seed's own recovery, byte-identical moves, the
bounded dead-list walk that keeps the order (also when stopped early or when
workers dead-letter meanwhile), attempts and errors, malformed strings,
check and its repairs, configurable prefixes, iter_batches, discovery."""

from __future__ import annotations

import json

import pytest

from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.layouts.json_list.discover import recognize
from jobctl.errors import NotFound
from jobctl.filter import compile_filter
from jobctl.keys import JsonListKeys
from jobctl.layouts import layout_for
from jobctl.layouts.json_list.layout import MALFORMED_ID_PREFIX, raw_sha1
from jobctl.layouts.json_list.tail_plan import JsonTailRange
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl_fixtures.layouts.json_list import (ADAPTER, MALFORMED_DEAD, MAX_RETRIES, VISIBILITY_TIMEOUT_MS,
                                               JsonListQueue, load_scenario)
from helpers import assert_every_state_batched, export_dead, purge_exported, write_config

P = "jobs"
SIZE = 120
VT = VISIBILITY_TIMEOUT_MS
NOW = 1_795_000_000_000


def layout(client, prefix: str = P):
    return layout_for(client, ADAPTER.queue_config(prefix))


def queue(client, prefix: str = P) -> JsonListQueue:
    return JsonListQueue(client, prefix, max_retries=MAX_RETRIES, timeout_ms=VT)


def apply(lay, spec, now=None, batch=None):
    return run_plan(lay, lay.plan(spec, now), journal=False, batch=batch)


def dead_list(client, prefix: str = P) -> list[bytes]:
    return client.lrange(JsonListKeys(prefix).dead, 0, -1)


def make_dead(client, n: int, prefix: str = P) -> list[bytes]:
    """``n`` jobs dead-lettered by the seed's worker, oldest first."""
    q = queue(client, prefix)
    for i in range(n):
        q.enqueue({"id": f"d{i:03d}", "task": "charge_card" if i % 3 else "send_email", "n": i})
        for _ in range(MAX_RETRIES):
            q.nack(q.claim(now=NOW), "card declined")
    return dead_list(client, prefix)


# -- status and the stuck rule ---------------------------------------------------------

def test_stuck_matches_the_seeds_recovery(redis_client):
    exp = load_scenario(redis_client, "stuck-workers", prefix=P, size=SIZE, now_ms=NOW)
    st = layout(redis_client).status(NOW)
    assert (st.processing, st.stuck) == (exp["processing"], exp["stuck"])
    assert set(queue(redis_client).recover_stuck(now=NOW)) == exp["stuck_ids"]


def test_claim_times_are_seconds_in_redis_and_ms_in_the_model(redis_client):
    q = queue(redis_client)
    q.enqueue({"id": "a", "task": "send_email"})
    q.claim(now=NOW - VT - 1_234)
    q.enqueue({"id": "b", "task": "send_email"})
    q.claim(now=NOW - VT)
    k = JsonListKeys(P)
    assert redis_client.zscore(k.processing_times, "a") == pytest.approx((NOW - VT - 1_234) / 1000)
    lay = layout(redis_client)
    st = lay.status(NOW)
    assert (st.stuck, st.next_deadline_ms) == (1, NOW)      # b's deadline is now: not stuck yet
    rec = lay.inspect("a")
    assert rec.meta["claimed_at_ms"] == NOW - VT - 1_234 and rec.deadline_ms == NOW - 1_234
    assert [r.job_id for r in lay.list_jobs(State.PROCESSING)] == ["a", "b"]


def test_defaults_and_prefixes(redis_client):
    lay = layout_for(redis_client, QueueConfig(name="anything", layout="json-list"))
    assert lay.keys.pending == "jobs:pending" and lay.visibility_ms == 300_000
    queue(redis_client, "emails").enqueue({"id": "e1", "task": "send_email"})
    queue(redis_client, "images").enqueue({"id": "i1", "task": "resize_image"})
    assert layout(redis_client, "emails").status().ready == 1
    assert [r.job_id for r in layout(redis_client, "images").list_jobs(State.READY)] == ["i1"]
    with pytest.raises(NotFound):
        layout(redis_client, "emails").inspect("i1")


# -- requeue ----------------------------------------------------------------------------

def test_requeue_moves_the_exact_bytes_to_the_claim_end(redis_client):
    k = JsonListKeys(P)
    odd = b'{ "id" : "odd",  "task":"send_email", "name": "Ren\\u00e9" }'  # not how json.dumps writes it
    redis_client.lpush(k.pending, odd)
    q = queue(redis_client)
    q.claim(now=NOW - 2 * VT)
    q.enqueue({"id": "next", "task": "send_email"})
    lay = layout(redis_client)
    res = apply(lay, OpSpec(Operation.REQUEUE, P, State.PROCESSING, State.READY, stuck_only=True), NOW)
    assert res.moved == 1
    assert redis_client.lindex(k.pending, -1) == odd        # byte for byte, claimed next (RPUSH)
    assert redis_client.zcard(k.processing_times) == 0 and redis_client.llen(k.processing) == 0
    assert redis_client.hget(k.attempts, "odd") is None     # undoing a claim is not a failure
    job = q.claim()
    assert job.raw == odd and q.ack(job)


def test_requeue_is_fenced_to_the_claim_time(redis_client):
    q = queue(redis_client)
    for i in range(3):
        q.enqueue({"id": f"j{i}", "task": "send_email"})
    claims = [q.claim(now=NOW - 2 * VT) for _ in range(3)]
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REQUEUE, P, State.PROCESSING, State.READY, stuck_only=True), NOW)
    assert plan.planned == 3
    assert q.ack(claims[0])                                        # acked meanwhile: gone
    redis_client.zadd(JsonListKeys(P).processing_times, {"j1": NOW / 1000})  # re-stamped: changed
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 1 and res.skipped_reasons == {"changed": 1, "gone": 1}
    assert redis_client.lrange(JsonListKeys(P).pending, 0, -1) == [claims[2].raw]


# -- the dead list ----------------------------------------------------------------------

def test_redrive_subset_keeps_the_order_of_the_rest(redis_client):
    before = make_dead(redis_client, 40)
    lay = layout(redis_client)
    spec = OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY, filter=compile_filter('type = "send_email"'))
    plan = lay.plan(spec)
    emails = [r for r in before if b"send_email" in r]
    assert plan.planned == len(emails) == 14
    res = run_plan(lay, plan, journal=False, batch=5)           # many small windows
    assert res.moved == 14 and res.skipped == 0
    assert dead_list(redis_client) == [r for r in before if b"send_email" not in r]
    pending = redis_client.lrange(JsonListKeys(P).pending, 0, -1)
    assert sorted(pending) == sorted(emails)                     # the byte-identical strings
    assert redis_client.hget(JsonListKeys(P).attempts, "d000") == str(MAX_RETRIES).encode()  # kept


def test_dead_walk_with_new_dead_letters_and_an_early_stop(redis_client):
    before = make_dead(redis_client, 30)
    evens = compile_filter('id ~ "d0?[02468]"')
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None, filter=evens))
    assert plan.planned == 15
    batches = lay.apply(plan, batch=4)
    assert len(next(batches).moved) == 2                         # d000, d002; d001, d003 rotated
    late = b'{"id": "late", "task": "sync_crm"}'
    redis_client.rpush(JsonListKeys(P).dead, late)               # a worker dead-letters meanwhile
    assert len(next(batches).moved) == 2
    batches.close()                                              # stopped between calls (Ctrl-C)
    after = dead_list(redis_client)
    assert after == [r for r in before if r not in (before[0], before[2], before[4], before[6])] + [late]
    rest = lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None, filter=evens))
    assert run_plan(lay, rest, journal=False, batch=4).moved == 11
    assert dead_list(redis_client) == before[1::2] + [late]


def test_suppress_unsuppress_and_purge(redis_client):
    before = make_dead(redis_client, 10)
    k = JsonListKeys(P)
    lay = layout(redis_client)
    spec = OpSpec(Operation.SUPPRESS, P, State.DEAD, State.SUPPRESSED, filter=compile_filter('id = "d003"'),
                  reason="fraud test card")
    assert apply(lay, spec).moved == 1
    rec = lay.inspect("d003")
    assert rec.state is State.SUPPRESSED and rec.raw == before[3] and rec.meta["suppressed"]["reason"]
    assert [r.job_id for r in lay.list_jobs(State.SUPPRESSED)] == ["d003"]
    assert apply(lay, OpSpec(Operation.UNSUPPRESS, P, State.SUPPRESSED, State.DEAD)).moved == 1
    assert dead_list(redis_client)[-1] == before[3]              # back at the newest end, same bytes
    assert redis_client.exists(k.suppressed, k.suppressed_raw, k.suppressed_info) == 0
    apply(lay, OpSpec(Operation.SUPPRESS, P, State.DEAD, State.SUPPRESSED, filter=compile_filter('id = "d004"'),
                      reason="x"))
    assert apply(lay, OpSpec(Operation.PURGE, P, State.SUPPRESSED, None)).moved == 1
    assert redis_client.hget(k.attempts, "d004") is None and redis_client.hget(k.errors, "d004") is None
    assert redis_client.exists(k.suppressed_raw) == 0


def test_redrive_reset_attempts(redis_client):
    make_dead(redis_client, 3)
    k = JsonListKeys(P)
    lay = layout(redis_client)
    res = apply(lay, OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY, ids=("d001",), reset_attempts=True))
    assert res.moved == 1 and redis_client.hget(k.attempts, "d001") is None
    q = queue(redis_client)
    job = q.claim()
    assert job.id == "d001" and q.nack(job, "again")
    assert redis_client.llen(k.dead) == 2                        # a fresh retry budget: back in pending
    apply(lay, OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY, ids=("d000",)))
    while (job := q.claim()) is not None and job.id != "d000":
        q.ack(job)
    q.nack(job, "still declined")
    assert dead_list(redis_client)[-1].startswith(b'{"id": "d000"')  # attempts kept: dead at once


def test_malformed_strings(redis_client):
    exp = load_scenario(redis_client, "dlq-spike", prefix=P, size=SIZE, now_ms=NOW)
    [bad] = exp["malformed_ids"]
    assert bad == MALFORMED_ID_PREFIX + raw_sha1(MALFORMED_DEAD)
    lay = layout(redis_client)
    rec = lay.inspect(bad)
    assert rec.state is State.DEAD and rec.raw == MALFORMED_DEAD and rec.envelope.problems
    plan = lay.plan(OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY))
    # unfiltered: a count of tail positions (JsonTailRange); the malformed string is listed, not planned
    assert plan.malformed == [bad] and plan.planned == plan.walked[0] - 1
    before = redis_client.llen(JsonListKeys(P).dead)
    res = run_plan(lay, plan, journal=False)
    assert res.moved == before - 1 and bad not in res.skipped_sample
    assert dead_list(redis_client) == [MALFORMED_DEAD]           # it stays dead, uncounted
    purge = lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None, ids=(bad,)))
    assert run_plan(lay, purge, journal=False).moved == 1
    assert MALFORMED_DEAD not in dead_list(redis_client)
    assert lay.check().ok


# -- an unfiltered redrive or purge: the tail walk (jl_tail.lua) -----------------------------

@pytest.mark.parametrize("batch", [None, 1, 7])
def test_unfiltered_redrive_moves_the_tail_in_the_per_job_order(redis_client, batch):
    before = make_dead(redis_client, 30)
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY, limit=25))
    assert isinstance(plan.jobs, JsonTailRange) and plan.planned == 25 and plan.truncated
    assert "25 oldest dead job(s) by position" in plan.describe()
    res = run_plan(lay, plan, journal=False, batch=batch)
    assert res.moved == 25 and not res.skipped and not res.failed
    k = JsonListKeys(P)
    # byte for byte, each pushed at pending's left as one LMOVE LEFT LEFT would
    assert redis_client.lrange(k.pending, 0, -1) == before[:25][::-1]
    assert dead_list(redis_client) == before[25:] and not redis_client.exists(k.hold)
    assert redis_client.hget(k.attempts, "d000") is not None        # attempts kept
    assert lay.inspect("d024").meta["redriven"]


def test_unfiltered_purge_takes_the_strings_and_their_entries(redis_client):
    before = make_dead(redis_client, 12)
    redis_client.rpush(JsonListKeys(P).dead, MALFORMED_DEAD)
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None))
    assert isinstance(plan.jobs, JsonTailRange) and plan.planned == 13 and not plan.malformed
    res = run_plan(lay, plan, journal=False, batch=5)
    assert res.moved == 13 and dead_list(redis_client) == [] and before
    k = JsonListKeys(P)
    assert not redis_client.exists(k.attempts) and not redis_client.exists(k.errors)


def test_unfiltered_purge_with_rate_stops_after_the_call_it_saw(redis_client):
    k = JsonListKeys(P)
    els = [b'{"id": "s%03d", "task": "t"}' % i for i in range(100)]
    redis_client.rpush(k.dead, *els)
    redis_client.hset(k.attempts, mapping={"s000": 3, "s099": 3})
    lay = layout(redis_client)
    seen: list[int] = []
    res = run_plan(lay, lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None)), batch=10, rate=1_000_000,
                   journal=False, progress=lambda done, total: seen.append(done), stop=lambda: len(seen) >= 3)
    assert res.interrupted and res.moved == 30  # one call a round trip: three calls
    assert dead_list(redis_client) == els[30:] and redis_client.hkeys(k.attempts) == [b"s099"]
    assert not redis_client.exists(k.hold) and not redis_client.exists(k.lease)
    res2 = run_plan(lay, lay.plan(OpSpec(Operation.PURGE, P, State.DEAD, None)), journal=False)  # resumed
    assert (res2.moved, res2.skipped) == (70, 0) and dead_list(redis_client) == []


def test_tail_script_moves_only_the_strings_read(redis_client):
    """Entry 1 is as read: moved; entry 2 changed since: held with its code;
    entry 3 excluded (id ""): held uncounted.  The hold keeps the order."""
    k = JsonListKeys(P)
    a, b, c = b'{"id": "a"}', b'{"id": "b"}', b'{"id": "c"}'
    redis_client.rpush(k.dead, a, b, c)
    redis_client.set(k.lease, "lv", px=60_000)
    redis_client.hset(k.walk, mapping={"op": "op1", "total": 3, "popped": 0, "record_ttl": 600_000})
    keys = [k.dead, k.hold, k.walk, k.lease, k.pending, "jobs:redriven", k.suppressed_info, k.suppressed_raw,
            k.attempts, k.errors]
    args = ["jl", "ready", "op1", "lv", 50_000, 3, NOW, NOW, "0", "", 0, 3, 0, 0, "",
            a, "a", b'{"id": "b", "x": 1}', "b", c, ""]
    reply = script(redis_client, "jl_tail")(keys=keys, args=args)
    assert reply == [3, 3, 0, 1, 2, 2, b"not at its planned position"]
    assert redis_client.lrange(k.pending, 0, -1) == [a] and redis_client.lrange(k.hold, 0, -1) == [b, c]
    assert not redis_client.exists(k.dead) and redis_client.hexists("jobs:redriven", "a")


@pytest.mark.parametrize("mode", ["ready", "purge"])
def test_tail_script_compares_every_byte_of_a_run(redis_client, mode):
    """A string whose bytes changed since the read (same length, the middle
    of a run) is held; the strings around it still move, in order."""
    k = JsonListKeys(P)
    els = [b'{"id": "%s", "n": 1}' % x for x in (b"a", b"b", b"c", b"d")]
    changed = b'{"id": "b", "n": 2}'
    redis_client.rpush(k.dead, els[0], changed, *els[2:])
    redis_client.hset(k.attempts, mapping={"a": 1, "b": 1, "c": 1, "d": 1})
    redis_client.set(k.lease, "lv", px=60_000)
    redis_client.hset(k.walk, mapping={"op": "op1", "total": 4, "popped": 0, "record_ttl": 600_000})
    keys = [k.dead, k.hold, k.walk, k.lease, k.pending if mode == "ready" else k.dead, "jobs:redriven",
            k.suppressed_info, k.suppressed_raw, k.attempts, k.errors]
    args = ["jl", mode, "op1", "lv", 50_000, 4, NOW, NOW, "0", "", 0, 4, 0, 0, "",
            *[v for el, i in zip(els, "abcd") for v in (el, i)]]
    reply = script(redis_client, "jl_tail")(keys=keys, args=args)
    assert reply == [4, 4, 0, 3, 1, 2, b"not at its planned position"]
    assert redis_client.lrange(k.hold, 0, -1) == [changed] and not redis_client.exists(k.dead)
    if mode == "ready":
        assert redis_client.lrange(k.pending, 0, -1) == [els[3], els[2], els[0]]
    else:
        assert redis_client.hkeys(k.attempts) == [b"b"]


# -- check ------------------------------------------------------------------------------

def test_check_finds_and_repairs(redis_client):
    exp = load_scenario(redis_client, "stuck-workers", prefix=P, size=SIZE)  # the repair reads the clock
    k = JsonListKeys(P)
    lay = layout(redis_client)
    assert lay.check().counts() == {"missing_claim_time": 1}
    dup = redis_client.lindex(k.pending, 0)
    redis_client.lpush(k.pending, dup)                              # the same string twice
    redis_client.zadd(k.processing_times, {"phantom": NOW / 1000})  # a claim time without a job
    redis_client.rpush(k.dead, b'{"id": "job_1_x", "task": "a"}')
    redis_client.lpush(k.pending, b'{"id": "job_1_x", "task": "a"}')  # one id, two states
    report = lay.check()
    assert report.counts() == {"missing_claim_time": 1, "duplicate": 1, "stray_claim_time": 1,
                               "multiple_states": 1}
    report = lay.check(repair=True)
    assert {p.kind for p in report.problems if p.repaired} == {"missing_claim_time", "duplicate",
                                                               "stray_claim_time"}
    assert lay.check().counts() == {"multiple_states": 1}
    # the repaired claim time makes the stranded job visibly stuck: requeue takes it
    res = apply(lay, OpSpec(Operation.REQUEUE, P, State.PROCESSING, State.READY, stuck_only=True))
    assert res.moved == exp["stuck"] + 1


@pytest.mark.parametrize("scenario", ["healthy", "dlq-spike", "stuck-workers"])
def test_iter_batches_covers_every_state(redis_client, scenario):
    load_scenario(redis_client, scenario, prefix=P, size=SIZE, now_ms=NOW)
    records = assert_every_state_batched(layout(redis_client), P, batch=7)
    assert all(r.raw is not None and r.meta["sha1"] == raw_sha1(r.raw) for r in records)


def test_attempts_histogram_from_the_attempts_hash(redis_client, redis_url, tmp_path, capsys):
    exp = load_scenario(redis_client, "healthy", prefix=P, size=SIZE, now_ms=NOW)
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f'[queues.work]\nlayout = "json-list"\ntag = "{P}"\nvisibility_timeout_ms = {VT}\n')
    assert main(["--url", redis_url, "--config", str(cfg), "attempts", "work", "--state", "dead", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"] == {str(MAX_RETRIES): exp["dead"]}
    assert main(["--url", redis_url, "--config", str(cfg), "attempts", "work", "--state", "ready", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["1"] == len(exp["ids_by_state"]["ready"]) - counts["0"] > 0


# -- discovery ----------------------------------------------------------------------------

def test_recognize():
    keys = {
        "jobs:pending": b"list", "jobs:processing": b"list", "jobs:processing:times": b"zset",
        "jobs:attempts": b"hash", "jobs:dead": b"list", "jobs:errors": b"hash", "jobs:jobctl:journal": b"stream",
        "emails:dead": b"list", "emails:errors": b"hash",            # only a DLQ so far: still a queue
        "cache:pending": b"list",                                    # a list alone: not enough
        "odd:pending": b"list", "odd:attempts": b"string",           # wrong type
        "queue:{x}:processing": b"list", "queue:{x}:processing:deadline": b"zset",  # a reliable-list
        "queue:jobs:pending": b"list", "queue:jobs:job:1": b"hash",  # a hash-job
    }
    found = {qc.name: (qc, ev) for qc, ev in recognize(keys)}
    assert set(found) == {"jobs", "emails"}
    qc, ev = found["jobs"]
    assert (qc.layout, qc.tag, qc.discovered) == ("json-list", "jobs", True)
    assert "jobs:processing:times" in ev and "jobs:jobctl:journal" in ev


def test_discover_checks_a_sample(redis_client):
    from jobctl.discovery import discover

    load_scenario(redis_client, "dlq-spike", prefix=P, size=40, now_ms=NOW)
    redis_client.rpush("decoy:pending", "not a job", "neither")      # named like a queue, no job inside
    redis_client.hset("decoy:attempts", "x", 1)
    d = discover(redis_client, layouts=("json-list",))
    assert [(q.name, q.layout, q.tag) for q in d.queues] == [(P, "json-list", P)]
    assert "decoy:pending" in d.rejected


def test_export_then_purge_exactly_the_export(redis_client, redis_url, tmp_path, capsys):
    exp = load_scenario(redis_client, "dlq-spike", prefix=P, size=60)
    base = ["--url", redis_url, "--config", write_config(
        tmp_path, f'[queues.work]\nlayout = "json-list"\ntag = "{P}"\nvisibility_timeout_ms = {VT}\n')]
    out = tmp_path / "export"
    assert export_dead(base, "work", out) == exp["ids_by_state"]["dead"]
    late = b'{"id": "late", "task": "sync_crm"}'
    redis_client.rpush(JsonListKeys(P).dead, late)        # dead-lettered after the export: not purged
    res = purge_exported(capsys, base, "work", out)
    assert res["moved"] == exp["dead"]
    assert dead_list(redis_client) == [late]


def test_a_key_of_the_wrong_type(redis_client):
    from jobctl.errors import DataError

    queue(redis_client).enqueue({"id": "a", "task": "send_email"})
    redis_client.set(JsonListKeys(P).dead, "oops")
    lay = layout(redis_client)
    st = lay.status()
    assert st.ready == 1 and st.errors == [f"key {JsonListKeys(P).dead} holds the wrong Redis type"]
    with pytest.raises(DataError):
        lay.inspect("a")


def test_unfiltered_redrive_leaves_malformed_strings_past_the_plans_scan_dead_uncounted(redis_client):
    """The plan lists the malformed strings among the oldest MALFORMED_SCAN
    only; one beyond that is left dead by the apply all the same, counted
    neither moved, skipped nor failed, and a rerun moves nothing."""
    from jobctl.layouts.json_list.tail_plan import MALFORMED_SCAN

    before = make_dead(redis_client, MALFORMED_SCAN + 5)
    redis_client.rpush(JsonListKeys(P).dead, MALFORMED_DEAD)   # the newest: past the scan
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY))
    assert isinstance(plan.jobs, JsonTailRange) and not plan.malformed
    assert "malformed job strings stay dead" in plan.describe()
    res = run_plan(lay, plan, journal=False)
    assert res.moved == len(before) and not res.skipped and not res.failed
    assert dead_list(redis_client) == [MALFORMED_DEAD] and not redis_client.exists(JsonListKeys(P).hold)
    again = lay.plan(OpSpec(Operation.REDRIVE, P, State.DEAD, State.READY))
    assert again.malformed == [MALFORMED_ID_PREFIX + raw_sha1(MALFORMED_DEAD)] and again.planned == 0


@pytest.mark.parametrize("raw,expected", [
    (b'{"id": "a1", "task": "t"}', ("a1", False)), (b'{"id": 7}', ("7", False)),
    (b'{"id": "x", "id": "y"}', ("y", False)),  # the last of two ids, as the envelope reads it
    (b'{"id": true}', None), (b'{"id": 1.5}', None), (b'{"id": ""}', None), (b'{"id": null}', None),
    (b'{"task": "t"}', None), (b'["id"]', None), (b'"id"', None), (b'{"id": "a"', None), (b'\xff{}', None)])
def test_element_id_names_what_parse_names(raw, expected):
    """The tail walk's id of a dead string is the id the envelope parse gives
    it: a malformed string (not a JSON object with a string or integer id)
    gets ``sha1:<hex>``."""
    from jobctl.layouts.json_list.layout import element_id

    assert element_id(raw) == (expected or (MALFORMED_ID_PREFIX + raw_sha1(raw), True))
    env = layout(None).parse(raw)
    assert (env.job_id, bool(env.problems)) == element_id(raw)


def test_tail_pairs_pack_as_one_bulk_string_each():
    """The tail walk packs each (string, id) pair at once: the same bytes as
    one bulk string each (an empty id, a surrogate-escaped one)."""
    from jobctl.ops.walk.wire import bulk, pairs_blob

    values, names = [b'{"id": "a"}', b"", b"\xff\r\n"], ["a", "", "x\udcff"]
    assert pairs_blob(values, names) == b"".join(bulk(v) for pair in zip(values, names) for v in pair)
