"""Filtered dead-list plans with the filter's rule-outs run server-side
(reliable-list redrive).

When the filter compiles to a server-side program
(:func:`jobctl.filter.lua_predicate.lua_program`), ``list_scan.lua`` runs it
on bounded windows of :data:`SCAN_WINDOW` tail positions (the client reads
each window's ids with one ``LRANGE`` and passes their payload keys): it
decodes each envelope with cjson, rules out every job the program proves
cannot match and reports the dangling ids and malformed envelopes, without
sending any envelope; only the candidates' indexes come back.  The client
reads the candidates' envelopes (one ``MGET`` per round trip: about the
matches) and decides each with jobctl's own reader and filter, exactly as
:mod:`.lean_plan` does, so the plan is the one the client-side plan makes
(matches, breakdown, dangling and malformed ids), with one exception: an
envelope with a number token cjson reads and orjson refuses (hex ``0x10``,
a leading zero ``01``, ``1.``) that the filter rules out is not listed as
malformed (it is not planned either way: only the client's reader plans).

The plan is a :class:`~jobctl.ops.plan.PredicateRange`: per window the SHA1
of its payload keys (its fence), a bitmap of its matches (one bit per
position) and their ids in one bytes string (to name them in the report of a
window that changed); the window engine moves the matches of each window
still as planned.  No object per job: memory is one bit per walked position
plus the matches' ids as bytes.

:func:`plan_dead_predicate` returns ``None`` (the caller plans client-side)
when jobctl's hold is not empty, the client is a cluster client, or the
filter does not compile.
"""

from __future__ import annotations

import hashlib

from ..filter.lua_predicate import lua_program
from ..model import parse_envelope
from ..ops.plan import Plan, PredicateRange
from ..ops.spec import OpSpec
from ..scripts import script
from .common import text

__all__ = ["plan_dead_predicate", "predicate_applies", "SCAN_WINDOW", "SCAN_DEPTH"]

#: Tail positions one ``list_scan.lua`` call judges (about 5-6 µs of server
#: time each on a lightly loaded server: the envelope read into Lua and
#: decoded by cjson, so ~0.7 ms a call), and calls per round trip.  The window engine
#: applies the plan in windows of the same size.
SCAN_WINDOW = 120
SCAN_DEPTH = 16


def predicate_applies(spec: OpSpec) -> bool:
    """Whether a dead-list ``spec`` may plan with server-side rule-outs: a
    redrive to ready with a filter, no ``--ids``/fence file/``--limit``/
    ``--reset-attempts``."""
    return (spec.operation.value == "redrive" and spec.target is not None and spec.target.value == "ready"
            and not spec.filter.is_match_all and not spec.ids and spec.fence is None and spec.limit is None
            and not spec.reset_attempts and not spec.stuck_only and not spec.delay_ms)


