"""The plan of an unfiltered json-list redrive or purge of the dead list: a
count of tail positions (:class:`JsonTailRange`), no column per job.

The walk driver then takes those positions in tail mode
(``jl_tail.lua``): before each round trip it reads the strings from the
dead list's oldest end (the left), and the script moves a string only if
it is still the byte-identical string read there; anything else is held
and stays dead.  A redrive still excludes malformed strings, as the
per-job plan does: the plan lists those among the :data:`MALFORMED_SCAN`
oldest strings (``plan.malformed``; reading every string would double the
bytes the command reads), and the apply passes every malformed string it
reads with the id "" so the script leaves it dead, uncounted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobctl.model import State
from jobctl.ops.plan import Plan, TailRange
from jobctl.ops.spec import Operation, OpSpec
from jobctl.layouts.planning import breakdown_key
from jobctl.layouts.walks import walk_list

if TYPE_CHECKING:
    from jobctl.layouts.json_list.layout import JsonList

__all__ = ["JsonTailRange", "tail_applies", "plan_tail", "TAIL_SAMPLE", "READ_WINDOW", "MALFORMED_SCAN"]

#: (windows, size) of the job strings sampled for an unfiltered plan's breakdown
TAIL_SAMPLE = (4, 250)
#: Strings one LRANGE of the redrive plan's malformed scan reads.
READ_WINDOW = 1000
#: The oldest dead strings a redrive plan reads to list the malformed ones.
MALFORMED_SCAN = 1000


class JsonTailRange(TailRange):
    """The :class:`~jobctl.ops.plan.TailRange` of a json-list plan; its
    ``excluded`` positions are the malformed strings a redrive leaves dead
    that the plan's scan saw."""

    __slots__ = ()


def tail_applies(spec: OpSpec) -> bool:
    """Whether ``spec`` plans as a :class:`JsonTailRange`: a redrive or purge
    of the dead list with no filter, ``--ids``, fence file, ``--stuck`` or
    ``--reset-attempts``."""
    return (spec.source is State.DEAD and spec.operation in (Operation.REDRIVE, Operation.PURGE)
            and spec.filter.is_match_all and not spec.ids and spec.fence is None and not spec.reset_attempts
            and not spec.stuck_only)


def _malformed(layout: "JsonList", walked: int) -> list[str]:
    """The ids of the malformed strings among the ``walked`` oldest dead
    positions (jobctl's hold first: the oldest part of the dead list)."""
    from jobctl.layouts.json_list.layout import element_id

    out: list[str] = []
    base = 0
    for key in (layout.keys.hold, layout.keys.dead):
        for start, chunk in walk_list(layout.client, key, from_right=False, batch=READ_WINDOW):
            for raw in chunk[:max(0, walked - base - start)]:
                job_id, bad = element_id(raw)
                if bad:
                    out.append(job_id)
        base += layout.client.llen(key) if key == layout.keys.hold else 0
    return out


def plan_tail(layout: "JsonList", plan: Plan) -> Plan:
    """Fill ``plan`` (an unfiltered redrive or purge, :func:`tail_applies`):
    ``W`` = the dead list's length plus jobctl's hold, capped by
    ``spec.limit`` (``plan.truncated``); the breakdown and sample ids from a
    bounded sample of :data:`TAIL_SAMPLE` strings
    (``plan.breakdown_sampled``); a redrive's malformed strings among the
    :data:`MALFORMED_SCAN` oldest listed (``plan.malformed``) and excluded
    (the apply leaves the later ones dead too, uncounted).  Memory and
    reads do not grow with the DLQ."""
    spec, k = plan.spec, layout.keys
    pipe = layout.client.pipeline(transaction=False)
    pipe.llen(k.dead)
    pipe.llen(k.hold)
    w = sum(pipe.execute())
    if spec.limit is not None and w > spec.limit:
        w, plan.truncated = spec.limit, True
    skip = spec.skips_malformed
    sample: list[str] = []
    for batch in layout.iter_batches(State.DEAD, 1000, sample=TAIL_SAMPLE):
        for rec in batch:
            if rec.position is None or rec.position >= w or (skip and rec.envelope.problems):
                continue
            plan.breakdown_sampled += 1
            plan.breakdown[breakdown_key(rec)] += 1
            if len(sample) < 10:
                sample.append(rec.job_id)
    plan.malformed = _malformed(layout, min(w, MALFORMED_SCAN)) if skip and w else []
    plan.jobs = JsonTailRange({0: w} if w else {}, sample, len(plan.malformed))
    plan.walked = {0: w} if w else {}
    plan.scanned = w
    return plan
