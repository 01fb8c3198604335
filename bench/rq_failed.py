"""Failed RQ jobs in bulk, for comparing ``rq requeue --all`` with jobctl.

A real RQ worker fails about a thousand jobs a second; to get 100,000
failed jobs in seconds, :func:`make_failed_jobs` writes what a failure
leaves behind through RQ's own API (``Job.create`` + job fields a worker
sets + ``FailedJobRegistry.add``), pipelined.  :func:`worker_failed_fields`
fails one job for real (``SimpleWorker`` in burst mode on ``int("x")``) so
the bench can show that the synthetic jobs carry the same hash fields.

Needs ``pip install rq`` (not a jobctl dependency).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

__all__ = ["make_failed_jobs", "worker_failed_fields", "job_fields"]

_EXC = ("Traceback (most recent call last):\n  File \"bench\", line 1, in <module>\n"
        "ValueError: invalid literal for int() with base 10: 'not a number'\n")


def job_fields(client, job_id: str) -> set[str]:
    """The field names of RQ's job hash ``rq:job:<id>``."""
    from rq.job import Job

    return {f.decode() for f in client.hkeys(Job.key_for(job_id))}


def worker_failed_fields(client, queue: str) -> set[str]:
    """Enqueue ``int("not a number")`` on ``queue``, fail it with a burst
    ``SimpleWorker``, and return its job hash's field names.  Leaves the
    failed job in the queue's FailedJobRegistry."""
    from rq import Queue, SimpleWorker

    q = Queue(queue, connection=client)
    job = q.enqueue("builtins.int", "not a number")
    logging.disable(logging.CRITICAL)  # the worker logs the expected traceback
    try:
        SimpleWorker([q], connection=client).work(burst=True, logging_level="ERROR")
    finally:
        logging.disable(logging.NOTSET)
    return job_fields(client, job.id)


def make_failed_jobs(client, queue: str, n: int, *, pipeline_jobs: int = 1000) -> list[str]:
    """Put ``n`` failed jobs (``builtins.int("not a number")``) in
    ``queue``'s FailedJobRegistry; returns their ids."""
    from rq import Queue
    from rq.job import Job, JobStatus
    from rq.registry import FailedJobRegistry

    Queue(queue, connection=client)  # no keys until used; the registry below names it
    registry = FailedJobRegistry(queue, connection=client)
    client.sadd("rq:queues", f"rq:queue:{queue}")
    ids = []
    for start in range(0, n, pipeline_jobs):
        pipe = client.pipeline(transaction=False)
        for _ in range(start, min(n, start + pipeline_jobs)):
            now = datetime.now(timezone.utc)
            job = Job.create("builtins.int", args=("not a number",), connection=client, origin=queue,
                             status=JobStatus.FAILED, timeout=180)
            job.enqueued_at = job.started_at = job.ended_at = job.last_heartbeat = now
            job.worker_name = "bench-worker"
            registry.add(job, exc_string=_EXC, pipeline=pipe)
            ids.append(job.id)
        pipe.execute()
    return ids
