"""Ctrl-C while an operation applies: acted on between results, never
inside a read.

The window engine keeps round trips of script calls in flight
(:mod:`jobctl.ops.walk`).  A ``KeyboardInterrupt`` raised while their
replies are read loses them with the connection (redis-py drops it on any
``BaseException``): those jobs moved, but the result and the journal would
not count them.  So while :func:`applying` is active (around
:func:`jobctl.ops.engine.run_plan`'s apply loop) a front end's ``SIGINT``
handler calls :func:`defer` instead of raising.  The engine then sends
nothing more, reads and counts what is in flight (milliseconds: a few
bounded calls), puts its hold back and journals: the path of a stop.

Only a press that :func:`defer` refuses (no operation applying, or one
abort already deferred) should raise at once; the calls in flight are then
not counted, though every job is still in exactly one state.

Signals reach only the main thread, so one process-wide state is enough.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["active", "applying", "defer", "requested"]

#: re-entrant: the handler runs on the main thread, maybe inside :func:`applying`'s own ``with``
_lock = threading.RLock()
_depth = 0
_requested = False


@contextmanager
def applying() -> Iterator[None]:
    """While an operation applies: a Ctrl-C may be deferred (:func:`defer`).
    Nests (threads too: the TUI applies in workers); the outermost one
    starts with no request, so none leaks from an operation a
    ``KeyboardInterrupt`` ended to the next one in the same process."""
    global _depth, _requested
    entered = False
    try:
        with _lock:
            if _depth == 0:
                _requested = False
            _depth += 1
            entered = True
        yield
    finally:
        if entered:
            with _lock:
                _depth = max(0, _depth - 1)
                if _depth == 0:
                    _requested = False


def active() -> bool:
    """Whether an operation is applying (a press now would be deferred)."""
    return _depth > 0


def defer() -> bool:
    """From a ``SIGINT`` handler: ``True`` when an operation is applying and
    no abort was deferred yet (the engine stops at its next result, counting
    every call that ran); ``False`` when the handler should raise
    ``KeyboardInterrupt`` itself."""
    global _requested
    with _lock:
        if _depth == 0 or _requested:
            return False
        _requested = True
        return True


def requested() -> bool:
    """Whether an abort was deferred (polled by the engine between calls)."""
    return _requested
