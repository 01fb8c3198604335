"""The hash-job layout (seed 001) on a real server: the stuck rule against
the seed's own reclaimer, the bounded status, what each operation writes to
the job hash, fences, TTLs, dangling ids, history, check and its repairs,
iter_batches over every state, discovery."""

from __future__ import annotations

import json

import pytest

from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.keys import HashJobKeys
from jobctl.layouts.hash_job import layout as hj_layout
from jobctl.layouts import layout_for
from jobctl.layouts.hash_job.discover import recognize
from jobctl.layouts.walks import LREM_BUDGET, lrem_chunk
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.layouts.hash_job import (ADAPTER, MAX_ATTEMPTS, VISIBILITY_TIMEOUT_MS, HashJobQueue,
                                              load_scenario)
from helpers import assert_every_state_batched, export_dead, purge_exported, write_config

Q = "jobs"
SIZE = 120
VT = VISIBILITY_TIMEOUT_MS
NOW = 1_795_000_000_000


def layout(client, **kw):
    return layout_for(client, ADAPTER.queue_config(Q) if not kw else QueueConfig(name=Q, layout="hash-job", **kw))


def queue(client, **kw) -> HashJobQueue:
    return HashJobQueue(client, Q, visibility_ms=VT, completed_ttl_s=86_400, history=10_000,
                        max_attempts=MAX_ATTEMPTS, **kw)


def apply(lay, spec, now=None):
    return run_plan(lay, lay.plan(spec, now), journal=False)


def h(client, job_id) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(HashJobKeys(Q).job(job_id)).items()}


# -- the stuck rule ----------------------------------------------------------------------

def test_stuck_matches_the_seeds_reclaimer(redis_client):
    exp = load_scenario(redis_client, "stuck-workers", queue=Q, size=SIZE, now_ms=NOW)
    st = layout(redis_client).status(NOW)
    assert st.stuck == exp["stuck"] > 0
    reclaimed = queue(redis_client).reclaim_stuck(now=NOW)  # the seed's own sweep, same instant
    assert set(reclaimed) == exp["stuck_ids"]


def test_stuck_boundaries(redis_client):
    q = queue(redis_client)
    claimed = q.enqueue({"kind": "email"}, now=NOW - 3 * VT)
    q.claim(now=NOW - VT)                            # deadline == NOW: not stuck yet
    unstamped = q.enqueue({"kind": "email"}, now=NOW - 2 * VT - 1)
    q.claim(now=NOW, write_claim=False)              # enqueue + 2 x VT < NOW: stuck
    fresh = q.enqueue({"kind": "email"}, now=NOW - 2 * VT)
    q.claim(now=NOW, write_claim=False)              # enqueue + 2 x VT == NOW: not stuck
    lay = layout(redis_client)
    st = lay.status(NOW)
    assert (st.processing, st.stuck) == (3, 1)
    assert st.next_deadline_ms == NOW
    by_id = {r.job_id: r for r in lay.list_jobs(State.PROCESSING, 10)}
    assert by_id[claimed].deadline_ms == NOW
    assert by_id[unstamped].deadline_ms == NOW - 1 and "note" in by_id[unstamped].meta
    assert by_id[fresh].deadline_ms == NOW
    assert [r.job_id for r in lay.list_jobs(State.PROCESSING, 10)][0] == unstamped  # earliest deadline first
    assert lay.check().ok  # an unstamped claim is the seed's known crash window, not a broken invariant


def test_stuck_count_is_bounded(redis_client, monkeypatch):
    load_scenario(redis_client, "stuck-workers", queue=Q, size=SIZE, now_ms=NOW)
    full = layout(redis_client).status(NOW)
    monkeypatch.setattr(hj_layout, "STUCK_SCAN_LIMIT", 10)
    monkeypatch.setattr(hj_layout, "_STATUS_WINDOW", 5)
    st = layout(redis_client).status(NOW)
    assert st.processing == full.processing > 10
    assert st.stuck <= 10 and any("oldest claims" in w for w in st.warnings)
    # the tail holds the oldest claims: the ones most likely stuck
    assert st.stuck == 10


def test_default_visibility_timeout_is_the_seeds(redis_client):
    lay = layout(redis_client, tag=Q)
    assert lay.visibility_ms == 5_000 and lay.max_attempts == 3


# -- requeue ---------------------------------------------------------------------------------

