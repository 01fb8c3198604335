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
malformed, and neither is a malformed envelope that the quick rule-out of
``prelude/predicate.lua`` drops without decoding (a filter on text values
none of which occurs in the envelope): neither is planned either way, only
the client's reader plans.

Every call is bounded whatever the filter and the data (the limits of
:mod:`jobctl.filter.lua_predicate`, docs/performance.md): a filter over
the clause or program-size limit has no program (this returns ``None``), and
each call gets its byte budget (:func:`~jobctl.filter.lua_predicate.scan_call_bytes`,
ARGV[4]): an envelope past it is not read in Lua but comes back as a
candidate, which the client reads and decides like any other.

The plan is a :class:`~jobctl.ops.plan.PredicateRange`: per window the SHA1
of its payload keys (its fence), a bitmap of its matches (one bit per
position) and their ids in one bytes string (to name them in the report of a
window that changed); the window engine moves the matches of each window
still as planned.  No object per job: one bit per walked position plus the
matches' ids as bytes, the windows kept in a :class:`~jobctl.ops.spill.SpillList`
(past :data:`~jobctl.ops.spill.ITEM_SPILL_AT` windows in an anonymous
temporary file, in chunks), so the plan's memory does not grow with the DLQ.

:func:`plan_dead_predicate` returns ``None`` (the caller plans client-side)
when jobctl's hold is not empty, the client is a cluster client, or the
filter does not compile.
"""

from __future__ import annotations

import hashlib
from collections import deque

from jobctl.filter.lua_predicate import SCAN_WINDOW, decodes, lua_program, scan_call_bytes
from jobctl.model import parse_envelope
from jobctl.ops.plan import Plan, PredicateRange
from jobctl.ops.spec import OpSpec
from jobctl.ops.spill import SpillList
from jobctl.ops.pipeline import _bulk
from jobctl.ops.window_tail import _key_blob
from jobctl.scripts import script
from jobctl.layouts.common import text

__all__ = ["plan_dead_predicate", "predicate_applies", "SCAN_WINDOW", "SCAN_DEPTH", "SCAN_AHEAD"]

# SCAN_WINDOW (imported with the scan's other per-call bounds from
# jobctl.filter.lua_predicate): the tail positions one list_scan.lua call
# judges, ~1-2 µs of server time each with a text-only filter (the quick
# rule-out), ~6-7 µs when the envelope is decoded by cjson, so ~0.2-0.8 ms a
# call.  The window engine applies the plan in windows of the same size.

#: Calls per round trip (one when the filter decodes:
#: :func:`~jobctl.filter.lua_predicate.decodes`), since another client's
#: command waits behind a whole round trip (:data:`jobctl.ops.window.DEPTH`),
#: and two may queue (the scan is pipelined one group ahead).  At 1M,
#: isolated: PING p99 0.54-0.75 ms at two calls, 0.96-0.98 at three; on
#: 2026-11-25, three interleaved runs each: p99 median 0.51 ms at one call
#: against 0.75 at two, plan 2.89 s against 2.70, the whole operation the
#: same within noise (the apply overlaps its round trips too).
SCAN_DEPTH = 1
#: Round trips in flight: each carries the ``LRANGE`` of the ids of the group
#: :data:`SCAN_AHEAD` groups later, so the server has the next round trip
#: queued while the client reads and confirms one.  At 1M, one in flight left
#: the server idle ~25 % of the plan (2.98 s of plan against 2.3 s of server
#: time); on 2026-11-25, isolated, three interleaved runs each: plan median
#: 3.15 s at one, 2.39 s at two, PING p99 median 0.55 against 0.65 ms.
SCAN_AHEAD = 2


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
    they come (the caller translates them).

    Pipelined :data:`SCAN_AHEAD` round trips deep, a group of
    :data:`SCAN_DEPTH` windows each: round trip k carries the scans of group
    k, the ``LRANGE`` of group k+SCAN_AHEAD's ids and the ``MGET`` of the
    candidates of the last group scanned before it was sent; the client
    confirms candidates (in walk order) while the server runs the round trips
    in flight, so the client and the server work at the same time."""
    from jobctl.cluster import is_cluster

    program = lua_program(spec.filter)
    if program is None or is_cluster(layout.client):
        return None
    client = layout.client
    for keys in layout.shards:
        if client.llen(keys.hold):
            return None  # a hold to finish first: the client-side plan walks it
    scan = script(client, "list_scan")
    client.script_load(scan.script)
    plan = Plan(spec=spec, now_ms=now, redrive_record="hash")
    walk = _Walk(plan, spec, now)
    own = redis_conn = None
    if getattr(client, "connection", None) is None:
        import redis

        own = redis_conn = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
    try:
        for shard, keys in enumerate(layout.shards):
            walk.shard(redis_conn or client, shard, keys, scan.sha, program)
    except BaseException:
        (redis_conn or client).connection.disconnect()  # replies of the round trip may be unread
        raise
    finally:
        if own is not None:
            own.close()
    plan.jobs = PredicateRange(walk.walked, walk.count, SCAN_WINDOW, walk.windows, walk.sample)
    plan.walked = dict(walk.walked)
    return plan