def plan_dead_predicate(layout, spec: OpSpec, now: int) -> Plan | None:
    """The plan of ``spec`` (:func:`predicate_applies`) on the reliable-list
    ``layout``, or ``None`` to plan client-side.  Redis errors are raised as
    they come (the caller translates them)."""
    from ..cluster import is_cluster
    from ..ops.window_tail import _bulk, _key_blob
    from .lean_plan import _Lean, doc_envelope
    from .planning import breakdown_key

    program = lua_program(spec.filter)
    if program is None or is_cluster(layout.client):
        return None
    flt = spec.filter
    skip_bad = spec.skips_malformed or flt.needs_payload
    client = layout.client
    scan = script(client, "list_scan")
    client.script_load(scan.script)
    plan = Plan(spec=spec, now_ms=now, redrive_record="hash")
    walked: dict[int, int] = {}
    windows: dict[int, list[tuple[str, bytes, bytes]]] = {}
    count = 0
    sample: list[str] = []
    head = _bulk("EVALSHA") + _bulk(scan.sha)
    for shard, keys in enumerate(layout.shards):
        if client.llen(keys.hold):
            return None  # a hold to finish first: the client-side plan walks it
        total = client.llen(keys.dead)
        prefix = keys.job("").encode("utf-8", "surrogateescape")
        tail_args = _bulk(program) + _bulk("1" if skip_bad else "0") + _bulk(prefix)
        group = SCAN_WINDOW * SCAN_DEPTH
        mine: list[tuple[str, bytearray, list[bytes]]] = []
        last = -1  # position of the last match
        last_ids: list[bytes] = []  # the ids of the window holding it
        for g0 in range(0, total, group):
            ids = client.lrange(keys.dead, -min(g0 + group, total), -(g0 + 1))
            ids.reverse()  # tail first: ids[k] is at position g0 + k
            if not ids:
                break
            bounds = [(lo, min(lo + SCAN_WINDOW, len(ids))) for lo in range(0, len(ids), SCAN_WINDOW)]
            out = []
            for lo, hi in bounds:
                out += [b"*%d\r\n" % (3 + (hi - lo) + 3), head, _bulk(hi - lo), _key_blob(prefix, ids[lo:hi]),
                        tail_args]
            replies = _round_trip(client, b"".join(out), len(bounds))
            cands: list[tuple[int, int]] = []  # (window, index in ids)
            dangling: list[int] = []
            malformed: list[int] = []
            for w, ((lo, hi), r) in enumerate(zip(bounds, replies)):
                if isinstance(r, Exception):
                    raise r
                nd, nm = int(r[1]), int(r[2])
                rest = [int(x) for x in r[3:]]
                plan.scanned += hi - lo
                dangling += [lo + i - 1 for i in rest[:nd]]
                malformed += [lo + i - 1 for i in rest[nd:nd + nm]]
                cands += [(w, lo + i - 1) for i in rest[nd + nm:]]
                mine.append((_digest(prefix, ids[lo:hi]), bytearray((hi - lo + 7) // 8), []))
            base = len(mine) - len(bounds)
            raws = client.mget([prefix + ids[k] for _, k in cands]) if cands else []
            for (w, k), raw in zip(cands, raws):
                if raw is None:
                    dangling.append(k)
                    continue
                job_id = text(ids[k])
                env = doc_envelope(raw)
                if env is None:
                    full = parse_envelope(raw)
                    if full.problems and skip_bad:
                        malformed.append(k)
                        continue
                    env = full
                rec = _Lean(job_id, env, g0 + k, keys.tag)
                if not flt.matches(rec, now):  # type: ignore[arg-type]
                    continue
                i = k - bounds[w][0]
                mine[base + w][1][i // 8] |= 128 >> (i % 8)
                mine[base + w][2].append(ids[k])
                count += 1
                if g0 + k > last:
                    last = g0 + k
                    last_ids = ids[bounds[w][0]:bounds[w][1]]
                plan.breakdown[breakdown_key(rec)] += 1  # type: ignore[arg-type]
                if len(sample) < 10:
                    sample.append(job_id)
            plan.dangling += [text(ids[k]) for k in sorted(dangling)]  # in walk order, as the walk lists them
            plan.malformed += [text(ids[k]) for k in sorted(malformed)]
        if last >= 0:
            walked[shard] = last + 1  # the apply walks up to the last match: its window's digest up to there
            w_last, i_last = divmod(last, SCAN_WINDOW)
            mine[w_last] = (_digest(prefix, last_ids[:i_last + 1]), mine[w_last][1], mine[w_last][2])
            windows[shard] = [(d, bytes(b), b"\n".join(m)) for d, b, m in mine[:w_last + 1]]
    plan.jobs = PredicateRange(walked, count, SCAN_WINDOW, windows, sample)
    plan.walked = dict(walked)
    return plan


def _digest(prefix: bytes, ids: list[bytes]) -> str:
    """SHA1 (hex) of the payload keys of ``ids`` joined by ``"\\n"``: a plan
    window's fence, compared by the window engine before it moves any of it."""
    return hashlib.sha1(prefix + (b"\n" + prefix).join(ids)).hexdigest() if ids else ""


def _round_trip(client, packed: bytes, n: int) -> list:
    """Send ``packed`` (``n`` commands) on one connection of ``client``'s
    pool and read the ``n`` replies (an error reply as the exception)."""
    import redis

    own = None
    if getattr(client, "connection", None) is None:
        own = client = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
    try:
        conn = client.connection
        conn.send_packed_command([packed], check_health=False)
        out: list = []
        for _ in range(n):
            try:
                out.append(conn.read_response())
            except redis.exceptions.ResponseError as exc:
                out.append(exc)
        return out
    finally:
        if own is not None:
            own.close()
