"""The bad-input corpus (issue 12): every command against bad bytes, extreme
numbers, broken configs and keys of the wrong type.

Data: ``tests/badinput/`` (ids, values, numbers, durations, configs).  One
server is loaded once for the module (:func:`loaded`): queues of the
reliable-list, hash-job and json-list layouts holding every bad id in every
state with every bad value, and one queue per key of every layout whose key
has the wrong Redis type.  Every case runs the CLI in-process and asserts:

* never exit 1 (internal error), never a traceback, only documented exit
  codes, exactly one ``jobctl: error:`` line when it fails;
* ``--json`` output parses as JSON (stdout carries only data);
* nothing in Redis changed (a ``DUMP`` of every key before and after): every
  case is a read, a ``--dry-run`` or a refusal.

The operations that do apply (``--yes``) are in :func:`test_applied_operations_are_journaled`
on their own load.  ``test_zz_corpus_summary`` prints the corpus size and
the counts by exit code (run with ``-s`` to see them).

Every case runs through the client jobctl ships (:func:`jobctl.connection.make_client`:
``str`` arguments holding undecodable bytes go out as those exact bytes,
``surrogateescape``): nothing in this module patches it.

The loaded queues also hold, in every zset of every layout (deadlines,
scheduled, suppressed, claim times, delayed events, delay zsets, Redisson's
timeouts), members scored ``+inf`` and ``-inf`` (:func:`_infinite_scores`);
stream entries and dead-stream entries whose ``jobId`` is each bad id and
delayed-events members holding each bad id (:func:`_load_more_layouts`); and
queues whose payload keys have the wrong Redis type in every state
(:data:`WRONG_PAYLOAD`): reported as such, naming the key, never as dangling.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest
import redis
import orjson

from jobctl.cli.main import main
from jobctl.exitcodes import ExitCode
from jobctl.keys import (DelayedEventsKeys, DelayZsetKeys, HashJobKeys, JsonListKeys, RedissonDelayedKeys,
                         ReliableListKeys, StreamGroupKeys)

DATA = Path(__file__).parent / "badinput"
DOCUMENTED = {int(c) for c in ExitCode} - {int(ExitCode.FAILURE), int(ExitCode.INTERRUPTED)}
OUTCOMES: Counter = Counter()
QUEUE_OUTCOMES: Counter = Counter()


# -- the data -------------------------------------------------------------------------------------


def _lines(name: str) -> list[str]:
    return [line.rstrip("\n") for line in (DATA / name).read_text("utf-8").splitlines(True)
            if not line.startswith("#")]


def _bytes(line: str) -> bytes:
    if line.startswith("REPEAT "):
        _, n, lit = line.split(" ", 2)
        return ast.literal_eval(lit) * int(n)
    return ast.literal_eval(line)


BAD_IDS = [_bytes(x) for x in _lines("ids.txt") if x.strip()]
BAD_VALUES = [_bytes(x) for x in _lines("values.txt") if x.strip()]
NUMBERS = _lines("numbers.txt")
DURATIONS = _lines("durations.txt")


def _configs() -> list[tuple[str, str, bytes]]:
    cases, name, expect, body = [], None, None, []
    for line in (DATA / "configs.txt").read_text("utf-8").splitlines():
        if line.startswith("#") and name is None:
            continue
        if line.startswith("=== "):
            if name is not None:
                cases.append((name, expect, _config_body(body)))
            head, _, expect = line[4:].partition(" expect: ")
            name, body = head.strip(), []
        else:
            body.append(line)
    cases.append((name, expect, _config_body(body)))
    return cases


def _config_body(lines: list[str]) -> bytes:
    if lines and lines[0].startswith("BYTES "):
        return ast.literal_eval(lines[0][6:])
    return ("\n".join(lines) + "\n").encode()


CONFIGS = _configs()


def sid(raw: bytes) -> str:
    """An id as the CLI receives it from a shell (surrogateescape)."""
    return raw.decode("utf-8", "surrogateescape")


# -- the loaded server ----------------------------------------------------------------------------

CATALOGUE = """
[queues.rl]
layout = "reliable-list"
tag = "rl"
dead_cap = 100000

[queues.hj]
layout = "hash-job"
tag = "hj"
visibility_timeout_ms = 30000

[queues.jl]
layout = "json-list"
tag = "jl"
visibility_timeout_ms = 300000

[queues.sg]
layout = "stream-group"
tag = "sg"
visibility_timeout_ms = 60000

[queues.dz]
layout = "delay-zset"
key = "dz:jobs"

[queues.de]
layout = "delayed-events"
prefix = "de:"
max_attempts = 5

[queues.sgs]
layout = "stream-group"
tag = "sgs"
visibility_timeout_ms = 60000
dead = "stream"

