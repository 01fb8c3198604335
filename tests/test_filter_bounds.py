"""The server-side filter scan of a filtered redrive's plan is bounded per
call whatever the filter and the data (jobctl.filter.lua_predicate's
limits, list_scan.lua): a filter over the clause or program-size limit is
planned client-side, an envelope past a call's byte budget is not read in
Lua but handed back to the client, which decides it.  Each plan is the
client-side plan (same ids, positions, breakdown); every list_scan call the
planner makes is checked on the server (MONITOR): at most SCAN_WINDOW keys,
a program within the limits, its byte budget as ARGV[4], and the envelopes
the script reads (its MGET) within that budget."""

from __future__ import annotations

import re
import threading

import orjson
import pytest
import redis

from jobctl.config import QueueConfig
from jobctl.filter import compile_filter
from jobctl.filter.lua_predicate import (SCAN_MAX_CLAUSES, SCAN_MAX_PROGRAM_BYTES, SCAN_WINDOW, lua_program,
                                         program_clauses, scan_call_bytes)
from jobctl.keys import ReliableListKeys
from jobctl.layouts.reliable_list.lean_plan import plan_dead_filtered
from jobctl.layouts.reliable_list.layout import ReliableList
from jobctl.model import State
from jobctl.ops.plan import PredicateRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from helpers import cli_runner, queues_toml, write_config

K = ReliableListKeys("pq")
NOW = 1_795_000_000_000


def _env(job_id: str, tenant: str, **extra) -> bytes:
    doc = {"jobId": job_id, "jobType": "email.send", "tenantId": tenant, "createdAtEpochMs": NOW - 1000,
           "attempt": 1, "maxAttempts": 5, "lastErrorCode": "HTTP_503", "payload": {"n": 1}}
    doc.update(extra)
    return orjson.dumps(doc)


def _load(client, envelopes: list[tuple[str, bytes]]) -> None:
    """Dead jobs ``(id, envelope)``, the first at the tail (oldest)."""
    for job_id, raw in envelopes:
        client.set(K.job(job_id), raw)
    client.rpush(K.dead, *reversed([job_id for job_id, _ in envelopes]))


def _spec(text: str) -> OpSpec:
    return OpSpec(Operation.REDRIVE, "pq", State.DEAD, State.READY, filter=compile_filter(text))


def _same_as_client(lay, spec, plan) -> list[str]:
    ref = plan_dead_filtered(lay, spec, NOW)
    assert [(j.job_id, j.position) for j in plan.jobs] == [(j.job_id, j.position) for j in ref.jobs]
    assert plan.breakdown == ref.breakdown and plan.dangling == ref.dangling
    return [j.job_id for j in ref.jobs]


# -- the server's own record of the calls (MONITOR) -----------------------------------------------------------

_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_ESC = re.compile(rb'\\(x[0-9a-fA-F]{2}|.)', re.S)
_NAMED = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}


def _unrepr(arg: bytes) -> bytes:
    """One MONITOR argument (sdscatrepr) back to its bytes."""
    def one(m: re.Match) -> bytes:
        e = m.group(1)
        if e[:1] == b"x" and len(e) == 3:
            return bytes([int(e[1:], 16)])
        return _NAMED.get(e, e)
    return _ESC.sub(one, arg)


