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
envelope the filter rules out that cjson reads and orjson refuses (``0x10``,
``01``), or that the quick rule-out drops undecoded, is not listed as
malformed (neither plan moves it).

Every call is bounded whatever the filter and the data (the limits of
:mod:`jobctl.filter.lua_predicate`): a filter over the clause or program-size
limit has no program (this returns ``None``), and each call gets its byte
budget (ARGV[4]): an envelope past it comes back as a candidate.

The plan is a :class:`~jobctl.ops.plan.PredicateRange`: per window the SHA1
of its payload keys (its fence), a bitmap of its matches and their ids in
one bytes string, kept in a :class:`~jobctl.ops.spill.SpillList`: no object
per job, and the plan's memory does not grow with the DLQ.

:func:`plan_dead_predicate` returns ``None`` (the caller plans client-side)
when jobctl's hold is not empty or the filter does not compile.
"""

from __future__ import annotations

import hashlib
from collections import deque

from jobctl.errors import DataError
from jobctl.filter.lua_predicate import SCAN_WINDOW, decodes, lua_program, scan_call_bytes
from jobctl.model import State, parse_envelope
from jobctl.ops.plan import Plan, PredicateRange
from jobctl.ops.spec import OpSpec
from jobctl.ops.spill import SpillList
from jobctl.ops.walk.flight import Flight, Trip, is_noscript
from jobctl.ops.walk.wire import Wire, bulks, command_blob, keyed_command, keyed_evalsha
from jobctl.scripts import script
from jobctl.layouts.common import text

__all__ = ["plan_dead_predicate", "predicate_applies", "SCAN_WINDOW", "SCAN_DEPTH", "SCAN_AHEAD"]

# SCAN_WINDOW (jobctl.filter.lua_predicate): the tail positions one call
# judges (~0.2-0.8 ms); the window engine applies the plan in windows of it.

#: Calls per round trip (one when the filter decodes): another client's
#: command waits behind a whole round trip (docs/performance.md).
SCAN_DEPTH = 1
#: Round trips in flight: each carries the ``LRANGE`` of the ids of the group
#: :data:`SCAN_AHEAD` groups later, so the server has the next round trip
#: queued while the client reads and confirms one.
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
    they come (the caller translates them).  On a Redis Cluster each
    primary's shards are scanned in a process of their own
    (:func:`~jobctl.ops.walk.parallel.plan_in_parallel`).

    Pipelined :data:`SCAN_AHEAD` round trips deep, a group of
    :data:`SCAN_DEPTH` windows each: round trip k carries the scans of group
    k, the ``LRANGE`` of group k+SCAN_AHEAD's ids and the ``MGET`` of the
    candidates of the last group scanned before it was sent; the client
    confirms candidates (in walk order) while the server runs the round trips
    in flight, so the client and the server work at the same time."""
    from jobctl.cluster import is_cluster
    from jobctl.ops.walk.parallel import plan_in_parallel

    program = lua_program(spec.filter)
    client = layout.client
    if program is None or any(client.llen(keys.hold) for keys in layout.shards):
        return None  # a hold to finish first: the client-side plan walks it
    shards = list(enumerate(layout.shards))
    if is_cluster(client):
        parts = plan_in_parallel(client, [(keys.dead, (n, keys)) for n, keys in shards],
                                 lambda conn, mine, halted: _shard_parts(conn, mine, spec, now, program, halted, True))
        return None if parts is None else _merged(Plan(spec=spec, now_ms=now, redrive_record="hash"),
                                                  sorted(parts, key=lambda part: part[0]))  # in shard order
    import redis

    conn = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
    try:
        return _merged(Plan(spec=spec, now_ms=now, redrive_record="hash"),
                       _shard_parts(conn, shards, spec, now, program, lambda: False, False))
    except BaseException:
        conn.connection.disconnect()  # replies of the round trip may be unread
        raise
    finally:
        conn.close()


def _shard_parts(conn, shards: list, spec: OpSpec, now: int, program: bytes, halted, portable: bool):
    """Per ``(shard index, keys)`` scanned on ``conn``: ``(shard, walked,
    windows, matches, sample ids, scanned, dangling ids, malformed ids,
    breakdown)``; the windows a plain list when ``portable`` (sent to
    another process)."""
    scan = script(conn, "list_scan")
    conn.script_load(scan.script)
    for shard, keys in shards:
        if halted():
            return
        plan = Plan(spec=spec, now_ms=now, redrive_record="hash")
        walk = _Walk(plan, spec, now)
        walk.shard(conn, shard, keys, scan, program)
        windows = walk.windows.get(shard)
        yield (shard, walk.walked.get(shard, 0), list(windows) if portable and windows is not None else windows,
               walk.count, walk.sample, plan.scanned, plan.dangling, plan.malformed, plan.breakdown)


