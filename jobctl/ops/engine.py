"""Run a planned operation: batches, rate limit, progress, stop, journal.

The engine is the same for every layout: a source the layout hands over
as window sources (:meth:`~jobctl.layouts.base.Layout.sources`) is driven
by the window engine (:mod:`.window`: pipelined window calls, a hold list, a
lease); any other source by the layout's own
:meth:`~jobctl.layouts.base.Layout.apply`.  Both yield one
:class:`~jobctl.ops.result.BatchResult` per script call and the engine
paces, counts and journals them.  Stopping (Ctrl-C, a TUI cancel) happens
between round trips (never inside one: results with ``more`` set belong to
calls that already ran), so every job is in exactly one state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from ..connection import Target, translate
from ..errors import Busy, ConnectionFailed, JobctlError
from ..layouts.base import Layout, now_ms
from .interrupt import applying, requested
from .journal import command_line, require_journal, write_entry
from .plan import Plan
from .result import EXPECTED_SKIPS, LATE_RESULTS, BatchResult, skip_words
from .walk import drive

__all__ = ["RunResult", "run_plan"]


#: What a result calls the jobs an operation acted on, when not "moved".
DONE_WORDS = {"purge": "deleted", "drain": "removed", "transform": "rewritten"}


@dataclass
class RunResult:
    """What an applied (or dry-run) operation did; the ``--json`` result."""

    operation: str
    queue: str
    operation_id: str
    planned: int
    moved: int = 0
    skipped: int = 0
    failed: int = 0
    dry_run: bool = False
    interrupted: bool = False
    error: str | None = None
    started_ms: int = 0
    ended_ms: int = 0
    skipped_reasons: Counter = field(default_factory=Counter)
    skipped_sample: list[str] = field(default_factory=list)
    journal_problems: list[str] = field(default_factory=list)
    #: the moved ids, streamed to the local journal's ids file (journaled runs)
    moved_ids: Any = field(default=None, repr=False, compare=False)

    @property
    def raced(self) -> int:
        """Skipped jobs of the expected race (:data:`~jobctl.ops.result.EXPECTED_SKIPS`):
        not failures."""
        return sum(n for k, n in self.skipped_reasons.items() if k in EXPECTED_SKIPS)

    @property
    def troubled(self) -> int:
        """Jobs that truly failed or were skipped for another reason (exit 8 when any)."""
        return self.failed + self.skipped - self.raced

    def summary(self) -> str:
        """One line: ``redrive email: planned 10, moved 9, skipped 1 (changed since the plan: 1), failed 0``;
        a purge says ``deleted``, a drain ``removed``, a transform ``rewritten`` (:data:`DONE_WORDS`)."""
        reasons = skip_words(self.skipped_reasons)
        done = DONE_WORDS.get(self.operation, "moved")
        return (f"{self.operation} {self.queue}: planned {self.planned:,}, {done} {self.moved:,}, "
                f"skipped {self.skipped:,}{f' ({reasons})' if reasons else ''}, failed {self.failed:,}")

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation, "queue": self.queue, "operation_id": self.operation_id,
            "planned": self.planned, "moved": self.moved, "skipped": self.skipped, "failed": self.failed,
            "dry_run": self.dry_run, "interrupted": self.interrupted, "error": self.error,
            "started_ms": self.started_ms, "ended_ms": self.ended_ms,
            "skipped_reasons": dict(self.skipped_reasons), "skipped_sample": self.skipped_sample[:20],
            "raced": self.raced,
        }


def run_plan(layout: Layout, plan: Plan, *, dry_run: bool = False, rate: float | None = None,
             batch: int | None = None, stop: Callable[[], bool] | None = None,
             progress: Callable[[int, int], None] | None = None, target: Target | None = None,
             argv: list[str] | None = None, journal: bool = True) -> RunResult:
    """Apply ``plan`` on ``layout`` (or only report it when ``dry_run``).

    ``rate`` caps jobs moved per second; ``stop()`` is polled between script
    calls, and so is a Ctrl-C deferred by the caller's ``SIGINT`` handler
    (:mod:`jobctl.ops.interrupt`); ``progress(done, total)`` is called after
    each.  The script calls
    run on one dedicated connection: a lost connection ends the run with
    ``error`` set (the state stays consistent; a rerun finishes).  The journal entry is written unless ``dry_run``.
    Raises :class:`JobctlError` only for a connection error, after journaling.
    """
    spec = plan.spec
    res = _new_result(plan, dry_run)
    if dry_run or plan.planned == 0:
        res.ended_ms = now_ms()
        if not dry_run and journal:
            _journal(layout, plan, res, target, argv)
        return res
    if journal:  # an ACL that refuses the journal stops the run here, before any job moves
        require_journal(layout.client, layout.journal_key, target)
    if rate:
        batch = max(1, min(batch or 256, int(rate)))
    run = _Run(res, plan, rate=rate, stop=stop, progress=progress)
    if journal:
        from .journal import MovedIds

        res.moved_ids = MovedIds(spec.op_id)
    layout, pinned = _pinned(layout)
    batches = _batches(layout, plan, batch=batch, rate=rate, halted=run.halted)
    # a second Ctrl-C now stops at the next result, like the first, instead of
    # raising inside a read and losing the replies in flight (jobctl.ops.interrupt)
    with applying():
        raised = run.consume(batches, layout.client, target)
        if raised is None and not res.interrupted:
            raised = _confirm_primary(layout.client, res, spec, plan, target)
        res.ended_ms = now_ms()
        if journal:
            _journal(layout, plan, res, target, argv, server_ok=raised is None)
    if pinned is not None:
        pinned.close()
    if raised is not None:
        raise raised
    return res


def _new_result(plan: Plan, dry_run: bool) -> RunResult:
    """A fresh :class:`RunResult` for ``plan`` that already counts the ids
    fenced out at plan time as skipped."""
    spec = plan.spec
    res = RunResult(operation=spec.operation.value, queue=spec.queue, operation_id=spec.op_id,
                    planned=plan.planned, dry_run=dry_run, started_ms=now_ms())
    for job_id, reason in plan.fence_skipped.items():
        res.skipped += 1
        res.skipped_reasons[reason] += 1
        if len(res.skipped_sample) < 20:
            res.skipped_sample.append(job_id)
    return res


def _batches(layout: Layout, plan: Plan, *, batch: int | None, rate: float | None,
             halted: Callable[[], bool]):
    """The iterator of :class:`BatchResult` that applies ``plan``: the window
    engine over the layout's window sources, else the layout's own apply."""
    sources = layout.sources(plan.spec)
    if sources:
        # with --rate one call a round trip and one round trip at a time; the
        # walk polls halted() before sending a round trip behind another
        return drive(sources, plan, batch=batch, depth=1 if rate else None, stop=halted,
                     ahead=1 if rate else None)
    return layout.apply(plan, batch=batch)


class _Run:
    """One applied run's loop: counts each result into ``res``, reports
    progress, paces to ``rate`` jobs/s and stops between round trips."""

    def __init__(self, res: RunResult, plan: Plan, *, rate: float | None,
                 stop: Callable[[], bool] | None, progress: Callable[[int, int], None] | None) -> None:
        self.res = res
        self.plan = plan
        self.rate = rate
        self.stop = stop
        self.progress = progress
        self.started = time.monotonic()
        self.halt = False  # set on Ctrl-C or an error: the walk sends nothing more
        self.last: BatchResult | None = None

    def stopping(self) -> bool:
        """The caller's stop, or a Ctrl-C deferred by its SIGINT handler."""
        return requested() or bool(self.stop and self.stop())

    def halted(self) -> bool:
        return self.halt or self.stopping()

    def consume(self, batches, client, target: Target | None) -> BaseException | None:
        """Read ``batches`` to the end or to a stop; the error to raise after
        journaling (``None`` when the run ended cleanly or was interrupted)."""
        late = LATE_RESULTS.set(lambda br: _count(self.res, br))  # walkers' results after a stop
        try:
            self._loop(batches)
            # a stop between calls: let the layout finish what it does on close
            # (the dead list puts the jobs that stay dead back in order)
            _close(batches)
        except KeyboardInterrupt:
            self.res.interrupted = True
            self.halt = True
            try:
                _count_in_flight(batches, self.last, self.res)  # the calls of the round trip in progress already ran
                _close(batches)  # the window engine puts its hold back (else the next operation does)
            except BaseException:  # noqa: BLE001 - a second Ctrl-C or a lost connection
                pass
        except Exception as exc:  # noqa: BLE001 - translated in _failed
            return self._failed(batches, exc, client, target)
        finally:
            LATE_RESULTS.reset(late)
        return None

    def _loop(self, batches) -> None:
        res = self.res
        for br in batches:
            self.last = br
            _count(res, br)
            if self.progress:
                self.progress(res.moved + res.skipped + res.failed, self.plan.planned)
            if br.more:
                continue  # the rest of this round trip already ran: count it first
            if self.stopping() or not self._pace():
                res.interrupted = True
                break
        else:  # walks that halted on the stop themselves (forked walkers) end their results
            if self.stopping() and res.moved + res.skipped + res.failed < self.plan.planned:
                res.interrupted = True

    def _pace(self) -> bool:
        """Sleep until the moved count is back under ``rate``; ``False`` when
        a stop came meanwhile."""
        if not self.rate:
            return True
        ahead = self.res.moved / self.rate - (time.monotonic() - self.started)
        while ahead > 0 and not self.stopping():
            time.sleep(min(ahead, 0.1))
            ahead -= 0.1
        return not self.stopping()

    def _failed(self, batches, exc: Exception, client, target: Target | None) -> BaseException:
        """Raised here (a progress callback...) with round trips in flight:
        count them, then the window engine reads its connection clean, puts
        its hold back and releases its lease (before the journal)."""
        res, spec = self.res, self.plan.spec
        self.halt = True
        try:
            _count_in_flight(batches, self.last, res)
        except Exception:  # noqa: BLE001 - the first error is the one reported
            pass
        try:
            _close(batches)
        except Exception:  # noqa: BLE001 - the first error is the one reported
            pass
        _recount_lost(client, exc, res, spec)
        err = translate(exc, target)
        if isinstance(err, ConnectionFailed):
            err = ConnectionFailed(f"{spec.operation.value} {spec.queue} stopped after {res.moved:,} of "
                                   f"{self.plan.planned:,} job(s): {str(err).rstrip('.')}; every job is in one state: "
                                   "run the same command again to finish")
        elif isinstance(err, Busy) and res.moved:  # a shard's lease taken by another operation midway
            err = Busy(f"{spec.operation.value} {spec.queue} stopped after {res.moved:,} of {self.plan.planned:,} "
                       f"job(s): {str(err).split('; nothing was changed')[0]}; every job is in one state: "
                       "run the same command again when it has finished")
        res.error = str(err) if isinstance(err, JobctlError) else f"{exc.__class__.__name__}: {exc}"
        return err if isinstance(err, JobctlError) else exc


