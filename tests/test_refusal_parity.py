"""Every refusal comes from the operations core, the same through every
front end.

ONE parametrized test runs each refusal case of each operation of
:data:`jobctl.ops.catalog.OPERATIONS` (a new operation without its cases
fails at collection: :data:`CASES` has no entry for it) through

(a) the CLI (``jobctl ...`` in-process),
(b) the TUI's path (the request :class:`jobctl_tui.actions.ActionRequest`
    builds, planned by :meth:`jobctl.dashboard.Dashboard.prepare`: what the
    TUI's worker calls), and
(c) a runbook step (``jobctl runbook run`` of a runbook holding the same
    command, run as a child process like every step),

and asserts the same refusal (exit code and message) and that nothing was
written: Redis unchanged (full-keyspace snapshot), no export directory.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobctl.cli.main import main
from jobctl.config import load_config
from jobctl.dashboard import Dashboard
from jobctl.errors import JobctlError
from jobctl.model import State
from jobctl.ops.catalog import OPERATIONS
from jobctl.ops.spec import Operation
from jobctl.ops.transform import load_transform
from jobctl.session import Session
from jobctl_tui.actions import ActionRequest
from helpers import queues_toml, write_config
from test_operations import simple_dead, snapshot
from test_pause import enqueue
from test_replay import history
from test_transform import TRANSFORM

TOML = queues_toml(email={"layout": "reliable-list"}, other={"layout": "reliable-list"},
                   ev={"layout": "stream-group", "tag": "ev"},  # ev: visibility timeout only a default
                   cel={"layout": "celery", "tag": "celery"})  # cel: result records not opted in

#: What only the read-only refusal of a runbook (``runbook run --yes``) and of an operation share.
READ_ONLY = "refused: read-only mode (--read-only or profile setting)"


@dataclass
class Case:
    """One refusal: the CLI words (after the global options), the TUI's
    :class:`ActionRequest` (``tui(tmp_path)``), whether the session is
    read-only, and the export directory that must not appear."""

    name: str
    argv: list[str]
    tui: Callable[[Path], ActionRequest]
    read_only: bool = False
    export: str | None = None


def _act(op: Operation, queue: str, source: State, **kw) -> Callable[[Path], ActionRequest]:
    return lambda tmp: ActionRequest(op, queue, source, "parity", **kw)


def _transform(tmp: Path, queue: str = "email", **kw) -> ActionRequest:
    return ActionRequest(Operation.TRANSFORM, queue, State.READY, "parity", transform=load_transform(
        str(tmp / "t.toml")), **kw)


def _purge_tui(**kw) -> Callable[[Path], ActionRequest]:
    return lambda tmp: ActionRequest(Operation.PURGE, "email", State.DEAD, "parity", **kw)


#: Operation -> (CLI words, TUI request) of one ordinary request; the
#: read-only and blank-filter cases are made from it.
BASE: dict[Operation, tuple[list[str], Callable[[Path], ActionRequest]]] = {
    Operation.REQUEUE: (["requeue", "email", "--stuck"], _act(Operation.REQUEUE, "email", State.PROCESSING,
                                                                 stuck_only=True)),
    Operation.PROMOTE: (["promote", "email"], _act(Operation.PROMOTE, "email", State.SCHEDULED)),
    Operation.REDRIVE: (["redrive", "email"], _act(Operation.REDRIVE, "email", State.DEAD)),
    Operation.SUPPRESS: (["suppress", "email", "--reason", "r", "--filter", "tenant = t1"],
                         _act(Operation.SUPPRESS, "email", State.DEAD, reason="r", filter_text="tenant = t1")),
    Operation.UNSUPPRESS: (["unsuppress", "email"], _act(Operation.UNSUPPRESS, "email", State.SUPPRESSED)),
    Operation.PURGE: (["purge", "email", "--state", "dead", "--export-to", "{tmp}/x"],
                      lambda tmp: ActionRequest(Operation.PURGE, "email", State.DEAD, "parity",
                                                export_to=str(tmp / "x"))),
    Operation.PAUSE: (["pause", "email", "--reason", "r"], _act(Operation.PAUSE, "email", State.READY, reason="r")),
    Operation.RESUME: (["resume", "email"], _act(Operation.RESUME, "email", State.PAUSED)),
    Operation.MIGRATE: (["migrate", "email", "other"], _act(Operation.MIGRATE, "email", State.READY,
                                                             destination="other")),
    Operation.DRAIN: (["drain", "email", "--export-to", "{tmp}/x"],
                      _act(Operation.DRAIN, "email", State.READY, export_to="{tmp}/x")),
    Operation.TRANSFORM: (["migrate", "email", "--transform", "{tmp}/t.toml"], _transform),
    Operation.REPLAY: (["replay", "ev", "--from", "0-1"],
                       _act(Operation.REPLAY, "ev", State.HISTORY, replay_range=("0-1", "+"))),
}

#: Operation -> its own refusal cases (beyond read-only and a blank filter).
OWN: dict[Operation, list[Case]] = {
    Operation.REQUEUE: [Case("stuck with a defaulted visibility timeout", ["requeue", "ev", "--stuck"],
                             _act(Operation.REQUEUE, "ev", State.PROCESSING, stuck_only=True))],
    Operation.PROMOTE: [],
    Operation.REDRIVE: [],
    Operation.SUPPRESS: [Case("blank reason", ["suppress", "email", "--reason", " ", "--filter", "tenant = t1"],
                              _act(Operation.SUPPRESS, "email", State.DEAD, reason=" ", filter_text="tenant = t1")),
                         Case("every dead job", ["suppress", "email", "--reason", "r"],
                              _act(Operation.SUPPRESS, "email", State.DEAD, reason="r"))],
    Operation.UNSUPPRESS: [],
    Operation.PURGE: [Case("without an export choice", ["purge", "email", "--state", "dead"], _purge_tui())],
    Operation.PAUSE: [Case("blank reason", ["pause", "email", "--reason", " "],
                           _act(Operation.PAUSE, "email", State.READY, reason=" ")),
                      Case("stream-group layout", ["pause", "ev", "--reason", "r"],
                           _act(Operation.PAUSE, "ev", State.READY, reason="r"))],
    Operation.RESUME: [Case("stream-group layout", ["resume", "ev"], _act(Operation.RESUME, "ev", State.PAUSED))],
    Operation.MIGRATE: [Case("from a stream-group queue", ["migrate", "ev", "email"],
                             _act(Operation.MIGRATE, "ev", State.READY, destination="email")),
                        Case("to a stream-group queue", ["migrate", "email", "ev"],
                             _act(Operation.MIGRATE, "email", State.READY, destination="ev"))],
    Operation.DRAIN: [Case("stream-group layout", ["drain", "ev", "--export-to", "{tmp}/x"],
                           _act(Operation.DRAIN, "ev", State.READY, export_to="{tmp}/x"), export="x")],
    Operation.TRANSFORM: [Case("stream-group layout", ["migrate", "ev", "--transform", "{tmp}/t.toml"],
                               lambda tmp: _transform(tmp, "ev"))],
    Operation.REPLAY: [Case("not a stream-group queue", ["replay", "email", "--from", "0-1"],
                            _act(Operation.REPLAY, "email", State.HISTORY, replay_range=("0-1", "+"))),
                       Case("celery result records not opted in", ["replay", "cel"],
                            _act(Operation.REPLAY, "cel", State.HISTORY))],
}


def _with_filter(make: Callable[[Path], ActionRequest], text: str) -> Callable[[Path], ActionRequest]:
    def build(tmp: Path) -> ActionRequest:
        req = make(tmp)
        req.filter_text = text
        return req
    return build


def _takes_filter(subcommand: str) -> bool:
    from jobctl.cli.main import cli

    return any(p.name == "filter_text" for p in cli.commands[subcommand].params)


def _cases(op: Operation) -> list[Case]:
    """Every refusal case of ``op`` (KeyError for an operation without its entries)."""
    argv, tui = BASE[op]
    export = "x" if "{tmp}/x" in argv else None
    cases = [Case("read-only session", argv, tui, read_only=True, export=export)]
    if _takes_filter(argv[0]):
        words = [w for i, w in enumerate(argv) if w != "--filter" and (i == 0 or argv[i - 1] != "--filter")]
        cases.append(Case("blank filter", words + ["--filter", " "], _with_filter(tui, " "), export=export))
    return cases + OWN[op]


CASES = [pytest.param(op, case, id=f"{op.value}: {case.name}") for op in OPERATIONS for case in _cases(op)]


def _words(argv: list[str], tmp: Path) -> list[str]:
    return [w.replace("{tmp}", str(tmp)) for w in argv]


def _runbook(tmp: Path, argv: list[str]) -> Path:
    """A runbook directory holding ``parity``, one step: ``jobctl ARGV``."""
    d = tmp / "books"
    d.mkdir(exist_ok=True)
    (d / "parity.md").write_text("# Parity\n\n## Remediation\n\n```jobctl step=op\njobctl "
                                 + " ".join(shlex.quote(w) for w in argv) + "\n```\n")
    return d


def _tui_refusal(url: str, cfg: str, case: Case, tmp: Path) -> JobctlError:
    session = Session(config_file=cfg, url=url, read_only_flag=case.read_only)
    session._config = load_config(cfg)
    try:
        action = case.tui(tmp)
        if action.export_to:
            action.export_to = action.export_to.replace("{tmp}", str(tmp))
        with pytest.raises(JobctlError) as info:
            Dashboard(session).prepare(action.request())
        return info.value
    finally:
        session.close()


@pytest.mark.parametrize("op, case", CASES)
def test_every_refusal_is_the_cores_in_cli_tui_and_runbook(op, case, redis_url, redis_client, tmp_path, capsys):
    simple_dead(redis_client, "email", 4)
    enqueue(redis_client, "email", 3, prefix="r")
    history(redis_client, 6, acked=4, pending=1)
    (tmp_path / "t.toml").write_text(TRANSFORM)
    cfg = write_config(tmp_path, TOML)
    before = snapshot(redis_client)
    argv = _words(case.argv, tmp_path)
    ro = ["--read-only"] if case.read_only else []

    # (b) the TUI's path: the core's refusal, as the TUI shows it
    exc = _tui_refusal(redis_url, cfg, case, tmp_path)
    message, code = str(exc), int(exc.exit_code)
    assert code in (2, 9), (code, message)
    assert snapshot(redis_client) == before

    # (a) the CLI: the same exit code and message (one line on stderr)
    capsys.readouterr()
    got = main(["--url", redis_url, "--config", cfg, *ro, *argv, "--yes"])
    err = capsys.readouterr().err
    assert got == code, err
    assert message.splitlines()[0] in err, (message, err)
    assert "Traceback" not in err
    assert snapshot(redis_client) == before

    # (c) a runbook step running the same command (its child's stderr copied to ours)
    books = _runbook(tmp_path, argv)
    got = main(["--url", redis_url, "--config", cfg, *ro, "runbook", "--dir", str(books), "run", "parity", "--yes"])
    err = capsys.readouterr().err
    assert got == code, err
    want = READ_ONLY if case.read_only else message.splitlines()[0]
    assert want in err, (want, err)
    assert snapshot(redis_client) == before
    if case.export or "{tmp}/x" in " ".join(case.argv):
        assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("op", list(OPERATIONS), ids=str)
def test_a_runbook_step_of_every_operation_is_mutating(op):
    """So that a runbook run without --yes (or read-only) runs it as a dry run, never for real."""
    from jobctl.runbook.model import Command

    argv = _words(BASE[op][0], Path("/tmp"))
    assert Command(" ".join(argv), tuple(argv), 1).mutating
    assert not Command(" ".join(argv), (*argv, "--dry-run"), 1).mutating
    if op is Operation.MIGRATE:
        assert Command("reshard q --shards 4", ("reshard", "q", "--shards", "4"), 1).mutating