def test_requeue_clears_the_claim_like_the_seeds_reclaimer(redis_client):
    exp = load_scenario(redis_client, "stuck-workers", queue=Q, size=SIZE, now_ms=NOW)
    lay = layout(redis_client)
    res = apply(lay, OpSpec(Operation.REQUEUE, Q, State.PROCESSING, State.READY, stuck_only=True), NOW)
    assert res.moved == exp["stuck"]
    k = HashJobKeys(Q)
    for job_id in exp["stuck_ids"]:
        fields = h(redis_client, job_id)
        assert fields["status"] == "pending" and fields["claim_token"] == "" and fields["claimed_at_ms"] == "0"
        assert int(fields["reclaimed_at_ms"]) > 0
    assert redis_client.lpos(k.processing, next(iter(exp["stuck_ids"]))) is None
    # requeued jobs join the back of the line (LPUSH), as the seed's reclaimer puts them
    head = [x.decode() for x in redis_client.lrange(k.pending, 0, len(exp["stuck_ids"]) - 1)]
    assert set(head) == exp["stuck_ids"]
    assert lay.status(NOW).stuck == 0


def test_requeue_is_fenced_to_the_claim_the_plan_saw(redis_client):
    q = queue(redis_client)
    a, b, c = (q.enqueue({"kind": "email"}, now=NOW - 5 * VT) for _ in range(3))
    ja, jb, jc = (q.claim(now=NOW - 2 * VT) for _ in range(3))
    lay = layout(redis_client)
    plan = lay.plan(OpSpec(Operation.REQUEUE, Q, State.PROCESSING, State.READY, stuck_only=True), NOW)
    assert plan.planned == 3
    assert q.complete(jb)                      # b finished meanwhile
    q.reclaim_stuck(now=NOW)                   # the seed's sweep took a and c...
    jc2 = q.claim(now=NOW)                     # ...and a worker claimed one of them again
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0
    assert set(res.skipped_reasons) <= {"changed", "gone"} and res.skipped == 3
    assert h(redis_client, jc2.id)["claim_token"] == jc2.claim_token  # the new claim is untouched
    del ja, jc


# -- redrive, suppress, purge ----------------------------------------------------------------

def test_redrive_persists_and_marks_the_hash(redis_client):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    k = HashJobKeys(Q)
    job_id = sorted(exp["ids_by_state"]["dead"] - exp["dangling_ids"])[0]
    assert redis_client.ttl(k.job(job_id)) > 0        # the workers' EXPIRE on failed hashes
    lay = layout(redis_client)
    res = apply(lay, OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, ids=(job_id,)))
    assert res.moved == 1
    fields = h(redis_client, job_id)
    assert redis_client.ttl(k.job(job_id)) == -1      # a pending job must not expire
    assert fields["status"] == "pending" and fields["claim_token"] == ""
    assert fields["attempts"] == str(MAX_ATTEMPTS)     # kept: the next failure fails it for good
    assert fields["redrive_count"] == "1" and fields["redrive_operation"].startswith("redrive-")
    assert redis_client.lindex(k.pending, 0).decode() == job_id
    rec = lay.inspect(job_id)
    assert rec.state is State.READY and rec.envelope.ready_since_ms == int(fields["redriven_at_ms"])
    # the seed's worker: one more failure and it is back in failed
    q = queue(redis_client)
    while (job := q.claim()) is not None and job.id != job_id:
        q.complete(job)
    assert job is not None and job.attempts == MAX_ATTEMPTS + 1
    assert q.fail(job, "still broken")
    assert h(redis_client, job_id)["status"] == "failed"


def test_redrive_reset_attempts_and_filters(redis_client):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    lay = layout(redis_client)
    dead = lay.list_jobs(State.DEAD, 1000)
    webhooks = {r.job_id for r in dead if r.envelope.job_type == "webhook" and r.raw is not None}
    spec = OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, filter=compile_filter('type = "webhook"'),
                  reset_attempts=True)
    plan = lay.plan(spec)
    assert {j.job_id for j in plan.jobs} == webhooks
    assert set(plan.dangling) == exp["dangling_ids"]
    assert plan.breakdown[("webhook", "HTTP 503 from endpoint")] == len(webhooks)
    assert run_plan(lay, plan, journal=False).moved == len(webhooks)
    assert {h(redis_client, j)["attempts"] for j in webhooks} == {"0"}
    msg = lay.plan(OpSpec(Operation.PURGE, Q, State.DEAD, None, filter=compile_filter('message ~ "smtp*"')))
    assert msg.planned == sum(1 for r in dead if r.envelope.job_type == "email" and r.raw is not None)


