"""The filter compiled to a server-side program (jobctl.filter.lua_predicate,
prelude/predicate.lua) and the plans built with it (jobctl.layouts.
predicate_plan), on a real server: the Lua evaluation never rules out a job
the Python filter matches and agrees with it on clean envelopes; a plan with
server-side rule-outs is the client-side plan (jobs, positions, breakdown,
dangling; malformed but those the quick rule-out never decodes); its apply moves exactly those jobs; a window that
changed after the plan moves nothing and names the plan's jobs."""

from __future__ import annotations

import orjson
import pytest

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.filter.lua_predicate import decodes, lua_program
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list.lean_plan import _Lean, doc_envelope, plan_dead_filtered
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State, parse_envelope
from jobctl.ops.engine import run_plan
from jobctl.ops.plan import PredicateRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script

K = ReliableListKeys("pq")
NOW = 1_795_000_000_000
PREFIX = K.job("")


def _env(i: int, **kw) -> dict:
    doc = {"jobId": f"j{i:03d}", "jobType": ("email.send", "sms.send", "push.send")[i % 3], "jobVersion": 1 + i % 2,
           "tenantId": f"t{i % 4}", "createdAtEpochMs": NOW - 1000 * i, "attempt": i % 5, "maxAttempts": 5,
           "lastErrorCode": ("HTTP_503", "HTTP_400", None)[i % 3], "lastErrorMessage": "boom",
           "payload": {"n": i}}
    doc.update(kw)
    return doc


#: raw envelopes: clean ones, and every kind the two JSON readers may see differently
CORPUS: list[bytes] = [orjson.dumps(_env(i)) for i in range(24)] + [
    b"{bad", b"[1, 2]", b'"just a string"', b"{}",
    orjson.dumps(_env(30, attempt="3")), orjson.dumps(_env(31, attempt=True)), orjson.dumps(_env(32, attempt=2.5)),
    orjson.dumps(_env(33, attempt=2.0)), orjson.dumps(_env(34, jobId=34)), orjson.dumps(_env(35, tenantId=7)),
    orjson.dumps(_env(36, jobType=None)), orjson.dumps(_env(37, attempt=2 ** 60)),
    orjson.dumps(_env(38, tenantId="t\u00e9")), orjson.dumps(_env(39, lastErrorMessage="line\nbreak")),
    b'{"jobId":"j040","jobType":"email.send","createdAtEpochMs":1,"tenantId":"t1","attempt":0x10}',
    b'{"jobId":"j041","jobType":"email.send","createdAtEpochMs":1,"tenantId":"t1","attempt":NaN}',
    b'{"jobId":"j042","jobType":"email.send","createdAtEpochMs":1,"tenantId":"t1","x":"\xff\xfe"}',
    b'{"jobId":"j043","jobType":"email.send","createdAtEpochMs":1,"tenantId":"\\u0074\\u0031"}',
    b'{"jobId":"j044","jobType":"email.send","createdAtEpochMs":1,"tenantId":"t1","tenantId":"t2"}',
    b'{ "jobId" : "j045", "jobType" : "sms.send", "createdAtEpochMs" : 2, "tenantId" : "t1" }',
    b'{"jobId":"j046","jobType":"email.send","createdAtEpochMs":1,"tenantId":"t1","attempt":01}',
    b'{"jobId":"j047","jobType":"email\\/send","createdAtEpochMs":1,"tenantId":"t1"}',
    b'{"jobId":"j048","jobType":"email/send","createdAtEpochMs":1,"tenantId":"t2","lastErrorMessage":"a \\"t1\\"\\n"}',
    b'{"jobId":"j049","jobType":"sms.send","createdAtEpochMs":1,"tenantId":"t\\u0031","lastErrorMessage":"x\\n"}',
]

FILTERS = [
    "tenant = t1", "tenant != t1", "type = email.send and attempts >= 2", "error = HTTP_503 or tenant = t2",
    "not (tenant = t1 or tenant = t3)", "attempts < 3", "attempts > 1.5", "version = 2", "max_attempts <= 5",
    "created >= 2026-11-18T00:00:00Z", "error != HTTP_400 and not type = push.send", "id = j005", "id != j005",
    "message = boom", "trace = x", "correlation != x", "idempotency_key = k",
    "tenant = t1 and attempts >= 2", "not tenant != t1 or type = sms.send", "not (tenant = t1 and type = email.send)",
    "tenant = j001 or id = k003", "type = email/send", "type != 'email/send' and tenant = t1",
]


def _python(flt, job_id: str, raw: bytes) -> str:
    """What the client-side plan makes of a job: match, no, malformed."""
    env = doc_envelope(raw)
    if env is None:
        full = parse_envelope(raw)
        if full.problems:
            return "malformed"
        env = full
    return "match" if flt.matches(_Lean(job_id, env, 0, "pq"), NOW) else "no"


