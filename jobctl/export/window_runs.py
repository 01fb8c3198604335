"""A window cut into runs the export's column paths take and the jobs they
do not (poison: a value that is not a JSON object, a dangling id, an id
that is not UTF-8), so one bad job goes record by record alone and its
window's good jobs keep the fast path.  Every value is parsed once."""

from __future__ import annotations

from itertools import groupby

import orjson

from ..layouts.raw import RawWindow

__all__ = ["parse_each", "window_runs"]


def parse_each(raws: list) -> list[dict | None]:
    """Each value of ``raws`` parsed once with orjson: the object, or ``None``
    for a value that is not bytes holding a JSON object.  Clean runs are
    parsed at C speed (one ``map``); the parse goes on past a bad value."""
    docs: list = []
    values = iter(raws)
    while True:
        try:
            docs.extend(map(orjson.loads, values))  # appends each parsed value until one fails
            break
        except (orjson.JSONDecodeError, TypeError):
            docs.append(None)
    return [d if type(d) is dict and type(r) is bytes else None for d, r in zip(docs, raws)]


def _id_ok(job_id: str) -> bool:
    try:
        job_id.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, escaped: the record path writes them
        return False
    return True


def window_runs(w: RawWindow) -> list[tuple[RawWindow, list[dict] | None]]:
    """``w`` as ``[(part, envelopes)]`` in order: ``envelopes`` the parsed
    objects of a part the column paths may take, ``None`` for a part of
    poison jobs (build its rows from ``part.records()``).  A clean window
    is one part, ``w`` itself."""
    docs = parse_each(w.raws)
    ok = [d is not None for d in docs]
    try:
        "".join(w.ids).encode("utf-8")
    except UnicodeEncodeError:
        ok = [good and _id_ok(i) for good, i in zip(ok, w.ids)]
    if all(ok):
        return [(w, docs)] if docs else []
    runs, start = [], 0
    for good, group in groupby(ok):
        end = start + len(list(group))
        runs.append((w.part(start, end), docs[start:end] if good else None))
        start = end
    return runs
