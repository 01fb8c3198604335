"""The windowed apply of ``jobctl pause`` / ``resume`` (and of ``migrate``'s
take-out) on the reliable-list layout: ``rl_pause_move.lua`` calls on a
bounded window around where the planned jobs are now, searched below (and,
for a resume, above) when the jobs moved; scheduled jobs fenced by their due
time.  The plan and the overview: :mod:`jobctl.layouts.reliable_list.pause`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from jobctl.keys import ReliableListKeys
from jobctl.ops.plan import PlannedJob
from jobctl.ops.result import BatchResult
from jobctl.ops.spec import OpSpec
from jobctl.scripts import script
from jobctl.layouts.common import text

if TYPE_CHECKING:
    from jobctl.layouts.reliable_list.layout import ReliableList

__all__ = ["SLACK", "MAX_SPAN", "pause_record", "apply_window", "apply_scheduled", "take_out_ready",
           "take_out_scheduled"]

#: Positions a window reaches past the planned ones (jobs pushed at the other end, estimate errors).
SLACK = 64
#: The widest span of planned positions one call covers.
MAX_SPAN = 2048

_TOMBSTONE = "\x00jobctl:paused:tombstone:"
#: The widest window rl_pause_move.lua reads (its MAX_WINDOW).
_MAX_WINDOW = 4096


def pause_record(spec: OpSpec, now: int, source_key: str, score: int | None) -> bytes:
    """JSON kept with a paused job: who, when, why, and where it came from."""
    return orjson.dumps({"by": spec.operator, "at_ms": now, "reason": spec.reason, "operation": spec.op_id,
                         "from": source_key, "score": score, "hold": spec.hold_id})


def _call(layout: "ReliableList", keys: ReliableListKeys, spec: OpSpec, mode: str, src: str, lo: int, hi: int,
          jobs: list[tuple[PlannedJob, str, bytes]], into: tuple[str, str] | None = None) -> list:
    readies = [r.key for r in layout.ready_lists(keys)] if mode.startswith("resume") else []
    args: list[Any] = [mode, lo, hi, _TOMBSTONE + spec.op_id, spec.hold_id or "", len(readies), len(jobs)]
    for job, score, rec in jobs:
        args += [job.job_id, "" if mode.startswith("resume") else job.sha1, score, rec]
    payloads = [] if mode.startswith("resume") else [keys.job(j.job_id) for j, _, _ in jobs]
    return script(layout.client, "rl_pause_move")(
        keys=[src, *(into or (keys.paused, keys.paused_info)), keys.holds, keys.scheduled, *readies, *payloads],
        args=args)


def _codes(reply: list, result: BatchResult, unseen: list[str]) -> None:
    for i in range(0, len(reply), 2):
        job_id, code = text(reply[i]), text(reply[i + 1])
        if code == "moved":
            result.moved.append(job_id)
        elif code == "unseen":
            unseen.append(job_id)
        else:
            result.skipped.append(job_id)
            result.reasons[job_id] = code


def apply_scheduled(layout, keys, spec, jobs, batch, now_fn, *, into: tuple[str, str] | None = None,
                    record=pause_record) -> Iterator[BatchResult]:
    """Scheduled ``jobs`` moved ``batch`` a call while their due time is the
    planned one (else skipped, ``moved``); one result a call."""
    for i in range(0, len(jobs), batch):
        chunk = jobs[i:i + batch]
        now = now_fn()
        items = [(j, str(j.score), record(spec, now, keys.scheduled, j.score)) for j in chunk]
        reply = _call(layout, keys, spec, "pause_zset", keys.scheduled, 0, 0, items, into)
        result, unseen = BatchResult(), []
        _codes(reply[2:], result, unseen)
        for job_id in unseen:  # promoted by the scheduler (or moved) since the plan
            result.skipped.append(job_id)
            result.reasons[job_id] = "moved"
        yield result


def apply_window(layout, keys, spec, mode: str, src: str, jobs: list[PlannedJob], batch: int,
                 now_fn, *, into: tuple[str, str] | None = None, record=pause_record,
                 newest: bool | None = None) -> Iterator[BatchResult]:
    """Chunks of jobs in position order, each applied by calls on a window
    around where the jobs are now.

    Workers pop the served end, so a ready job's position from the tail only
    decreases; the shift (planned - found position) one call sees places
    the next window.  Jobs a window did not hold are looked for in the
    windows below it, down to the served end (resume: then above it, up to
    the list's end, for jobs paused meanwhile at the head); a job found
    nowhere was claimed by a worker or moved by someone else (``moved``).
    """
    # a pause takes the newest first and appends each job at the paused list's
    # served end: a job a later call finds (it moved below its window) is
    # older than every job moved before it, so the order holds; a hold cycle
    # (new arrivals) takes the oldest first and pushes them at the head
    newest_first = mode == "pause" and not spec.hold_id if newest is None else newest
    if newest_first:
        mode = "pause_tail"
    jobs = sorted(jobs, key=lambda j: j.position or 0, reverse=newest_first)
    search = _WindowSearch(layout, keys, spec, mode, src, into)
    for chunk in _chunks(jobs, batch):
        now = now_fn()
        rec = record(spec, now, src, None) if mode != "resume" else b""
        yield search.apply(chunk, rec)


def _chunks(jobs: list[PlannedJob], batch: int) -> Iterator[list[PlannedJob]]:
    """``jobs`` (in position order) cut into runs of at most ``batch`` jobs
    within :data:`MAX_SPAN` positions of the run's first."""
    i = 0
    while i < len(jobs):
        first = jobs[i].position or 0
        k = i
        while k < len(jobs) and k - i < batch and abs((jobs[k].position or 0) - first) <= MAX_SPAN:
            k += 1
        yield jobs[i:k]
        i = k


class _WindowSearch:
    """The calls that apply one chunk after another of a list's planned
    jobs; ``shift`` (planned - found position) carries from one to the next."""

    def __init__(self, layout, keys, spec, mode: str, src: str, into: tuple[str, str] | None) -> None:
        self.layout, self.keys, self.spec, self.mode, self.src, self.into = layout, keys, spec, mode, src, into
        self.shift = 0
        self.going_up = False  # a resume searching above the first window (per chunk)
        self.length: int | None = None  # the source list's length, read once a chunk when needed

    def apply(self, chunk: list[PlannedJob], rec: bytes) -> BatchResult:
        """Move ``chunk``'s jobs, searching windows until each is found or
        the search ends; one result for the chunk."""
        mode = self.mode
        pending = {j.job_id: j for j in chunk}
        result = BatchResult()
        probe: tuple[int, int] | None = None  # a search window; None: around the estimate
        self.going_up, self.length = False, None
        strict, strict_tries = True, 1
        while pending:
            pos = [pending[u].position or 0 for u in pending]
            lo, hi = self._window(pos, probe)
            if hi < lo:
                break
            # oldest first (resume, pause into the head): all or nothing while the
            # window may be off, so that no job moves before an older one; then what is left
            call_mode = {"resume": "resume_all", "pause": "pause_all"}.get(mode, mode) if strict else mode
            reply = _call(self.layout, self.keys, self.spec, call_mode, self.src, lo, hi,
                          [(pending[u], str(pending[u].position or 0), rec) for u in pending], self.into)
            found, seen_shift = int(reply[0]), int(reply[1])
            unseen: list[str] = []
            _codes(reply[2:], result, unseen)
            pending = {u: pending[u] for u in unseen}
            if found:
                self.shift = seen_shift
                if call_mode in ("resume_all", "pause_all") and unseen:
                    # re-centre on what was found (resume); a second miss means some left the list
                    strict = mode == "resume" and strict_tries > 0
                    strict_tries -= 1
                    probe = None
                    continue
            probe = self._next_probe(lo, hi, pos)
            if probe is None:
                break
        for job_id in pending:
            result.skipped.append(job_id)
            result.reasons[job_id] = "moved"  # claimed by a worker, or moved by someone else
        if mode in ("resume", "pause"):  # oldest first: the jobs that just left sat before the next ones
            self.shift += len(result.moved)
        return result

    def _window(self, pos: list[int], probe: tuple[int, int] | None) -> tuple[int, int]:
        """The positions ``(lo, hi)`` the next call reads: ``probe``, or
        around the pending jobs' estimated positions."""
        if probe is None:
            lo, hi = min(pos) - self.shift - SLACK, max(pos) - self.shift + SLACK
            if self.mode != "resume":
                # from the tail a job only moves down (workers pop the tail; an
                # oldest-first run also removes jobs below the next ones).  The plan
                # read its windows at different times, so the shift of one job
                # bounds another's only in an oldest-first run (the shift grows):
                # newest first, the top of the window assumes none.  Below the top,
                # the widest window the script reads.
                if self.mode == "pause_tail":
                    hi = max(pos) + SLACK
                lo = max(0, hi - _MAX_WINDOW + 1)
        else:
            lo, hi = probe
        return max(0, lo, hi - _MAX_WINDOW + 1), hi  # the script reads at most _MAX_WINDOW positions

    def _next_probe(self, lo: int, hi: int, pos: list[int]) -> tuple[int, int] | None:
        """The window to search after ``[lo, hi]`` missed jobs: below it
        towards the served end (pause) / the head (resume), then for a
        resume above it; ``None`` when the search is over."""
        span = max(hi - lo, 2 * SLACK)
        if not self.going_up and lo > 0:
            return (lo - span, lo + SLACK)
        if self.mode != "resume":
            return None
        # pushed away from the head by jobs paused meanwhile
        self.length = self.layout.client.llen(self.src) if self.length is None else self.length
        top = hi if self.going_up else max(hi, max(pos) - self.shift + SLACK)
        self.going_up = True
        if top + 1 >= self.length:
            return None
        return (top - SLACK, top + span)


def take_out_ready(layout, keys, spec, src: str, jobs: list[PlannedJob], batch: int, now_fn, *,
                   into: tuple[str, str], record) -> Iterator[BatchResult]:
    """Move planned ready jobs of the list ``src`` into the jobctl-owned list
    and info hash ``into`` (oldest first, pushed at its head),
    windowed and fenced as a pause is; ``record(spec, now, src, score)``
    gives each job's info JSON.  Used by ``jobctl migrate``."""
    return apply_window(layout, keys, spec, "pause", src, jobs, batch, now_fn, into=into, record=record,
                        newest=False)


def take_out_scheduled(layout, keys, spec, jobs: list[PlannedJob], batch: int, now_fn, *,
                       into: tuple[str, str], record) -> Iterator[BatchResult]:
    """:func:`take_out_ready` for scheduled jobs, fenced by their due time."""
    return apply_scheduled(layout, keys, spec, jobs, batch, now_fn, into=into, record=record)
