"""Calling the per-job move scripts: error replies as jobctl errors, and the
bounded requeue loop.

Every move script (``jobctl/lua/*_move.lua``, ``*_requeue.lua``) checks its
ARGV and the Redis TYPE of every key before its first write and answers

* ``WRONGTYPE key K holds a T, expected a U`` (``jobctl/lua/prelude``): a
  source or target key of the wrong type; the call wrote nothing.  :func:`call_move` raises
  :class:`~jobctl.errors.DataError` (exit 6): the operation stops there,
  every job still in exactly one state;
* ``BADARG ...``: jobctl built a bad call (a bug); the call wrote nothing;
  :class:`~jobctl.errors.JobctlError` (exit 1);
* otherwise ``{id, code, ...}``, one code per job: ``moved``; a skip reason
  (``gone``, ``changed``, ``locked``, ``exists``, ``unreached``); or a
  per-job failure (``wrongtype``: the job's own payload key holds another
  type; ``error``: a write failed and was undone), counted as failed.

The requeue scripts search the processing list from its tail with a budget
of :data:`REQUEUE_BUDGET` elements per call and return ``deferred`` for the
jobs they could not afford; :func:`requeue_calls` passes those again first
in the next call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ..errors import DataError, JobctlError
from ..model import State
from ..ops.result import BatchResult
from ..ops.spec import Operation, OpSpec
from ..scripts import script
from .common import text

__all__ = ["call_move", "count_code", "move_error", "move_result", "requeue_calls", "shard_chunks", "window_mode", "REQUEUE_BUDGET",
           "FAILED_CODES"]

#: Elements of a processing list one requeue call may search (LPOS MAXLEN
#: from the tail, then LREM -1 over the same elements: at most twice this
#: many comparisons, ~1 ms).  A processing list holds one element per
#: in-flight job, so worker concurrency keeps it far below this.
REQUEUE_BUDGET = 50_000

#: Per-job codes that count as failed (not skipped).
FAILED_CODES = frozenset({"wrongtype", "error"})

J = TypeVar("J")


def call_move(client, name: str, keys: list, args: list) -> list[Any]:
    """Run the move script ``name`` (``jobctl/lua/<name>.lua``); its reply.

    Raises :class:`DataError` for a ``WRONGTYPE`` error reply (a key of the
    wrong Redis type; nothing was written) and :class:`JobctlError` for a
    ``BADARG`` one; other redis-py errors propagate.
    """
    import redis

    try:
        return script(client, name)(keys=keys, args=args)
    except redis.exceptions.ResponseError as exc:
        err = move_error(name, exc)
        if err is exc:
            raise
        raise err from None


def move_error(name: str, exc: Exception) -> Exception:
    """The jobctl error of a move script's error reply ``exc``: ``WRONGTYPE key``
    (nothing written by that call) -> :class:`DataError`, ``BADARG`` ->
    :class:`JobctlError`, anything else ``exc`` itself."""
    msg = str(exc).splitlines()[0] if str(exc) else ""
    if msg.startswith("WRONGTYPE key "):
        return DataError(f"{msg[len('WRONGTYPE '):]}: stopped, this call moved nothing "
                         "(fix the key's type, then run the same command again)")
    if msg.startswith("BADARG"):
        return JobctlError(f"internal error: {name}.lua refused its arguments ({msg}); nothing moved")
    return exc


def count_code(out: BatchResult, job_id: str, code: str) -> None:
    """Count ``job_id`` in ``out`` by its script code: ``"moved"``, a
    :data:`FAILED_CODES` code as failed, any other as a skip reason."""
    if code == "moved":
        out.moved.append(job_id)
        return
    (out.failed if code in FAILED_CODES else out.skipped).append(job_id)
    out.reasons[job_id] = code


def move_result(reply: Sequence[Any]) -> BatchResult:
    """A ``{id1, code1, ...}`` reply as a :class:`BatchResult` (:func:`count_code`)."""
    out = BatchResult()
    for i in range(0, len(reply), 2):
        count_code(out, text(reply[i]), text(reply[i + 1]))
    return out


def requeue_calls(jobs: Sequence[J], batch: int, key_of: Callable[[J], str],
                  call: Callable[[list[J]], list[Any]]) -> Iterator[BatchResult]:
    """One :class:`BatchResult` per requeue script call over ``jobs``, at
    most ``batch`` per call.  ``call(chunk)`` runs the script on ``chunk``
    and returns its reply; ``key_of(job)`` is the id the reply names it by.
    Jobs answered ``deferred`` (the call's search budget ran out) lead the
    next call, which always handles its first job, so the loop ends."""
    queue = list(jobs)
    while queue:
        chunk, queue = queue[:batch], queue[batch:]
        reply = call(chunk)
        deferred_ids = {text(reply[i]) for i in range(0, len(reply), 2) if text(reply[i + 1]) == "deferred"}
        if key_of(chunk[0]) in deferred_ids:  # the scripts never defer a call's first job
            raise JobctlError("internal error: a requeue call deferred its first job; nothing more moved")
        if deferred_ids:
            queue = [j for j in chunk if key_of(j) in deferred_ids] + queue
            reply = [x for i in range(0, len(reply), 2) if text(reply[i + 1]) != "deferred"
                     for x in (reply[i], reply[i + 1])]
        yield move_result(reply)


def shard_chunks(jobs: Iterable[J], batch: int) -> Iterator[tuple[int, list[J]]]:
    """``(shard, chunk)`` per script call over planned ``jobs``: grouped by
    their ``shard`` (shards in the order they first appear, jobs in plan
    order), at most ``batch`` jobs per chunk."""
    by_shard: dict[int, list[J]] = {}
    for job in jobs:
        by_shard.setdefault(job.shard, []).append(job)  # type: ignore[attr-defined]
    for shard, group in by_shard.items():
        for i in range(0, len(group), batch):
            yield shard, group[i:i + batch]


def window_mode(spec: OpSpec) -> str:
    """The window scripts' mode of a dead-list operation the window
    engine drives: ``purge``, ``suppressed``, ``scheduled`` (a redrive
    ``--to scheduled``) or ``ready``."""
    if spec.operation is Operation.PURGE:
        return "purge"
    if spec.target is State.SUPPRESSED:
        return "suppressed"
    if spec.target is State.SCHEDULED:
        return "scheduled"
    return "ready"
