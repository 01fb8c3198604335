"""Ctrl-C while an operation applies (``jobctl.ops.interrupt`` and the
CLI's handler): no server needed; the walks' counts under real ``SIGINT``s
are in test_tail_walk_changes_and_errors.py and test_per_job_walk_changes_and_errors.py."""

from __future__ import annotations

import os
import signal

import pytest

from jobctl.cli.ops_cmds import StopFlag
from jobctl.ops import interrupt


def test_defer_only_while_applying_and_only_once():
    assert not interrupt.defer() and not interrupt.requested()
    with interrupt.applying():
        with interrupt.applying():  # nested: one request for the whole
            assert interrupt.defer() and interrupt.requested()
            assert not interrupt.defer()  # the next press raises
        assert interrupt.requested()
    assert not interrupt.requested() and not interrupt.defer()


def test_a_request_left_by_an_interrupted_apply_does_not_reach_the_next():
    with pytest.raises(KeyboardInterrupt), interrupt.applying():
        assert interrupt.defer()
        raise KeyboardInterrupt  # a third press: the operation ends here
    with interrupt.applying():
        assert interrupt.active() and not interrupt.requested()
    assert not interrupt.active()


def _press() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_presses_outside_an_apply_stop_then_interrupt(capsys):
    with StopFlag() as stopper:
        _press()
        assert stopper.flag.is_set()
        with pytest.raises(KeyboardInterrupt):
            _press()
    assert "stopping after the current batch" in capsys.readouterr().err


def test_presses_while_applying_stop_stop_then_interrupt(capsys):
    before = signal.getsignal(signal.SIGINT)  # another test's (pyspark installs one)
    with StopFlag() as stopper, interrupt.applying():
        _press()
        _press()
        assert stopper.flag.is_set() and interrupt.requested()
        with pytest.raises(KeyboardInterrupt):
            _press()
    err = capsys.readouterr().err
    assert "stopping after the calls in flight (Ctrl-C twice more" in err
    assert "already stopping: counting the calls in flight" in err and not interrupt.requested()
    assert signal.getsignal(signal.SIGINT) is before
