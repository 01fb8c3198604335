"""Where a BullMQ job is: the first of the queue's keys that holds its id
(one pipelined round trip: ``ZSCORE`` of each zset, ``LPOS`` of each list)."""

from __future__ import annotations

from typing import Any

from jobctl.layouts.common import score_ms
from jobctl.model import State

__all__ = ["find_job"]

#: (key attribute, jobctl state or None, BullMQ's name of the state), zsets first.
_ZSETS = (("failed", State.DEAD, "failed"), ("prioritized", State.READY, "prioritized"),
          ("delayed", State.SCHEDULED, "delayed"), ("completed", State.HISTORY, "completed"),
          ("waiting_children", None, "waiting-children"))
_LISTS = (("wait", State.READY, "wait"), ("active", State.PROCESSING, "active"), ("paused", State.READY, "paused"))


def find_job(layout, job_id: str) -> tuple[State | None, dict[str, Any], dict[str, Any]]:
    """``(state, record position/score, meta)`` of ``job_id``; state
    ``None`` when no jobctl state holds it (``meta["bullmq_state"]`` names
    ``waiting-children`` when that set does)."""
    k = layout.keys
    pipe = layout.client.pipeline(transaction=False)
    for attr, _, _ in _ZSETS:
        pipe.zscore(getattr(k, attr), job_id)
    for attr, _, _ in _LISTS:
        pipe.lpos(getattr(k, attr), job_id)
    replies = [None if isinstance(r, Exception) else r for r in pipe.execute(raise_on_error=False)]
    for (attr, state, bull), score in zip(_ZSETS, replies):
        if score is not None:
            meta = {"state_key": getattr(k, attr), "bullmq_state": bull, "score": repr(float(score))}
            if attr == "delayed":
                return state, {"score": int(score) // 0x1000}, meta
            return state, {"score": score_ms(score) if attr in ("failed", "completed") else None}, meta
    for (attr, state, bull), pos in zip(_LISTS, replies[len(_ZSETS):]):
        if pos is not None:
            return state, {"position": pos}, {"state_key": getattr(k, attr), "bullmq_state": bull}
    return None, {}, {}
