"""``jobctl replay QUEUE --from TIME|ID [--to TIME|ID] [--filter EXPR]`` on
the stream-group layout (issue 14; seed 000 section 1: "replay").

History = the entries of the stream up to the consumer group's
last-delivered id that are not pending (delivered and acknowledged).  The
plan walks ``XRANGE from..to`` in windows of :data:`~.walks.WINDOW`,
drops the entries ``XPENDING`` lists for the window and those after the
group's last-delivered id and the entries that carry ``replayOf`` (they
are replays: never replayed), loads each job (its payload key, or the
fields the entry carries) and applies the filter; an entry whose payload
key is gone and that carries no payload is a dangling id (reported, not
replayed).  ``sg_replay.lua`` re-adds each planned entry with the same
fields plus ``replayOf`` = its id, once per original entry: it checks and
writes jobctl's replay record (``queue:{t}:jobctl:replay-record``) in the
same atomic step as the ``XADD``, so replays of the same window, one after
the other or at the same time, re-add each original once in total.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from jobctl.errors import UsageError
from jobctl.model import JobRecord, State
from jobctl.ops.plan import Plan
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import Operation, OpSpec
from jobctl.scripts import script
from jobctl.layouts.common import batch_result, check_transition, text
from jobctl.layouts.moves import shard_chunks
from jobctl.layouts.planning import plan_from_walk, shard_index
from jobctl.layouts.walks import WINDOW

if TYPE_CHECKING:
    from jobctl.layouts.stream_group.layout import StreamGroup

__all__ = ["REPLAY_TRANSITIONS", "plan_replay", "apply_replay", "DEFAULT_BATCH"]

REPLAY_TRANSITIONS = {(Operation.REPLAY, State.HISTORY): (State.READY,)}
DEFAULT_BATCH = 128
#: The field a replayed entry carries: the original entry id.
REPLAY_OF = "replayOf"


def _is_replay(fields: dict) -> bool:
    return REPLAY_OF in fields or REPLAY_OF.encode() in fields


def _id_le(a: str, b: str) -> bool:
    ams, aseq = (int(x) for x in a.split("-", 1))
    bms, bseq = (int(x) for x in b.split("-", 1))
    return (ams, aseq) <= (bms, bseq)


def _history(layout: "StreamGroup", keys, start: str, end: str) -> Iterator[list[JobRecord]]:
    group = layout.group_info(keys)
    if group is None:
        return
    last = group.last_id
    client = layout.client
    cursor = start
    while True:
        entries = client.xrange(keys.stream, cursor, end, count=WINDOW)
        if not entries:
            return
        first_id, last_id = text(entries[0][0]), text(entries[-1][0])
        pending = {text(p["message_id"]) for p in
                   client.xpending_range(keys.stream, layout.group, first_id, last_id, len(entries))}
        done = [(eid, f) for eid, f in entries
                if text(eid) not in pending and _id_le(text(eid), last) and not _is_replay(f)]
        items = layout._entry_items(done)
        yield layout._records(keys, items, State.HISTORY)
        if not _id_le(last_id, last) or len(entries) < WINDOW:
            return
        cursor = f"({last_id}"


def plan_replay(layout: "StreamGroup", spec: OpSpec, now: int) -> Plan:
    """Plan the replay of the acknowledged entries in ``spec.replay_range``
    matching the filter; each planned job's ``position`` is unused and its
    fence is the original entry id (kept in ``sha1``).  Reads only."""
    check_transition(layout.name, REPLAY_TRANSITIONS, spec)
    if not spec.replay_range:
        raise UsageError("replay needs --from")
    start, end = spec.replay_range

    def walk():
        for keys in layout.shards:
            yield from _history(layout, keys, start, end)

    return plan_from_walk(Plan(spec=spec, now_ms=now), walk(), lambda rec: rec.meta.get("entry_id", ""),
                          shard_of=shard_index(layout.shards))


def apply_replay(layout: "StreamGroup", plan: Plan, *, batch: int = DEFAULT_BATCH) -> Iterator[BatchResult]:
    """One ``sg_replay.lua`` call per ``batch`` entries; result ids are job
    ids; skip reasons ``replayed`` (by an earlier or concurrent run),
    ``is-replay``, ``gone``, ``error``.  Raises ``redis.ResponseError`` on
    a wrong-typed key (nothing written by that call)."""
    call = script(layout.client, "sg_replay")
    for shard, chunk in shard_chunks(plan.jobs, batch):
        keys = layout.shards[shard]
        reply = call(keys=[keys.stream, keys.replay_record, keys.replayed],
                     args=[len(chunk), *[j.sha1 for j in chunk]])
        by_entry = {j.sha1: j.job_id for j in chunk}
        got = batch_result(reply)
        out = BatchResult(moved=[by_entry[e] for e in got.moved], skipped=[by_entry[e] for e in got.skipped])
        out.reasons = {by_entry[e]: r for e, r in got.reasons.items()}
        yield out
