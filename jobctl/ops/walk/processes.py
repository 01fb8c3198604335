"""Work split by Redis Cluster primary, run in forked processes: the client's
per-job Python (reading, filtering, packing calls) then spreads over cores
instead of sharing one interpreter lock.

Each task runs in a child forked from the caller (it inherits the plan and
the layout: nothing is pickled on the way in) and streams what it yields
back through a pipe of its own, pickled, at most :data:`CREDIT` items ahead
of what the caller took (the caller grants one more per item it takes), so
a caller that paces (``--rate``) or stops holds every task back.  Stopping is one
shared byte the children poll (their ``halted()``); a child ignores Ctrl-C (the
caller's handler decides) and ends when the caller's end of its pipe
closes.  The first error a task raises stops the others; every item still
reaches the caller, then that error is raised.  A child that dies without a
word (killed) is :class:`~jobctl.errors.ConnectionFailed`: its jobs stay in
jobctl's holds, which a rerun finishes."""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import selectors
import signal
import sys
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, Pipe
from typing import Any

from ...errors import ConnectionFailed, JobctlError
from ..result import LATE_RESULTS

__all__ = ["FORKS", "run_forked", "POLL_S", "CREDIT", "ITEMS_A_MESSAGE"]

#: Whether tasks run in forked processes (Linux: fork is cheap and the
#: children only talk to Redis); elsewhere the caller uses threads.
FORKS = sys.platform == "linux"
#: Seconds between two looks at the caller's ``stop()`` while no child speaks.
POLL_S = 0.1
#: Items a child may send before the caller has taken them.
CREDIT = 4
#: Items a child merges into one message at most, when the caller gives a
#: merge (walks not paced by ``--rate``) and is behind: fewer pickles, pipe
#: writes and wake-ups where they cost most.
ITEMS_A_MESSAGE = 8

Task = Callable[[Callable[[], bool]], Iterator[Any]]
Merge = Callable[[Any, Any], Any]


def _child(task: Task, flag: mmap.mmap, conn: Connection, merge: Merge | None) -> None:
    """The child's whole life: ``task(halted)``'s items sent within the
    credit the caller granted, then ``("done", None)`` or ``("error",
    exc)``.  With ``merge``, the items that come while the caller has
    granted no credit are merged, up to :data:`ITEMS_A_MESSAGE` (or until
    ``merge`` declines), and sent as one message when credit comes: held
    only when the caller is behind, where the walk would otherwise wait."""
    from ..lease import forked_walker

    forked_walker()
    credit, pending, held = CREDIT, None, 0

    def send(item: Any, wait: bool = True) -> bool:
        nonlocal credit
        while conn.poll():  # grants already there, read without waiting
            credit += len(conn.recv_bytes())
        if credit == 0 and not wait:
            return False
        while credit == 0:
            credit += len(conn.recv_bytes())  # EOFError once the caller is gone
        conn.send(("item", item))
        credit -= 1
        return True

    try:
        with contextlib.closing(task(lambda: flag[0] == 1)) as items:  # closed: the task's finally runs
            for item in items:
                if merge is None:
                    send(item)
                    continue
                joined = None if pending is None else merge(pending, item)
                if pending is not None and joined is None:  # not mergeable: the held one goes first
                    send(pending)
                pending, held = (item, 1) if joined is None else (joined, held + 1)
                if send(pending, wait=held >= ITEMS_A_MESSAGE):
                    pending, held = None, 0
        if pending is not None:
            item, pending = pending, None
            send(item)
        conn.send(("done", None))
    except BaseException as exc:  # noqa: BLE001 - carried to the caller, raised there
        if pending is not None:
            with contextlib.suppress(BaseException):
                send(pending)
        with contextlib.suppress(BaseException):
            _send_error(conn, exc)