def test_suppress_keeps_the_hash_and_unsuppress_restores_its_ttl(redis_client):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    k = HashJobKeys(Q)
    job_id = sorted(exp["ids_by_state"]["dead"] - exp["dangling_ids"])[0]
    ttl_before = redis_client.pttl(k.job(job_id))
    lay = layout(redis_client)
    spec = OpSpec(Operation.SUPPRESS, Q, State.DEAD, State.SUPPRESSED, ids=(job_id,), reason="known bad")
    assert apply(lay, spec).moved == 1
    assert redis_client.pttl(k.job(job_id)) == -1
    rec = lay.inspect(job_id)
    assert rec.state is State.SUPPRESSED and rec.meta["suppressed"]["reason"] == "known bad"
    assert 0 < rec.meta["suppressed"]["ttl_ms"] <= ttl_before
    assert apply(lay, OpSpec(Operation.UNSUPPRESS, Q, State.SUPPRESSED, State.DEAD)).moved == 1
    assert 0 < redis_client.pttl(k.job(job_id)) <= ttl_before
    assert redis_client.lindex(k.failed, 0).decode() == job_id and redis_client.hlen(k.suppressed_info) == 0


def test_purge_deletes_the_hash_and_skips_dangling_ids(redis_client):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    lay = layout(redis_client)
    res = apply(lay, OpSpec(Operation.PURGE, Q, State.DEAD, None))
    live = exp["ids_by_state"]["dead"] - exp["dangling_ids"]
    assert res.moved == len(live)
    k = HashJobKeys(Q)
    assert not any(redis_client.exists(k.job(j)) for j in live)
    assert {x.decode() for x in redis_client.lrange(k.failed, 0, -1)} == exp["dangling_ids"]


def test_operations_the_layout_lacks_are_usage_errors(redis_client):
    from jobctl.errors import UsageError

    lay = layout(redis_client)
    with pytest.raises(UsageError):
        lay.plan(OpSpec(Operation.PROMOTE, Q, State.SCHEDULED, State.READY))
    with pytest.raises(UsageError):
        lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.SCHEDULED))
    with pytest.raises(UsageError):
        lay.plan(OpSpec(Operation.REQUEUE, Q, State.PROCESSING, State.READY))  # needs --stuck or --ids
    with pytest.raises(UsageError):
        lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, priority=0))


