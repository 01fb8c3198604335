"""jobctl.ops.walk.processes: tasks in forked children, their items on one
iterator; a stop or an error reaches every child; a dead child is an error
naming it.  No server: the tasks are plain generators."""

from __future__ import annotations

import itertools
import os
import threading

import pytest

from jobctl.errors import ConnectionFailed
from jobctl.ops.walk.processes import FORKS, run_forked

pytestmark = pytest.mark.skipif(not FORKS, reason="tasks run in threads where fork is not used")


def counting(label: str, limit: int | None = None):
    def task(halted):
        for n in itertools.count() if limit is None else range(limit):
            if halted():
                return
            yield (label, n, os.getpid())

    return task


def test_every_item_of_every_child_reaches_the_caller_from_another_process():
    items = list(run_forked([counting("a", 500), counting("b", 700)], ["a", "b"], None))
    assert sorted(n for label, n, _ in items if label == "a") == list(range(500))
    assert sorted(n for label, n, _ in items if label == "b") == list(range(700))
    pids = {pid for *_, pid in items}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_stop_halts_every_child_and_the_iterator_ends():
    seen: list = []
    stopped = threading.Event()

    def stop() -> bool:
        return stopped.is_set()

    for item in run_forked([counting("a"), counting("b")], ["a", "b"], stop):
        seen.append(item)
        if len(seen) == 50:
            stopped.set()
    assert len(seen) >= 50  # items already sent still arrive, then every child ends


def test_the_first_error_is_raised_after_the_others_stopped():
    def failing(halted):
        yield ("c", 0, os.getpid())
        raise ValueError("bad window")

    with pytest.raises(ValueError, match="bad window"):
        list(run_forked([counting("a"), failing], ["a", "c"], None))


def test_an_error_that_does_not_pickle_arrives_as_its_message():
    class Local(Exception):  # a local class: pickle cannot name it
        pass

    def failing(halted):
        raise Local("no pickle")
        yield

    with pytest.raises(ConnectionFailed, match="no pickle"):
        list(run_forked([failing], ["x"], None))


def test_a_child_that_dies_is_an_error_naming_it():
    def dying(halted):
        yield ("d", 0, os.getpid())
        os.kill(os.getpid(), 9)
        yield ("d", 1, os.getpid())

    with pytest.raises(ConnectionFailed, match="127.0.0.1:7001.*rerun"):
        list(run_forked([dying], ["127.0.0.1:7001"], None))


def test_closing_the_iterator_early_ends_every_child():
    it = run_forked([counting("a"), counting("b")], ["a", "b"], None)
    pids = {next(it)[2] for _ in range(10)}
    it.close()
    for pid in pids:  # reaped: no zombie left
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_closing_right_after_an_item_with_a_credit_of_one_does_not_wait_forever(monkeypatch):
    from jobctl.ops.walk import processes

    monkeypatch.setattr(processes, "CREDIT", 1)  # the child blocks after each item until it is granted
    it = run_forked([counting("a")], ["a"], None)
    next(it)
    closer = threading.Thread(target=it.close, daemon=True)
    closer.start()
    closer.join(timeout=30)
    assert not closer.is_alive(), "the close waited on a child that waited for its credit"


def test_merged_items_arrive_whole_in_order_and_before_the_error():
    """With a merge, each message carries up to ITEMS_A_MESSAGE items; none
    is lost or reordered, and those held when the task fails arrive before
    its error."""
    from jobctl.ops.walk.processes import ITEMS_A_MESSAGE

    def listed(label: str, limit: int, fail: bool = False):
        def task(halted):
            for n in range(limit):
                yield [(label, n)]
            if fail:
                raise ValueError("bad window")

        return task

    got: list = []
    messages = 0
    with pytest.raises(ValueError, match="bad window"):
        for item in run_forked([listed("a", 100), listed("b", ITEMS_A_MESSAGE + 3, fail=True)], ["a", "b"], None,
                               merge=lambda x, y: x + y):
            got += item
            messages += 1
    assert [n for label, n in got if label == "a"] == list(range(100))
    assert [n for label, n in got if label == "b"] == list(range(ITEMS_A_MESSAGE + 3))
    assert messages < 100 + ITEMS_A_MESSAGE + 3
