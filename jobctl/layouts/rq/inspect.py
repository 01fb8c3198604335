"""Where an RQ job is: the first of RQ's keys that holds its id (one
pipelined round trip, plus a bounded ``ZSCAN`` of ``wip``, whose members
are ``<id>:<execution id>``)."""

from __future__ import annotations

import re
from typing import Any

from jobctl.layouts.common import score_ms, suppression_info, text
from jobctl.model import State

__all__ = ["find_job", "suppressed_records"]

_GLOB = re.compile(r"([*?\[\]\\])")


def _ms(score) -> int | None:
    return None if score is None else score_ms(float(score) * 1000)


def _in_wip(layout, job_id: str) -> tuple[str, float] | None:
    """The wip member ``<id>:<execution>`` of ``job_id`` and its score, if any."""
    pattern = _GLOB.sub(r"\\\1", job_id) + ":*"
    for member, score in layout.client.zscan_iter(layout.keys.wip, match=pattern, count=1000):
        if text(member).rsplit(":", 1)[0] == job_id:
            return text(member), score
    return None


def find_job(layout, job_id: str) -> tuple[State | None, dict[str, Any], dict[str, Any]]:
    """``(state, record position/score, meta)`` of ``job_id``: state ``None``
    when no state holds it (``meta["rq_registry"]`` names RQ's deferred or
    canceled registry when one does)."""
    k = layout.keys
    pipe = layout.client.pipeline(transaction=False)
    pipe.zscore(k.failed, job_id)
    pipe.zrevrank(k.failed, job_id)
    pipe.zscore(k.scheduled, job_id)
    pipe.lpos(k.queue, job_id)
    pipe.lpos(k.intermediate, job_id)
    pipe.zscore(k.finished, job_id)
    pipe.zscore(k.deferred, job_id)
    pipe.zscore(k.canceled, job_id)
    pipe.zscore(k.suppressed, job_id)
    pipe.hget(k.suppressed_info, job_id)
    failed, rank, sched, pos, inter, fin, deferred, canceled, supp, info = [
        None if isinstance(r, Exception) else r for r in pipe.execute(raise_on_error=False)]
    if failed is not None:
        return State.DEAD, {"position": rank}, {
            "state_key": k.failed, "failed_registry_score": repr(float(failed)),
            "failed_registry_expires_at_ms": _ms(failed)}
    if supp is not None:
        return State.SUPPRESSED, {"score": score_ms(supp)}, {
            "state_key": k.suppressed, "suppressed_score": repr(float(supp)),
            "suppressed": suppression_info(info) if info is not None else None}
    if sched is not None:
        return State.SCHEDULED, {"score": _ms(sched)}, {"state_key": k.scheduled}
    if pos is not None:
        return State.READY, {"position": pos}, {"state_key": k.queue}
    wip = _in_wip(layout, job_id)
    if wip is not None:
        return State.PROCESSING, {}, {"state_key": k.wip, "execution": wip[0].rsplit(":", 1)[-1],
                                      "heartbeat_expires_at_ms": _ms(wip[1])}
    if inter is not None:
        return State.PROCESSING, {}, {"state_key": k.intermediate}
    if fin is not None:
        return State.HISTORY, {}, {"state_key": k.finished, "result_expires_at_ms": _ms(fin)}
    for key, score in ((k.deferred, deferred), (k.canceled, canceled)):
        if score is not None:
            return None, {}, {"rq_registry": key}
    return None, {}, {}


def suppressed_records(layout, ids: list[str], pairs: list) -> list:
    """Records of suppressed ``ids`` (``pairs``: their zset entries, scores
    in ms) with their suppression records (one ``HMGET`` of the info hash)."""
    infos = layout.client.hmget(layout.keys.suppressed_info, ids) if ids else []
    recs = layout.records(ids, State.SUPPRESSED, [{"score": score_ms(sc)} for _, sc in pairs])
    for rec, (_, sc), info in zip(recs, pairs, infos):
        rec.meta["suppressed_score"] = repr(float(sc))
        rec.meta["suppressed"] = suppression_info(info) if info is not None else None
    return recs
