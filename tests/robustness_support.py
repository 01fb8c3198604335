"""What ``test_robustness.py`` needs to read a queue's states from the keys
themselves (never through ``jobctl check`` or a layout's read side), plant a
key of the wrong type, and run ``jobctl`` as a process it may kill.

:func:`census` maps every job to the number of state memberships it has:
"every job in exactly one state" is ``set(census.values()) == {1}``.  Key
names come from :mod:`jobctl.keys` (the one place they are built).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter

from jobctl.keys import DelayedEventsKeys, DelayZsetKeys, HashJobKeys, JsonListKeys, ReliableListKeys, StreamGroupKeys

__all__ = ["census", "plant_wrong_type", "restore_key", "state_snapshot", "spawn_cli", "script_calls",
           "key_of", "payload_key"]

#: jobctl's own keys that hold states (the rest of ``*:jobctl:*`` is
#: bookkeeping: journal, leases, holds).
_JOBCTL_STATE_SUFFIXES = (":jobctl:suppressed", ":jobctl:suppressed:info", ":jobctl:suppressed:raw")
SAVED_SUFFIX = ":robustness-saved"


def _s(v) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


def _list(client, key: str) -> list[str]:
    out: list[str] = []
    n = client.llen(key) if client.type(key) == b"list" else 0
    for start in range(0, n, 1000):
        out += [_s(x) for x in client.lrange(key, start, start + 999)]
    return out


def _zset(client, key: str) -> list[str]:
    if client.type(key) != b"zset":
        return []
    return [_s(m) for m in client.zrange(key, 0, -1)]


def _members(client, lists=(), zsets=()) -> Counter:
    """How many times each job stands in the lists ``lists`` and the sorted
    sets ``zsets`` (keys of another type count as empty)."""
    out: Counter = Counter()
    for key in lists:
        out.update(_list(client, key))
    for key in zsets:
        out.update(_zset(client, key))
    return out


def _json_id(raw: str) -> str:
    """A json-list job string's id; ``sha1:<hex>`` of its bytes when it has
    none (how jobctl names a malformed string)."""
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "id" in doc:
        return str(doc["id"])
    return "sha1:" + hashlib.sha1(raw.encode("utf-8", "surrogateescape")).hexdigest()


def census(client, layout) -> Counter:
    """``{job: number of state keys holding it}`` for the queue ``layout``
    (a :class:`jobctl.layouts.base.Layout`), read from its keys.  A dead
    list's ``hold`` (jobctl's list of dead jobs a window walk set aside,
    where the keys module names one) counts as dead."""
    where: Counter = Counter()
    name = layout.name
    if name == "reliable-list":
        for k in layout.shards:
            assert isinstance(k, ReliableListKeys)
            lists = [k.ready, k.processing, k.dead, *_hold(k)]
            lists += [k.ready_priority(p) for p in range(layout.queue.priorities or 0)]
            where.update(_members(client, lists, (k.scheduled, k.suppressed)))
    elif name == "hash-job":
        k = layout.keys
        assert isinstance(k, HashJobKeys)
        where.update(_members(client, (*k.state_lists, *_hold(k)), (k.suppressed,)))
    elif name == "json-list":
        k = layout.keys
        assert isinstance(k, JsonListKeys)
        for key in (k.pending, k.processing, k.dead, *_hold(k)):
            where.update(_json_id(x) for x in _list(client, key))
        where.update(_zset(client, k.suppressed))
    elif name == "stream-group":
        for k in layout.shards:
            assert isinstance(k, StreamGroupKeys)
            where.update(_stream_states(client, k, layout.group))
            if layout.dead_kind == "stream":
                where.update(_entry_job(f) for _, f in client.xrange(k.dead_stream))
            else:
                where.update(_members(client, lists=(k.dead, *_hold(k))))
            where.update(_members(client, zsets=(k.scheduled, k.suppressed)))
    elif name == "delayed-events":
        k = layout.keys
        assert isinstance(k, DelayedEventsKeys)
        members = _zset(client, k.zset)
        where.update(members)
        where.update(_zset(client, k.suppressed))
        held = {_s(f) for f in client.hkeys(k.events)}
        assert set(members) <= held, f"events without envelope: {sorted(set(members) - held)[:3]}"
    elif name == "delay-zset":
        k = layout.keys
        assert isinstance(k, DelayZsetKeys)
        where.update(_zset(client, k.zset))
    else:  # pragma: no cover - a new layout needs its census
        raise AssertionError(f"no census for layout {name}")
    return where


def _hold(keys) -> tuple[str, ...]:
    """The keys object's ``hold`` list, when it names one."""
    hold = getattr(keys, "hold", None)
    return (hold,) if isinstance(hold, str) else ()


