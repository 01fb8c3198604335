"""Window calls whose replies a dropped connection lost.

The walk keeps round trips in flight: when the connection drops, calls the
server already ran may never have answered.  Their jobs are re-read where
the operation leaves its trace, in jobctl's own keys where it has them, so
the count reported and journaled is what happened (:func:`recount`):

* a redrive: the day's redrive record (``[op id, at, count]`` a job;
  hash-job: the job hash's ``redrive_operation``);
* a suppress: the suppressed-info record's ``operation``;
* a purge: the payload key is gone and the id is in neither the dead
  list's tail nor the hold (json-list keeps no trace: its jobs stay
  uncounted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from .walk import ListSource

__all__ = ["Unconfirmed", "mark", "recount"]

#: Ids re-read per pipelined round trip.
CHUNK = 1000
#: Elements searched from the dead list's tail (and the hold) for a purged
#: id: the lost calls' jobs that stayed dead lie there, back from the hold.
SEARCH = 100_000


@dataclass
class Unconfirmed:
    """The jobs of the calls in flight on ``source`` when the connection dropped."""

    source: "ListSource"
    ids: list[str]


def mark(exc: BaseException, source: "ListSource", ids: list[str]) -> None:
    """Attach the in-flight calls' jobs to ``exc`` (``exc.unconfirmed``),
    each once (consecutive calls of a per-job walk may carry the same job)."""
    exc.unconfirmed = Unconfirmed(source, list(dict.fromkeys(ids)))  # type: ignore[attr-defined]


def _op_of_record(raw: Any) -> str | None:
    try:
        doc = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return None
    if isinstance(doc, list) and doc:
        return doc[0]
    return doc.get("operation") if isinstance(doc, dict) else None


def _moved(client: Any, src: "ListSource", op_id: str, ids: list[str]) -> list[str]:
    pipe = client.pipeline(transaction=False)
    if src.mode == "purge":
        if src.kind == "jl":
            return []
        for i in ids:
            pipe.exists(src.payload_key(i))
        gone = [i for i, n in zip(ids, pipe.execute()) if not n]
        for i in gone:  # a dangling id stays dead (the script skips it): no payload is no proof of a purge
            pipe.lpos(src.dead, i, rank=-1, maxlen=SEARCH)
            pipe.lpos(src.hold, i, maxlen=SEARCH)
        found = pipe.execute() if gone else []
        return [i for n, i in enumerate(gone) if found[2 * n] is None and found[2 * n + 1] is None]
    if src.mode == "suppressed" or src.kind != "hj":
        key = src.info_hash if src.mode == "suppressed" else src.redriven
        return [i for i, raw in zip(ids, client.hmget(key, ids)) if raw is not None and _op_of_record(raw) == op_id]
    for i in ids:
        pipe.hget(src.payload_key(i), "redrive_operation")
    return [i for i, op in zip(ids, pipe.execute()) if op is not None and op.decode() == op_id]


def recount(client: Any, lost: Unconfirmed, op_id: str) -> list[str]:
    """The ids of ``lost`` that operation ``op_id`` moved, read with
    ``client`` (a working connection).  Raises what redis-py raises when the
    server is still out of reach."""
    out: list[str] = []
    for n in range(0, len(lost.ids), CHUNK):
        out += _moved(client, lost.source, op_id, lost.ids[n:n + CHUNK])
    return out