class Monitor:
    """Every command the server runs while the block runs (MONITOR on its
    own connection, read by a thread): ``(source, [args as bytes])``,
    source ``"lua"`` for a command a script ran."""

    END = b"jobctl-test-monitor-end"

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.url = url
        self.calls: list[tuple[str, list[bytes]]] = []

    def __enter__(self) -> "Monitor":
        self.conn = self.client.connection_pool.get_connection()
        self.conn.send_command("MONITOR")
        assert self.conn.read_response() in (b"OK", "OK")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self) -> None:
        while True:
            line = self.conn.read_response()
            if isinstance(line, str):
                line = line.encode("utf-8", "surrogateescape")
            head, _, rest = line.partition(b"] ")
            args = [_unrepr(a) for a in _ARG.findall(rest)]
            if args[:2] == [b"ECHO", self.END]:
                return
            self.calls.append(("lua" if head.endswith(b" lua") else "client", args))

    def __exit__(self, *exc) -> None:
        redis.Redis.from_url(self.url).echo(self.END)
        self.thread.join(timeout=60)
        self.conn.disconnect()
        self.client.close()

    def scans(self, sha: str) -> list[tuple[list[bytes], list[bytes], list[bytes]]]:
        """Each ``EVALSHA`` of ``sha``: ``(keys, argv, keys of the MGET it ran)``."""
        out = []
        for i, (src, args) in enumerate(self.calls):
            if src == "client" and args[:1] == [b"EVALSHA"] and args[1].decode() == sha:
                n = int(args[2])
                mget: list[bytes] = []
                for src2, inner in self.calls[i + 1:]:
                    if src2 != "lua":
                        break
                    if inner[0].upper() == b"MGET":
                        mget += inner[1:]
                out.append((args[3:3 + n], args[3 + n:], mget))
        return out


def assert_bounded(client, sha: str, monitor: Monitor) -> int:
    """Every ``list_scan`` call ``monitor`` saw had bounded inputs; returns
    how many calls there were."""
    scans = monitor.scans(sha)
    for keys, argv, mget in scans:
        program = argv[0]
        assert 0 < len(keys) <= SCAN_WINDOW
        assert len(program) <= SCAN_MAX_PROGRAM_BYTES and program_clauses(program)[0] <= SCAN_MAX_CLAUSES
        assert len(argv) == 4 and int(argv[3]) == scan_call_bytes(program), argv[1:]
        assert set(mget) <= set(keys)
        assert sum(client.strlen(k) for k in mget) <= int(argv[3])
    return len(scans)


# -- the tests ------------------------------------------------------------------------------------------------