def _recount_lost(client, exc: BaseException, res: RunResult, spec) -> None:
    """Count the jobs of calls whose replies a dropped connection lost and
    that did run (:mod:`jobctl.ops.lost_replies`), read on a new connection
    of ``client``'s pool; unreadable (the server still out of reach): they
    stay uncounted, and the rerun's plan finds them where they are."""
    import redis

    from .lost_replies import recount

    lost = getattr(exc, "unconfirmed", None)
    pool = getattr(client, "connection_pool", None)
    if lost is None or not lost.ids or pool is None:
        return
    fresh = redis.Redis(connection_pool=pool)
    try:
        moved = recount(fresh, lost, spec.op_id)
    except Exception:  # noqa: BLE001 - still unreachable: the rerun counts them
        return
    res.moved += len(moved)
    if res.moved_ids is not None:
        res.moved_ids.add(moved)


def _confirm_primary(client, res: RunResult, spec, plan: Plan, target: Target | None) -> JobctlError | None:
    """The error of a run whose writes went to a primary the Sentinels no
    longer name (:func:`jobctl.ops.primary.lost_primary`), set on ``res``;
    ``None`` when they reached the primary."""
    from .primary import lost_primary

    try:
        reason = lost_primary(client)
    except Exception as exc:  # noqa: BLE001 - unconfirmed is not done
        reason = f"the primary could not be confirmed ({translate(exc, target)})"
    if reason is None:
        return None
    err = ConnectionFailed(f"{spec.operation.value} {spec.queue}: {res.moved:,} of {plan.planned:,} job(s) "
                           f"answered as moved, but {reason}; every job is in one state on the primary: run the "
                           "same command again to finish")
    res.error = str(err)
    return err