def _merged(plan: Plan, parts) -> Plan:
    """``plan`` with every shard's part of :func:`_shard_parts` added."""
    walked: dict[int, int] = {}
    windows: dict[int, SpillList] = {}
    count, sample = 0, []
    for shard, w, wins, n, first, scanned, dangling, malformed, breakdown in parts:
        plan.scanned += scanned
        plan.dangling += dangling
        plan.malformed += malformed
        plan.breakdown.update(breakdown)
        if w:
            walked[shard], windows[shard] = w, wins if isinstance(wins, SpillList) else SpillList(wins)
        count += n
        sample += first
    plan.jobs = PredicateRange(walked, count, SCAN_WINDOW, windows, sample[:10])
    plan.walked = dict(walked)
    return plan


class _Candidate:
    """What the filter's getters read of a job record (as the client-side lean plan's)."""

    __slots__ = ("job_id", "envelope", "position", "shard")
    state = State.DEAD
    score = None
    meta = None

    def __init__(self, job_id: str, envelope, position: int, shard: str) -> None:
        self.job_id, self.envelope, self.position, self.shard = job_id, envelope, position, shard


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

    def shard(self, client, shard: int, keys, scan, program: bytes) -> None:
        """Walk one shard's dead list, pipelined (:data:`SCAN_AHEAD` round trips in flight)."""
        total = client.llen(keys.dead)
        if not total:
            return
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
        _ShardScan(self, client, keys.dead, prefix, total, scan, program).run()
        if self.last >= 0:
            # the apply walks up to the last match: its window's digest up to there
            self.walked[shard] = self.last + 1
            w_last, i_last = divmod(self.last, SCAN_WINDOW)
            done = self.done
            _, bitmap, matched = done[w_last]
            done[w_last] = (_digest(prefix, self.last_ids[:i_last + 1]), bitmap, matched)
            del done[w_last + 1:]
            self.windows[shard] = done

    def scanned(self, g: _Group, replies: list, prefix: bytes) -> None:
        """Keep what the scans of ``g`` reported (``replies``, one a window)."""
        for w, ((lo, hi), r) in enumerate(zip(g.bounds, replies)):
            nd, nm = int(r[1]), int(r[2])
            rest = [int(x) for x in r[3:]]
            self.plan.scanned += hi - lo
            g.dangling += [lo + i - 1 for i in rest[:nd]]
            g.malformed += [lo + i - 1 for i in rest[nd:nd + nm]]
            g.cands += [(w, lo + i - 1) for i in rest[nd + nm:]]
            self.mine.append((_digest(prefix, g.ids[lo:hi]), bytearray((hi - lo + 7) // 8), []))

    def _confirm_ready(self, order: deque) -> None:
        """Confirm the groups at the front of ``order`` whose candidates'
        envelopes have been read (:meth:`_confirm`), in walk order."""
        while order and order[0][1] is not None:
            g, raws = order.popleft()
            self._confirm(g, raws)

    def _confirm(self, g: _Group, raws: list) -> None:
        """Decide ``g``'s candidates with jobctl's own reader and filter (their
        envelopes ``raws``, in order) and mark the matches in the windows."""
        from jobctl.layouts.reliable_list.lean_plan import doc_envelope
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
            rec = _Candidate(job_id, env, g.g0 + k, self.tag)
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


class _ScanTrip(Trip):
    """A round trip of the scan: the group it scans (or None), whether it
    reads a later group's ids, the group whose candidates' envelopes it reads
    (``MGET``) or None."""

    __slots__ = ("group", "reads_ids", "carried")

    def __init__(self) -> None:
        super().__init__()
        self.group: _Group | None = None
        self.reads_ids = False
        self.carried: _Group | None = None


class _ShardScan:
    """The scan of one shard's dead list for :class:`_Walk` ``walk``: round
    trip k carries the scans of group k, the ``LRANGE`` of group
    k+SCAN_AHEAD's ids and the ``MGET`` of the candidates of the last group
    scanned before it was sent; the walk confirms candidates (in walk order)
    while the server runs the round trips in flight."""

    def __init__(self, walk: _Walk, client, dead: str, prefix: bytes, total: int, scan, program: bytes) -> None:
        self.walk, self.dead, self.prefix, self.total = walk, dead, prefix, total
        self.flight = Flight(Wire(client), scan, SCAN_AHEAD)
        self.args = (program, "1" if walk.skip_bad else "0", prefix, scan_call_bytes(program))
        self.group = SCAN_WINDOW * (SCAN_DEPTH if not decodes(program) else 1)
        self.starts = list(range(0, total, self.group))
        self.ahead = max(1, SCAN_AHEAD)
        self.call_head = (bulks(("EVALSHA", scan.sha)), bulks(self.args))
        # scanned groups not yet confirmed, in walk order, each with its
        # candidates' envelopes once read (None until then)
        self.order: deque[list] = deque()
        self.mget: _Group | None = None  # a scanned group whose MGET rides in the next round trip
        self.k, self.ended = 0, False

    def lrange(self, g0: int) -> bytes:
        return command_blob("LRANGE", self.dead, -min(g0 + self.group, self.total), -(g0 + 1))

    def run(self) -> None:
        first = self.starts[:self.ahead]
        trip = _ScanTrip()
        trip.after, trip.reads = [self.lrange(g0) for g0 in first], ["LRANGE"] * len(first)
        self.flight.send(trip)
        self.ids_ahead = deque(_tail_first(got) for got in _checked(self.flight.next()).read_back)
        while self.step():
            pass
        self.walk._confirm_ready(self.order)
        assert not self.order

    def next_trip(self) -> _ScanTrip | None:
        """The next round trip to send (None: nothing to send)."""
        trip, cur = _ScanTrip(), None
        if not self.ended and self.k < len(self.starts):
            g0 = self.starts[self.k]
            ids = self.ids_ahead.popleft()
            if ids:
                cur = _Group(g0, ids, g0 // SCAN_WINDOW)
            # a short group: the list changed under the plan; stop there
            # (the apply's window fences see the change)
            self.ended = len(ids) < min(self.group, self.total - g0)
        trip.group = cur
        if cur is not None:
            head, args = self.call_head
            trip.packed = [keyed_evalsha(head, self.prefix, cur.ids[lo:hi], args, len(self.args))
                           for lo, hi in cur.bounds]
            if not self.ended and self.k + self.ahead < len(self.starts):
                trip.after.append(self.lrange(self.starts[self.k + self.ahead]))
                trip.reads.append("LRANGE")
                trip.reads_ids = True
            self.k += 1
        trip.carried, self.mget = self.mget, None
        if trip.carried is not None:
            trip.after.append(keyed_command("MGET", self.prefix, [trip.carried.ids[i] for _, i in trip.carried.cands]))
            trip.reads.append("MGET")
        return trip if trip.packed or trip.after else None

    def step(self) -> bool:
        """Send one round trip (and another while fewer than ``ahead`` are in
        flight), else read one; False when the scan is over."""
        trip = self.next_trip()
        if trip is not None:
            self.flight.send(trip)
            if trip.group is not None and len(self.flight.inflight) < self.ahead:
                return True  # another round trip to send before reading one
        elif not self.flight.inflight:
            return False
        self.walk._confirm_ready(self.order)  # the client's work while the server runs the round trips
        trip = _checked(self.flight.next())
        back = iter(trip.read_back)
        g = trip.group
        if g is not None:
            self.walk.scanned(g, trip.replies, self.prefix)
            self.order.append([g, None if g.cands else []])
            if g.cands:
                self.mget = g
        if trip.reads_ids:
            self.ids_ahead.append(_tail_first(next(back)))
        if trip.carried is not None:
            entry = next(e for e in self.order if e[1] is None)
            assert entry[0] is trip.carried  # envelopes are read in walk order
            entry[1] = next(back)
        return True


def _tail_first(ids: list[bytes]) -> list[bytes]:
    """An ``LRANGE`` reply reversed: ``ids[k]`` is at position ``g0 + k``."""
    ids.reverse()
    return ids


def _checked(trip):
    """``trip`` once read; its first error reply raised (a script refused
    again after the cache was reloaded as a one-line error)."""
    for reply in (*trip.replies, *trip.read_back):
        if is_noscript(reply):
            raise DataError("the server's script cache was flushed again while jobctl ran the refused scan calls "
                            "again; nothing changed: rerun the operation")
        if isinstance(reply, Exception):
            raise reply
    return trip


def _digest(prefix: bytes, ids: list[bytes]) -> str:
    """SHA1 (hex) of the payload keys of ``ids`` joined by ``"\\n"``: a plan
    window's fence, compared by the window engine before it moves any of it."""
    return hashlib.sha1(prefix + (b"\n" + prefix).join(ids)).hexdigest() if ids else ""
