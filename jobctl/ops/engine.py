"""Run a planned operation: batches, rate limit, progress, stop, journal.

The engine is the same for every layout: the layout yields one
:class:`~jobctl.layouts.reliable_list_ops.BatchResult` per script call and
the engine paces, counts and journals them.  Stopping (Ctrl-C, a TUI cancel)
happens between calls, so every job is either moved or untouched.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..connection import Target, translate
from ..errors import JobctlError
from ..layouts.base import Layout, now_ms
from .journal import command_line, write_entry
from .plan import Plan

__all__ = ["RunResult", "run_plan"]


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

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation, "queue": self.queue, "operation_id": self.operation_id,
            "planned": self.planned, "moved": self.moved, "skipped": self.skipped, "failed": self.failed,
            "dry_run": self.dry_run, "interrupted": self.interrupted, "error": self.error,
            "started_ms": self.started_ms, "ended_ms": self.ended_ms,
            "skipped_reasons": dict(self.skipped_reasons), "skipped_sample": self.skipped_sample[:20],
        }


def run_plan(layout: Layout, plan: Plan, *, dry_run: bool = False, rate: float | None = None,
             batch: int | None = None, stop: Callable[[], bool] | None = None,
             progress: Callable[[int, int], None] | None = None, target: Target | None = None,
             argv: list[str] | None = None, journal: bool = True) -> RunResult:
    """Apply ``plan`` on ``layout`` (or only report it when ``dry_run``).

    ``rate`` caps jobs moved per second; ``stop()`` is polled between script
    calls; ``progress(done, total)`` is called after each.  A lost connection
    ends the run with ``error`` set (the state stays consistent; a rerun
    finishes).  The journal entry is written unless ``dry_run``.
    Raises :class:`JobctlError` only for a connection error, after journaling.
    """
    spec = plan.spec
    res = RunResult(operation=spec.operation.value, queue=spec.queue, operation_id=spec.op_id,
                    planned=plan.planned, dry_run=dry_run, started_ms=now_ms())
    if dry_run or plan.planned == 0:
        res.ended_ms = now_ms()
        if not dry_run and journal:
            _journal(layout, plan, res, target, argv)
        return res
    if rate:
        batch = max(1, min(batch or 256, int(rate)))
    started = time.monotonic()
    raised: BaseException | None = None
    try:
        for br in layout.apply(plan, batch=batch):
            res.moved += len(br.moved)
            res.skipped += len(br.skipped)
            res.failed += len(br.failed)
            for job_id in br.skipped:
                res.skipped_reasons[br.reasons.get(job_id, "skipped")] += 1
                if len(res.skipped_sample) < 20:
                    res.skipped_sample.append(job_id)
            if progress:
                progress(res.moved + res.skipped + res.failed, plan.planned)
            if stop and stop():
                res.interrupted = True
                break
            if rate:
                ahead = res.moved / rate - (time.monotonic() - started)
                while ahead > 0 and not (stop and stop()):
                    time.sleep(min(ahead, 0.1))
                    ahead -= 0.1
                if stop and stop():
                    res.interrupted = True
                    break
    except KeyboardInterrupt:
        res.interrupted = True
    except Exception as exc:  # noqa: BLE001 - translated below
        err = translate(exc, target)
        res.error = str(err) if isinstance(err, JobctlError) else f"{exc.__class__.__name__}: {exc}"
        raised = err if isinstance(err, JobctlError) else exc
    res.ended_ms = now_ms()
    if journal:
        _journal(layout, plan, res, target, argv, server_ok=raised is None)
    if raised is not None:
        raise raised
    return res


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
        "moved": res.moved, "skipped": res.skipped, "failed": res.failed,
        "skipped_reasons": dict(res.skipped_reasons), "interrupted": res.interrupted, "error": res.error,
        "started_ms": res.started_ms, "ended_ms": res.ended_ms,
    }
    client = layout.client if server_ok else None
    res.journal_problems = write_entry(client, layout.journal_key, entry, target)