def test_lrem_chunk_bounds_a_call():
    assert lrem_chunk(256, 50) == 256
    assert lrem_chunk(256, LREM_BUDGET // 10) == 10
    assert lrem_chunk(256, 10 * LREM_BUDGET) == 1


# -- dangling ids, history, check ------------------------------------------------------------

def test_dangling_failed_ids_are_flagged_everywhere(redis_client, redis_url, tmp_path, capsys):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    lay = layout(redis_client)
    dangling = exp["dangling_ids"]
    listed = {r.job_id: r for r in lay.list_jobs(State.DEAD, 1000)}
    for job_id in dangling:
        assert listed[job_id].raw is None and "expired" in listed[job_id].meta["problem"]
        rec = lay.inspect(job_id)
        assert rec.state is State.DEAD and "expired" in rec.meta["problem"]
    report = lay.check()
    assert report.counts() == {"dangling": len(dangling)}
    assert lay.check(repair=True).ok
    assert lay.check().ok and lay.status().dead == exp["dead"] - len(dangling)


def test_history(redis_client):
    exp = load_scenario(redis_client, "healthy", queue=Q, size=SIZE, now_ms=NOW)
    lay = layout(redis_client)
    recs = lay.list_jobs(State.HISTORY, 1000)
    assert {r.job_id for r in recs} == exp["ids_by_state"]["history"]
    assert all(r.meta["status"] == "completed" and r.state is State.HISTORY for r in recs)
    assert lay.inspect(recs[0].job_id).meta["ttl_ms"] > 0   # the workers' EXPIRE
    assert recs[0].meta["completed_at_ms"] >= recs[-1].meta["completed_at_ms"]  # newest first
    gone = recs[0].job_id
    redis_client.delete(HashJobKeys(Q).job(gone))   # its TTL ran out: normal for history
    report = lay.check()
    assert report.ok and report.to_json()["expired_history"] == 1
    assert lay.depth(State.HISTORY) == len(recs)


def test_check_finds_and_repairs(redis_client):
    q = queue(redis_client)
    k = HashJobKeys(Q)
    a = q.enqueue({"kind": "email"}, now=NOW)
    b = q.enqueue({"kind": "email"}, now=NOW)
    redis_client.lpush(k.pending, a)                       # a twice
    redis_client.lpush(k.processing, "ghost")              # no hash
    redis_client.hset(k.job("lost"), mapping={"id": "lost", "payload": "{}", "status": "pending"})  # orphan
    redis_client.hset(k.job("bare"), mapping={"id": "bare", "payload": "{}", "status": "processing"})
    redis_client.lpush(k.processing, "bare")               # neither claimed_at_ms nor enqueued_at_ms
    redis_client.hset(k.job(b), "status", "completed")     # b's status disagrees with pending
    lay = layout(redis_client)
    report = lay.check()
    assert report.counts() == {"duplicate": 1, "dangling": 1, "orphan_job": 1, "no_deadline": 1,
                               "status_mismatch": 1}
    report = lay.check(repair=True)
    assert {p.kind for p in report.problems if p.repaired} == {"duplicate", "dangling", "no_deadline"}
    assert redis_client.llen(k.pending) == 2 and redis_client.lpos(k.processing, "ghost") is None
    st = lay.status()
    assert st.stuck == 1  # "bare" is now visibly stuck, for requeue --stuck or the seed's reclaimer
    assert set(lay.check().counts()) == {"orphan_job", "status_mismatch"}


def test_repair_reaches_only_the_ends_of_a_long_list(redis_client):
    """hj_repair searches R entries at each end of a list longer than 2 x R
    (a bounded call): copies there are repaired, a copy deeper is left."""
    from jobctl.scripts import script

    fix, k, reach = script(redis_client, "hj_repair"), HashJobKeys(Q), 3
    filler = [f"f{i}" for i in range(10)]
    redis_client.rpush(k.failed, "g", *filler[:5], "g", *filler[5:], "g")  # ghost: head, middle, tail
    keys = [k.failed, k.job("g"), k.suppressed_info]
    assert fix(keys=keys, args=["dangling_list", "g", "", reach]) == 1
    assert [x.decode() for x in redis_client.lrange(k.failed, 0, -1)] == [*filler[:5], "g", *filler[5:]]
    redis_client.delete(k.failed)
    redis_client.rpush(k.failed, "d", *filler[:5], "d", *filler[5:], "d", "d")
    redis_client.hset(k.job("d"), "status", "failed")
    assert fix(keys=[k.failed, k.job("d"), k.suppressed_info], args=["duplicate", "d", "4", reach]) == 1
    # the two at the tail go, the head one is kept; the deep one is out of reach
    assert [x.decode() for x in redis_client.lrange(k.failed, 0, -1)] == ["d", *filler[:5], "d", *filler[5:]]
    redis_client.delete(k.processing)
    redis_client.rpush(k.processing, *filler[:5], "p", *filler[5:])
    redis_client.hset(k.job("p"), "status", "processing")
    assert fix(keys=[k.processing, k.job("p"), k.suppressed_info], args=["no_deadline", "p", "5", reach]) == 0
    assert fix(keys=[k.processing, k.job("p"), k.suppressed_info], args=["no_deadline", "p", "5", 10]) == 1


@pytest.mark.parametrize("scenario", ["healthy", "dlq-spike", "stuck-workers"])
def test_iter_batches_covers_every_state(redis_client, scenario):
    load_scenario(redis_client, scenario, queue=Q, size=SIZE, now_ms=NOW)
    assert_every_state_batched(layout(redis_client), Q, batch=7)


def test_cli_status_ls_inspect(redis_client, redis_url, tmp_path, capsys):
    exp = load_scenario(redis_client, "stuck-workers", queue=Q, size=SIZE)
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f'[queues.jobs]\nlayout = "hash-job"\nvisibility_timeout_ms = {VT}\n')
    assert main(["--url", redis_url, "--config", str(cfg), "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    q = doc["queues"][0]
    assert (q["layout"], q["stuck"], q["dead"]) == ("hash-job", exp["stuck"], exp["dead"])
    assert main(["--url", redis_url, "--config", str(cfg), "ls", "jobs", "--state", "processing"]) == 0
    out = capsys.readouterr().out
    assert "deadline" in out
    job_id = sorted(exp["stuck_ids"])[0]
    assert main(["--url", redis_url, "--config", str(cfg), "inspect", "jobs", job_id]) == 0
    out = capsys.readouterr().out
    assert "claim_token" in out and "processing" in out


# -- discovery ------------------------------------------------------------------------------

def test_recognize():
    keys = {
        "queue:jobs:pending": b"list", "queue:jobs:processing": b"list", "queue:jobs:failed": b"list",
        "queue:jobs:job:9a4f0d1c": b"hash", "queue:jobs:job:77aa": b"hash",
        "queue:jobs:jobctl:journal": b"stream",
        "queue:{x}:ready": b"list", "queue:{x}:processing": b"list",      # a reliable-list: no job hashes
        "queue:lonely:pending": b"list",                                   # a list alone: not enough
        "queue:strings:pending": b"list", "queue:strings:job:1": b"string",  # wrong type
        "queue:notalist:pending": b"zset", "queue:notalist:job:1": b"hash",
        "user:1": b"hash",
    }
    [(qc, evidence)] = recognize(keys)
    assert (qc.name, qc.layout, qc.tag, qc.discovered) == ("jobs", "hash-job", "jobs", True)
    assert "queue:jobs:job:77aa" in evidence and "queue:jobs:jobctl:journal" in evidence
    assert not any(e.startswith(("queue:{x}", "queue:lonely", "user:")) for e in evidence)


def test_discover_checks_a_sample(redis_client):
    from jobctl.discovery import discover

    load_scenario(redis_client, "healthy", queue=Q, size=40, now_ms=NOW)
    redis_client.lpush("queue:decoy:pending", "a")                      # a hash named like a job...
    redis_client.hset("queue:decoy:job:a", mapping={"name": "not a job"})  # ...without a seed-001 status
    d = discover(redis_client, layouts=("hash-job",))
    assert [(q.name, q.layout, q.tag) for q in d.queues] == [(Q, "hash-job", Q)]
    assert len(d.evidence[Q]) == 4 + 40 + 40 // 10  # the four lists; the job hashes (completed ones too)


def test_export_then_purge_exactly_the_export(redis_client, redis_url, tmp_path, capsys):
    exp = load_scenario(redis_client, "dlq-spike", queue=Q, size=60)
    base = ["--url", redis_url, "--config",
            write_config(tmp_path, f'[queues.jobs]\nlayout = "hash-job"\nvisibility_timeout_ms = {VT}\n')]
    out = tmp_path / "export"
    assert export_dead(base, "jobs", out) == exp["ids_by_state"]["dead"]
    q = HashJobQueue(redis_client, Q, max_attempts=1)  # a job fails for good after the export...
    late = q.claim()
    assert q.fail(late, "boom")
    res = purge_exported(capsys, base, "jobs", out)
    assert res["moved"] == exp["dead"] - len(exp["dangling_ids"])
    left = {x.decode() for x in redis_client.lrange(HashJobKeys(Q).failed, 0, -1)}
    assert left == exp["dangling_ids"] | {late.id}       # ...is not purged


def test_a_key_of_the_wrong_type(redis_client):
    from jobctl.errors import DataError

    q = queue(redis_client)
    job_id = q.enqueue({"kind": "email"})
    redis_client.set(HashJobKeys(Q).failed, "oops")
    lay = layout(redis_client)
    st = lay.status()
    assert st.ready == 1 and st.errors == [f"key {HashJobKeys(Q).failed} holds the wrong Redis type"]
    with pytest.raises(DataError):
        lay.inspect(job_id)


def test_lean_unfiltered_failed_plan_matches_the_record_plan(redis_client):
    """An unfiltered redrive with --reset-attempts plans per job without a
    record per job: the plan the record walk makes (the other unfiltered
    plans are tail ranges: tests/test_hash_job_tail.py)."""
    from jobctl.layouts.hash_job.plan import lean_failed_plan, tail_failed_plan
    from jobctl.ops.plan import JobColumns

    load_scenario(redis_client, "dlq-spike", queue=Q, size=SIZE, now_ms=NOW)
    k = HashJobKeys(Q)
    failed = [x.decode() for x in redis_client.lrange(k.failed, 0, -1)]
    redis_client.hset(k.job(failed[3]), "payload", "{not json")  # malformed: a redrive leaves it
    lay = layout(redis_client)
    lean_spec = OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reset_attempts=True)
    full_spec = OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reset_attempts=True,
                       filter=compile_filter("id ~ '*'"))
    assert lean_failed_plan(lean_spec) and not tail_failed_plan(lean_spec) and not lean_failed_plan(full_spec)
    lean, full = lay.plan(lean_spec), lay.plan(full_spec)
    assert isinstance(lean.jobs, JobColumns) and lean.planned > 0
    key = [(j.job_id, j.position, j.sha1) for j in (lean.jobs[n] for n in range(lean.planned))]
    assert key == [(j.job_id, j.position, j.sha1) for j in (full.jobs[n] for n in range(full.planned))]
    assert lean.breakdown == full.breakdown and lean.walked == full.walked and lean.scanned == full.scanned
    assert set(lean.dangling) == set(full.dangling) and set(lean.malformed) == set(full.malformed)
    assert failed[3] in lean.malformed
    limited = lay.plan(OpSpec(Operation.REDRIVE, Q, State.DEAD, State.READY, reset_attempts=True, limit=5))
    assert limited.planned == 5 and limited.truncated
