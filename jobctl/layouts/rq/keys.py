"""Key names of one RQ 2.x queue (RQ's own names, ``rq:<kind>:<queue>``,
and one key per job), plus jobctl's journal for it.

RQ puts no hash tag in its names: one queue's keys span Redis Cluster slots
(:meth:`~jobctl.layouts.base.KeyedLayout.slot_keys` lists them, so Cluster
mode notes it in ``status`` and refuses the moves)."""

from __future__ import annotations

import re

__all__ = ["RqKeys", "RQ_KEY_RE", "QUEUES", "JOB_PREFIX"]

#: RQ's set of every queue key (``SADD`` on each enqueue).
QUEUES = "rq:queues"
#: The prefix of RQ's job hashes.
JOB_PREFIX = "rq:job:"
#: A per-queue RQ key: ``rq:<kind>:<queue>`` (group 1 the kind, 2 the queue;
#: the ready list's ``:intermediate`` companion is folded into its queue).
RQ_KEY_RE = re.compile(r"^rq:(queue|failed|scheduled|wip|finished|deferred|canceled):(.+?)(:intermediate)?$")


class RqKeys:
    """The keys of the RQ queue ``name`` (RQ's ``Queue(name)``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def queue(self) -> str:
        """The ready LIST (producers RPUSH, workers pop from the left)."""
        return f"rq:queue:{self.name}"

    @property
    def intermediate(self) -> str:
        """The LIST a worker moves an id to before it marks it started."""
        return f"rq:queue:{self.name}:intermediate"

    @property
    def queues(self) -> str:
        return QUEUES

    @property
    def failed(self) -> str:
        """ZSET id -> expiry time (s): ``now + failure_ttl``, not the failure time."""
        return f"rq:failed:{self.name}"

    @property
    def scheduled(self) -> str:
        """ZSET id -> run-at (s)."""
        return f"rq:scheduled:{self.name}"

    @property
    def wip(self) -> str:
        """ZSET ``<id>:<execution id>`` -> heartbeat expiry (s): started jobs."""
        return f"rq:wip:{self.name}"

    @property
    def finished(self) -> str:
        """ZSET id -> result expiry (s)."""
        return f"rq:finished:{self.name}"

    @property
    def deferred(self) -> str:
        return f"rq:deferred:{self.name}"

    @property
    def canceled(self) -> str:
        return f"rq:canceled:{self.name}"

    @property
    def workers(self) -> str:
        """RQ's SET of the worker keys (``rq:worker:<name>``, hashes with a ``version``) serving the queue."""
        return f"rq:workers:{self.name}"

    @property
    def suppressed(self) -> str:
        """jobctl's ZSET of suppressed failed jobs: id -> suppressed-at (ms)."""
        return f"jobctl:rq:{self.name}:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's HASH id -> suppression record (JSON)."""
        return f"jobctl:rq:{self.name}:suppressed:info"

    @property
    def journal(self) -> str:
        """jobctl's audit stream of this queue (outside RQ's ``rq:`` names)."""
        return f"jobctl:rq:{self.name}:journal"

    def job(self, job_id: str) -> str:
        return f"{JOB_PREFIX}{job_id}"

    def results(self, job_id: str) -> str:
        """The job's results STREAM (capped at 10 entries by RQ)."""
        return f"rq:results:{job_id}"

    def job_side_keys(self, job_id: str) -> list[str]:
        """Every key RQ keeps for the job besides its hash: dependents,
        dependencies, executions registry, results stream."""
        return [f"{JOB_PREFIX}{job_id}:dependents", f"{JOB_PREFIX}{job_id}:dependencies",
                f"rq:executions:{job_id}", self.results(job_id)]
