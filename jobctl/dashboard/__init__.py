"""Headless data behind the live dashboard (the TUI draws it; this package
never imports textual, and the TUI never talks to Redis except through it).

Modules, one concern each (every public name is importable from here too):

* :mod:`.slo`: per-queue SLO thresholds from ``[queues.<name>.slo]``,
  evaluated into a :class:`Level` per metric;
* :mod:`.history`: :class:`QueueHistory`, status samples for the sparklines
  and the DLQ growth rate;
* :mod:`.triage`: :func:`triage`, the DLQ grouped by (job type, error) with
  counts and first/last seen (seed 000 section 22: "classify first"), and
  the filter text selecting one group;
* :mod:`.schedule`: :func:`due_distribution` and
  :func:`processing_by_deadline`;
* :mod:`.pages`: :func:`find_jobs`, a state's jobs with a filter;
* :mod:`.prom_history`: the history's last hours read back from a
  Prometheus that scrapes ``jobctl metrics`` (``prometheus_url``);
* :mod:`.overview`: the side panels (top error groups across every queue,
  operations under way and holds, recent journal entries);
* :mod:`.facade`: :class:`Dashboard`, what a front end calls from worker
  threads (operations go through :class:`jobctl.ops.core.OperationCore`).

Times are epoch milliseconds; ages and durations milliseconds.
"""

from __future__ import annotations

from .facade import Dashboard, QueueDetail, QueueRow, Snapshot, equivalent_command
from .history import GROWTH_WINDOW_MS, HISTORY_LEN, QueueHistory, Sample
from .pages import FIND_SCAN_BOUND, JobPage, find_jobs
from .schedule import DUE_BUCKETS, DueDistribution, due_distribution, processing_by_deadline
from .slo import DEFAULT_SLO, SLO_METRICS, Level, Slo, Threshold, slo_for, slo_values
from .triage import TRIAGE_EXACT_BOUND, Triage, TriageGroup, group_filter_text, quote_filter_value, triage

__all__ = [
    "Level", "Threshold", "Slo", "SLO_METRICS", "DEFAULT_SLO", "slo_for", "slo_values",
    "Sample", "QueueHistory", "GROWTH_WINDOW_MS", "HISTORY_LEN",
    "TriageGroup", "Triage", "triage", "group_filter_text", "quote_filter_value", "TRIAGE_EXACT_BOUND",
    "DUE_BUCKETS", "DueDistribution", "due_distribution", "processing_by_deadline",
    "JobPage", "find_jobs", "FIND_SCAN_BOUND", "QueueRow", "Snapshot", "QueueDetail", "Dashboard",
    "equivalent_command",
]
