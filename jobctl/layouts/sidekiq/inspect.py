"""Finding one Sidekiq job by its ``jid`` (:func:`find_job`) and reading the
in-flight jobs of the live processes (:func:`work_records`).

A jid lives inside the job JSON, so the sets are searched with ``ZSCAN
MATCH *"jid":"<jid>"*`` and the queue lists and work hashes are read in
windows of 1,000: linear in the instance's size, in bounded commands.
"""

from __future__ import annotations

import re

from jobctl.layouts.common import text
from jobctl.layouts.sidekiq.job import job_doc, job_record, time_ms
from jobctl.layouts.walks import WINDOW, walk_list
from jobctl.model import JobRecord, State

__all__ = ["find_job", "work_records"]

_GLOB = re.compile(rb"([*?\[\]\\])")


def _pattern(job_id: str) -> bytes:
    return b'*"jid":"' + _GLOB.sub(rb"\\\1", job_id.encode("utf-8", "surrogateescape")) + b'"*'


def _in_sets(layout, job_id: str) -> JobRecord | None:
    k = layout.keys
    for state, key in ((State.DEAD, k.dead), (State.SCHEDULED, k.retry), (State.SCHEDULED, k.schedule)):
        for member, score in layout.client.zscan_iter(key, match=_pattern(job_id), count=WINDOW):
            rec = job_record(layout, member, state, score=score, key=key)
            if rec.job_id == job_id:
                rec.meta["rank"] = layout.client.zrank(key, member)
                return rec
    return None


def _in_queues(layout, job_id: str) -> JobRecord | None:
    needle = f'"jid":"{job_id}"'.encode("utf-8", "surrogateescape")
    for q in layout.queue_names():
        key = layout.keys.queue(q)
        for start, chunk in walk_list(layout.client, key, from_right=True, batch=WINDOW):
            for n, raw in enumerate(chunk):
                if needle in raw:
                    rec = job_record(layout, raw, State.READY, position=start + n, key=key)
                    if rec.job_id == job_id:
                        return rec
    return None


def find_job(layout, job_id: str) -> JobRecord | None:
    """The record of the job ``job_id`` (sets first, then queues, then
    in-flight work); ``None`` when no key holds it."""
    rec = _in_sets(layout, job_id) or _in_queues(layout, job_id)
    if rec is None:
        rec = next((r for r in work_records(layout, 10 ** 6) if r.job_id == job_id), None)
    if rec is not None and rec.state is State.DEAD:
        rec.meta["ages"] = "the dead set's score is when the job died (failed_at)"
    return rec


def work_records(layout, limit: int) -> list[JobRecord]:
    """Up to ``limit`` in-flight jobs: each live process's (``processes``
    set) ``<identity>:work`` (or, Sidekiq 6, ``:workers``) hash, written by
    its heartbeat every few seconds, whose values are ``{"queue", "payload",
    "run_at"}`` (payload: the job JSON, as a string or an object); the
    deadline is unknown (Sidekiq keeps none), ``meta.run_at_ms`` and
    ``meta.process`` say when and where it runs."""
    out: list[JobRecord] = []
    for ident in sorted(text(p) for p in layout.client.smembers(layout.keys.processes)):
        for key in layout.keys.work(ident):
            for tid, value in sorted(layout.client.hgetall(key).items()):
                work = job_doc(value) or {}
                payload = work.get("payload")
                raw = payload.encode() if isinstance(payload, str) else value if payload is None else _dump(payload)
                rec = job_record(layout, raw, State.PROCESSING, key=key)
                rec.meta.update(process=ident, thread=text(tid), run_at_ms=time_ms(work.get("run_at")))
                out.append(rec)
                if len(out) >= limit:
                    return out
    return out


def _dump(payload) -> bytes:
    import json

    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