[queues.rq]
layout = "redisson-delayed-queue"
name = "rq"
"""

#: Queues whose payload keys have the wrong Redis type (a hash, a list...) in every state.
WRONG_PAYLOAD = {
    "wp-rl": ("reliable-list", 'tag = "wp-rl"'),
    "wp-sg": ("stream-group", 'tag = "wp-sg"\nvisibility_timeout_ms = 60000'),
}

#: Per layout: the queue's keys that get the wrong type, one queue each.
RL = ReliableListKeys("wt-rl")
HJ = HashJobKeys("wt-hj")
JL = JsonListKeys("wt-jl")
SG = StreamGroupKeys("wt-sg")
WRONG_TYPE = {
    "wt-rl": ("reliable-list", 'tag = "wt-rl"', [RL.ready, RL.processing, RL.deadline, RL.scheduled, RL.dead,
                                                  RL.suppressed, RL.job("j1")]),
    "wt-hj": ("hash-job", 'tag = "wt-hj"\nvisibility_timeout_ms = 1000',
              [HJ.pending, HJ.processing, HJ.completed, HJ.failed, HJ.job("j1"), HJ.suppressed]),
    "wt-jl": ("json-list", 'tag = "wt-jl"\nvisibility_timeout_ms = 1000',
              [JL.pending, JL.processing, JL.dead, JL.processing_times, JL.attempts, JL.suppressed]),
    "wt-sg": ("stream-group", 'tag = "wt-sg"\nvisibility_timeout_ms = 1000',
              [SG.stream, SG.scheduled, SG.dead, SG.job("j1")]),
    "wt-dz": ("delay-zset", 'key = "wt-dz:jobs"', ["wt-dz:jobs"]),
    "wt-de": ("delayed-events", 'prefix = "wt-de:"', ["wt-de:delayed_events"]),
}


def _wrong_type_queues() -> list[tuple[str, str, str]]:
    """(queue name, layout, config lines): one queue per wrong-typed key."""
    out = []
    for base, (layout, cfg, keys) in WRONG_TYPE.items():
        for n, _ in enumerate(keys):
            out.append((f"{base}-{n}", layout, cfg.replace(base, f"{base}-{n}")))
    return out


def _wrong_type_key(client, key: str) -> None:
    """Write ``key`` with a type no layout expects there."""
    t = client.type(key)
    client.delete(key)
    if t == b"string" or t == b"none" and ("job" in key):
        client.sadd(key, "not", "a", "hash")  # a set where a string/hash belongs
    else:
        client.set(key, b"not a list \xff")


def _load(client) -> None:
    from jobctl_fixtures.layouts import hash_job as hj_fixture
    from jobctl_fixtures.layouts import json_list as jl_fixture
    from jobctl_fixtures.scenarios import load_scenario

    load_scenario(client, "dlq-spike", queue="rl", tag="rl", size=40, seed=3)
    hj_fixture.load_scenario(client, "dlq-spike", queue="hj", size=30, seed=3)
    jl_fixture.load_scenario(client, "dlq-spike", prefix="jl", size=30, seed=3)
    rl, hj, jl = ReliableListKeys("rl"), HashJobKeys("hj"), JsonListKeys("jl")
    env = b'{"jobId":"x","jobType":"t","createdAtEpochMs":1}'
    for n, bad in enumerate(BAD_IDS):
        value = BAD_VALUES[n % len(BAD_VALUES)]
        # reliable-list: the id in every state, each with a payload (some bad)
        client.set(rl.job(sid(bad)).encode("utf-8", "surrogateescape"), value if n % 2 else env)
        for key in (rl.ready, rl.dead):
            client.lpush(key, bad)
        client.lpush(rl.processing, bad)
        client.zadd(rl.deadline, {bad: 1_700_000_000_000 + n})
        client.zadd(rl.scheduled, {bad: [float("inf"), float("-inf"), 1e300, 1_800_000_000_000][n % 4]})
        client.zadd(rl.suppressed, {bad: 1_700_000_000_000})
        # hash-job: a failed job hash with bad bytes in its fields
        hkey = hj.job(sid(bad)).encode("utf-8", "surrogateescape")
        client.hset(hkey, mapping={b"id": bad, b"payload": value, b"status": b"failed", b"attempts": b"\xff",
                                   b"last_error": b"boom \xff", b"enqueued_at_ms": b"inf"})
        client.lpush(hj.failed, bad)
        # json-list: bad strings in pending and dead
        client.lpush(jl.dead, value)
        client.lpush(jl.pending, b'{"id":"' + bad.replace(b'"', b"") + b'","task":"t"}')
    # a 200 KB non-UTF-8 payload and +inf scores on the json-list times zset
    client.set(rl.job("huge"), b"\xfe" * 200_000)
    client.lpush(rl.dead, "huge")
    client.zadd(jl.processing_times, {b"ghost": float("inf")})
    client.zadd(rl.scheduled, {b"inf-only": float("inf")})
    client.set(rl.job("inf-only"), env)
    _infinite_scores(client)
    _load_more_layouts(client)
    _wrong_payload_type(client)
    for name, layout, _ in _wrong_type_queues():
        base = name.rsplit("-", 1)[0]
        key = WRONG_TYPE[base][2][int(name.rsplit("-", 1)[1])].replace(base, name)
        _wrong_type_key(client, key)


INF, NINF = float("inf"), float("-inf")
#: Members scored +inf and -inf in every zset (:func:`_infinite_scores`).
INF_IDS = {b"inf-plus": INF, b"inf-minus": NINF}
ENVELOPE = b'{"jobId":"x","jobType":"t","createdAtEpochMs":1}'
EVENT = b'{"type":"com.acme.Cls","payload":{"id":"x"},"attempt":%d,"logContext":{}}'


def _infinite_scores(client) -> None:
    """+inf and -inf scores in every zset of every layout (layouts.md: the
    deadlines, scheduled, suppressed, claim times, delayed events, delay
    zsets, Redisson's timeouts), each member with its payload where the
    layout has one."""
    rl, hj, jl, de = ReliableListKeys("rl"), HashJobKeys("hj"), JsonListKeys("jl"), DelayedEventsKeys("de:")
    for tag in ("rl", "sg", "sgs"):
        keys = ReliableListKeys(tag) if tag == "rl" else StreamGroupKeys(tag)
        client.zadd(keys.scheduled, INF_IDS)
        client.zadd(keys.suppressed, INF_IDS)
        for m in INF_IDS:
            client.set(keys.job(m.decode()), ENVELOPE)
    client.zadd(rl.deadline, INF_IDS)
    client.lpush(rl.processing, *INF_IDS)
    client.zadd(hj.suppressed, INF_IDS)
    for m in INF_IDS:
        client.hset(hj.job(m.decode()), mapping={b"id": m, b"payload": b"{}", b"status": b"failed",
                                                 b"attempts": b"1"})
        client.lpush(jl.processing, b'{"id":"' + m + b'","task":"t"}')
        client.hset(jl.suppressed_raw, m, b'{"id":"' + m + b'","task":"t"}')
    client.zadd(jl.processing_times, INF_IDS)
    client.zadd(jl.suppressed, INF_IDS)
    client.zadd(DelayZsetKeys("dz:jobs").zset, INF_IDS)
    for m, score in INF_IDS.items():
        member = b"com.acme.Cls###" + m
        client.zadd(de.zset, {member: score, member + b"-dead": score})
        client.hset(de.events, mapping={member: EVENT % 1, member + b"-dead": EVENT % 9})
    client.zadd(de.suppressed, {b"com.acme.Cls###supp-" + m: s for m, s in INF_IDS.items()})
    rq = RedissonDelayedKeys("rq")
    for n, (m, score) in enumerate(INF_IDS.items()):
        packed = bytes(8) + n.to_bytes(8, "little") + m  # 8-byte random id, 8-byte length, codec bytes
        client.zadd(rq.timeout, {packed: score})
        client.rpush(rq.order, packed)


def _load_more_layouts(client) -> None:
    """Stream-group (dead list and dead stream), delay-zset and
    delayed-events queues holding every bad id: stream entries whose
    ``jobId`` is the bad id (some delivered: the PEL), delayed-events members
    ``<class>###<bad id>`` and members that are bad bytes whole."""
    de, dz = DelayedEventsKeys("de:"), DelayZsetKeys("dz:jobs")
    for tag in ("sg", "sgs"):
        sg = StreamGroupKeys(tag)
        client.xgroup_create(sg.stream, "workers", id="0", mkstream=True)
        client.xadd(sg.stream, {b"jobId": b"good"})
        client.set(sg.job("good"), ENVELOPE)
        for n, bad in enumerate(BAD_IDS):
            client.xadd(sg.stream, {b"jobId": bad, **({b"jobType": b"t\xff"} if n % 2 else {})})
            client.set(sg.job(sid(bad)).encode("utf-8", "surrogateescape"), BAD_VALUES[n % len(BAD_VALUES)])
            client.zadd(sg.scheduled, {bad: 1_800_000_000_000 + n})
            if tag == "sg":
                client.lpush(sg.dead, bad)
            else:
                client.xadd(sg.dead_stream, {b"jobId": bad})
        client.xreadgroup("workers", "w1", {sg.stream: ">"}, count=len(BAD_IDS) // 2)
    for n, bad in enumerate(BAD_IDS):
        for member in (b"com.acme.Cls###" + bad, bad):
            client.zadd(de.zset, {member: 1_700_000_000_000 + n})
            client.hset(de.events, member, EVENT % (1 + 8 * (n % 2)))
        client.zadd(dz.zset, {bad: 1_700_000_000_000 + n, b"later-" + bad: 4_000_000_000_000})


def _wrong_payload_type(client) -> None:
    """Each :data:`WRONG_PAYLOAD` queue: a good job and, in every state, a
    job whose payload key is a hash."""
    for name, (layout, _) in WRONG_PAYLOAD.items():
        keys = ReliableListKeys(name) if layout == "reliable-list" else StreamGroupKeys(name)
        client.set(keys.job("fine"), ENVELOPE)
        ids = {s: f"wp-{s}" for s in ("ready", "scheduled", "processing", "dead", "suppressed")}
        for job_id in ids.values():
            client.hset(keys.job(job_id), "not", "a string")
        if layout == "reliable-list":
            client.lpush(keys.ready, ids["ready"], "fine")
            client.lpush(keys.processing, ids["processing"])
            client.zadd(keys.deadline, {ids["processing"]: 1_700_000_000_000})
        else:
            client.xgroup_create(keys.stream, "workers", id="0", mkstream=True)
            client.xadd(keys.stream, {"jobId": ids["processing"]})
            client.xreadgroup("workers", "w1", {keys.stream: ">"}, count=1)
            client.xadd(keys.stream, {"jobId": ids["ready"]})
            client.xadd(keys.stream, {"jobId": "fine"})
        client.zadd(keys.scheduled, {ids["scheduled"]: 1_800_000_000_000})
        client.lpush(keys.dead, ids["dead"], "fine")
        client.zadd(keys.suppressed, {ids["suppressed"]: 1_700_000_000_000})


def _config_text() -> str:
    parts = [CATALOGUE]
    for name, (layout, cfg) in WRONG_PAYLOAD.items():
        parts.append(f'[queues."{name}"]\nlayout = "{layout}"\n{cfg}\n')
    for name, layout, cfg in _wrong_type_queues():
        parts.append(f'[queues."{name}"]\nlayout = "{layout}"\n{cfg}\n')
    return "\n".join(parts)


def dump_all(client) -> dict[bytes, object]:
    """Every key's ``DUMP`` (the full state a refusal must not change);
    hashes and sets as their sorted members instead: a read of a hash
    table being rehashed moves its entries, so their DUMP bytes change
    although nothing was written."""
    keys = sorted(set(client.scan_iter(count=1000)))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.type(k)
    types = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for k, t in zip(keys, types):
        if t == b"hash":
            pipe.hgetall(k)
        elif t == b"set":
            pipe.smembers(k)
        else:
            pipe.dump(k)
    return {k: (sorted(v.items()) if isinstance(v, dict) else sorted(v) if isinstance(v, set) else v)
            for k, v in zip(keys, pipe.execute())}


@pytest.fixture(scope="module")
def loaded(redis_server, _redis_admin, tmp_path_factory):
    """(url, config path, client, dump) of the loaded server; shared by the module."""
    _redis_admin.flushall()
    _redis_admin.script_flush()
    client = redis.Redis.from_url(redis_server.url)
    _load(client)
    for key in client.scan_iter(count=1000):  # the fixtures' TTLs would make keys vanish mid-module
        client.persist(key)
    cfg = tmp_path_factory.mktemp("badinput") / "jobctl.toml"
    cfg.write_text(_config_text())
    before = dump_all(client)
    yield redis_server.url, str(cfg), client, before
    client.close()


def run(capsys, loaded, *argv: str, record: str = "corpus") -> tuple[int, str, str]:
    """Run one case; assert the contract of the module docstring."""
    url, cfg, client, before = loaded
    code = main(["--url", url, "--config", cfg, *argv])
    out, err = capsys.readouterr()
    OUTCOMES[code] += 1
    assert code != int(ExitCode.FAILURE), (argv, err)
    assert code in DOCUMENTED, (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert "internal error" not in err, (argv, err)
    errors = [line for line in err.splitlines() if line.startswith("jobctl: error:")]
    if code in (0, 7, 8):
        assert not errors, (argv, code, err)
    elif code == int(ExitCode.DATA):  # status names each wrong-typed key on its own line
        assert errors, (argv, code, err)
    else:
        assert len(errors) == 1, (argv, code, err)
    if "--json" in argv and code in (0, 6, 7, 8) and out.strip():
        for doc in out.strip().splitlines() if "--watch" in argv else [out]:
            json.loads(doc)
    after = dump_all(client)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"{argv} changed Redis: {changed[:5]}"
    return code, out, err


# -- reads and dry runs on bad ids, bad values, +inf scores ----------------------------------------

LAYOUT_STATES = {"rl": ("ready", "scheduled", "processing", "dead", "suppressed"),
                 "hj": ("ready", "processing", "dead", "suppressed"),
                 "jl": ("ready", "processing", "dead", "suppressed"),
                 "sg": ("ready", "scheduled", "processing", "dead", "suppressed"),
                 "sgs": ("ready", "scheduled", "processing", "dead", "suppressed"),
                 "dz": ("ready", "scheduled"),
                 "de": ("ready", "scheduled", "dead", "suppressed"),
                 "rq": ("ready", "scheduled"),
                 "wp-rl": ("ready", "scheduled", "processing", "dead", "suppressed"),
                 "wp-sg": ("ready", "scheduled", "processing", "dead", "suppressed")}
#: Queues no operation writes to (read-only layouts): reads only.
READ_ONLY_QUEUES = ("rq",)


def _read_cases() -> list[tuple[str, ...]]:
    cases: list[tuple[str, ...]] = [("status",), ("status", "--json"), ("discover", "--json"), ("discover",),
                                    ("metrics", "once")]
    for q, states in LAYOUT_STATES.items():
        cases += [("status", q), ("status", q, "--json"), ("check", q), ("check", q, "--json"),
                  ("journal", q), ("metrics", "once", q)]
        for s in states:
            cases += [("ls", q, "--state", s, "--limit", "10000"), ("ls", q, "--state", s, "--json"),
                      ("attempts", q, "--state", s), ("attempts", q, "--state", s, "--json")]
        if q in READ_ONLY_QUEUES:
            continue
        cases += [("redrive", q, "--dry-run"), ("redrive", q, "--dry-run", "--json"),
                  ("redrive", q, "--to", "scheduled", "--delay", "5m", "--dry-run"),
                  ("suppress", q, "--filter", 'error ~ "*"', "--reason", "x", "--dry-run"),
                  ("unsuppress", q, "--dry-run"), ("requeue", q, "--stuck", "--dry-run"),
                  ("purge", q, "--state", "dead", "--dry-run"), ("purge", q, "--state", "dead", "--dry-run",
                                                                 "--filter", "attempts >= 0")]
    cases += [("promote", "rl", "--dry-run"), ("promote", "rl", "--dry-run", "--json")]
    return cases


@pytest.mark.parametrize("argv", _read_cases(), ids=" ".join)
def test_reads_and_dry_runs_on_bad_data(capsys, loaded, argv):
    run(capsys, loaded, *argv)


@pytest.mark.parametrize("n", range(len(BAD_IDS)))
@pytest.mark.parametrize("queue", ["rl", "hj"])
def test_inspect_bad_id(capsys, loaded, queue, n):
    bad = BAD_IDS[n]
    code, out, err = run(capsys, loaded, "inspect", queue, sid(bad), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["id"]  # escaped when not UTF-8
    code, out, err = run(capsys, loaded, "inspect", queue, sid(bad))
    assert code == 0, err
    assert "\udcff" not in out


@pytest.mark.parametrize("n", range(len(BAD_IDS)))
def test_inspect_bad_id_as_shown(capsys, loaded, n):
    """The escaped form ls prints (``job\\xff``) finds the job too."""
    from jobctl.cli.render import shown

    bad = BAD_IDS[n]
    code, out, err = run(capsys, loaded, "inspect", "rl", shown(sid(bad)), "--json")
    assert code == 0, err


#: (queue, the id a member holds in a delayed-events zset) for inspect.
def _member(queue: str, raw: bytes) -> str:
    return sid(b"com.acme.Cls###" + raw) if queue == "de" else sid(raw)


@pytest.mark.parametrize("n", range(len(BAD_IDS)))
@pytest.mark.parametrize("queue", ["sg", "sgs", "de", "dz"])
def test_inspect_bad_id_other_layouts(capsys, loaded, queue, n):
    """A stream entry whose ``jobId`` is not UTF-8, a delayed-events member
    holding such bytes, a delay-zset member: found, shown escaped."""
    code, out, err = run(capsys, loaded, "inspect", queue, _member(queue, BAD_IDS[n]), "--json")
    assert code == 0, err
    json.loads(out)
    code, out, err = run(capsys, loaded, "inspect", queue, _member(queue, BAD_IDS[n]))
    assert code == 0 and "\udcff" not in out, err


def test_delayed_events_member_of_bad_bytes(capsys, loaded):
    """A member that is bad bytes whole (no ``###``, not UTF-8) is listed, escaped
    (attempt 1: ready; attempt 9, past max_attempts: dead)."""
    ids = set()
    for state in ("ready", "dead"):
        code, out, err = run(capsys, loaded, "ls", "de", "--state", state, "--limit", "10000", "--json")
        assert code == 0, err
        ids |= {j["id"] for j in json.loads(out)["jobs"]}
    assert "\\xff" in ids and "com.acme.Cls###\\xffjob" in ids


@pytest.mark.parametrize("queue", sorted(LAYOUT_STATES))
@pytest.mark.parametrize("member", sorted(INF_IDS))
def test_inspect_infinite_scores(capsys, loaded, queue, member):
    """Every layout's ``inspect`` of a member scored +inf/-inf: never / always."""
    job_id = "com.acme.Cls###" + member.decode() if queue == "de" else member.decode()
    code, out, err = run(capsys, loaded, "inspect", queue, job_id)
    assert code in (0, 5), err
    if code == 0 and queue not in ("wp-rl", "wp-sg"):
        assert ("never" if member == b"inf-plus" else "always") in out, out
    code, out, err = run(capsys, loaded, "inspect", queue, job_id, "--json")
    assert code in (0, 5), err


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("queue", sorted(LAYOUT_STATES))
def test_export_bad_ids_and_values(capsys, loaded, tmp_path, queue, fmt):
    """Every dead job is exported, bad bytes and all (ids escaped or raw, never a crash)."""
    out_dir = tmp_path / "export"
    states = [] if "dead" in LAYOUT_STATES[queue] else [a for s in LAYOUT_STATES[queue] for a in ("--state", s)]
    code, out, err = run(capsys, loaded, "export", queue, "--out", str(out_dir), "--format", fmt, "--json", *states)
    assert code == 0, err
    rows = json.loads(out)["manifest"]["rows"] if "manifest" in json.loads(out) else None
    url, cfg, client, before = loaded
    if rows is not None and queue in ("rl", "hj", "jl"):
        dead_key = {"rl": ReliableListKeys("rl").dead, "hj": HashJobKeys("hj").failed,
                    "jl": JsonListKeys("jl").dead}[queue]
        assert rows == client.llen(dead_key)


def test_ls_shows_bad_ids_escaped(capsys, loaded):
    code, out, err = run(capsys, loaded, "ls", "rl", "--state", "dead", "--limit", "10000")
    assert code == 0 and "\\xff" in out and "\udcff" not in out
    code, out, err = run(capsys, loaded, "ls", "rl", "--state", "dead", "--limit", "10000", "--json")
    ids = {j["id"] for j in json.loads(out)["jobs"]}
    assert "\\xffjob" in ids and "job\\xff" in ids


def test_inspect_truncates_large_values(capsys, loaded):
    code, out, err = run(capsys, loaded, "inspect", "rl", "huge")
    assert code == 0 and "truncated" in err and len(out) < 400_000
    code, out, err = run(capsys, loaded, "inspect", "rl", "huge", "--json")
    assert json.loads(out)["meta"]["truncated"].startswith("showing 65,536 of 200,000 bytes")
    code, out, err = run(capsys, loaded, "inspect", "rl", "huge", "--json", "--full")
    assert len(json.loads(out)["raw_hex"]) == 400_000


def test_infinite_scores(capsys, loaded):
    code, out, err = run(capsys, loaded, "ls", "rl", "--state", "scheduled", "--limit", "10000")
    assert code == 0 and "never" in out
    code, out, err = run(capsys, loaded, "inspect", "rl", "inf-only")
    assert code == 0 and "never (score +inf)" in out
    code, out, err = run(capsys, loaded, "inspect", "rl", "inf-only", "--json")
    assert json.loads(out)["score"] == 2 ** 53


def test_status_of_the_whole_catalogue_with_infinite_scores(capsys, loaded):
    """+inf is a due time no clock reaches ("never"), -inf one always past."""
    code, out, err = run(capsys, loaded, "status", "--json")
    assert code in (0, 6), err
    by_queue = {q["queue"]: q for q in json.loads(out)["queues"]}
    assert by_queue["rl"]["next_deadline_ms"] is not None
    code, out, err = run(capsys, loaded, "status")
    assert code in (0, 6) and "never" in out, err


def test_dashboard_data_with_infinite_scores(loaded):
    """The TUI's data (jobctl.dashboard): snapshot, detail, histograms,
    triage and job pages of every loaded queue, +inf/-inf scores and all."""
    from jobctl.dashboard import Dashboard
    from jobctl.model import State
    from jobctl.session import Session

    url, cfg, client, before = loaded
    session = Session(url=url, config_file=cfg)
    try:
        board = Dashboard(session)
        snap = board.refresh()
        rows = {r.name: r for r in snap.rows}
        for queue in LAYOUT_STATES:
            assert rows[queue].status is not None, (queue, rows[queue].error)
        for queue, states in LAYOUT_STATES.items():
            board.queue_detail(queue)
            board.histograms(queue)
            for state in states:
                page = board.jobs(queue, State(state))
                assert page is not None
                if state == "dead" or queue == "de":
                    board.triage(queue, state=State(state))
    finally:
        session.close()
    assert dump_all(client) == before


# -- payload keys of the wrong type: named, never "dangling" ------------------------------------------


@pytest.mark.parametrize("queue", sorted(WRONG_PAYLOAD))
def test_wrong_typed_payload_is_named(capsys, loaded, queue):
    """A payload key holding a hash is reported as a key of the wrong type,
    naming it, by status, check, inspect and ls; a plan excludes it as
    malformed; never as dangling."""
    keys = ReliableListKeys(queue)
    code, out, err = run(capsys, loaded, "status", queue, "--json")
    warnings = " ".join(json.loads(out)["queues"][0]["warnings"])
    assert "dangling" not in warnings
    if queue == "wp-rl":  # the dead-list audit (a stream-group's dead list has none)
        assert keys.job("wp-dead") in warnings and "wrong Redis type" in warnings, warnings
    code, out, err = run(capsys, loaded, "check", queue, "--json")
    problems = [p for q in json.loads(out)["queues"] for p in q["problems"]]
    wrong = {p["id"] for p in problems if p["kind"] == "wrong_type_payload"}
    checked = LAYOUT_STATES[queue] if queue == "wp-rl" else ("scheduled", "dead", "suppressed")  # not entries
    assert wrong == {f"wp-{s}" for s in checked}, problems
    assert all(keys.job(p["id"]) in p["detail"] for p in problems if p["kind"] == "wrong_type_payload")
    assert not [p for p in problems if p["kind"] == "dangling"], problems
    code, out, err = run(capsys, loaded, "inspect", queue, "wp-dead")
    assert keys.job("wp-dead") in err + out and "wrong Redis type" in err + out
    for state in LAYOUT_STATES[queue]:
        code, out, err = run(capsys, loaded, "ls", queue, "--state", state, "--json")
        jobs = {j["id"]: j for j in json.loads(out)["jobs"]}
        assert "wrong Redis type" in json.dumps(jobs[f"wp-{state}"]), jobs
        assert "dangling" not in out and "missing payload key" not in out, out
    for argv in (("redrive", queue, "--dry-run"), ("redrive", queue, "--dry-run", "--filter", "attempts >= 0")):
        code, out, err = run(capsys, loaded, *argv)
        assert code == 0 and "dangling" not in err + out, err
    assert "malformed envelopes excluded (e.g. wp-dead)" in err, err


# -- filter globs that cannot compile ---------------------------------------------------------------

#: Globs whose character class is not one: a reversed range and its kin.
BAD_GLOBS = ["[z-a]", "job_[9-0]*", "[\\xff-\\x00]", "[b-a]x", "x[z-a", "[]"]


@pytest.mark.parametrize("glob", BAD_GLOBS)
@pytest.mark.parametrize("argv", [("redrive", "rl", "--dry-run"), ("purge", "rl", "--state", "dead", "--dry-run"),
                                  ("ls", "rl", "--state", "dead"), ("redrive", "hj", "--dry-run"),
                                  ("redrive", "jl", "--dry-run"), ("redrive", "sg", "--dry-run")],
                         ids=" ".join)
def test_reversed_glob_range(capsys, loaded, argv, glob):
    """``id ~ '[z-a]'``: a glob whose range runs backwards matches nothing
    (docs/filter.md), never an internal error."""
    code, out, err = run(capsys, loaded, *argv, "--filter", f"id ~ '{glob}'")
    assert code in (0, 2), err


def test_reversed_range_is_empty_as_in_fnmatch(capsys, loaded):
    """The glob semantics of a reversed range are fnmatch's (an empty range),
    for the filter and the analyze rules alike; such a filter selects nothing."""
    import fnmatch
    import re

    from jobctl.vocabulary import glob_matcher, glob_regex

    words = ["a", "b", "z", "-", "x", "bx", "job_1", "]", "^", "&", "\\", "+", ",", "?"]
    for glob in [*BAD_GLOBS, "[!z-a]", "[a-cz-b]", "[a-]", "[-a]", "[z-a-c]", "[---]", "[%-+]", "[!]]"]:
        want = re.compile(fnmatch.translate(glob))
        rx = re.compile(glob_regex(glob))
        for w in words:
            assert glob_matcher(glob)(w) == bool(want.match(w)) == bool(rx.match(w)), (glob, w)
    code, out, err = run(capsys, loaded, "redrive", "rl", "--dry-run", "--json", "--filter", "id ~ '[z-a]'")
    assert code == 0 and json.loads(out)["planned"] == 0, err
    code, out, err = run(capsys, loaded, "redrive", "rl", "--dry-run", "--json", "--filter", "id ~ '[!z-a]*'")
    assert code == 0 and json.loads(out)["planned"] > 0, err


# -- wrong key types in every key of every layout ----------------------------------------------------


def _wrong_type_cases() -> list[tuple[str, ...]]:
    cases = []
    for name, layout, _ in _wrong_type_queues():
        cases += [("status", name), ("status", name, "--json"), ("check", name), ("inspect", name, "j1"),
                  ("attempts", name), ("metrics", "once", name)]
        states = {"reliable-list": ("ready", "scheduled", "processing", "dead", "suppressed"),
                  "delay-zset": ("ready", "scheduled"), "delayed-events": ("scheduled", "dead")}.get(
            layout, ("ready", "processing", "dead"))
        cases += [("ls", name, "--state", s) for s in states]
        if layout not in ("delay-zset",):
            cases += [("redrive", name, "--dry-run")]
    return cases


@pytest.mark.parametrize("argv", _wrong_type_cases(), ids=" ".join)
def test_wrong_key_types(capsys, loaded, argv):
    code, out, err = run(capsys, loaded, *argv)
    QUEUE_OUTCOMES[code] += 1


# -- extreme numbers in every numeric option -----------------------------------------------------------

#: (argv before the option, option, argv after): commands that would run
#: forever or change Redis with a valid value end in --dry-run, or are only
#: given invalid values (:data:`LOOPS`).
NUMERIC_OPTIONS = [
    (("ls", "rl"), "--limit", ()),
    (("redrive", "rl"), "--limit", ("--dry-run",)),
    (("redrive", "rl"), "--rate", ("--dry-run",)),
    (("redrive", "rl"), "--batch", ("--dry-run",)),
    (("redrive", "rl"), "--priority", ("--dry-run",)),
    (("promote", "rl"), "--limit", ("--dry-run",)),
    (("requeue", "rl", "--stuck"), "--limit", ("--dry-run",)),
    (("suppress", "rl", "--filter", "attempts >= 0", "--reason", "x"), "--rate", ("--dry-run",)),
    (("purge", "rl", "--state", "dead"), "--batch", ("--dry-run",)),
    (("journal", "rl"), "--limit", ()),
    (("discover",), "--limit", ()),
    (("status",), "--watch", ()),
    (("metrics", "serve"), "--interval", ()),
    (("metrics", "serve"), "--port", ()),
    (("tui",), "--refresh", ()),
    (("tui",), "--rate", ()),
    (("export", "rl", "--out", "/nonexistent-dir/x"), "--part-rows", ()),
    (("demo",), "--size", ()),
]
#: Options whose valid values start something that runs until Ctrl-C.
LOOPS = {("status", "--watch"), ("metrics", "--interval"), ("metrics", "--port"), ("tui", "--refresh"),
         ("tui", "--rate"), ("demo", "--size"), ("export", "--part-rows")}


def _number_cases():
    for before, opt, after in NUMERIC_OPTIONS:
        for value in NUMBERS:
            yield pytest.param(before, opt, value, after, id=f"{' '.join(before[:1])} {opt} {value!r}")


@pytest.mark.parametrize("before,opt,value,after", list(_number_cases()))
def test_extreme_numbers(capsys, loaded, before, opt, value, after):
    loops = (before[0], opt) in LOOPS
    if loops:
        from jobctl.cli.main import cli

        cmd = cli
        for word in before:
            if word in getattr(cmd, "commands", {}):
                cmd = cmd.commands[word]
        param = next(p for p in cmd.params if opt in getattr(p, "opts", ()))
        try:
            param.type.convert(value, param, None)
        except Exception:  # noqa: BLE001 - refused: run it, it must exit 2 before starting
            pass
        else:
            pytest.skip("a valid value starts a loop")
    code, out, err = run(capsys, loaded, *before, opt, value, *after)
    assert code in (0, 2, 8), (code, err)


def test_global_timeout_numbers(capsys, loaded):
    for value in NUMBERS:
        code, out, err = run(capsys, loaded, "--timeout", value, "status", "rl")
        assert code in (0, 2), (value, code, err)


@pytest.mark.parametrize("value", DURATIONS)
@pytest.mark.parametrize("argv", [("redrive", "rl", "--to", "scheduled", "--delay"),
                                  ("purge", "rl", "--state", "dead", "--dry-run", "--older-than"),
                                  ("requeue", "hj", "--stuck", "--dry-run", "--visibility-timeout")],
                         ids=lambda a: a[0] if isinstance(a, tuple) else a)
def test_extreme_durations(capsys, loaded, argv, value):
    code, out, err = run(capsys, loaded, *argv, value, *(("--dry-run",) if argv[0] == "redrive" else ()))
    assert code in (0, 2), (code, err)


def test_limit_over_64_bits_refused_before_anything_runs(capsys, loaded):
    code, out, err = run(capsys, loaded, "redrive", "rl", "--limit", "99999999999999999999", "--yes")
    assert code == ExitCode.USAGE and "--limit" in err


@pytest.mark.parametrize("out_dir", ["/proc/no/such/dir", "/dev/null/x", "/dev/null"])
def test_export_into_unwritable_directory(capsys, loaded, out_dir):
    code, out, err = run(capsys, loaded, "export", "rl", "--out", out_dir)
    assert code == ExitCode.USAGE


def test_read_only_runbook_yes_refused(capsys, loaded):
    code, out, err = run(capsys, loaded, "--read-only", "runbook", "run", "dlq-spike", "--queue", "rl", "--yes")
    assert code == ExitCode.READ_ONLY and "read-only" in err


@pytest.mark.parametrize("argv", [("redrive", "rl"), ("purge", "rl", "--state", "dead", "--no-export"),
                                  ("requeue", "rl", "--stuck"), ("promote", "rl"), ("check", "rl", "--repair"),
                                  ("suppress", "rl", "--filter", "attempts >= 0", "--reason", "r")],
                         ids=lambda a: a[0])
def test_read_only_refuses_every_mutation(capsys, loaded, argv):
    code, out, err = run(capsys, loaded, "--read-only", *argv, "--yes")
    assert code == ExitCode.READ_ONLY


# -- broken configs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name,expect,body", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_config_refused(capsys, loaded, tmp_path, name, expect, body):
    url, _, client, before = loaded
    cfg = tmp_path / "bad.toml"
    cfg.write_bytes(body)
    code = main(["--url", url, "--config", str(cfg), "status"])
    out, err = capsys.readouterr()
    OUTCOMES[code] += 1
    assert code == ExitCode.USAGE, (name, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert expect in err, (name, err)
    assert dump_all(client) == before


def test_tui_screens_on_bad_data(loaded):
    """The TUI opens every tab of every loaded queue (bad ids, bad values, +inf scores) without failing."""
    import asyncio

    from jobctl.session import Session
    from jobctl_tui import make_app
    from jobctl_tui.queue_screen import QueueScreen
    from jobctl_tui.testing import settle

    url, cfg, client, before = loaded

    async def go():
        session = Session(url=url, config_file=cfg)
        app = make_app(session, refresh_s=3600, server_label="redis://test")
        try:
            async with app.run_test(size=(140, 40)) as pilot:
                await settle(pilot)
                for queue in LAYOUT_STATES:
                    for tab in ("overview", "processing", "triage", "jobs", "journal"):
                        app.open_queue(queue, tab=tab)
                        await settle(pilot)
                        assert isinstance(app.screen, QueueScreen) and app.screen.active_tab == tab
                        await pilot.press("escape")
                        await settle(pilot)
        finally:
            session.close()

    asyncio.run(go())
    assert dump_all(client) == before


# -- applied operations: journaled (their own loads: after every test of the shared `loaded` server) --


@pytest.mark.parametrize("argv", [("redrive", "rl", "--limit", "5"), ("promote", "rl", "--limit", "3"),
                                  ("requeue", "rl", "--stuck"),
                                  ("suppress", "rl", "--filter", "attempts >= 0", "--reason", "r", "--limit", "3"),
                                  ("purge", "rl", "--state", "dead", "--no-export", "--limit", "2")],
                         ids=lambda a: a[0])
def test_applied_operations_are_journaled(capsys, redis_url, redis_client, tmp_path, argv):
    """Every applied operation leaves a journal entry, with bad ids among the jobs."""
    from jobctl_fixtures.scenarios import load_scenario

    scenario = "stuck-workers" if argv[0] == "requeue" else "dlq-spike"
    load_scenario(redis_client, scenario, queue="rl", tag="rl", size=40, seed=5)
    rl = ReliableListKeys("rl")
    for bad in BAD_IDS[:4]:
        redis_client.set(rl.job(sid(bad)).encode("utf-8", "surrogateescape"),
                         b'{"jobId":"x","jobType":"t","createdAtEpochMs":1,"attempt":1}')
        redis_client.lpush(rl.dead, bad)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[queues.rl]\ntag = "rl"\n')
    code = main(["--url", redis_url, "--config", str(cfg), *argv, "--yes"])
    out, err = capsys.readouterr()
    assert code in (0, 8), err
    assert "Traceback" not in err and "internal error" not in err
    assert redis_client.xlen(rl.journal) >= 1, err
    for more in ((), ("--json",), ("--local",)):  # the journal shows what it holds, bad ids and all
        code = main(["--url", redis_url, "--config", str(cfg), "journal", "rl", *more])
        out, err = capsys.readouterr()
        assert code == 0 and "internal error" not in err, err


def test_zz_corpus_summary(capsys):
    """The corpus size and the counts by outcome (exit code)."""
    with capsys.disabled():
        total = sum(OUTCOMES.values())
        by_code = ", ".join(f"exit {c} ({ExitCode(c).name.lower()}): {n}" for c, n in sorted(OUTCOMES.items()))
        print(f"\nbad-input corpus: {total} CLI runs; {by_code}")
        print(f"data: {len(BAD_IDS)} ids, {len(BAD_VALUES)} values, {len(NUMBERS)} numbers, "
              f"{len(DURATIONS)} durations, {len(CONFIGS)} configs, "
              f"{len(_wrong_type_queues())} wrong-typed keys")
    assert OUTCOMES[int(ExitCode.FAILURE)] == 0


def test_purge_with_export_takes_bad_ids_exactly(capsys, redis_url, redis_client, tmp_path):
    """Ids with undecodable bytes are exported escaped and purged exactly (the fence unescapes them)."""
    rl = ReliableListKeys("rl")
    for bad in BAD_IDS:
        redis_client.set(rl.job(sid(bad)).encode("utf-8", "surrogateescape"),
                         b'{"jobId":"x","jobType":"t","createdAtEpochMs":1}')
        redis_client.lpush(rl.dead, bad)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[queues.rl]\ntag = "rl"\n')
    code = main(["--url", redis_url, "--config", str(cfg), "purge", "rl", "--state", "dead", "--export-to",
                 str(tmp_path / "export"), "--export-format", "jsonl", "--yes"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert redis_client.llen(rl.dead) == 0 and not list(redis_client.scan_iter(match="job:{rl}:*"))
    assert redis_client.xlen(rl.journal) >= 1



def test_redrive_ids_takes_a_bad_id_exactly(capsys, redis_url, redis_client, tmp_path):
    """`redrive --ids` on an undecodable id (as a shell passes `$'\\xff'`):
    that job moves, the others stay dead in their order, the journal names it
    (no test-side client patch: the clients jobctl builds send the bytes)."""
    from jobctl_fixtures.scenarios import load_scenario

    load_scenario(redis_client, "dlq-spike", queue="rl", tag="rl", size=40, seed=5)
    rl = ReliableListKeys("rl")
    bad = BAD_IDS[0]
    redis_client.set(rl.job(sid(bad)).encode("utf-8", "surrogateescape"),
                     b'{"jobId":"x","jobType":"t","createdAtEpochMs":1,"attempt":1}')
    redis_client.rpush(rl.dead, bad)  # the oldest dead job
    before = redis_client.lrange(rl.dead, 0, -1)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[queues.rl]\ntag = "rl"\n')
    code = main(["--url", redis_url, "--config", str(cfg), "redrive", "rl", "--ids", sid(bad), "--yes"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert redis_client.lrange(rl.dead, 0, -1) == [x for x in before if x != bad]
    assert bad in redis_client.lrange(rl.ready, 0, -1)
    entry = orjson.loads(redis_client.xrange(rl.journal)[-1][1][b"entry"])
    assert entry["moved"] == 1 and entry["moved_ids_file"]
    assert Path(entry["moved_ids_file"]).read_bytes() == bad + b"\n"