def _entry_job(fields: dict) -> str:
    return _s(fields.get(b"jobId", b"?"))


def _stream_states(client, k: StreamGroupKeys, group: str) -> list[str]:
    """Jobs of the stream that are ready (after the group's last delivered
    id) or processing (in the PEL); acknowledged entries are history."""
    if client.type(k.stream) != b"stream":
        return []
    last = "0-0"
    for g in client.xinfo_groups(k.stream):
        if _s(g["name"]) == group:
            last = _s(g["last-delivered-id"])
    out = [_entry_job(f) for _, f in client.xrange(k.stream, min=f"({last}")]
    pending = client.xpending_range(k.stream, group, min="-", max="+", count=1_000_000)
    for p in pending:
        eid = _s(p["message_id"])
        entry = client.xrange(k.stream, min=eid, max=eid)
        out.append(_entry_job(entry[0][1]) if entry else f"<deleted {eid}>")
    return out


def key_of(layout, attr: str) -> str:
    """The key ``attr`` (a :mod:`jobctl.keys` property, or ``dead`` for the
    stream-group dead list or stream) of the layout's first shard."""
    keys = layout.shards[0] if hasattr(layout, "shards") else layout.keys
    if layout.name == "stream-group" and attr == "dead":
        return layout.dead_key(keys)
    return getattr(keys, attr)


def payload_key(layout, job_id: str) -> str:
    """The payload key of ``job_id`` (layouts with one key per job)."""
    keys = layout.shards[0] if hasattr(layout, "shards") else layout.keys
    return keys.job(job_id)


def plant_wrong_type(client, key: str) -> None:
    """Put ``key`` aside (RENAME to ``key + SAVED_SUFFIX``) and write a key
    of another type in its place: a hash where a list or a string was (or
    none), else a string."""
    kind = client.type(key)
    if kind != b"none":
        client.rename(key, key + SAVED_SUFFIX)
    if kind in (b"list", b"string", b"none"):
        client.hset(key, "planted", "wrong type")
    else:
        client.set(key, "planted: wrong type")


def restore_key(client, key: str) -> None:
    """Undo :func:`plant_wrong_type`."""
    client.delete(key)
    if client.exists(key + SAVED_SUFFIX):
        client.rename(key + SAVED_SUFFIX, key)


def state_snapshot(client, snapshot) -> dict:
    """``snapshot(client)`` without jobctl's bookkeeping keys (journal,
    leases, holds): what an operation that moved nothing leaves unchanged."""
    out = {}
    for key, value in snapshot(client).items():
        name = _s(key)
        if ":jobctl:" in name and not name.endswith(_JOBCTL_STATE_SUFFIXES):
            continue
        out[key] = value
    return out


def spawn_cli(url: str, config: str, *argv: str) -> subprocess.Popen:
    """``jobctl --url url --config config *argv`` as a child process
    (stdout and stderr captured)."""
    code = "import sys; from jobctl.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, "--url", url, "--config", config, *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def script_calls(client) -> int:
    """Script calls the server has run so far (EVAL, EVALSHA, FCALL): the
    progress signal of an operation."""
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items()
               if k in ("cmdstat_eval", "cmdstat_evalsha", "cmdstat_fcall", "cmdstat_eval_ro", "cmdstat_evalsha_ro"))
