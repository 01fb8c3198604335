"""jobctl's record of the redrives its window engine made, kept for a
retention period and then dropped.

A redrive on the window engine (reliable-list, stream-group and json-list
dead lists) does not rewrite the envelope (docs/layouts.md, "Where a
redrive is recorded").  Each window call writes its redriven jobs into one
hash per queue shard and UTC day, ``queue:{t}:jobctl:redriven:<YYYY-MM-DD>``
(json-list: ``<prefix>:jobctl:redriven:<YYYY-MM-DD>``; the day is the one
the operation's apply started on; :meth:`jobctl.keys.WindowKeys.redriven`),
job id -> JSON ``[op id, at (epoch ms), count]`` (``count``: that job's
redrives recorded in that hash), with one ``HMGET`` + one ``HSET`` per call
(the window scripts (``rl_window.lua``, ``rl_tail.lua``, ...)).

Retention: reads (``jobctl inspect``, the oldest-ready age of ``status``)
look at today's hash and those of the :data:`RETENTION_DAYS` days before.
Each operation's walk ``UNLINK``s the hashes of the :data:`UNLINK_DAYS`
days before the oldest one read (:func:`stale_keys`; ``UNLINK`` frees a
large hash off the main thread), and each write sets its day's hash to expire
:data:`EXPIRE_AFTER_MS` after it: the backstop for a queue no jobctl
operation walks again.  Without a retention the record grew forever,
~100 bytes of server memory for every job ever redriven; the walk also
moves that older, undated hash into today's (:func:`upkeep`).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..keys import utc_day

__all__ = ["RETENTION_DAYS", "UNLINK_DAYS", "EXPIRE_AFTER_MS", "DAY_MS", "record_key", "read_keys", "stale_keys",
           "parse", "merge", "lookup", "upkeep", "source_fields"]

#: One day (ms).
DAY_MS = 86_400_000
#: Days of redrive records a read looks back over, besides today.
RETENTION_DAYS = 7
#: Days past the retention whose hashes a walk still ``UNLINK``s (older ones
#: have expired: :data:`EXPIRE_AFTER_MS`).
UNLINK_DAYS = 31
#: A day's hash expires this long after its last write (ms), the backstop
#: when no walk ``UNLINK``s it.  The server then frees it on its main thread
#: unless ``lazyfree-lazy-expire`` is on (off by default in Redis 7.0:
#: ~14 ms for 100k records, ~220 ms for 1M on this project's 2-core
#: machine).
EXPIRE_AFTER_MS = (RETENTION_DAYS + UNLINK_DAYS + 1) * DAY_MS


def record_key(keys: Any, now_ms: int) -> str:
    """The record hash that a walk applying at ``now_ms`` (epoch ms) writes,
    for a queue (shard) with window keys ``keys``."""
    return keys.redriven(utc_day(now_ms))


def read_keys(keys: Any, now_ms: int) -> list[str]:
    """The record hashes a read at ``now_ms`` looks at, newest first:
    today's and those of the :data:`RETENTION_DAYS` days before."""
    return [keys.redriven(utc_day(now_ms - d * DAY_MS)) for d in range(RETENTION_DAYS + 1)]


def stale_keys(keys: Any, now_ms: int) -> list[str]:
    """The record hashes past the retention at ``now_ms`` that a walk
    ``UNLINK``s: those of the :data:`UNLINK_DAYS` days before the oldest
    one :func:`read_keys` reads."""
    first = RETENTION_DAYS + 1
    return [keys.redriven(utc_day(now_ms - d * DAY_MS)) for d in range(first, first + UNLINK_DAYS)]


def parse(raw: Any) -> dict[str, Any] | None:
    """One value of a record hash (``[op id, at (epoch ms), count]``) as
    ``{"operation", "at_ms", "count"}``; ``None`` for none, an error reply
    or a value that is not one."""
    if raw is None or isinstance(raw, Exception):
        return None
    try:
        op, at, count = orjson.loads(raw)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        return None
    return {"operation": op, "at_ms": at, "count": count}


def merge(values: list) -> dict[str, Any] | None:
    """One job's values in :func:`read_keys`'s hashes (newest first; a
    value may be ``None`` or an error reply) as one record: the newest
    day's operation and time, ``count`` summed over the days; ``None`` for
    none."""
    out = None
    for raw in values:
        rec = parse(raw)
        if rec is None:
            continue
        if out is None:
            out = rec
        elif isinstance(out["count"], int) and isinstance(rec["count"], int):
            out["count"] += rec["count"]
    return out


def lookup(client: Any, keys: Any, job_id: str, now_ms: int) -> dict[str, Any] | None:
    """jobctl's record of ``job_id``'s redrives (:func:`merge`): one
    ``HGET`` per :func:`read_keys` hash, in one pipeline; ``None`` for
    none."""
    pipe = client.pipeline(transaction=False)
    for key in read_keys(keys, now_ms):
        pipe.hget(key, job_id)
    return merge(pipe.execute(raise_on_error=False))


def upkeep(client: Any, keys: Any, now_ms: int) -> None:
    """What a walk of a queue (shard) with window keys ``keys`` does to its
    record once it has begun at ``now_ms`` (under the lease): ``UNLINK``
    each of the :func:`stale_keys` and look for the record jobctl kept
    before it was kept by day (``keys.redriven_undated``, one hash for all
    time), in one pipelined round trip; if there is one (once per queue),
    move it to today's hash (``RENAMENX``, O(1)) with its expiry, so its
    records stay readable, and their counts go on, for the retention.
    When today's hash exists already, an earlier jobctl still writes the
    undated one: it is left for a later day's walk."""
    import redis

    pipe = client.pipeline(transaction=False)
    for key in stale_keys(keys, now_ms):  # one UNLINK a key: a cluster pipeline takes no multi-key UNLINK
        pipe.unlink(key)
    pipe.exists(keys.redriven_undated)
    if not pipe.execute(raise_on_error=False)[-1]:
        return
    today = record_key(keys, now_ms)
    try:
        if client.renamenx(keys.redriven_undated, today):
            client.pexpire(today, EXPIRE_AFTER_MS)
    except redis.exceptions.ResponseError:  # gone meanwhile (another walk moved it)
        pass


def source_fields(client: Any, keys: Any, now_ms: int) -> dict[str, Any]:
    """The redrive-record fields of a window-engine source
    (:class:`~jobctl.ops.walk.ListSource`) of a queue (shard) with window
    keys ``keys``, for an apply starting at ``now_ms``: the hash its calls
    write (``redriven``) and its :func:`upkeep` (``record_upkeep(walk client)``:
    on the walk's own connection, ``client`` when it passes none)."""
    return {"redriven": record_key(keys, now_ms),
            "record_upkeep": lambda walk_client=None: upkeep(walk_client or client, keys, now_ms)}