def _clean(raw: bytes) -> bool:
    """An envelope both readers see alike and the program decides: read
    without problems, printable ASCII, no \\u escape, integers below 2^53."""
    if doc_envelope(raw) is None or not all(32 <= b < 127 for b in raw) or b"\\u" in raw:
        return False
    doc = orjson.loads(raw)
    return all(not isinstance(v, (int, float)) or abs(v) < 2 ** 53 for v in doc.values())


@pytest.mark.parametrize("text", FILTERS)
def test_lua_never_rules_out_a_python_match_and_agrees_on_clean_envelopes(redis_client, text):
    flt = compile_filter(text)
    program = lua_program(flt)
    assert program is not None
    ids = [f"k{n:03d}" for n in range(len(CORPUS))]
    for job_id, raw in zip(ids, CORPUS):
        redis_client.set(K.job(job_id), raw)
    reply = script(redis_client, "list_scan")(keys=[K.job(i) for i in ids], args=[program, "1", PREFIX, 10 ** 9])
    nd, nm = int(reply[1]), int(reply[2])
    rest = [int(x) for x in reply[3:]]
    assert nd == 0
    malformed = {ids[i - 1] for i in rest[:nm]}
    candidates = {ids[i - 1] for i in rest[nm:]}
    for job_id, raw in zip(ids, CORPUS):
        py = _python(flt, job_id, raw)
        if py == "match":
            assert job_id in candidates, (text, raw)
        if job_id in malformed:
            assert py == "malformed", (text, raw)
        if _clean(raw) and decodes(program):  # a clean envelope: the Lua verdict is the Python one
            assert (job_id in candidates) == (py == "match"), (text, raw)


@pytest.mark.parametrize("text", ["payload.n = 3", "tenant ~ 't*'", "message contains oo", "age > 5m",
                                  "state = dead", "tenant < t2", "id > a"])
def test_filters_the_program_cannot_express_stay_client_side(text):
    assert lua_program(compile_filter(text)) is None


#: number tokens cjson reads and orjson refuses: a plan may not list such an
#: envelope as malformed when the filter rules it out (documented in
#: jobctl/layouts/reliable_list/predicate_plan.py); it is never planned either way
_CJSON_ONLY = (b"0x", b"NaN", b":01")


def _load(client, n: int) -> list[str]:
    """``n`` dead jobs (the corpus but :data:`_CJSON_ONLY`, cycled, with their
    own ids); returns the ids oldest first (at the tail)."""
    corpus = [raw for raw in CORPUS if not any(t in raw for t in _CJSON_ONLY)]
    ids = [f"d{n:04d}" for n in range(n)]
    for i, job_id in enumerate(ids):
        raw = corpus[i % len(corpus)]
        if raw.startswith(b'{"jobId"') and raw.isascii():
            doc = orjson.loads(raw)
            doc["jobId"] = job_id
            raw = orjson.dumps(doc)
        client.set(K.job(job_id), raw)
    client.delete(K.job(ids[7]))  # one dangling id
    client.rpush(K.dead, *reversed(ids))  # ids[0] at the tail
    return ids


def _spec(text: str) -> OpSpec:
    return OpSpec(Operation.REDRIVE, "pq", State.DEAD, State.READY, filter=compile_filter(text))


# depth 1: one window a round trip, six groups pipelined, one to three round trips in flight
@pytest.mark.parametrize("depth,ahead", [(16, 2), (1, 1), (1, 2), (1, 3)])
@pytest.mark.parametrize("text", ["tenant = t1", "error = HTTP_503 or attempts >= 4", "not type = sms.send"])
def test_a_plan_with_server_side_rule_outs_is_the_client_side_plan_and_moves_exactly_it(redis_client, text, depth,
                                                                                         ahead, monkeypatch):
    from jobctl.layouts.reliable_list import predicate_plan as predicate_plan

    monkeypatch.setattr(predicate_plan, "SCAN_DEPTH", depth)
    monkeypatch.setattr(predicate_plan, "SCAN_AHEAD", ahead)
    _load(redis_client, 700)  # several scan windows
    lay = ReliableList(redis_client, QueueConfig("pq"))
    spec = _spec(text)
    plan = lay.plan(spec, now=NOW)
    ref = plan_dead_filtered(lay, spec, NOW)
    assert isinstance(plan.jobs, PredicateRange) and plan.planned > 0
    assert [(j.job_id, j.position) for j in plan.jobs] == [(j.job_id, j.position) for j in ref.jobs]
    assert plan.breakdown == ref.breakdown and plan.walked == ref.walked
    assert (plan.scanned, plan.dangling) == (ref.scanned, ref.dangling)
    # a malformed envelope the filter's text values rule out without decoding
    # (no '"t1"' in it) is not listed: it is never planned either way
    assert set(plan.malformed) <= set(ref.malformed)
    unlisted = set(ref.malformed) - set(plan.malformed)
    assert all(text == "tenant = t1" and b'"t1"' not in redis_client.get(K.job(i)) for i in unlisted)
    assert unlisted or text != "tenant = t1"
    expected = [j.job_id for j in ref.jobs]
    dead_before = [x.decode() for x in redis_client.lrange(K.dead, 0, -1)]
    res = run_plan(lay, plan, journal=False, batch=None if text != "tenant = t1" else 37)  # a batch off the windows
    assert (res.moved, res.skipped, res.failed) == (len(expected), 0, 0)
    assert sorted(x.decode() for x in redis_client.lrange(K.ready, 0, -1)) == sorted(expected)
    assert [x.decode() for x in redis_client.lrange(K.dead, 0, -1)] == [x for x in dead_before if x not in expected]
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.walk) and not redis_client.exists(K.lease)
    assert predicate_plan.SCAN_WINDOW < 700


