"""The wrong-type matrix of jobctl's Lua scripts, generated from the script
registry (``jobctl.scripts.SCRIPT_NAMES``).

``SCRIPTS`` enters every registered script: a read-only one as
:class:`ReadOnly` (a valid call, checked to write nothing), a writing one
as the :class:`Call` s that make it write (one per mode or kind), each
naming the KEYS it writes (checked: exactly those keys change) and the
Redis type it expects at each key it writes or reads by type.  A test
asserts the table's keys are the registry, so a new script cannot be
added without entering it here.

The matrix: every writing call x every typed key x every other Redis type
planted there; the call must be refused (an error reply naming WRONGTYPE)
with the whole keyspace (DUMP and PTTL of every key) unchanged, or, for a
key whose wrong type the script documents as skipping only its own job
(``per_job``), answer that job's code with the keyspace unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from typing import Callable

import pytest
import redis

from jobctl.layouts.hash_job.layout import FENCE_FIELDS
from jobctl.scripts import SCRIPT_NAMES, script

TYPES = ("string", "list", "hash", "set", "zset", "stream")

Built = tuple[list, list]  # (KEYS, ARGV) of a call, after its state is planted


@dataclass(frozen=True)
class Call:
    """A call of a writing script that writes.

    ``build(client)`` plants a state where the call writes and returns its
    (KEYS, ARGV); ``writes`` are the KEYS indexes (1-based) it changes;
    ``types`` maps each KEYS index it writes (or reads by type) to the Redis
    type it expects there; ``per_job`` maps an index whose wrong type only
    skips its job to that job's code; ``untyped`` maps a written index left
    out of the matrix to the reason (documented behaviour)."""

    label: str
    build: Callable[[redis.Redis], Built]
    writes: frozenset[int]
    types: dict[int, str]
    per_job: dict[int, str] = field(default_factory=dict)
    untyped: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadOnly:
    """A script that never writes; ``build`` plants a state and returns a
    valid call's (KEYS, ARGV)."""

    build: Callable[[redis.Redis], Built]


def sha(raw: bytes | str) -> str:
    return hashlib.sha1(raw.encode() if isinstance(raw, str) else raw).hexdigest()


ENV = b'{"jobId":"a","jobType":"email","createdAtEpochMs":1}'
JL = '{"id":"a","type":"email"}'


# -- reliable-list --------------------------------------------------------------------------------------------

def _rl_zset_move(purge: bool):
    def build(c):
        c.zadd("q:{t}:scheduled", {"a": 5})
        c.set("job:{t}:a", ENV)
        c.hset("q:{t}:info", "a", "{}")
        target = "q:{t}:scheduled" if purge else "q:{t}:ready"
        return (["q:{t}:scheduled", target, "q:{t}:info", "job:{t}:a"],
                ["purge" if purge else "lpush", 1, "a", "5", sha(ENV)])
    return build


def _rl_requeue(c):
    c.rpush("q:{t}:processing", "a")
    c.zadd("q:{t}:deadline", {"a": 1000})
    return ["q:{t}:processing", "q:{t}:deadline", "q:{t}:ready"], [10, 1, "a", "1000"]


RL_REPAIR_KEYS = ["q:{t}:processing", "job:{t}:a", "q:{t}:deadline", "q:{t}:processing"]


def _rl_repair(kind: str):
    def build(c):
        keys = list(RL_REPAIR_KEYS)
        arg = ""
        if kind == "stray_deadline":
            c.rpush("q:{t}:processing", "other")
            c.zadd("q:{t}:deadline", {"a": 1000})
            arg = "1000"
        elif kind == "missing_deadline":
            c.rpush("q:{t}:processing", "a")
            c.zadd("q:{t}:deadline", {"other": 1})
            c.set("job:{t}:a", ENV)
            arg = "2000"
        elif kind == "dangling_processing":
            c.rpush("q:{t}:processing", "a")
            c.zadd("q:{t}:deadline", {"a": 1000})
        elif kind == "dangling_list":
            keys[0] = "q:{t}:ready"
            c.rpush("q:{t}:ready", "a")
        elif kind == "dangling_zset":
            keys[0] = "q:{t}:scheduled"
            c.zadd("q:{t}:scheduled", {"a": 5})
        elif kind == "duplicate":
            keys[0] = "q:{t}:ready"
            c.rpush("q:{t}:ready", "a", "b", "a")
            c.set("job:{t}:a", ENV)
            arg = "2"
        return keys, [kind.replace("dangling_processing", "dangling_list"), "a", arg]
    return build


def _rl_recheck(c):
    c.set("job:{t}:a", ENV)
    c.rpush("q:{t}:ready", "a")
    c.zadd("q:{t}:deadline", {"b": 1})
    return (["job:{t}:a", "q:{t}:deadline", "q:{t}:scheduled", "q:{t}:suppressed", "q:{t}:ready",
             "q:{t}:processing", "q:{t}:dead"], ["a", 100])


PAUSE_KEYS = ["q:{t}:paused", "q:{t}:paused:info", "q:{t}:holds", "q:{t}:scheduled"]


def _rl_pause(mode: str, hold: str = ""):
    def build(c):
        c.set("job:{t}:a", ENV)
        if hold:
            c.hset("q:{t}:holds", hold, "{}")
        if mode == "pause_zset":
            c.zadd("q:{t}:scheduled", {"a": 5})
            src, where = "q:{t}:scheduled", "5"
        else:
            c.rpush("q:{t}:ready", "b", "a")  # a at the tail: position 0
            src, where = "q:{t}:ready", "0"
        return ([src, *PAUSE_KEYS, "job:{t}:a"],
                [mode, 0, 0, "\x00tomb", hold, 0, 1, "a", sha(ENV), where, '{"from":"%s"}' % src])
    return build


def _rl_resume(to_scheduled: bool):
    def build(c):
        c.lpush("q:{t}:paused", "a")
        rec = '{"from":"q:{t}:scheduled","score":5}' if to_scheduled else '{"from":"q:{t}:ready"}'
        c.hset("q:{t}:paused:info", "a", rec)
        return (["q:{t}:paused", *PAUSE_KEYS, "q:{t}:ready"], ["resume", 0, 0, "\x00tomb", "", 1, 1, "a", "", "0", ""])
    return build


MIGRATE_IN_KEYS = ["q:{d}:ready", "q:{d}:scheduled", "q:{d}:migrated-in", "job:{d}:a"]


def _rl_migrate_in(state: str):
    def build(c):
        due = "1000" if state == "scheduled" else ""
        return list(MIGRATE_IN_KEYS), [1, "a", ENV, "op1", state, due]
    return build


MIGRATE_OUT_KEYS = ["q:{t}:migrating", "q:{t}:migrating:info", "q:{t}:ready", "q:{t}:scheduled", "job:{t}:a"]


def _rl_migrate_out(action: str, due: str = ""):
    def build(c):
        c.rpush("q:{t}:migrating", "a")
        c.hset("q:{t}:migrating:info", "a", "{}")
        c.set("job:{t}:a", ENV)
        return list(MIGRATE_OUT_KEYS), [1, "a", action, due]
    return build


NEW_ENV = b'{"jobId":"a","jobType":"email","createdAtEpochMs":1,"jobVersion":2}'


def _rl_transform(mode: str):
    def build(c):
        c.set("job:{t}:a", ENV)
        apply = ["apply", "op1", "1000", 1, "a", sha(ENV), NEW_ENV]
        if mode == "apply":
            return ["q:{t}:before", "job:{t}:a"], apply
        script(c, "rl_transform")(keys=["q:{t}:before", "job:{t}:a"], args=apply)  # what a rollback undoes
        return ["q:{t}:before", "job:{t}:a"], ["rollback", "op1", "1000", 1, "a", "", ""]
    return build


