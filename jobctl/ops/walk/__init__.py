"""The walk driver: the one bulk data path for dead lists.

A :class:`ListSource` is one dead list of one shard (reliable-list and
stream-group: ids, tail at the right; json-list: JSON strings, tail at the
left; hash-job's failed list: ids, tail at the right, kind ``"hj"``).
Applying a plan on it (:func:`drive`) is, per source:

1. take the lease (:mod:`jobctl.ops.lease`, ``lease.lua``: ``<op id> <host>
   <pid>``, PX ``LEASE_TTL_MS``, renewed by every window call); another
   live operation holding it -> :class:`~jobctl.errors.Busy` (exit 11),
   nothing changed.  A lease left by a dead process of this host is taken
   over;
2. finish any hold a crashed or interrupted run left (``list_restore.lua``),
   so every job is back in the dead list in its order;
3. record the walk in the walk hash (op, total tail positions the plan
   covers, popped = 0);
4. window calls (the kind's script, :data:`~.source.WINDOW_SCRIPTS`), each popping up to ``batch`` tail
   positions: planned jobs whose fence holds move (one ``redis.pcall``-guarded
   step per job, target written first), the rest go to the hold list in
   order.  The calls carry their own bounds (``upto``) and the popped count
   lives server-side, so calls go pipelined, several round trips in flight;
5. restore calls put the hold back at the tail, in the original order
   (also when the run stops early or a call fails); the lease is released.

Modules: :mod:`.wire` (RESP packing and the one place that sends),
:mod:`.flight` (round trips in flight, stop, the NOSCRIPT replay, drain),
:mod:`.source` (the source, codes, errors), :mod:`.lifecycle` (lease and
hold), :mod:`.per_job` and :mod:`.tail` (the two walk modes),
:mod:`.plan_windows` (a filtered plan's windows), :mod:`.driver`
(:func:`drive` and its knobs).

Every read of the layout counts the hold as dead, so at every instant each
job is in exactly one state.  Stopping (Ctrl-C, ``stop()``) happens between
round trips: results of one round trip carry ``more=True`` except the last.

The fence is identity + position: a planned job matches an element with its
identity (an id; json-list: the SHA1 of the string) met at a tail position
within ``[p - SLACK, p]`` of the position ``p`` the plan saw it at.  It is
sound because workers only push at the dead list's other end and no second
jobctl operation can walk it (the lease); see docs/layouts.md.  Hash-job
adds the SHA1 of the job hash's fence fields (the field list in ARGV,
:attr:`ListSource.fence_fields`), computed server-side: workers rewrite
that hash in place.
"""

from __future__ import annotations

from ..lease import LEASE_TTL_MS, lease_value
from .driver import (DEPTH, MAX_TAIL_DEPTH, ROUND_TRIP_POSITIONS, TAIL_AHEAD, TAIL_WINDOW, WINDOW, drive,
                     tail_depth)
from .lifecycle import finish_hold
from .source import (LOST_CONNECTION, RESTORE_MAX, SLACK, WINDOW_OPERATIONS, ListSource, by_job_id, drives,
                     record_code)

__all__ = ["ListSource", "drive", "drives", "WINDOW_OPERATIONS", "finish_hold", "lease_value", "LEASE_TTL_MS",
           "SLACK", "DEPTH", "ROUND_TRIP_POSITIONS", "MAX_TAIL_DEPTH", "TAIL_AHEAD", "tail_depth", "WINDOW",
           "TAIL_WINDOW", "RESTORE_MAX", "LOST_CONNECTION", "by_job_id", "record_code"]
