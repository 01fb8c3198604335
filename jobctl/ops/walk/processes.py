"""Work split by Redis Cluster primary, run in forked processes: the client's
per-job Python (reading, filtering, packing calls) then spreads over cores
instead of sharing one interpreter lock.

Each task runs in a child forked from the caller (it inherits the plan and
the layout: nothing is pickled on the way in) and streams what it yields
back through a pipe of its own, pickled; a full pipe holds the child back,
so a caller that paces or stops holds every task back.  Stopping is one
shared byte the children poll (:data:`halted`); a child ignores Ctrl-C (the
caller's handler decides) and ends when the caller's end of its pipe
closes.  The first error a task raises stops the others; every item still
reaches the caller, then that error is raised.  A child that dies without a
word (killed) is :class:`~jobctl.errors.ConnectionFailed`: its jobs stay in
jobctl's holds, which a rerun finishes."""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import sys
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any

from ...errors import ConnectionFailed

__all__ = ["FORKS", "run_forked", "POLL_S"]

#: Whether tasks run in forked processes (Linux: fork is cheap and the
#: children only talk to Redis); elsewhere the caller uses threads.
FORKS = sys.platform == "linux"
#: Seconds between two looks at the caller's ``stop()`` while no child speaks.
POLL_S = 0.1

Task = Callable[[Callable[[], bool]], Iterator[Any]]


def _child(task: Task, flag: mmap.mmap, out: Connection) -> None:
    """The child's whole life: ``task(halted)``'s items sent one by one,
    then ``("done", None)`` or ``("error", exc)``."""
    with contextlib.suppress(ValueError):  # the forking thread is the child's main thread: this holds
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with contextlib.closing(task(lambda: flag[0] == 1)) as items:  # closed: the task's finally runs
            for item in items:
                out.send(("item", item))
        out.send(("done", None))
    except BaseException as exc:  # noqa: BLE001 - carried to the caller, raised there
        with contextlib.suppress(BaseException):
            try:
                out.send(("error", exc))
            except OSError:  # the caller is gone
                pass
            except Exception:  # noqa: BLE001 - an error that does not pickle: its message
                out.send(("error", ConnectionFailed(f"{type(exc).__name__}: {exc}")))


def _fork(task: Task, flag: mmap.mmap, inherited: list[Connection]) -> tuple[Connection, int]:
    """Start ``task`` in a child; returns the caller's end of its pipe and its pid."""
    reader, writer = Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for conn in (*inherited, reader):  # the other children's pipes: their ends must close with the caller
                conn.close()
            _child(task, flag, writer)
        except BaseException:  # noqa: BLE001 - a child never returns into the caller's code
            code = 1
        finally:
            os._exit(code)
    writer.close()
    return reader, pid


def _receive(conn: Connection, name: str) -> tuple[str, Any]:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return "error", ConnectionFailed(f"the walk on {name} ended without a result (its process died); "
                                         "its jobs are held: rerun the command to finish them")


def run_forked(tasks: list[Task], names: list[str], stop: Callable[[], bool] | None) -> Iterator[Any]:
    """Run each ``task(halted)`` in a forked child (``names[i]`` names it in
    errors, e.g. the primary); yields every task's items as they come.
    ``stop()`` is polled between items and every :data:`POLL_S`; once it
    is true, or a task raised, ``halted()`` is true in every child.  Raises
    the first task's error after every child ended."""
    flag = mmap.mmap(-1, 1)
    live: dict[Connection, tuple[int, str]] = {}
    error: BaseException | None = None
    try:
        for task, name in zip(tasks, names):
            conn, pid = _fork(task, flag, list(live))
            live[conn] = (pid, name)
        while live:
            for conn in wait(list(live), timeout=POLL_S):
                kind, value = _receive(conn, live[conn][1])
                if kind == "item":
                    yield value
                    continue
                _reap(live.pop(conn), conn)
                if kind == "error" and error is None:
                    error, flag[0] = value, 1
            if stop is not None and stop():
                flag[0] = 1
    finally:
        flag[0] = 1  # the caller stopped early: the children end at their next round trip
        for conn, child in list(live.items()):  # drain: a child waiting on a full pipe must reach its end
            while _receive(conn, child[1])[0] == "item":
                pass
            _reap(child, conn)
        flag.close()
    if error is not None:
        raise error


def _reap(child: tuple[int, str], conn: Connection) -> None:
    conn.close()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child[0], 0)