def test_a_window_that_changed_after_the_plan_moves_nothing_of_it(redis_client):
    ids = _load(redis_client, 300)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    plan = lay.plan(_spec("tenant = t1"), now=NOW)
    planned = [j.job_id for j in plan.jobs]
    assert isinstance(plan.jobs, PredicateRange) and planned
    redis_client.rpop(K.dead)  # the oldest dead job leaves (another tool): every position shifts
    redis_client.set(K.job(ids[0]), b"{}")
    res = run_plan(lay, plan, journal=False)
    assert res.moved == 0 and res.skipped == len(planned)
    assert set(res.skipped_reasons) <= {"not at its planned position", "gone"}  # gone: past the list's end now
    assert redis_client.llen(K.ready) == 0 and redis_client.llen(K.dead) == 299
    assert set(res.skipped_sample) <= set(planned)
    assert not redis_client.exists(K.hold) and not redis_client.exists(K.lease)


@pytest.mark.parametrize(("text", "decoded"), [
    ("tenant = t1", False), ("not (tenant = t1 or id = j005)", False), ("type != sms.send", False),
    ("tenant = t1 and attempts >= 2", True), ("created >= 2026-11-18T00:00:00Z", True),
    ("tenant = café", True), ("""tenant = 'a"b'""", True),  # values the quick rule-out does not read
])
def test_only_a_filter_with_a_clause_the_quick_rule_out_cannot_decide_is_decoded(text, decoded):
    assert decodes(lua_program(compile_filter(text))) is decoded


def test_a_script_cache_flushed_mid_walk_moves_exactly_the_plan(redis_client):
    """The apply reads the next round trip's plan windows in the current
    one; when the script cache is flushed (NOSCRIPT: the calls did not run,
    the read came too early) they are read again, so nothing is skipped."""
    _load(redis_client, 700)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    plan = lay.plan(_spec("tenant = t1"), now=NOW)
    expected = [j.job_id for j in plan.jobs]
    flushed = []

    def progress(done, total):
        if not flushed:
            flushed.append(done)
            redis_client.script_flush()

    res = run_plan(lay, plan, journal=False, progress=progress)
    assert flushed and (res.moved, res.skipped, res.failed) == (len(expected), 0, 0)
    assert sorted(x.decode() for x in redis_client.lrange(K.ready, 0, -1)) == sorted(expected)


def test_a_filter_value_that_is_not_utf8_stays_client_side():
    assert lua_program(compile_filter("tenant = t\udcff")) is None


@pytest.mark.parametrize("ahead", [1, 2, 3])
@pytest.mark.parametrize("picked", [(5,), (690,), (130, 600), (250, 251, 380)])
def test_groups_without_candidates_between_those_with_some_are_confirmed_in_walk_order(redis_client, picked, ahead,
                                                                                        monkeypatch):
    """Groups whose scan finds no candidate are confirmed without an
    envelope read, in walk order with those whose candidates' envelopes are
    still in flight (predicate_plan.SCAN_AHEAD)."""
    from jobctl.layouts.reliable_list import predicate_plan as predicate_plan

    monkeypatch.setattr(predicate_plan, "SCAN_DEPTH", 1)
    monkeypatch.setattr(predicate_plan, "SCAN_AHEAD", ahead)
    ids = _load(redis_client, 700)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    spec = _spec(" or ".join(f"id = {ids[i]}" for i in picked))
    plan = lay.plan(spec, now=NOW)
    ref = plan_dead_filtered(lay, spec, NOW)
    assert isinstance(plan.jobs, PredicateRange) and plan.planned > 0
    assert [(j.job_id, j.position) for j in plan.jobs] == [(j.job_id, j.position) for j in ref.jobs]
    assert {j.job_id for j in plan.jobs} <= {ids[i] for i in picked}
    res = run_plan(lay, plan, journal=False)
    assert (res.moved, res.skipped, res.failed) == (plan.planned, 0, 0)
    assert sorted(x.decode() for x in redis_client.lrange(K.ready, 0, -1)) == sorted(j.job_id for j in ref.jobs)
