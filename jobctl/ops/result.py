"""What one script call of an operation did (every layout yields these)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["BatchResult", "EXPECTED_SKIPS", "SKIP_WORDS", "skip_words", "LATE_RESULTS"]

#: Skip codes of the expected race, not a failure: the job left the source
#: the plan saw it in (a live worker took it: pause, migrate, drain, a
#: rollback's finished job) before the script call, or the work was already
#: done (replay).  An operation whose only skips are these exits 0 and says
#: how many.  ``gone`` is not one: scripts also answer it for a job still in
#: its source whose payload is missing (exit 8).
EXPECTED_SKIPS = frozenset({"moved", "replayed", "is-replay"})

#: What a skip code means, in the words the CLI and the TUI print.
SKIP_WORDS = {
    "gone": "gone (no longer where the plan saw it, or its payload missing)",
    "moved": "taken by a worker since the plan",  # pause, migrate, rollback: no longer in its source
    "changed": "changed since the plan",
    "replayed": "already replayed",
    "is-replay": "itself a replay",
}


def skip_words(reasons: dict[str, int]) -> str:
    """``"taken by a worker since the plan: 3, changed since the plan: 1"``
    (codes of the same words added up)."""
    words: dict[str, int] = {}
    for code, n in reasons.items():
        words[SKIP_WORDS.get(code, code)] = words.get(SKIP_WORDS.get(code, code), 0) + n
    return ", ".join(f"{w}: {n:,}" for w, n in words.items())


@dataclass
class BatchResult:
    """Outcome of one script call: job ids by outcome; ``reasons`` maps a
    skipped or failed id to its code (``changed``, ``gone``, ``moved``...)."""

    moved: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    #: more results of the same pipelined round trip follow: the engine
    #: does not stop between them (the calls already ran)
    more: bool = False


def merged(first: BatchResult, later: BatchResult) -> BatchResult | None:
    """One result for two consecutive ones (``later``'s ``more``): what a
    walk in another process sends as one message.  ``None`` when a job id
    has a reason in both (``reasons`` keeps one a job id: merged, one of
    its outcomes would be counted wrong)."""
    if first.reasons and later.reasons and not first.reasons.keys().isdisjoint(later.reasons):
        return None
    return BatchResult(moved=first.moved + later.moved, skipped=first.skipped + later.skipped,
                       failed=first.failed + later.failed, reasons={**first.reasons, **later.reasons},
                       more=later.more)


#: Where results that arrive after the caller stopped reading go: walks run
#: in other processes or threads may have moved jobs by then, which the
#: caller must still count (set by the operations engine while it applies).
LATE_RESULTS: ContextVar[Callable[[BatchResult], None] | None] = ContextVar("late_results", default=None)
