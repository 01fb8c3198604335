"""The Prometheus exporter: ``jobctl metrics serve`` and ``jobctl metrics once``.

Per queue (labels ``queue``, ``layout``), the gauges of seed 000 section 21
and section 17's backpressure signals, read on scrape at most once per
interval:

==========================================  =========================================
``redis_job_ready_depth``                   ready jobs (``_priority_depth``: per pN)
``redis_job_scheduled_depth``               scheduled zset (delays and retries)
``redis_job_scheduled_overdue_depth``       due but not promoted: scheduler lag
``redis_job_scheduled_overdue_max_age_ms``  how long the oldest overdue job has waited
``redis_job_processing_depth``              in flight
``redis_job_stuck_depth``                   past the visibility deadline
``redis_job_dead_depth``                    DLQ depth
``redis_job_suppressed_depth``              suppressed dead jobs
``redis_job_oldest_ready_age_ms``           latency pressure (0: nothing ready)
``redis_job_paused_depth``                  paused by an operator (``jobctl pause``)
``redis_job_held_filters``                  active holds (``jobctl pause --hold``)
``redis_job_migrating_depth``               left between two queues by an interrupted ``jobctl migrate``
``redis_job_attempts`` (histogram)          attempts, ``state="dead"|"scheduled"``
``redis_job_dead_by_type_tenant``           DLQ by jobType x tenantId (bounded sample)
``jobctl_operations_total`` and             jobctl's own operations, from the journal
``jobctl_operation_jobs_{moved,skipped,failed}_total``
``jobctl_redis_info``, ``_uptime_seconds``  restarts and failovers (run_id changes)
``jobctl_exporter_up``                      0 when the server cannot be read
==========================================  =========================================

The cost of one scrape is bounded whatever the depth (see
:mod:`jobctl.metrics.snapshot`).  Example alert rules that link each alert to
its runbook: ``runbooks/alerts.yml``.
"""

from .collector import JobctlCollector
from .exporter import DEFAULT_PORT, exposition, registry_for, start_exporter
from .families import ATTEMPT_BUCKETS, STATUS_GAUGES

__all__ = ["JobctlCollector", "DEFAULT_PORT", "exposition", "registry_for", "start_exporter",
           "ATTEMPT_BUCKETS", "STATUS_GAUGES"]
