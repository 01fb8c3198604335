"""The window engine's old import path: the walk driver is
:mod:`jobctl.ops.walk` (layouts and :mod:`jobctl.ops.engine` import
these names from here)."""

from __future__ import annotations

from .walk import (DEPTH, LEASE_TTL_MS, LOST_CONNECTION, MAX_TAIL_DEPTH, RESTORE_MAX, ROUND_TRIP_POSITIONS, SLACK,
                   TAIL_AHEAD, TAIL_WINDOW, WINDOW, WINDOW_OPERATIONS, ListSource, by_job_id, drive, drives,
                   finish_hold, lease_value, record_code, tail_depth)

__all__ = ["ListSource", "drive", "drives", "WINDOW_OPERATIONS", "finish_hold", "lease_value", "LEASE_TTL_MS",
           "SLACK", "DEPTH", "ROUND_TRIP_POSITIONS", "MAX_TAIL_DEPTH", "TAIL_AHEAD", "tail_depth", "WINDOW",
           "TAIL_WINDOW", "RESTORE_MAX", "LOST_CONNECTION", "by_job_id", "record_code"]