def _count(res: RunResult, br: BatchResult) -> None:
    """Add one script call's outcome to ``res``."""
    res.moved += len(br.moved)
    if res.moved_ids is not None:
        res.moved_ids.add(br.moved)
    res.skipped += len(br.skipped)
    res.failed += len(br.failed)
    for job_id in br.skipped:
        res.skipped_reasons[br.reasons.get(job_id, "skipped")] += 1
        if len(res.skipped_sample) < 20:
            res.skipped_sample.append(job_id)


def _pinned(layout: Layout) -> tuple[Layout, Any]:
    """``layout`` on one dedicated connection of its client's pool, and that
    client (``None`` when ``layout`` already has one).

    A pooled client silently replaces a connection the server closed; an
    operation must not: a dropped connection (``CLIENT KILL``, a restart, a
    failover) ends the run with :class:`~jobctl.errors.ConnectionFailed`
    between two script calls, and the operator reruns the command.
    """
    import redis

    client = layout.client
    if not isinstance(client, redis.Redis) or client.connection is not None:
        return layout, None
    pinned = redis.Redis(connection_pool=client.connection_pool, single_connection_client=True)
    return type(layout)(pinned, layout.queue), pinned


def _count_in_flight(batches, last: BatchResult | None, res) -> None:
    """Count the results that follow ``last`` while each says ``more``: the
    rest of a round trip that already ran and the round trips in flight."""
    while last is not None and last.more:
        last = next(batches, None)
        if last is not None:
            _count(res, last)