# -- stream-group ---------------------------------------------------------------------------------------------

def _sg_replay(c):
    c.xadd("s:{t}:jobs", {"jobId": "a"}, id="1-0")
    c.sadd("q:{t}:replayed", "0-1")
    return ["s:{t}:jobs", "q:{t}:replay-record", "q:{t}:replayed"], [1, "1-0"]


def _sg_pel_summary(c):
    c.xadd("s:{t}:jobs", {"jobId": "a"}, id="1-0")
    c.xgroup_create("s:{t}:jobs", "g", id="0")
    c.xreadgroup("g", "c1", {"s:{t}:jobs": ">"}, count=1)
    return ["s:{t}:jobs"], ["g", 1000, 10]


def _sg_count_after(c):
    c.xadd("s:{t}:jobs", {"jobId": "a"}, id="1-0")
    return ["s:{t}:jobs"], ["0-0", 10]


def _sg_requeue(c):
    c.xadd("s:{t}:jobs", {"jobId": "a"}, id="1-0")
    c.xgroup_create("s:{t}:jobs", "g", id="0")
    c.xreadgroup("g", "c1", {"s:{t}:jobs": ">"}, count=1)
    return ["s:{t}:jobs"], ["g", 1, "a", "1-0", "c1", "1"]


def _sg_zset_move(mode: str, kind: str = "list"):
    def build(c):
        src = "q:{t}:scheduled" if mode == "promote" else "q:{t}:suppressed"
        c.zadd(src, {"a": 5})
        c.set("job:{t}:a", ENV)
        c.hset("q:{t}:info", "a", "{}")
        target = {"promote": "s:{t}:jobs", "purge": src}.get(mode) or ("q:{t}:dead" if kind == "list" else "s:{t}:dead")
        return [src, target, "q:{t}:info", "job:{t}:a"], [mode, kind, 1, "a", "5", sha(ENV)]
    return build


def _sg_dead_move(mode: str, kind: str, new: bytes = b""):
    def build(c):
        if kind == "list":
            c.rpush("q:{t}:dead", "a")
            dead, locator = "q:{t}:dead", "1"
        else:
            c.xadd("s:{t}:dead", {"jobId": "a"}, id="1-0")
            dead, locator = "s:{t}:dead", "1-0"
        c.set("job:{t}:a", ENV)
        target = {"ready": "s:{t}:jobs", "purge": dead}.get(mode, "q:{t}:" + mode)
        info = '{"by":"x"}' if mode == "suppressed" else ""
        return [dead, target, "q:{t}:info", "job:{t}:a"], [mode, kind, "1000", 1, "a", locator, sha(ENV), new, info]
    return build


# -- delayed-events, delay-zset -------------------------------------------------------------------------------

DE_KEYS = ["delayed_events", "events", "delayed_events_lock", "delayed_events:sup", "delayed_events:sup:info"]
DE_ENV = '{"id":"m","attempt":2}'
DE_INFO = '{"envelope":"{\\"id\\":\\"m\\"}","score":5}'


def _de_move(mode: str, new: str = ""):
    def build(c):
        if mode in ("unsuppress", "purge_suppressed"):
            c.zadd("delayed_events:sup", {"m": 5})
            c.hset("delayed_events:sup:info", "m", DE_INFO)
            want = sha(DE_INFO)
        else:
            c.zadd("delayed_events", {"m": 5})
            c.hset("events", "m", DE_ENV)
            want = sha(DE_ENV)
        info = '{"by":"x"}' if mode == "suppress" else ""
        return list(DE_KEYS), [mode, "1000", 1, "m", "5", want, new, info]
    return build


def _dz_move(mode: str):
    def build(c):
        c.zadd("delay_queue", {"m": 5})
        return ["delay_queue"], [mode, "1000", 1, "m", "5"]
    return build


# -- hash-job -------------------------------------------------------------------------------------------------

HJ_JOB = {"status": "processing", "attempts": "1", "claim_token": "t", "claimed_at_ms": "5"}


def _hj_fence() -> str:
    return sha("\x1f".join(HJ_JOB.get(f, "") for f in FENCE_FIELDS))


def _hj_requeue(c):
    c.rpush("q:h:processing", "a")
    c.hset("q:h:job:a", mapping=HJ_JOB)
    return ["q:h:processing", "q:h:pending", "q:h:job:a"], [10, 1000, " ".join(FENCE_FIELDS), 1, "a", _hj_fence()]


def _hj_suppressed_move(mode: str):
    def build(c):
        c.zadd("q:h:sup", {"a": 5})
        c.hset("q:h:sup:info", "a", '{"ttl_ms":-1}')
        c.hset("q:h:job:a", mapping=HJ_JOB)
        return ["q:h:sup", "q:h:sup:info", "q:h:failed", "q:h:job:a"], [mode, " ".join(FENCE_FIELDS), 1, "a", "5",
                                                                          _hj_fence()]
    return build


def _hj_repair(kind: str):
    def build(c):
        keys, arg = ["q:h:failed", "q:h:job:a", "q:h:sup:info"], ""
        if kind == "dangling_list":
            c.rpush("q:h:failed", "a")
        elif kind == "dangling_zset":
            keys[0] = "q:h:sup"
            c.zadd("q:h:sup", {"a": 5})
            c.hset("q:h:sup:info", "a", "{}")
        elif kind == "duplicate":
            c.rpush("q:h:failed", "a", "b", "a")
            c.hset("q:h:job:a", "status", "failed")
            arg = "2"
        else:  # no_deadline
            keys[0] = "q:h:processing"
            c.rpush("q:h:processing", "a")
            c.hset("q:h:job:a", "status", "processing")
            arg = "1000"
        return keys, [kind, "a", arg, "100"]
    return build


# -- json-list ------------------------------------------------------------------------------------------------

def _jl_requeue(c):
    c.rpush("j:processing", JL)
    c.zadd("j:processing:times", {"a": 100})
    return ["j:processing", "j:processing:times", "j:pending"], [10, 1, "a", JL, "100"]


JL_SUP_KEYS = ["j:sup", "j:sup:raw", "j:sup:info", "j:dead", "j:attempts", "j:errors"]


def _jl_suppressed_move(mode: str):
    def build(c):
        c.zadd("j:sup", {"a": 5})
        c.hset("j:sup:raw", "a", JL)
        c.hset("j:sup:info", "a", "{}")
        c.hset("j:attempts", "a", "3")
        c.hset("j:errors", "a", "boom")
        return list(JL_SUP_KEYS), [mode, 1, "a", "5", sha(JL)]
    return build


def _jl_repair(kind: str):
    def build(c):
        keys, arg, raw = ["j:processing", "j:processing:times", "j:sup:raw", "j:sup:info"], "", JL
        if kind == "duplicate":
            keys[0] = "j:dead"
            c.rpush("j:dead", JL, "x", JL)
            arg = "2"
        elif kind == "missing_claim_time":
            c.rpush("j:processing", JL)
            c.zadd("j:processing:times", {"other": 1})
            arg = "100"
        elif kind == "stray_claim_time":
            c.zadd("j:processing:times", {"a": 100})
            arg, raw = "100", ""
        else:  # dangling
            keys[0] = "j:sup"
            c.zadd("j:sup", {"a": 5})
            c.hset("j:sup:info", "a", "{}")
            c.hset("j:sup:raw", "other", "{}")
            raw = ""
        return keys, [kind, "a", arg, raw]
    return build


# -- the window engine ----------------------------------------------------------------------------------------

