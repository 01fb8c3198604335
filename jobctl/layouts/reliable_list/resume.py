"""The reliable-list hold records as the operations core sees them
(:class:`HoldHooks`, a mixin of
:class:`~jobctl.layouts.reliable_list.layout.ReliableList`): which holds a
resume lifts, lifting them, one hold cycle's plan, and a planned job's
payload for a transformation's sample."""

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

    def plan_hold_cycle(self, hold: dict[str, Any], marks: Any, budget: int):
        """:func:`~jobctl.layouts.reliable_list.holds.plan_cycle`."""
        from jobctl.layouts.reliable_list.holds import plan_cycle

        return plan_cycle(self, hold, marks, budget)

    def planned_payload(self, job) -> bytes | None:
        """``GET`` of the job's payload key in its shard."""
        return self.client.get(self.shards[job.shard].job(job.job_id))
