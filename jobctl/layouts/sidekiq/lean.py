"""The unfiltered plan of a Sidekiq redrive, promote or purge: the set(s)
walked by score (:mod:`~jobctl.layouts.sidekiq.walk`), each member parsed
once for its ``jid``, ``queue`` and breakdown fields, no job record built
(what a filtered plan needs: :func:`jobctl.layouts.planning.plan_from_walk`)."""

from __future__ import annotations

import hashlib

from jobctl.layouts.planning import breakdown_key
from jobctl.layouts.sidekiq.job import job_doc
from jobctl.layouts.sidekiq.walk import walk_by_score
from jobctl.model import Envelope, JobRecord, State
from jobctl.ops.plan import Plan, PlannedJob

__all__ = ["plan_all"]


def _breakdown(doc: dict) -> tuple[str, str]:
    """:func:`~jobctl.layouts.planning.breakdown_key` of a job from its JSON."""
    def txt(f):
        return doc[f] if isinstance(doc.get(f), str) else None
    env = Envelope(job_type=txt("wrapped") or txt("class"), last_error_code=txt("error_class"),
                   last_error_message=txt("error_message"))
    return breakdown_key(JobRecord(queue="", layout="", shard="", job_id="", state=None, envelope=env))


def _add(plan: Plan, member: bytes, score: float, key: str, moving: bool) -> None:
    """Plan one member (a member that is not a job with a jid: malformed, never moved)."""
    from jobctl.layouts.sidekiq.ops import SkPlannedJob

    doc = job_doc(member)
    jid = doc.get("jid") if doc is not None else None
    if not isinstance(jid, str) or not jid:
        if moving:
            plan.malformed.append("sha1:" + hashlib.sha1(member).hexdigest())
            return
        jid, doc = "sha1:" + hashlib.sha1(member).hexdigest(), doc or {}
    queue = doc.get("queue") if isinstance(doc.get("queue"), str) and doc.get("queue") else "default"
    job = PlannedJob(job_id=jid, shard=0, position=len(plan.jobs), score=None, sha1=repr(float(score)))
    plan.jobs.append(SkPlannedJob(job, member, key, queue))
    plan.breakdown[_breakdown(doc)] += 1


def plan_all(layout, plan: Plan, moving: bool) -> Plan:
    """Fill ``plan`` (unfiltered: no ids, fence or filter) with every job of
    its source state's set(s) and return it; stops at ``spec.limit``."""
    spec = plan.spec
    for key in layout.zset_keys(spec.source):
        for _, pairs in walk_by_score(layout.client, key, desc=spec.source is State.DEAD):
            for member, score in pairs:
                plan.scanned += 1
                _add(plan, member, score, key, moving)
                if spec.limit is not None and len(plan.jobs) >= spec.limit:
                    plan.truncated = True
                    return plan
    return plan
