"""The Prometheus collector: computes on scrape, at most once per interval.

:class:`JobctlCollector` is a custom prometheus-client collector.  A scrape
reads the server (:func:`~jobctl.metrics.snapshot.take_snapshot`) only if
the last read is older than ``interval_s``; scrapes in between, and
concurrent scrapes, get the cached snapshot.  The slow metrics (attempt
histograms, dead breakdown) are recomputed every ``slow_interval_s``.
Without a configured catalogue, queues are rediscovered every
``discovery_interval_s``.

When the server cannot be read, the scrape still answers: ``jobctl_exporter_up
0`` and nothing else (never stale queue values); the error goes to stderr
once per change.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator

from ..errors import JobctlError
from .families import families
from .journal_counters import JournalCounters
from .snapshot import SlowCache, Snapshot, take_snapshot

__all__ = ["JobctlCollector", "DEFAULT_INTERVAL_S", "DEFAULT_SLOW_INTERVAL_S", "DISCOVERY_INTERVAL_S"]

DEFAULT_INTERVAL_S = 5.0
DEFAULT_SLOW_INTERVAL_S = 60.0
DISCOVERY_INTERVAL_S = 300.0


class JobctlCollector:
    """Collector for the queues ``names`` (empty: all) of ``session``.

    ``log(text)`` receives error lines (default: stderr).  Thread-safe.
    """

    def __init__(self, session, names: tuple[str, ...] = (), *, interval_s: float = DEFAULT_INTERVAL_S,
                 slow_interval_s: float = DEFAULT_SLOW_INTERVAL_S,
                 discovery_interval_s: float = DISCOVERY_INTERVAL_S,
                 log: Callable[[str], None] | None = None, clock=time.monotonic) -> None:
        self.session = session
        self.names = tuple(names)
        self.interval_s = interval_s
        self.slow_interval_s = max(slow_interval_s, interval_s)
        self.discovery_interval_s = discovery_interval_s
        self.log = log or (lambda text: print(f"jobctl: {text}", file=sys.stderr, flush=True))
        self.clock = clock
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._read_at = 0.0
        self._discovered_at = clock()
        self._cache = SlowCache()
        self._counters = JournalCounters()
        self._last_error: str | None = None
        self._warned: set[str] = set()

    def snapshot(self) -> Snapshot:
        """The current snapshot, read now if the cached one is older than the interval."""
        with self._lock:
            now = self.clock()
            if self._snap is not None and now - self._read_at < self.interval_s:
                return self._snap
            if not self.session.config.queues and now - self._discovered_at >= self.discovery_interval_s:
                self.session.discovery = None
                self._discovered_at = now
            try:
                snap = take_snapshot(self.session, self.names, self._cache, self._counters,
                                     slow_interval_s=self.slow_interval_s, clock=self.clock)
                if self._last_error is not None:
                    self.log("server readable again")
                self._last_error = None
            except JobctlError as exc:
                snap = Snapshot(taken_at=time.time(), up=False, error=str(exc))
                if str(exc) != self._last_error:
                    self.log(f"error: {exc}")
                self._last_error = str(exc)
                self.session.close()  # reconnect on the next refresh
            warnings = {f"warning: queue {qs.queue.name}: {qs.error}" for qs in snap.queues if qs.error}
            for text in sorted(warnings - self._warned):  # each problem once, not every refresh
                self.log(text)
            self._warned = warnings
            self._snap = snap
            self._read_at = self.clock()
            return snap

    def collect(self) -> Iterator:
        """prometheus-client's collector protocol."""
        yield from families(self.snapshot())

    def describe(self) -> list:
        """Nothing at registration: the first read happens on the first scrape."""
        return []
