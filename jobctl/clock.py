"""The wall clock jobctl reads: epoch milliseconds."""

from __future__ import annotations

import time

__all__ = ["now_ms"]


def now_ms() -> int:
    """The local wall clock in epoch milliseconds (``time.time_ns() // 1e6``)."""
    return time.time_ns() // 1_000_000