def _close(batches) -> None:
    """Close ``batches`` when it is a generator (the window engine restores
    its hold and releases its lease then)."""
    if isinstance(batches, Generator):
        batches.close()


def _journal(layout: Layout, plan: Plan, res: RunResult, target: Target | None, argv: list[str] | None,
             server_ok: bool = True) -> None:
    spec = plan.spec
    entry = {
        "id": spec.op_id, "operation": spec.operation.value, "queue": spec.queue, "layout": layout.name,
        "operator": spec.operator, "command": command_line(argv, target),
        "server": target.display if target else None, "filter": spec.filter.text,
        "source": spec.source.value, "target": spec.target.value if spec.target else None,
        "ids": list(spec.ids)[:100], "reason": spec.reason, "reset_attempts": spec.reset_attempts,
        "delay_ms": spec.delay_ms, "limit": spec.limit,
        "planned": plan.planned, "scanned": plan.scanned,
        "breakdown": [[t, e, c] for (t, e), c in plan.breakdown.most_common(50)],
        "breakdown_sampled": plan.breakdown_sampled,  # > 0: the breakdown counts a sample of that many
        "plan_note": plan.redrive_note,  # what the layout said of the move (a queue library's version)
        "moved": res.moved, "skipped": res.skipped, "failed": res.failed,
        "skipped_reasons": dict(res.skipped_reasons), "interrupted": res.interrupted, "error": res.error,
        "started_ms": res.started_ms, "ended_ms": res.ended_ms,
    }
    log = res.moved_ids
    if log is not None:  # which jobs it moved: a sample here, every id in the file
        log.close()
        entry["moved_sample"] = log.sample
        entry["moved_ids_file"] = str(log.path) if log.count else None
    client = layout.client if server_ok else None
    res.journal_problems = write_entry(client, layout.journal_key, entry, target)
    if log is not None and log.problem:
        res.journal_problems.append(log.problem)