def test_the_limits_are_where_the_program_stops():
    at = " or ".join(f"tenant = t{k}" for k in range(SCAN_MAX_CLAUSES))
    program = lua_program(compile_filter(at))
    assert program is not None and scan_call_bytes(program) > 0
    assert lua_program(compile_filter(at + " or tenant = x")) is None
    long = "x" * (SCAN_MAX_PROGRAM_BYTES // 2)
    assert lua_program(compile_filter(f"tenant = {long} or type = {long}")) is None
    # the most expensive program the limits allow still leaves the call bytes to read
    values = (SCAN_MAX_PROGRAM_BYTES - 40 * SCAN_MAX_CLAUSES) // SCAN_MAX_CLAUSES
    worst = lua_program(compile_filter(" or ".join(f"tenant = {'v' * values}{k:02d}"
                                                   for k in range(SCAN_MAX_CLAUSES))))
    assert worst is not None and scan_call_bytes(worst) >= 2048


def test_list_scan_refuses_a_call_without_its_byte_budget(redis_client):
    program = lua_program(compile_filter("tenant = t1"))
    scan = script(redis_client, "list_scan")
    for bad in ([program, "1", K.job("")], [program, "1", K.job(""), "-1"], [program, "1", K.job(""), "1.5"]):
        with pytest.raises(redis.ResponseError, match="BADARG byte budget"):
            scan(keys=[K.job("a")], args=bad)


def test_a_filter_of_7000_clauses_is_planned_client_side_with_the_client_filters_ids(redis_client, redis_url,
                                                                                        tmp_path, capsys):
    _load(redis_client, [(f"j{i:03d}", _env(f"j{i:03d}", f"t{i % 10}")) for i in range(300)])
    text = " or ".join(f"tenant = 'x{k}'" for k in range(6_998)) + " or tenant = t3 or tenant = 't7'"
    spec = _spec(text)
    assert lua_program(spec.filter) is None
    lay = ReliableList(redis_client, QueueConfig("pq"))
    sha = script(redis_client, "list_scan").sha
    with Monitor(redis_url) as mon:
        plan = lay.plan(spec, now=NOW)
    assert assert_bounded(redis_client, sha, mon) == 0  # no server-side program at all
    ids = _same_as_client(lay, spec, plan)
    assert len(ids) == 60 and all(int(i[1:]) % 10 in (3, 7) for i in ids)
    run = cli_runner(capsys, redis_url, write_config(tmp_path, queues_toml(pq={"layout": "reliable-list"})))
    code, out, err = run("redrive", "pq", "--filter", text, "--dry-run")
    assert code == 0, err
    assert "60" in out and not err.strip()
    assert redis_client.llen(K.dead) == 300 and not redis_client.exists(K.ready)


def test_a_50mb_envelope_matched_by_a_non_ascii_tenant_is_decided_by_the_client(redis_client, redis_url, tmp_path,
                                                                                  capsys):
    envs = [(f"j{i:03d}", _env(f"j{i:03d}", "ü" if i % 7 == 0 else f"t{i % 5}")) for i in range(400)]
    row = b'"' + b"y" * 98 + b'",'
    big = _env("big", "ü", payload=None)[:-1] + b',"rows":[' + row * 510_000 + b'"y"]}'  # ~50 MB for cjson
    assert len(big) > 50_000_000
    envs.insert(130, ("big", big))
    _load(redis_client, envs)
    lay = ReliableList(redis_client, QueueConfig("pq"))
    spec = _spec("tenant = 'ü'")
    program = lua_program(spec.filter)
    assert program is not None and scan_call_bytes(program) < len(big)
    sha = script(redis_client, "list_scan").sha
    redis_client.config_set("slowlog-log-slower-than", 100_000)  # a coarse guard: no call near 100 ms
    redis_client.slowlog_reset()
    with Monitor(redis_url) as mon:
        plan = lay.plan(spec, now=NOW)
    assert isinstance(plan.jobs, PredicateRange)
    calls = assert_bounded(redis_client, sha, mon)
    assert calls == -(-len(envs) // SCAN_WINDOW)
    assert all(K.job("big").encode() not in mget for _, _, mget in mon.scans(sha))
    assert not [e for e in redis_client.slowlog_get(128) if b"EVALSHA" in (e["command"] or b"").upper()]
    ids = _same_as_client(lay, spec, plan)
    assert "big" in ids and len(ids) == 1 + len([i for i, _ in envs if i != "big" and int(i[1:]) % 7 == 0])
    run = cli_runner(capsys, redis_url, write_config(tmp_path, queues_toml(pq={"layout": "reliable-list"})))
    code, out, err = run("redrive", "pq", "--filter", "tenant = 'ü'", "--dry-run")
    assert code == 0, err
    assert str(len(ids)) in out
    assert redis_client.llen(K.dead) == len(envs) and not redis_client.exists(K.ready)


def _mixed(i: int) -> bytes:
    """Envelopes of every size up to ~200 KB, some quote-dense, some with
    ``\\u`` escapes (decoded even by a text-only program)."""
    tenant = f"t{i % 4}"
    if i % 11 == 0:
        return _env(f"m{i}", tenant, payload={"q": ["t1x"] * 30_000})  # ~180 KB of quotes
    if i % 5 == 0:
        return _env(f"m{i}", tenant, lastErrorMessage="caf\u00e9 " * 2_000)  # orjson writes é as UTF-8
    if i % 3 == 0:
        return _env(f"m{i}", tenant, payload={"s": "\\u0041" * 500})
    return _env(f"m{i}", tenant)


FILTERS = [
    "tenant = t1",
    " or ".join(f"tenant = t{k}" for k in range(SCAN_MAX_CLAUSES - 1)) + " or type = x",  # at the clause limit
    "tenant = t1 and attempts >= 1",  # decoded
    "id = m33 or id = m40",  # the id only: envelopes are never read into Lua
    "tenant = 'café' or error = HTTP_503",
]


@pytest.mark.parametrize("text", FILTERS)
def test_every_list_scan_call_of_a_plan_has_bounded_inputs(redis_client, redis_url, text):
    _load(redis_client, [(f"m{i}", _mixed(i)) for i in range(600)])
    lay = ReliableList(redis_client, QueueConfig("pq"))
    spec = _spec(text)
    sha = script(redis_client, "list_scan").sha
    with Monitor(redis_url) as mon:
        plan = lay.plan(spec, now=NOW)
    assert isinstance(plan.jobs, PredicateRange)
    assert assert_bounded(redis_client, sha, mon) == 5
    assert _same_as_client(lay, spec, plan)