def _send_error(conn: Connection, exc: BaseException) -> None:
    """``exc`` to the caller; one that does not pickle as its message (and
    its exit code when it is jobctl's)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any pickling failure: rebuilt below
        code = getattr(exc, "exit_code", None)
        exc = (JobctlError(f"{type(exc).__name__}: {exc}", exit_code=code) if isinstance(exc, JobctlError)
               else ConnectionFailed(f"{type(exc).__name__}: {exc}"))
    conn.send(("error", exc))


def _fork(task: Task, flag: mmap.mmap, inherited: list[Connection], merge: Merge | None) -> tuple[Connection, int]:
    """Start ``task`` in a child; returns the caller's end of its pipe and its
    pid.  SIGINT is blocked across the fork, so the child ignores it before
    any can reach it (the caller's handler decides)."""
    mine, theirs = Pipe(duplex=True)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            for conn in (*inherited, mine):  # the other children's pipes: their ends must close with the caller
                conn.close()
            _child(task, flag, theirs, merge)
        except BaseException:  # noqa: BLE001 - a child never returns into the caller's code
            code = 1
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    theirs.close()
    return mine, pid


def _receive(conn: Connection, name: str) -> tuple[str, Any]:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return "error", ConnectionFailed(f"the walk on {name} ended without a result (its process died); "
                                         "its jobs are held: rerun the command to finish them")
    except Exception as exc:  # noqa: BLE001 - an error that pickled but does not unpickle
        return "error", ConnectionFailed(f"the walk on {name} failed: {type(exc).__name__}: {exc}")


def _grant(conn: Connection) -> None:
    with contextlib.suppress(OSError):  # the child has ended
        conn.send_bytes(b"\x01")


def run_forked(tasks: list[Task], names: list[str], stop: Callable[[], bool] | None,
               halting: Callable[[Any], None] | None = None, merge: Merge | None = None) -> Iterator[Any]:
    """Run each ``task(halted)`` in a forked child (``names[i]`` names it in
    errors, e.g. the primary); yields every task's items as they come.
    ``stop()`` is polled before each item and every :data:`POLL_S`; once it
    is true, or a task raised, ``halted()`` is true in every child, and each
    item still to come is passed to ``halting(item)`` before it is yielded
    (e.g. to say more follow).  Raises the first task's error after every
    child ended; closed early, the children are halted and what they still
    send goes to :data:`~jobctl.ops.result.LATE_RESULTS` (dropped when
    none is set).  With ``merge(a, b)`` (``None``: not mergeable), a child
    merges the items that come while the caller is behind, up to
    :data:`ITEMS_A_MESSAGE` a message."""
    flag = mmap.mmap(-1, 1)
    live: dict[Connection, tuple[int, str]] = {}
    error: BaseException | None = None
    # one for the run, not one built for every item; poll(2): no kernel object the children inherit
    ready = selectors.PollSelector()
    try:
        for task, name in zip(tasks, names):
            conn, pid = _fork(task, flag, list(live), merge)
            live[conn] = (pid, name)
            ready.register(conn, selectors.EVENT_READ)
        while live:
            for conn in [key.fileobj for key, _ in ready.select(timeout=POLL_S)]:
                kind, value = _receive(conn, live[conn][1])  # type: ignore[index]
                if kind == "item":
                    if not flag[0] and stop is not None and stop():
                        _halt(flag)
                    if flag[0] and halting is not None:
                        halting(value)
                    yield value
                    _grant(conn)
                    continue
                ready.unregister(conn)
                _reap(live.pop(conn), conn)  # type: ignore[arg-type]
                if kind == "error" and error is None:
                    error = value
                    _halt(flag)
            if not flag[0] and stop is not None and stop():
                _halt(flag)
    finally:
        ready.close()
        _halt(flag)  # the caller stopped early: the children end at their next round trip
        late = LATE_RESULTS.get()
        for conn, child in list(live.items()):  # drain: each child must reach its end
            _grant(conn)  # for an item yielded to a caller that closed before granting it
            while (got := _receive(conn, child[1]))[0] == "item":
                if late is not None:  # what moved after the caller stopped reading is still counted
                    late(got[1])
                _grant(conn)
            _reap(child, conn)
        flag.close()
    if error is not None:
        raise error


def _halt(flag: mmap.mmap) -> None:
    if not flag.closed and not flag[0]:
        flag[0] = 1


def _reap(child: tuple[int, str], conn: Connection) -> None:
    conn.close()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child[0], 0)