WIN = ["w:{t}:dead", "w:{t}:hold", "w:{t}:walk", "w:{t}:lease"]


def _walk(c, total: int) -> None:
    c.set("w:{t}:lease", "lv", px=60_000)
    c.hset("w:{t}:walk", mapping={"op": "op1", "total": total, "popped": 0, "record_ttl": 600_000})


def _window_args(kind: str, mode: str, upto: int, info: str, entries: list) -> list:
    width = 4 if kind == "hj" else 3
    args = [kind, mode, "op1", "lv", "50000", upto, "1000", "2000", "0", info, "0", len(entries) // width, width]
    return args + entries + (list(FENCE_FIELDS) if kind == "hj" else [])


def _window(kind: str, mode: str):
    """A per-job window call (rl_window, jl_window, hj_window) that moves one job and holds one element."""
    def build(c):
        total = 2
        if kind == "jl":
            c.rpush("w:{t}:dead", JL, "x")  # the tail is the left end: JL first
            c.hset("w:{t}:attempts", "a", "3")
            c.hset("w:{t}:errors", "a", "boom")
            entries = [sha(JL), "0", "a"]
        else:
            c.rpush("w:{t}:dead", "a", "x")  # the tail is the right end: x (held), then a
            entries = ["a", "1", ""] + ([""] if kind == "hj" else [])
            if kind == "hj":
                c.hset("w:{t}:job:a", mapping=HJ_JOB)
            else:
                c.set("job:{t}:a", ENV)
        _walk(c, total)
        keys = _window_keys(kind, mode)
        if kind != "jl":
            keys.append("w:{t}:job:a" if kind == "hj" else "job:{t}:a")
        info = '{"by":"x"}' if mode == "suppressed" else ""
        return keys, _window_args(kind, mode, total, info, entries)
    return build


def _window_keys(kind: str, mode: str) -> list:
    target = {"ready": "w:{t}:ready", "suppressed": "w:{t}:sup", "purge": "w:{t}:dead"}[mode]
    keys = [*WIN, target, "w:{t}:redriven", "w:{t}:info"]
    return keys + (["w:{t}:raw", "w:{t}:attempts", "w:{t}:errors"] if kind == "jl" else [keys[0]] * 3)


def _rl_tail(mode: str, filtered: bool = False):
    """A tail-walk window call (rl_tail) over a dead list of one id, its entry 1."""
    def build(c):
        c.rpush("w:{t}:dead", "a")
        c.set("job:{t}:a", ENV)
        _walk(c, 1)
        keys = _window_keys("rl", mode) + ["job:{t}:a"]
        info = '{"by":"x"}' if mode == "suppressed" else ""
        args = ["rl", mode, "op1", "lv", "50000", 1, "1000", "2000", "0", info, "0", 1, 0, 0, "job:{t}:"]
        return keys, args + ([bytes([0b10000000]), "1"] if filtered else [])
    return build


def _jl_tail(mode: str):
    """A tail-walk window call (jl_tail) over a dead list of one job string, its entry 1."""
    def build(c):
        c.rpush("w:{t}:dead", JL)
        c.hset("w:{t}:attempts", "a", "3")
        c.hset("w:{t}:errors", "a", "boom")
        _walk(c, 1)
        args = ["jl", mode, "op1", "lv", "50000", 1, "1000", "2000", "0", "", "0", 1, 0, 0, "", JL, "a"]
        return _window_keys("jl", mode), args
    return build


def _hj_tail(mode: str):
    """A tail-walk window call (hj_tail) over a failed list of one id, its entry 1 (status failed)."""
    def build(c):
        c.rpush("w:{t}:dead", "a")
        c.hset("w:{t}:job:a", mapping={**HJ_JOB, "status": "failed", "payload": "{}"})
        _walk(c, 1)
        keys = _window_keys("hj", mode) + ["w:{t}:job:a"]
        info = '{"by":"x"}' if mode == "suppressed" else ""
        return keys, ["hj", mode, "op1", "lv", "50000", 1, "1000", "2000", "0", info, "0", 1, 0, 0, "w:{t}:job:"]
    return build


def _list_restore(c):
    c.rpush("w:{t}:hold", "x")
    c.hset("w:{t}:walk", "op", "op1")
    return ["w:{t}:dead", "w:{t}:hold", "w:{t}:walk"], ["rl", 10]


def _lease(action: str):
    def build(c):
        if action != "acquire":
            c.set("w:{t}:lease", "lv", px=60_000)
        args = {"acquire": ["acquire", "lv", "50000", ""], "release": ["release", "lv"],
                "begin": ["begin", "lv", "op1", "10", "600000"]}[action]
        return ["w:{t}:lease", "w:{t}:walk"], args
    return build


def _list_scan(c):
    c.set("job:{t}:a", ENV)
    return ["job:{t}:a", "job:{t}:b"], ['[["c","jobType","=","email"]]', "1", "job:{t}:", "4096"]


# -- rq, bullmq -----------------------------------------------------------------------------------------------

RQ_SIDE = ["rq:job:a:dependents", "rq:job:a:dependencies", "rq:executions:a", "rq:results:a"]
RQ_SIDE_DEL = "a purge DELs the job's side keys (dependents, dependencies, executions, results) whatever their type"
RQ_NOW = "2026-01-01T00:00:00.000000Z"


def _rq_side(c) -> None:
    c.sadd(RQ_SIDE[0], "b")
    c.sadd(RQ_SIDE[1], "c")
    c.zadd(RQ_SIDE[2], {"e": 1})
    c.xadd(RQ_SIDE[3], {"status": "failed"})


def _rq_move(mode: str):
    def build(c):
        c.zadd("rq:failed:q", {"a": 5})
        c.hset("rq:job:a", mapping={"status": "failed", "origin": "q"})
        if mode == "purge":
            _rq_side(c)
        per_job = ["rq:queue:q"] if mode == "redrive" else RQ_SIDE
        return ["rq:failed:q", "rq:queues", "rq:job:a", *per_job], [mode, RQ_NOW, 1, "a", "5", "q"]
    return build


RQ_SUP = ["rq:failed:q", "jobctl:rq:q:suppressed", "jobctl:rq:q:suppressed:info", "rq:job:a", *RQ_SIDE]


def _rq_suppress(mode: str):
    def build(c):
        c.hset("rq:job:a", mapping={"status": "failed", "origin": "q"})
        if mode == "suppress":
            c.zadd(RQ_SUP[0], {"a": 5})
            c.expire("rq:job:a", 1000)  # the suppress makes it persistent
            return list(RQ_SUP), [mode, "1000", 1, "a", "5", "q", '{"by":"x"}']
        c.zadd(RQ_SUP[1], {"a": 5})
        c.hset(RQ_SUP[2], "a", "{}")
        if mode == "purge":
            _rq_side(c)
        return list(RQ_SUP), [mode, "1000", 1, "a", "5", "q", "100|5000" if mode == "unsuppress" else ""]
    return build


BULL = ["bull:q:failed", "bull:q:wait", "bull:q:prioritized", "bull:q:pc", "bull:q:marker", "bull:q:meta",
        "bull:q:events", "bull:q:active", "bull:q:paused"]
BULL_TYPES = {1: "zset", 2: "list", 3: "zset", 4: "string", 5: "zset", 6: "hash", 7: "stream", 8: "list", 9: "list"}
BULL_PARENT = ["bull:q:p", "bull:q:p:unsuccessful", "bull:q:p:failed", "bull:q:p:dependencies"]
BULL_SIDE = ["bull:q:a:logs", "bull:q:a:dependencies", "bull:q:a:processed", "bull:q:a:failed",
             "bull:q:a:unsuccessful", "bull:q:de:d1"]
BULL_SIDE_DEL = "a purge DELs the job's side keys whatever their type"
BULL_DEDUP = "the dedup key is deleted only when it is a string holding the job's id; another type is left alone"


def _bullmq_move(mode: str):
    """One failed job "a": a plain redrive, a redrive of a prioritized child of "p" (reset), or a purge."""
    def build(c):
        c.zadd(BULL[0], {"a": 5})
        job = {"finishedOn": "10", "failedReason": "boom", "atm": "2"}
        parent, deid, keys = "", "", ["bull:q:a"] * 5
        if mode == "redrive-child":
            job.update(priority="3", parentKey=BULL_PARENT[0])
            c.hset(BULL_PARENT[0], "name", "p")
            c.zadd(BULL_PARENT[1], {"bull:q:a": 1})
            parent, keys = BULL_PARENT[0], ["bull:q:a", *BULL_PARENT]
        elif mode == "purge":
            job["deid"] = deid = "d1"
            c.rpush(BULL_SIDE[0], "log")
            c.sadd(BULL_SIDE[1], "x")
            c.hset(BULL_SIDE[2], "x", "1")
            c.hset(BULL_SIDE[3], "x", "1")
            c.zadd(BULL_SIDE[4], {"x": 1})
            c.set(BULL_SIDE[5], "a")
            keys = ["bull:q:a", *BULL_SIDE]
        c.hset("bull:q:a", mapping=job)
        args = ["purge" if mode == "purge" else "redrive", "1" if parent else "0", 1, "a", "5", "10", sha("boom"),
                "LPUSH", parent, deid]
        return BULL + keys, args
    return build


def bull_fence(finished: str, reason: str, parent: str, deid: str) -> str:
    """The fence of ``jobctl/lua/prelude/bullmq_fence.lua``."""
    return sha("\0".join([finished, parent, deid, reason]))


def _bullmq_redrive(priority: str):
    """One failed job "a" (no parent; prioritized when ``priority``), for the unfiltered redrive."""
    def build(c):
        c.zadd(BULL[0], {"a": 5})
        c.hset("bull:q:a", mapping={"finishedOn": "10", "failedReason": "boom", "atm": "2", "priority": priority,
                                    "opts": '{"lifo":true}'})
        return BULL + ["bull:q:a"], ["0", 1, "a", "5", bull_fence("10", "boom", "", "")]
    return build


def _bullmq_fence(c):
    c.hset("bull:q:a", mapping={"finishedOn": "10", "failedReason": "boom"})
    c.set("bull:q:b", "not a hash")
    return ["bull:q:a", "bull:q:b", "bull:q:c"], []


SK_JOB = '{"class":"A","queue":"work","args":[9223372036854775807],"jid":"j1","retry_count":0}'


def _sk_move(mode: str):
    """One dead Sidekiq job "j1": a redrive to queue:work, or a purge."""
    def build(c):
        c.zadd("dead", {SK_JOB: 5})
        if mode == "purge":
            return ["dead", "queues"], [mode, 1, "j1", SK_JOB, "5", "", ""]
        return ["dead", "queues", "queue:work"], [mode, 1, "j1", SK_JOB, "5", "work", SK_JOB.replace(":0}", ":-1}")]
    return build


def _bullmq_read(c):
    c.hset("bull:q:a", mapping={"finishedOn": "10", "failedReason": "boom"})
    c.set("bull:q:b", "not a hash")
    return ["bull:q:a", "bull:q:b", "bull:q:c"], ["finishedOn", "failedReason"]


# -- celery ----------------------------------------------------------------------------------------------------

CEL_MSG = b'{"body": "W1tdLCB7fSwge31d", "headers": {"id": "t1", "task": "a", "big": 9223372036854775807}}'
CEL_VALUE = b'[' + CEL_MSG + b', "", "celery"]'


def _cel_requeue(c):
    """One unacked message (delivery tag "g1", delivered at 5 s: overdue) of the queue celery."""
    c.hset("unacked", "g1", CEL_VALUE)
    c.zadd("unacked_index", {"g1": 5})
    return ["unacked", "unacked_index", "celery"], ["1", 1, "t1", "g1", "5", sha(CEL_VALUE), 2, 1 + len(CEL_MSG)]


def _cel_purge(c):
    """One ready message of the queue celery."""
    c.rpush("celery", CEL_MSG)
    return ["celery"], [0, 5, "jobctl:purge-tombstone:x", 1, CEL_MSG]


CEL_RECORD = b'{"status": "FAILURE", "name": "a", "args": [9223372036854775807], "kwargs": {}, "queue": "celery"}'


def _cel_replay(c):
    """One failed task "t1"'s result record, replayed as "t2" to the queue celery."""
    c.set("celery-task-meta-t1", CEL_RECORD)
    return (["jobctl:celery:celery:replayed", "celery", "celery-task-meta-t1"],
            [1, "t1", sha(CEL_RECORD), "t2", CEL_MSG])


# -- the table ------------------------------------------------------------------------------------------------

def C(label, build, writes, types, per_job=None, untyped=None) -> Call:  # noqa: N802 - a table row
    return Call(label, build, frozenset(writes), types, per_job or {}, untyped or {})


PAYLOAD_PER_JOB = {4: "wrongtype"}
WINDOW_JOB = "a job key of the wrong type only holds its own job (hj_window's per-job step, code 'wrongtype')"
TAIL_JOB = "a job hash of the wrong type only holds its own job (hj_tail's fence, code 'wrongtype')"
TAIL_PURGE = "an unfiltered purge unlinks the planned payload keys in one UNLINK, whatever their type (rl_tail)"
WINDOW_TYPES = {1: "list", 2: "list", 3: "hash", 4: "string", 6: "hash", 7: "hash"}

SCRIPTS: dict[str, tuple[Call, ...] | ReadOnly] = {
    "rl_zset_move": (
        C("lpush", _rl_zset_move(False), {1, 2, 3}, {1: "zset", 2: "list", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
        C("purge", _rl_zset_move(True), {1, 3, 4}, {1: "zset", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
    ),
    "rl_requeue": (C("requeue", _rl_requeue, {1, 2, 3}, {1: "list", 2: "zset", 3: "list"}),),
    "rl_repair": (
        C("stray_deadline", _rl_repair("stray_deadline"), {3}, {3: "zset", 4: "list"}),
        C("missing_deadline", _rl_repair("missing_deadline"), {3}, {3: "zset", 4: "list"}),
        C("dangling_processing", _rl_repair("dangling_processing"), {1, 3}, {1: "list", 3: "zset", 4: "list"}),
        C("dangling_list", _rl_repair("dangling_list"), {1}, {1: "list", 3: "zset", 4: "list"}),
        C("dangling_zset", _rl_repair("dangling_zset"), {1}, {1: "zset", 3: "zset", 4: "list"}),
        C("duplicate", _rl_repair("duplicate"), {1}, {1: "list", 3: "zset", 4: "list"}),
    ),
    "rl_recheck": ReadOnly(_rl_recheck),
    "sg_replay": (C("replay", _sg_replay, {1, 2}, {1: "stream", 2: "zset", 3: "set"}),),
    "sg_pel_summary": ReadOnly(_sg_pel_summary),
    "sg_count_after": ReadOnly(_sg_count_after),
    "sg_requeue": (C("requeue", _sg_requeue, {1}, {1: "stream"}),),
    "sg_zset_move": (
        C("promote", _sg_zset_move("promote"), {1, 2}, {1: "zset", 2: "stream", 3: "hash", 4: "string"},
          PAYLOAD_PER_JOB),
        C("unsuppress-list", _sg_zset_move("unsuppress"), {1, 2, 3}, {1: "zset", 2: "list", 3: "hash", 4: "string"},
          PAYLOAD_PER_JOB),
        C("unsuppress-stream", _sg_zset_move("unsuppress", "stream"), {1, 2, 3},
          {1: "zset", 2: "stream", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
        C("purge", _sg_zset_move("purge"), {1, 3, 4}, {1: "zset", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
    ),
    "sg_dead_move": (
        C("ready-list", _sg_dead_move("ready", "list"), {1, 2}, {1: "list", 2: "stream", 3: "hash", 4: "string"},
          PAYLOAD_PER_JOB),
        C("ready-list-new-payload", _sg_dead_move("ready", "list", b'{"v":2}'), {1, 2, 4},
          {1: "list", 2: "stream", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
        C("scheduled-stream", _sg_dead_move("scheduled", "stream"), {1, 2},
          {1: "stream", 2: "zset", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
        C("suppressed-list", _sg_dead_move("suppressed", "list"), {1, 2, 3},
          {1: "list", 2: "zset", 3: "hash", 4: "string"}, PAYLOAD_PER_JOB),
        C("purge-stream", _sg_dead_move("purge", "stream"), {1, 4}, {1: "stream", 3: "hash", 4: "string"},
          PAYLOAD_PER_JOB),
    ),
    "rl_pause_move": (
        C("pause_zset", _rl_pause("pause_zset"), {1, 2, 3},
          {1: "zset", 2: "list", 3: "hash", 4: "hash", 5: "zset", 6: "string"}, {6: "wrongtype"}),
        C("pause", _rl_pause("pause"), {1, 2, 3}, {1: "list", 2: "list", 3: "hash", 4: "hash", 6: "string"},
          {6: "wrongtype"}),
        C("pause_tail", _rl_pause("pause_tail"), {1, 2, 3}, {1: "list", 2: "list", 3: "hash", 4: "hash", 6: "string"},
          {6: "wrongtype"}),
        C("pause_all-held", _rl_pause("pause_all", "h1"), {1, 2, 3},
          {1: "list", 2: "list", 3: "hash", 4: "hash", 6: "string"}, {6: "wrongtype"}),
        C("resume", _rl_resume(False), {1, 3, 6}, {1: "list", 3: "hash", 4: "hash", 5: "zset", 6: "list"}),
        C("resume-scheduled", _rl_resume(True), {1, 3, 5}, {1: "list", 3: "hash", 4: "hash", 5: "zset", 6: "list"}),
    ),
    "rl_migrate_in": (
        C("ready", _rl_migrate_in("ready"), {1, 3, 4}, {1: "list", 2: "zset", 3: "hash", 4: "string"},
          {4: "conflict"}),
        C("scheduled", _rl_migrate_in("scheduled"), {2, 3, 4}, {1: "list", 2: "zset", 3: "hash", 4: "string"},
          {4: "conflict"}),
    ),
    "rl_migrate_out": (
        C("delete", _rl_migrate_out("delete"), {1, 2, 5}, {1: "list", 2: "hash", 3: "list", 4: "zset", 5: "string"}),
        C("back-ready", _rl_migrate_out("back"), {1, 2, 3}, {1: "list", 2: "hash", 3: "list", 4: "zset"}),
        C("back-scheduled", _rl_migrate_out("back", "1000"), {1, 2, 4}, {1: "list", 2: "hash", 3: "list", 4: "zset"}),
    ),
    "rl_transform": (
        C("apply", _rl_transform("apply"), {1, 2}, {1: "hash", 2: "string"}, {2: "wrongtype"}),
        C("rollback", _rl_transform("rollback"), {1, 2}, {1: "hash", 2: "string"}, {2: "wrongtype"}),
    ),
    "de_move": tuple(
        C(label, _de_move(mode, new), writes, {1: "zset", 2: "hash", 4: "zset", 5: "hash"})
        for label, mode, new, writes in (
            ("score", "score", "", {1}), ("score-new-envelope", "score", '{"id":"m","attempt":0}', {1, 2}),
            ("suppress", "suppress", "", {1, 2, 4, 5}), ("unsuppress", "unsuppress", "", {1, 2, 4, 5}),
            ("purge", "purge", "", {1, 2}), ("purge_suppressed", "purge_suppressed", "", {4, 5}))),
    "dz_move": (C("score", _dz_move("score"), {1}, {1: "zset"}), C("purge", _dz_move("purge"), {1}, {1: "zset"})),
    "hj_requeue": (C("requeue", _hj_requeue, {1, 2, 3}, {1: "list", 2: "list", 3: "hash"}, {3: "wrongtype"}),),
    "hj_suppressed_move": (
        C("unsuppress", _hj_suppressed_move("unsuppress"), {1, 2, 3}, {1: "zset", 2: "hash", 3: "list", 4: "hash"},
          {4: "wrongtype"}),
        C("purge", _hj_suppressed_move("purge"), {1, 2, 4}, {1: "zset", 2: "hash", 4: "hash"}, {4: "wrongtype"}),
    ),
    "hj_repair": (
        C("dangling_list", _hj_repair("dangling_list"), {1}, {1: "list"}),
        C("dangling_zset", _hj_repair("dangling_zset"), {1, 3}, {1: "zset", 3: "hash"}),
        C("duplicate", _hj_repair("duplicate"), {1}, {1: "list"}),
        C("no_deadline", _hj_repair("no_deadline"), {2}, {1: "list", 2: "hash"}),
    ),
    "rl_window": (
        C("ready", _window("rl", "ready"), {1, 2, 3, 4, 5, 6}, {**WINDOW_TYPES, 5: "list"}),
        C("suppressed", _window("rl", "suppressed"), {1, 2, 3, 4, 5, 7}, {**WINDOW_TYPES, 5: "zset"}),
        C("purge", _window("rl", "purge"), {1, 2, 3, 4, 11}, {**WINDOW_TYPES, 5: "list"},
          untyped={11: "a purge unlinks the planned job's payload key, whatever its type"}),
    ),
    "rl_tail": (
        C("ready", _rl_tail("ready"), {1, 3, 4, 5, 6}, {**WINDOW_TYPES, 5: "list"}),
        C("ready-filtered", _rl_tail("ready", True), {1, 3, 4, 5, 6}, {**WINDOW_TYPES, 5: "list"}),
        C("suppressed", _rl_tail("suppressed"), {1, 3, 4, 5, 7}, {**WINDOW_TYPES, 5: "zset"}),
        C("purge", _rl_tail("purge"), {1, 3, 4, 11}, {**WINDOW_TYPES, 5: "list"}, untyped={11: TAIL_PURGE}),
    ),
    "jl_window": (
        C("ready", _window("jl", "ready"), {1, 2, 3, 4, 5, 6}, {**WINDOW_TYPES, 5: "list", 8: "hash", 9: "hash",
                                                                 10: "hash"}),
        C("purge", _window("jl", "purge"), {1, 2, 3, 4, 9, 10},
          {**WINDOW_TYPES, 5: "list", 8: "hash", 9: "hash", 10: "hash"}),
        C("suppressed", _window("jl", "suppressed"), {1, 2, 3, 4, 5, 7, 8},
          {**WINDOW_TYPES, 5: "zset", 8: "hash", 9: "hash", 10: "hash"}),
    ),
    "jl_tail": (
        C("ready", _jl_tail("ready"), {1, 3, 4, 5, 6}, {**WINDOW_TYPES, 5: "list", 8: "hash", 9: "hash", 10: "hash"}),
        C("purge", _jl_tail("purge"), {1, 3, 4, 9, 10},
          {**WINDOW_TYPES, 5: "list", 8: "hash", 9: "hash", 10: "hash"}),
    ),
    "hj_window": (
        C("ready", _window("hj", "ready"), {1, 2, 3, 4, 5, 11}, {**WINDOW_TYPES, 5: "list"},
          untyped={11: WINDOW_JOB}),
        C("suppressed", _window("hj", "suppressed"), {1, 2, 3, 4, 5, 7}, {**WINDOW_TYPES, 5: "zset"},
          untyped={11: WINDOW_JOB}),
        C("purge", _window("hj", "purge"), {1, 2, 3, 4, 11}, {**WINDOW_TYPES, 5: "list"},
          untyped={11: WINDOW_JOB}),
    ),
    "hj_tail": (
        C("ready", _hj_tail("ready"), {1, 3, 4, 5, 11}, {**WINDOW_TYPES, 5: "list"}, untyped={11: TAIL_JOB}),
        C("suppressed", _hj_tail("suppressed"), {1, 3, 4, 5, 7}, {**WINDOW_TYPES, 5: "zset"},
          untyped={11: TAIL_JOB}),
        C("purge", _hj_tail("purge"), {1, 3, 4, 11}, {**WINDOW_TYPES, 5: "list"}, untyped={11: TAIL_JOB}),
    ),
    "list_restore": (C("restore", _list_restore, {1, 2, 3}, {1: "list", 2: "list", 3: "hash"}),),
    "lease": tuple(C(a, _lease(a), w, {1: "string", 2: "hash"})
                   for a, w in (("acquire", {1}), ("release", {1}), ("begin", {2}))),
    "jl_requeue": (C("requeue", _jl_requeue, {1, 2, 3}, {1: "list", 2: "zset", 3: "list"}),),
    "jl_suppressed_move": (
        C("unsuppress", _jl_suppressed_move("unsuppress"), {1, 2, 3, 4}, {1: "zset", 2: "hash", 3: "hash", 4: "list"}),
        C("purge", _jl_suppressed_move("purge"), {1, 2, 3, 5, 6},
          {1: "zset", 2: "hash", 3: "hash", 5: "hash", 6: "hash"}),
    ),
    "jl_repair": (
        C("duplicate", _jl_repair("duplicate"), {1}, {1: "list"}),
        C("missing_claim_time", _jl_repair("missing_claim_time"), {2}, {1: "list", 2: "zset"}),
        C("stray_claim_time", _jl_repair("stray_claim_time"), {2}, {2: "zset"}),
        C("dangling", _jl_repair("dangling"), {1, 4}, {1: "zset", 3: "hash", 4: "hash"}),
    ),
    "list_scan": ReadOnly(_list_scan),
    "rq_move": (
        C("redrive", _rq_move("redrive"), {1, 2, 3, 4}, {1: "zset", 2: "set", 3: "hash", 4: "list"},
          {3: "wrongtype", 4: "wrongtype"}),
        C("purge", _rq_move("purge"), {1, 3, 4, 5, 6, 7}, {1: "zset", 2: "set", 3: "hash"}, {3: "wrongtype"},
          {i: RQ_SIDE_DEL for i in (4, 5, 6, 7)}),
    ),
    "rq_suppress": (
        C("suppress", _rq_suppress("suppress"), {1, 2, 3, 4}, {1: "zset", 2: "zset", 3: "hash", 4: "hash"},
          {4: "wrongtype"}),
        C("unsuppress", _rq_suppress("unsuppress"), {1, 2, 3, 4}, {1: "zset", 2: "zset", 3: "hash", 4: "hash"},
          {4: "wrongtype"}),
        C("purge", _rq_suppress("purge"), {2, 3, 4, 5, 6, 7, 8}, {1: "zset", 2: "zset", 3: "hash", 4: "hash"},
          {4: "wrongtype"}, {i: RQ_SIDE_DEL for i in (5, 6, 7, 8)}),
    ),
    "bullmq_move": (
        C("redrive", _bullmq_move("redrive"), {1, 2, 5, 7, 10}, {**BULL_TYPES, 10: "hash"}, {10: "wrongtype"}),
        C("redrive-child", _bullmq_move("redrive-child"), {1, 3, 4, 5, 7, 10, 12, 14},
          {**BULL_TYPES, 10: "hash", 12: "zset", 13: "hash", 14: "set"},
          {10: "wrongtype", 12: "wrongtype", 13: "wrongtype", 14: "wrongtype"}),
        C("purge", _bullmq_move("purge"), {1, *range(10, 17)}, {**BULL_TYPES, 10: "hash"}, {10: "wrongtype"},
          {**{i: BULL_SIDE_DEL for i in range(11, 16)}, 16: BULL_DEDUP}),
    ),
    "cel_requeue": (C("requeue", _cel_requeue, {1, 2, 3}, {1: "hash", 2: "zset", 3: "list"}, {3: "wrongtype"}),),
    "cel_purge": (C("purge", _cel_purge, {1}, {1: "list"}),),
    "cel_replay": (C("replay", _cel_replay, {1, 2}, {1: "hash", 2: "list", 3: "string"}, {3: "wrongtype"}),),
    "bullmq_read": ReadOnly(_bullmq_read),
    "bullmq_redrive": (
        C("redrive", _bullmq_redrive("0"), {1, 2, 5, 7, 10}, {**BULL_TYPES, 10: "hash"}, {10: "wrongtype"}),
        C("redrive-prioritized", _bullmq_redrive("4"), {1, 3, 4, 5, 7, 10}, {**BULL_TYPES, 10: "hash"},
          {10: "wrongtype"}),
    ),
    "bullmq_fence": ReadOnly(_bullmq_fence),
    "sk_move": (
        C("redrive", _sk_move("redrive"), {1, 2, 3}, {1: "zset", 2: "set", 3: "list"}, {3: "wrongtype"}),
        C("purge", _sk_move("purge"), {1}, {1: "zset", 2: "set"}),
    ),
}

# -- the keyspace ---------------------------------------------------------------------------------------------

def keyspace(client) -> dict[bytes, tuple[bytes, int]]:
    """Every key: (DUMP, PTTL)."""
    return {k: (client.dump(k), client.pttl(k)) for k in client.scan_iter(count=1000)}


def assert_unchanged(before: dict, after: dict) -> None:
    """The same keys with the same DUMP; a TTL only ran down (a key whose
    expiry was set again would have a longer or a much shorter one)."""
    assert sorted(after) == sorted(before)
    for key, (dump, ttl) in before.items():
        assert after[key][0] == dump, key
        now = after[key][1]
        assert (now == ttl) if ttl < 0 else (0 <= ttl - now < 1000), (key, ttl, now)


def changed_keys(before: dict, after: dict) -> set[bytes]:
    """The keys whose value changed, that appeared or went, or whose TTL
    did more than run down."""
    out = set()
    for key in set(before) | set(after):
        try:
            assert_unchanged({key: before[key]}, {key: after[key]})
        except (AssertionError, KeyError):
            out.add(key)
    return out


def plant(client, key: str, kind: str) -> None:
    """Replace ``key`` by a value of Redis type ``kind``."""
    client.delete(key)
    {"string": lambda: client.set(key, "planted"), "list": lambda: client.rpush(key, "planted"),
     "hash": lambda: client.hset(key, "planted", "1"), "set": lambda: client.sadd(key, "planted"),
     "zset": lambda: client.zadd(key, {"planted": 1}), "stream": lambda: client.xadd(key, {"planted": "1"})}[kind]()


def flat(reply) -> list:
    out = []
    for x in reply if isinstance(reply, list) else [reply]:
        out += flat(x) if isinstance(x, list) else [x]
    return out


# -- the tests ------------------------------------------------------------------------------------------------

def test_table_enters_every_registered_script():
    assert len(set(SCRIPT_NAMES)) == len(SCRIPT_NAMES)
    assert set(SCRIPTS) == set(SCRIPT_NAMES)
    files = {p.name[:-4] for p in resources.files("jobctl").joinpath("lua").iterdir() if p.name.endswith(".lua")}
    assert files == set(SCRIPT_NAMES), "every jobctl/lua/*.lua file is a registered script"
    for name, entry in SCRIPTS.items():
        for call in () if isinstance(entry, ReadOnly) else entry:
            assert call.writes <= set(call.types) | set(call.untyped), (name, call.label)
            assert set(call.per_job) <= set(call.types), (name, call.label)


def _calls():
    for name in SCRIPT_NAMES:
        entry = SCRIPTS.get(name)
        for call in () if entry is None or isinstance(entry, ReadOnly) else entry:
            yield name, call


@pytest.mark.parametrize("name,call", [pytest.param(n, c, id=f"{n}-{c.label}") for n, c in _calls()])
def test_each_call_writes_exactly_the_keys_it_declares(redis_client, name, call):
    keys, args = call.build(redis_client)
    before = keyspace(redis_client)
    reply = script(redis_client, name)(keys=keys, args=args)
    assert b"error" not in b" ".join(x for x in flat(reply) if isinstance(x, bytes)), reply
    assert changed_keys(before, keyspace(redis_client)) == {keys[i - 1].encode() for i in call.writes}, reply


@pytest.mark.parametrize("name", [n for n in SCRIPT_NAMES if isinstance(SCRIPTS.get(n), ReadOnly)])
def test_read_only_scripts_write_nothing(redis_client, name):
    keys, args = SCRIPTS[name].build(redis_client)
    before = keyspace(redis_client)
    script(redis_client, name)(keys=keys, args=args)
    assert_unchanged(before, keyspace(redis_client))


def _with(args: list, at: int, value) -> list:
    out = list(args)
    out[at] = value
    return out


#: (script, call, how its ARGV is spoiled, what the error reply starts with)
BAD_ARGS = [
    ("rl_pause_move", _rl_resume(False), lambda a: _with(a, 0, "unpause"), "BADARG mode"),
    ("rl_pause_move", _rl_pause("pause"), lambda a: _with(a, 0, "pause_list"), "BADARG mode"),
    ("rl_pause_move", _rl_pause("pause"), lambda a: _with(a, 2, 5000), "BADARG window"),
    ("rl_pause_move", _rl_pause("pause_zset"), lambda a: _with(a, 9, "soon"), "BADARG due time"),
    ("rl_pause_move", _rl_pause("pause"), lambda a: _with(a, 6, 2), "BADARG job count"),
    ("rl_pause_move", _rl_resume(False), lambda a: _with(a, 5, 0), "BADARG ready list count"),
    ("rl_migrate_in", _rl_migrate_in("ready"), lambda a: _with(a, 4, "later"), "BADARG state"),
    ("rl_migrate_in", _rl_migrate_in("scheduled"), lambda a: _with(a, 5, ""), "BADARG due time"),
    ("rl_migrate_in", _rl_migrate_in("scheduled"), lambda a: _with(a, 5, "soon"), "BADARG due time"),
    ("rl_migrate_in", _rl_migrate_in("ready"), lambda a: _with(a, 0, "x"), "BADARG job count"),
    ("rl_migrate_out", _rl_migrate_out("delete"), lambda a: _with(a, 2, "drop"), "BADARG action"),
    ("rl_migrate_out", _rl_migrate_out("back", "1000"), lambda a: _with(a, 3, "soon"), "BADARG due time"),
    ("rl_migrate_out", _rl_migrate_out("delete"), lambda a: a + ["b", "delete", ""], "BADARG job count"),
    ("rl_repair", _rl_repair("missing_deadline"), lambda a: _with(a, 2, "soon"), "BADARG score"),
    ("rl_repair", _rl_repair("dangling_processing"), lambda a: _with(a, 0, "dangling"), "BADKIND"),
    ("rl_repair", _rl_repair("duplicate"), lambda a: _with(a, 1, ""), "BADARG job id"),
    ("hj_repair", _hj_repair("duplicate"), lambda a: _with(a, 2, "x"), "BADARG copy count"),
    ("hj_repair", _hj_repair("no_deadline"), lambda a: _with(a, 2, ""), "BADARG claimed_at_ms"),
    ("hj_repair", _hj_repair("dangling_zset"), lambda a: _with(a, 0, "dangling"), "BADKIND"),
    ("jl_repair", _jl_repair("stray_claim_time"), lambda a: _with(a, 2, "x"), "BADARG claim time"),
    ("jl_repair", _jl_repair("duplicate"), lambda a: a[:3], "BADARG job string"),
    ("jl_repair", _jl_repair("dangling"), lambda a: _with(a, 1, ""), "BADARG job id"),
    # the window scripts: each takes its own kind, modes and widths only
    ("rl_window", _window("rl", "ready"), lambda a: _with(a, 0, "jl"), "BADARG kind"),
    ("rl_window", _window("rl", "ready"), lambda a: _with(a, 1, "later"), "BADARG mode"),
    ("rl_window", _window("rl", "ready"), lambda a: _with(a, 12, 4), "BADARG width"),
    ("rl_window", _window("rl", "ready"), lambda a: _with(a, 11, 2), "BADARG expected"),
    ("rl_window", _window("rl", "ready"), lambda a: _with(a, 14, "x"), "BADARG position"),
    ("rl_tail", _rl_tail("ready"), lambda a: _with(a, 12, 3), "BADARG width"),
    ("rl_tail", _rl_tail("ready"), lambda a: _with(a, 13, "x"), "BADARG first"),
    ("rl_tail", _rl_tail("ready", True), lambda a: _with(a, 1, "purge"), "BADARG a filtered tail plan"),
    ("rl_tail", _rl_tail("ready", True), lambda a: _with(a, 15, b""), "BADARG bitmap"),
    ("jl_tail", _jl_tail("ready"), lambda a: _with(a, 1, "suppressed"), "BADARG mode"),
    ("jl_tail", _jl_tail("ready"), lambda a: _with(a, 12, 3), "BADARG width"),
    ("jl_tail", _jl_tail("ready"), lambda a: _with(a, 13, "x"), "BADARG first"),
    ("jl_tail", _jl_tail("ready"), lambda a: a[:-1], "BADARG expected"),
    ("jl_window", _window("jl", "ready"), lambda a: _with(a, 1, "stream"), "BADARG mode"),
    ("jl_window", _window("jl", "ready"), lambda a: _with(a, 12, 5), "BADARG width"),
    ("jl_window", _window("jl", "ready"), lambda a: _with(a, 0, "rl"), "BADARG kind"),
    ("hj_window", _window("hj", "ready"), lambda a: _with(a, 1, "scheduled"), "BADARG mode"),
    ("hj_window", _window("hj", "ready"), lambda a: _with(a, 12, 3), "BADARG width"),
    ("hj_window", _window("hj", "ready"), lambda a: a[:17], "BADARG hj needs the fence field list"),
    ("hj_window", _window("hj", "ready"), lambda a: _with(a, 4, 0), "BADARG ttl"),
    ("hj_tail", _hj_tail("ready"), lambda a: _with(a, 1, "scheduled"), "BADARG mode"),
    ("hj_tail", _hj_tail("ready"), lambda a: _with(a, 12, 4), "BADARG width"),
    ("hj_tail", _hj_tail("ready"), lambda a: _with(a, 13, "x"), "BADARG first"),
    ("hj_tail", _hj_tail("ready"), lambda a: a[:-1], "BADARG expected"),
    # rq, bullmq
    ("rq_move", _rq_move("redrive"), lambda a: _with(a, 0, "requeue"), "BADARG mode"),
    ("rq_move", _rq_move("redrive"), lambda a: _with(a, 1, ""), "BADARG enqueued_at"),
    ("rq_move", _rq_move("purge"), lambda a: _with(a, 4, "x"), "BADARG score"),
    ("rq_move", _rq_move("purge"), lambda a: _with(a, 2, 2), "BADARG job count"),
    ("rq_suppress", _rq_suppress("suppress"), lambda a: _with(a, 0, "hide"), "BADARG mode"),
    ("rq_suppress", _rq_suppress("suppress"), lambda a: _with(a, 1, "soon"), "BADARG now"),
    ("rq_suppress", _rq_suppress("suppress"), lambda a: _with(a, 6, "by x"), "BADARG record"),
    ("rq_suppress", _rq_suppress("unsuppress"), lambda a: _with(a, 6, "100"), "BADARG restore"),
    ("rq_suppress", _rq_suppress("unsuppress"), lambda a: _with(a, 6, "nan|-1"), "BADARG restore"),
    ("rq_suppress", _rq_suppress("purge"), lambda a: a[:-1], "BADARG job count"),
    ("bullmq_move", _bullmq_move("redrive"), lambda a: _with(a, 0, "retry"), "BADARG mode"),
    ("bullmq_move", _bullmq_move("redrive"), lambda a: _with(a, 1, "yes"), "BADARG reset"),
    ("bullmq_move", _bullmq_move("redrive"), lambda a: _with(a, 7, "PUSH"), "BADARG push"),
    ("bullmq_move", _bullmq_move("purge"), lambda a: _with(a, 4, "x"), "BADARG score"),
    ("bullmq_move", _bullmq_move("redrive-child"), lambda a: _with(a, 2, 2), "BADARG job count"),
    ("bullmq_redrive", _bullmq_redrive("0"), lambda a: _with(a, 0, "yes"), "BADARG reset"),
    ("bullmq_redrive", _bullmq_redrive("0"), lambda a: _with(a, 3, "x"), "BADARG score"),
    ("bullmq_redrive", _bullmq_redrive("0"), lambda a: _with(a, 1, 2), "BADARG job count"),
    ("cel_requeue", _cel_requeue, lambda a: _with(a, 0, "-1"), "BADARG visibility timeout"),
    ("cel_requeue", _cel_requeue, lambda a: _with(a, 4, "x"), "BADARG score"),
    ("cel_requeue", _cel_requeue, lambda a: _with(a, 6, "x"), "BADARG first byte"),
    ("cel_requeue", _cel_requeue, lambda a: _with(a, 7, 1), "BADARG byte range"),
    ("cel_requeue", _cel_requeue, lambda a: a[:-1], "BADARG job count"),
    ("cel_purge", _cel_purge, lambda a: _with(a, 4, ""), "BADARG message bytes"),
    ("cel_purge", _cel_purge, lambda a: _with(a, 4, a[2]), "BADARG message bytes"),
    ("cel_purge", _cel_purge, lambda a: _with(a, 1, 0), "BADARG hi"),
    ("cel_purge", _cel_purge, lambda a: _with(a, 2, ""), "BADARG tombstone"),
    ("cel_purge", _cel_purge, lambda a: a[:-1], "BADARG job count"),
    ("cel_replay", _cel_replay, lambda a: a[:-1], "BADARG job count"),
    ("cel_replay", _cel_replay, lambda a: _with(a, 2, "x" * 40), "BADARG sha1"),
    ("cel_replay", _cel_replay, lambda a: _with(a, 4, ""), "BADARG empty id or message"),
    ("bullmq_read", _bullmq_read, lambda a: [], "BADARG no fields"),
    ("sk_move", _sk_move("redrive"), lambda a: _with(a, 0, "retry"), "BADARG mode"),
    ("sk_move", _sk_move("redrive"), lambda a: _with(a, 1, 2), "BADARG job count"),
    ("sk_move", _sk_move("purge"), lambda a: _with(a, 4, "x"), "BADARG score"),
    ("sk_move", _sk_move("purge"), lambda a: _with(a, 3, ""), "BADARG member"),
    ("sk_move", _sk_move("redrive"), lambda a: _with(a, 6, ""), "BADARG queue or payload"),
]


@pytest.mark.parametrize("name,build,spoil,error", [pytest.param(*b, id=f"{b[0]}-{n}") for n, b in enumerate(BAD_ARGS)])
def test_bad_arguments_are_refused_before_any_write(redis_client, name, build, spoil, error):
    keys, args = build(redis_client)
    before = keyspace(redis_client)
    with pytest.raises(redis.exceptions.ResponseError, match="^" + error):
        script(redis_client, name)(keys=keys, args=spoil(args))
    assert_unchanged(before, keyspace(redis_client))


def test_pause_from_scheduled_with_a_string_at_the_paused_list_keeps_the_job_scheduled(redis_client):
    keys, args = _rl_pause("pause_zset")(redis_client)
    redis_client.set(keys[1], "not a list")
    with pytest.raises(redis.exceptions.ResponseError, match=f"^WRONGTYPE key {keys[1]} holds a string"):
        script(redis_client, "rl_pause_move")(keys=keys, args=args)
    assert redis_client.zscore(keys[0], "a") == 5


def test_migrate_in_with_a_wrong_typed_ready_list_writes_nothing(redis_client):
    keys, args = _rl_migrate_in("ready")(redis_client)
    redis_client.hset(keys[0], "not", "a list")
    before = keyspace(redis_client)
    with pytest.raises(redis.exceptions.ResponseError, match=f"^WRONGTYPE key {keys[0]} holds a hash"):
        script(redis_client, "rl_migrate_in")(keys=keys, args=args)
    assert_unchanged(before, keyspace(redis_client))
    assert not redis_client.exists(keys[3])


def _matrix():
    for name, call in _calls():
        for index, want in sorted(call.types.items()):
            for wrong in TYPES:
                if wrong != want:
                    yield pytest.param(name, call, index, wrong, id=f"{name}-{call.label}-KEYS{index}-{wrong}")


@pytest.mark.parametrize("name,call,index,wrong", list(_matrix()))
def test_wrong_type_is_refused_before_any_write(redis_client, name, call, index, wrong):
    keys, args = call.build(redis_client)
    plant(redis_client, keys[index - 1], wrong)
    before = keyspace(redis_client)
    run = script(redis_client, name)
    if index in call.per_job:
        reply = run(keys=keys, args=args)
        assert call.per_job[index].encode() in flat(reply), reply
    else:
        with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
            run(keys=keys, args=args)
    assert_unchanged(before, keyspace(redis_client))


def test_window_scripts_are_one_per_kind_without_a_branch_on_kind():
    """The walk driver's scripts (one per kind, and walk mode) are registered,
    and none branches on the kind of list (each checks its own ARGV[1])."""
    from jobctl.ops.walk.source import WINDOW_SCRIPTS
    from jobctl.scripts import source

    names = {name for pair in WINDOW_SCRIPTS.values() for name in pair}
    assert names <= set(SCRIPT_NAMES) and "list_window" not in SCRIPT_NAMES
    for name in names:
        text = source(name)
        assert "kind ==" not in text and "kind ~=" not in text, name
