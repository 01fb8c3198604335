"""What the operations core hands its front ends: :class:`Prepared` (a
planned request) and :class:`Outcome` (what became of it), and the plan's
breakdown as display rows (:func:`breakdown_rows`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exitcodes import ExitCode
from .request import OpRequest
from .spec import OpSpec

if TYPE_CHECKING:
    from ..layouts.base import Layout
    from .engine import RunResult
    from .plan import Plan

__all__ = ["Prepared", "Outcome", "breakdown_rows"]


def breakdown_rows(plan: "Plan", top: int) -> list[tuple[str, str, str]]:
    """The plan's breakdown as display rows ``(job type, error, jobs)``, the
    ``top`` largest groups first, then one ``("…", "N more groups", jobs)``
    row for the rest, and a ``("(sample)", ...)`` row when the breakdown
    comes from a sample of envelopes (what the CLI and the TUI show before
    confirming)."""
    groups = plan.breakdown.most_common()
    rows = [(jt, err, f"{n:,}") for (jt, err), n in groups[:top]]
    if len(groups) > top:
        rest = sum(n for _, n in groups[top:])
        rows.append(("…", f"{len(groups) - top} more groups", f"{rest:,}"))
    if plan.breakdown_sampled:  # an unfiltered dead-list plan read only a sample of envelopes
        rows.append(("(sample)", f"breakdown from a sample of {plan.breakdown_sampled:,}", ""))
    return rows


@dataclass
class Prepared:
    """A planned request: the ``spec`` it became, the ``layout`` and the
    ``plan``.  ``typed_count``: confirming needs the planned count typed.
    ``exported``: the export directory the purge is fenced to (``None``:
    none, or not written yet: ``export_pending``).  ``holds``: the hold records (``{"id", "filter", "reason", "by",
    ...}``) a resume lifts when applied.  ``needs_confirmation``: something
    would change (jobs, or holds to lift)."""

    request: OpRequest
    spec: OpSpec
    layout: "Layout"
    plan: "Plan"
    typed_count: bool = False
    exported: str | None = None
    holds: list[dict[str, Any]] = field(default_factory=list)
    #: migrate --transform: the before/after diff lines of the first planned envelopes
    samples: list[str] = field(default_factory=list)
    #: ``prepare(defer_export=True)``: the directory the export is written to once confirmed (``apply``)
    export_pending: str | None = None

    @property
    def needs_confirmation(self) -> bool:
        return not self.request.dry_run and (self.plan.planned > 0 or bool(self.holds))


@dataclass
class Outcome:
    """What became of a request: ``status`` is ``dry-run``, ``nothing`` (no
    job matched), ``cancelled`` (confirmation declined) or ``applied``;
    ``result`` the engine's :class:`~jobctl.ops.engine.RunResult` (``None``
    when cancelled); ``exit_code`` the :class:`ExitCode` to exit with."""

    prepared: Prepared
    status: str
    exit_code: ExitCode
    result: "RunResult | None" = None
    problems: list[str] = field(default_factory=list)
    #: the hold records a resume lifted
    lifted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def plan(self) -> "Plan":
        return self.prepared.plan

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` document: the result plus the plan."""
        base = self.result.to_json() if self.result is not None else {}
        return {**base, "plan": self.plan.to_json()}

    def summary(self) -> str:
        """One line: ``redrive email: planned 10, moved 9, skipped 1 (changed: 1), failed 0  [id]``."""
        res = self.result
        if res is None:
            return f"{self.plan.spec.operation.value} cancelled: nothing was changed"
        return res.summary()
