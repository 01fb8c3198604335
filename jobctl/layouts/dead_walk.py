"""What the dead-list applies of reliable-list and json-list share.

Both walk the dead list from one end with a window script (planned jobs
leave, every other element is rotated to the other end), then a restore
script moves the rotated elements back (:mod:`.reliable_list_ops`,
:mod:`.json_list_ops`).  This module holds the bookkeeping around those
calls: the slack a planned job is looked for in, dropping the jobs the walk
went past, and running the restore however the walk ends.  Reads and
writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from ..ops.plan import PlannedJob
from ..ops.result import BatchResult

__all__ = ["DEAD_SLACK", "RESTORE_HOLD", "position", "drop_passed", "skip_all", "walk_then_restore"]

#: How far (in dead-list positions) the walk looks for a planned job on
#: either side of the position the plan saw it at; beyond, it was moved by
#: someone else and counts as skipped.
DEAD_SLACK = 64
#: Most new dead jobs one restore call sets aside to reach the rotated ones
#: behind them.
RESTORE_HOLD = 1024


def position(job: PlannedJob) -> int:
    """The dead-list position the plan saw ``job`` at (0 when none)."""
    return job.position or 0


def skip_all(result: BatchResult, jobs: Iterable[PlannedJob], reason: str) -> None:
    """Count every one of ``jobs`` in ``result`` as skipped for ``reason``."""
    for j in jobs:
        result.skipped.append(j.job_id)
        result.reasons[j.job_id] = reason


def drop_passed(pending: list[PlannedJob], cursor: int, result: BatchResult) -> list[PlannedJob]:
    """The ``pending`` jobs a walk that has popped ``cursor`` positions may
    still meet; each one more than :data:`DEAD_SLACK` positions behind it
    is counted in ``result`` as skipped (``moved``: someone else moved it)."""
    still = []
    for j in pending:
        if cursor - position(j) > DEAD_SLACK:
            skip_all(result, [j], "moved")
        else:
            still.append(j)
    return still


def walk_then_restore(walk: Iterator[BatchResult], restore: Callable[[], object]) -> Iterator[BatchResult]:
    """Yield the results of ``walk``, then call ``restore``.

    The restore also runs when the caller stops early (the generator is
    closed) or a call fails, as far as the server lets it (a failing restore
    is then not reported: the original error is); not after a second Ctrl-C
    (``KeyboardInterrupt``): the jobs then stay dead, only their order in
    the list has changed.
    """
    try:
        yield from walk
    except KeyboardInterrupt:
        raise
    except BaseException:  # GeneratorExit (stopped between calls) or a failed call
        try:
            restore()
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        raise
    restore()