class _Group:
    """One group of scan windows in flight: its ids (tail first), first
    position, windows' bounds, index of its first window in the shard's
    list, and what its scans reported."""

    __slots__ = ("g0", "ids", "bounds", "base", "cands", "dangling", "malformed")

    def __init__(self, g0: int, ids: list[bytes], base: int) -> None:
        self.g0, self.ids, self.base = g0, ids, base
        self.bounds = [(lo, min(lo + SCAN_WINDOW, len(ids))) for lo in range(0, len(ids), SCAN_WINDOW)]
        self.cands: list[tuple[int, int]] = []  # (window, index in ids)
        self.dangling: list[int] = []
        self.malformed: list[int] = []


class _Walk:
    """The plan's walk over every shard's dead list (see
    :func:`plan_dead_predicate`)."""

    def __init__(self, plan: Plan, spec: OpSpec, now: int) -> None:
        self.plan, self.flt, self.now = plan, spec.filter, now
        self.skip_bad = spec.skips_malformed or spec.filter.needs_payload
        self.walked: dict[int, int] = {}
        self.windows: dict[int, SpillList[tuple[str, bytes, bytes]]] = {}
        self.count = 0
        self.sample: list[str] = []

    def shard(self, client, shard: int, keys, sha: str, program: bytes) -> None:
        """Walk one shard's dead list, pipelined (:data:`SCAN_AHEAD` round trips in flight)."""
        total = client.llen(keys.dead)
        if not total:
            return
        conn = client.connection
        prefix = keys.job("").encode("utf-8", "surrogateescape")
        self.tag = keys.tag
        # per window of the groups in flight (from window ``mbase`` on):
        # digest, match bitmap, matched ids (a list until its group is
        # confirmed, then one bytes string: ~31 bytes a match); confirmed
        # windows go to ``done`` (spilled to a file past a threshold)
        self.mine: list[tuple[str, bytearray | bytes, list[bytes] | bytes]] = []
        self.mbase = 0
        self.done: SpillList[tuple[str, bytes, bytes]] = SpillList()
        self.last, self.last_ids = -1, []
        head = _bulk("EVALSHA") + _bulk(sha)
        tail_args = (_bulk(program) + _bulk("1" if self.skip_bad else "0") + _bulk(prefix)
                     + _bulk(scan_call_bytes(program)))
        group = SCAN_WINDOW * (SCAN_DEPTH if not decodes(program) else 1)
        starts = list(range(0, total, group))
        dead = _bulk(keys.dead)
        ahead = max(1, SCAN_AHEAD)

        def lrange(g0: int) -> bytes:
            return b"*4\r\n$6\r\nLRANGE\r\n" + dead + _bulk(-min(g0 + group, total)) + _bulk(-(g0 + 1))

        def read_ids() -> list[bytes]:
            got = client.parse_response(conn, "LRANGE")
            got.reverse()  # tail first: ids[k] is at position g0 + k
            return got

        first = starts[:ahead]
        conn.send_packed_command([b"".join(lrange(g0) for g0 in first)], check_health=False)
        ids_ahead = deque(read_ids() for _ in first)  # the ids of the next groups to scan, in order
        # round trips in flight, oldest first: the group it scans (or None),
        # whether it reads a later group's ids, the group whose candidates'
        # envelopes it reads (MGET) or None
        flight: deque[tuple[_Group | None, bool, _Group | None]] = deque()
        # scanned groups not yet confirmed, in walk order, each with its
        # candidates' envelopes once read (None until then)
        order: deque[list] = deque()
        mget: _Group | None = None  # a scanned group whose MGET rides in the next round trip
        k, ended = 0, False
        while True:
            cur = None
            if not ended and k < len(starts):
                ids = ids_ahead.popleft()
                if ids:
                    cur = _Group(starts[k], ids, starts[k] // SCAN_WINDOW)
                # a short group: the list changed under the plan; stop there
                # (the apply's window fences see the change)
                ended = len(ids) < min(group, total - starts[k])
            out: list[bytes] = []
            reads = False
            if cur is not None:
                for lo, hi in cur.bounds:
                    out += [b"*%d\r\n" % (3 + (hi - lo) + 4), head, _bulk(hi - lo), _key_blob(prefix, ids[lo:hi]),
                            tail_args]
                if not ended and k + ahead < len(starts):
                    out.append(lrange(starts[k + ahead]))
                    reads = True
                k += 1
            carried, mget = mget, None
            if carried is not None:
                out.append(b"*%d\r\n$4\r\nMGET\r\n" % (1 + len(carried.cands))
                           + _key_blob(prefix, [carried.ids[i] for _, i in carried.cands]))
            if out:
                conn.send_packed_command([b"".join(out)], check_health=False)
                flight.append((cur, reads, carried))
                if cur is not None and len(flight) < ahead:
                    continue  # another round trip to send before reading one
            elif not flight:
                break
            self._confirm_ready(order)  # the client's work while the server runs the round trips
            g, reads, carried = flight.popleft()
            if g is not None:
                for w, (lo, hi) in enumerate(g.bounds):
                    r = client.parse_response(conn, "EVALSHA")
                    nd, nm = int(r[1]), int(r[2])
                    rest = [int(x) for x in r[3:]]
                    self.plan.scanned += hi - lo
                    g.dangling += [lo + i - 1 for i in rest[:nd]]
                    g.malformed += [lo + i - 1 for i in rest[nd:nd + nm]]
                    g.cands += [(w, lo + i - 1) for i in rest[nd + nm:]]
                    self.mine.append((_digest(prefix, g.ids[lo:hi]), bytearray((hi - lo + 7) // 8), []))
                order.append([g, None if g.cands else []])
                if g.cands:
                    mget = g
            if reads:
                ids_ahead.append(read_ids())
            if carried is not None:
                entry = next(e for e in order if e[1] is None)
                assert entry[0] is carried  # envelopes are read in walk order
                entry[1] = client.parse_response(conn, "MGET")
        self._confirm_ready(order)
        assert not order
        if self.last >= 0:
            # the apply walks up to the last match: its window's digest up to there
            self.walked[shard] = self.last + 1
            w_last, i_last = divmod(self.last, SCAN_WINDOW)
            done = self.done
            _, bitmap, matched = done[w_last]
            done[w_last] = (_digest(prefix, self.last_ids[:i_last + 1]), bitmap, matched)
            del done[w_last + 1:]
            self.windows[shard] = done

    def _confirm_ready(self, order: deque) -> None:
        """Confirm the groups at the front of ``order`` whose candidates'
        envelopes have been read (:meth:`_confirm`), in walk order."""
        while order and order[0][1] is not None:
            g, raws = order.popleft()
            self._confirm(g, raws)

    def _confirm(self, g: _Group, raws: list) -> None:
        """Decide ``g``'s candidates with jobctl's own reader and filter (their
        envelopes ``raws``, in order) and mark the matches in the windows."""
        from jobctl.layouts.reliable_list.lean_plan import _Lean, doc_envelope
        from jobctl.layouts.planning import breakdown_key

        plan, flt, now, ids = self.plan, self.flt, self.now, g.ids
        for (w, k), raw in zip(g.cands, raws):
            if raw is None:
                g.dangling.append(k)
                continue
            job_id = text(ids[k])
            env = doc_envelope(raw)
            if env is None:
                full = parse_envelope(raw)
                if full.problems and self.skip_bad:
                    g.malformed.append(k)
                    continue
                env = full
            rec = _Lean(job_id, env, g.g0 + k, self.tag)
            if not flt.matches(rec, now):  # type: ignore[arg-type]
                continue
            lo = g.bounds[w][0]
            i = k - lo
            win = self.mine[g.base + w - self.mbase]
            win[1][i // 8] |= 128 >> (i % 8)
            win[2].append(ids[k])
            self.count += 1
            if g.g0 + k > self.last:
                self.last = g.g0 + k
                self.last_ids = ids[lo:g.bounds[w][1]]
            plan.breakdown[breakdown_key(rec)] += 1  # type: ignore[arg-type]
            if len(self.sample) < 10:
                self.sample.append(job_id)
        plan.dangling += [text(ids[k]) for k in sorted(g.dangling)]  # in walk order, as the walk lists them
        plan.malformed += [text(ids[k]) for k in sorted(g.malformed)]
        assert g.base == self.mbase  # groups are confirmed in walk order
        for d, b, m in self.mine[:len(g.bounds)]:  # final: the matches' ids as one bytes string
            self.done.append((d, bytes(b), b"\n".join(m)))
        del self.mine[:len(g.bounds)]
        self.mbase += len(g.bounds)


def _digest(prefix: bytes, ids: list[bytes]) -> str:
    """SHA1 (hex) of the payload keys of ``ids`` joined by ``"\\n"``: a plan
    window's fence, compared by the window engine before it moves any of it."""
    return hashlib.sha1(prefix + (b"\n" + prefix).join(ids)).hexdigest() if ids else ""
