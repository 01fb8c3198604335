"""The reliable-list hold records as the operations core sees them
(:class:`HoldHooks`, a mixin of
:class:`~jobctl.layouts.reliable_list.layout.ReliableList`): which holds a
resume lifts, lifting them, recording one, one hold cycle's plan and what
its cycles watch, and a planned job's payload for a transformation's
sample."""

from __future__ import annotations

from typing import Any

__all__ = ["HoldHooks"]


class HoldHooks:
    """Hooks of :class:`~jobctl.layouts.facts.LayoutFacts` backed by
    :mod:`jobctl.layouts.reliable_list.holds` (the layout provides
    ``client`` and ``shards``)."""

    def holds_to_lift(self, filter_text: str | None) -> list[dict[str, Any]]:
        """The holds of the same filter, every hold without one (reads only)."""
        from jobctl.layouts.reliable_list.holds import lift_holds

        return lift_holds(self, filter_text, dry_run=True)

    def lift_holds(self, holds: list[dict[str, Any]], filter_text: str | None, plan, now: int
                   ) -> list[dict[str, Any]]:
        """Drop those of ``holds`` still recorded, then take the jobs their
        cycles paused since ``plan`` was made into it (``replan_after_lift``)."""
        from jobctl.layouts.reliable_list.holds import drop_holds, lift_holds
        from jobctl.layouts.reliable_list.pause import replan_after_lift

        current = {h["id"] for h in lift_holds(self, filter_text, dry_run=True)}
        lifted = [h for h in holds if h["id"] in current]
        drop_holds(self, [h["id"] for h in lifted])
        if lifted:
            replan_after_lift(self, plan, [h["id"] for h in lifted], now)
        return lifted

    def hold_records(self) -> list[dict[str, Any]]:
        """:func:`~jobctl.layouts.reliable_list.holds.holds` (read from the first shard)."""
        from jobctl.layouts.reliable_list.holds import holds

        return holds(self)

    def holds_left(self, filter_text: str | None) -> list[dict[str, Any]]:
        """The holds whose normalized filter differs from ``filter_text``'s."""
        from jobctl.layouts.reliable_list.holds import filter_key, hold_key, holds

        return [h for h in holds(self) if hold_key(h) != filter_key(filter_text)]

    def record_hold(self, filter_text: str | None, reason: str, operator: str) -> dict[str, Any]:
        """:func:`~jobctl.layouts.reliable_list.holds.add_hold` (every shard)."""
        from jobctl.layouts.reliable_list.holds import add_hold

        return add_hold(self, filter_text, reason, operator)

    def new_cycle_marks(self) -> Any:
        """A fresh :class:`~jobctl.layouts.reliable_list.holds.CycleMarks`."""
        from jobctl.layouts.reliable_list.holds import CycleMarks

        return CycleMarks()

    def arrival_keys(self) -> list[str]:
        """Every ready list of every shard (priorities included)."""
        return [ref.key for keys in self.shards for ref in self.ready_lists(keys)]

    def plan_hold_cycle(self, hold: dict[str, Any], marks: Any, budget: int):
        """:func:`~jobctl.layouts.reliable_list.holds.plan_cycle`."""
        from jobctl.layouts.reliable_list.holds import plan_cycle

        return plan_cycle(self, hold, marks, budget)

    def planned_payload(self, job) -> bytes | None:
        """``GET`` of the job's payload key in its shard."""
        return self.client.get(self.shards[job.shard].job(job.job_id))
