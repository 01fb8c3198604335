"""What the walk driver walks: one dead list of one shard
(:class:`ListSource`), how a window call's codes and error replies are
read (:func:`record_code`, :func:`call_error`), and the knobs of the walk
(:data:`SLACK`, :data:`RESTORE_MAX`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import Busy, ConnectionFailed, DataError, JobctlError
from ..plan import PlannedJob
from ..result import BatchResult
from ..spec import Operation, OpSpec

__all__ = ["ListSource", "by_job_id", "call_error", "record_code", "drives", "WINDOW_OPERATIONS",
           "LOST_CONNECTION", "SLACK", "RESTORE_MAX", "WINDOW_SCRIPTS"]


def _lost_connection() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


#: What a dropped connection raises while replies are read.
LOST_CONNECTION = _lost_connection()

#: The operations the window engine drives (from a dead list); every other
#: operation from dead (transform, migrate...) is applied by its layout.
WINDOW_OPERATIONS = frozenset({Operation.REDRIVE, Operation.SUPPRESS, Operation.PURGE})

#: How many positions a planned job may have shifted towards the tail (jobs
#: below it removed by others) and still match.
SLACK = 64
#: Elements one restore call moves back.
RESTORE_MAX = 2000

#: The window script (``jobctl/lua/<name>.lua``) of each kind of list, per
#: walk mode ``(per job, tail)``: the one place the driver picks a script.
WINDOW_SCRIPTS = {"rl": ("rl_window", "rl_tail"), "jl": ("jl_window", "jl_tail"),
                  "hj": ("hj_window", "hj_tail")}

#: Codes of a tail walk's job that its plan sets aside too (hj_tail.lua: a
#: dangling id, a redrive's malformed payload): left in place, counted
#: neither skipped nor failed, as the per-job walk never meets them.
SET_ASIDE = frozenset({"dangling", "malformed"})


def drives(spec: OpSpec) -> bool:
    """Whether the window engine drives ``spec`` (an operation in
    :data:`WINDOW_OPERATIONS` from a dead list)."""
    from ...model import State

    return spec.source is State.DEAD and spec.operation in WINDOW_OPERATIONS


def by_job_id(job: PlannedJob) -> str:
    """The default identity a window call matches a planned job by: its id."""
    return job.job_id


@dataclass
class ListSource:
    """One dead list the window engine walks (a :class:`~jobctl.layouts.base.WindowSource`).

    ``kind`` ``"rl"`` (elements are ids, payload at ``payload_key(id)``:
    reliable-list, stream-group), ``"jl"`` (elements are the JSON
    strings; ``raw``/``attempts``/``errors`` hashes keyed by job id) or
    ``"hj"`` (hash-job failed list: ids, job hash at ``payload_key(id)``,
    fenced by the SHA1 of ``fence_fields``; modes ``ready``,
    ``suppressed``, ``purge``).
    ``mode`` is the window script's mode (``ready``: LMOVE to a list,
    ``stream``: XADD jobId <id>, ``scheduled``, ``suppressed``, ``purge``);
    ``target`` its target key; ``shard`` the index of the plan's shard it
    walks.
    """

    client: Any
    kind: str
    tag: str
    shard: int
    dead: str
    hold: str
    walk: str
    lease: str
    redriven: str
    info_hash: str
    target: str
    mode: str
    #: run when the walk begins, with the walk's client: the upkeep of
    #: jobctl's redrive record (:func:`jobctl.ops.redrive_record.upkeep`);
    #: ``None`` for none
    record_upkeep: Callable[[Any], None] | None = None
    raw: str | None = None
    attempts: str | None = None
    errors: str | None = None
    payload_key: Callable[[str], str] | None = None
    #: added to now for a zset target's score (redrive to scheduled: the delay, ms)
    delay_ms: int = 0
    #: redrive with ``--reset-attempts`` (json-list: the attempts entry goes)
    reset_attempts: bool = False
    #: the identity the window script matches a planned job by
    ident: Callable[[PlannedJob], str] = by_job_id
    #: ``(jobs, now, walk's client) -> {id: (new payload, SHA1 of the payload
    #: it replaces)}`` for the jobs of one round trip (reliable-list
    #: ``--reset-attempts``), read on the walk's client
    new_payloads: Callable[[list[PlannedJob], int, Any], dict[str, tuple[bytes, str]]] | None = None
    #: ``now -> suppressed-info JSON`` (suppress)
    info: Callable[[int], bytes] | None = None
    #: kind ``"hj"`` (hash-job failed list): the job-hash fields whose SHA1 is
    #: the fence (:data:`jobctl.layouts.hash_job.layout.FENCE_FIELDS`), passed as ARGV
    fence_fields: tuple[str, ...] = ()
    #: tail positions per window call when ``--batch`` sets none (0: the
    #: driver's ``WINDOW``, tail mode ``TAIL_WINDOW``)
    window: int = 0
    #: kind ``"jl"``: the job id of a dead-list element (a tail walk reads
    #: the elements from the left, passes each with its id, "" for one the
    #: plan excludes); ``None``: the elements are the ids, tail at the right
    element_id: Callable[[bytes], str] | None = None
    #: server time of a position relative to a reliable-list one: a tail
    #: round trip carries ``ROUND_TRIP_POSITIONS`` over it
    cost: int = 1

    def window_script(self, tail: bool) -> str:
        """The name of the window script this source's calls run
        (:data:`WINDOW_SCRIPTS`; ``tail``: a tail walk's); KeyError for an
        unknown kind."""
        return WINDOW_SCRIPTS[self.kind][tail]

    def fixed_keys(self) -> list[str]:
        """KEYS[1..10] of the window scripts (:meth:`window_script`)."""
        extra = [self.raw, self.attempts, self.errors] if self.kind == "jl" else [self.dead] * 3
        return [self.dead, self.hold, self.walk, self.lease, self.target, self.redriven, self.info_hash, *extra]


def call_error(exc: Exception, src: ListSource) -> JobctlError:
    """An error reply of one of the engine's scripts as a one-line error
    (``Busy`` for a lost lease or walk, ``DataError`` otherwise); anything
    that is not an error reply is raised as it is."""
    msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    if msg.startswith("LEASE") or msg.startswith("WALK"):
        return Busy(f"{msg}: another jobctl operation took over; nothing of this call moved")
    if msg.upper().startswith("WRONGTYPE"):
        return DataError(f"{msg}: nothing moved in that call; every job is in one state")
    if _is_noscript(exc):
        return DataError(f"{src.dead}: the server's script cache was flushed again while jobctl ran the refused "
                         "calls again; nothing of that call moved; every job is in one state: rerun the operation")
    if isinstance(exc, JobctlError):
        return exc
    import redis

    if (moved := _redirection(exc)) is not None:
        return ConnectionFailed(f"{src.dead}: the cluster answered {moved} (its slots moved or a failover "
                                "happened); nothing of that call ran")
    if isinstance(exc, redis.ResponseError):
        return DataError(f"{src.dead}: {msg}")
    raise exc


def _redirection(exc: Exception) -> str | None:
    """``MOVED <slot> <node>`` (``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``,
    ``READONLY``) when ``exc`` is a cluster's refusal to run a call on this
    node: the call did not run; else ``None``."""
    from redis import exceptions as e

    kinds = ((e.MovedError, "MOVED"), (e.AskError, "ASK"), (e.TryAgainError, "TRYAGAIN"),
             (e.ClusterDownError, "CLUSTERDOWN"), (e.ReadOnlyError, "READONLY"))
    for cls, word in kinds:
        if isinstance(exc, cls):
            return f"{word} {exc}".strip() if word != "READONLY" else word
    return None


def _is_noscript(exc: Exception) -> bool:
    import redis

    return isinstance(exc, redis.exceptions.NoScriptError)


def record_code(br: BatchResult, job_id: str, code: str) -> None:
    """Count one job's code from a window call's reply in ``br``: ``moved``;
    failed for ``error:...`` (a write the server refused, undone) and
    ``wrongtype`` (its payload key); :data:`SET_ASIDE` codes not at all;
    any other code is a skip reason."""
    if code in SET_ASIDE:
        return
    if code == "moved":
        br.moved.append(job_id)
    elif code.startswith("error:") or code == "wrongtype":
        br.failed.append(job_id)
        br.reasons[job_id] = code
    else:
        br.skipped.append(job_id)
        br.reasons[job_id] = code
