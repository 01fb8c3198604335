"""Fences from exports and redrive plans: ``{job id: payload SHA1}``.

An :class:`~jobctl.ops.spec.OpSpec` with a ``fence`` plans only the jobs
whose id is in the fence *and* whose payload still hashes to the recorded
SHA1 (:func:`jobctl.ops.plan.payload_sha1`); the operation is then applied
with the plan's usual per-job fence.  Two sources:

* ``jobctl purge --export-to DIR``: the ids an export wrote
  (:func:`export_fence`, which first writes or finishes the export);
* ``jobctl redrive --plan redrive-plan.jsonl``: the ids ``jobctl analyze``
  judged safe to redrive (:func:`read_redrive_plan`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..errors import DataError, NotFound, UsageError
from ..escape import unshown
from ..model import State
from .manifest import find_manifest, load_manifest
from .reader import iter_rows

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["manifest_fence", "export_fence", "read_redrive_plan"]


def manifest_fence(directory: str | Path, queue: str, state: State) -> dict[str, str]:
    """``{id: payload_sha1}`` of the rows in ``state`` of the complete,
    verified export in ``directory``.

    Raises :class:`NotFound` (no manifest), :class:`DataError` (incomplete,
    checksum mismatch, unreadable part) or :class:`UsageError` (the export is
    of another queue, or does not cover ``state``).
    """
    m = load_manifest(directory)
    if m.queue != queue:
        raise UsageError(f"{directory}: the export is of queue {m.queue!r}, not {queue!r}")
    if state.value not in m.selector.get("states", []):
        raise UsageError(f"{directory}: the export covers {', '.join(m.selector.get('states', []))}, "
                         f"not {state.value}")
    fence: dict[str, str] = {}
    for job_id, st, sha in iter_rows(directory, m, ("job_id", "state", "payload_sha1")):
        if st == state.value:
            fence[unshown(job_id)] = sha  # ids with undecodable bytes are exported escaped
    return fence


def export_fence(session: "Session", queue: str, state: State, filter_text: str | None,
                 directory: str | Path, *, fmt: str = "parquet", dry_run: bool = False,
                 note: Callable[[str], None] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, str] | None:
    """The fence of "export, then purge".

    When ``directory`` holds a complete export of ``queue`` covering
    ``state``, its rows are the fence (whatever its filter: the purge's own
    filter still applies).  Otherwise the jobs of ``state`` matching
    ``filter_text`` are exported there first (an interrupted export with the
    same selector is finished), then fenced.  With ``dry_run`` nothing is
    written: ``None`` is returned when no complete export exists yet (the
    plan then shows what would be exported and purged).

    Raises what :func:`manifest_fence` and
    :func:`jobctl.export.exporter.run_export` raise.
    """
    from ..filter import MATCH_ALL, compile_filter

    say = note or (lambda _text: None)
    existing = find_manifest(directory) if Path(directory).is_dir() else None
    if existing is not None and existing.complete and existing.queue == queue \
            and state.value in existing.selector.get("states", []):
        say(f"purging only the jobs of the export in {directory} ({existing.rows:,} row(s), "
            f"snapshot {existing.to_json()['snapshot_at']})")
        return manifest_fence(directory, queue, state)
    if dry_run:
        say(f"dry run: the matching jobs would first be exported to {directory}")
        return None
    from .exporter import run_export

    flt = MATCH_ALL if filter_text is None else compile_filter(filter_text)
    with session.errors():
        layout = session.layout(queue)
        res = run_export(layout, directory, states=[state], flt=flt, fmt=fmt, server=session.target.display,
                         note=say, progress=progress)
    malformed = res.manifest.malformed
    say(f"exported {res.manifest.rows:,} {state.value} job(s) to {directory} ({len(res.manifest.parts)} part(s)"
        + (f", {malformed:,} malformed, exported for review" if malformed else "")
        + ("); purging those of them that still match the filter (the plan counts them)"
           if filter_text is not None else "); purging exactly those"))
    return manifest_fence(directory, queue, state)


def read_redrive_plan(path: str | Path, queue: str) -> dict[str, str]:
    """``{id: payload_sha1}`` of the lines of a ``redrive-plan.jsonl`` for ``queue``.

    Each line is a JSON object with at least ``queue``, ``id`` and
    ``payload_sha1`` (``jobctl analyze`` also writes ``rule``, ``class``,
    ``job_type``, ``error_code``, ``tenant``...).  An id listed more than
    once is one entry of the result (the plan is a set).  Raises
    :class:`NotFound` for a missing file, :class:`DataError` for a line that
    does not parse or an id listed twice with different payload SHA1s,
    and :class:`UsageError` when the plan holds lines but none for ``queue``.
    """
    p = Path(path)
    if not p.is_file():
        raise NotFound(f"redrive plan {path}: no such file")
    fence: dict[str, str] = {}
    other: set[str] = set()
    with open(p, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = orjson.loads(line)
                job_id, sha, q = doc["id"], doc["payload_sha1"], doc["queue"]
                if not (isinstance(job_id, str) and isinstance(sha, str) and isinstance(q, str)):
                    raise TypeError("id, payload_sha1 and queue must be strings")
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataError(f"redrive plan {path}, line {n}: {exc.__class__.__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
            if q == queue:
                job_id = unshown(job_id)
                if fence.setdefault(job_id, sha) != sha:  # a repeated id is one job; two payloads are not
                    raise DataError(f"redrive plan {path}, line {n}: job {job_id} is listed twice with "
                                    "different payload_sha1")
            else:
                other.add(q)
    if not fence and other:
        raise UsageError(f"redrive plan {path} is for queue(s) {', '.join(sorted(other))}, not {queue}")
    return fence
