"""What a command's start-up loads (issue 11: jobctl's fixed cost inside every
bulk figure): one command imports its own module of commands only, an
operation without a filter never imports the filter compiler, and
``--help`` still lists every command in the same order.  Checked in fresh
interpreters (``sys.modules``), never with timings."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from jobctl.cli import main as cli_main

#: Modules an unfiltered operation must not import.
_NOT_FOR_AN_OPERATION = ("jobctl.cli.read_cmds", "jobctl.cli.admin_cmds", "jobctl.cli.demo_cmd",
                         "jobctl.cli.tui_cmd", "jobctl.cli.runbook_cmds", "jobctl.cli.metrics_cmds",
                         "jobctl.cli.export_cmds", "jobctl.cli.recovery_cmds", "jobctl.filter.compiler",
                         "jobctl.filter.grammar", "decimal", "getpass")


def _probe(argv: list[str]) -> dict:
    """``main(argv)`` in a fresh interpreter: its exit code, stdout and the
    jobctl / watched modules it left in ``sys.modules`` (reported on stderr)."""
    code = f"""
import json, sys
from jobctl.cli.main import main
try:
    rc = main({argv!r})
except SystemExit as exc:
    rc = exc.code
sys.stdout.flush()
watched = {_NOT_FOR_AN_OPERATION!r}
print(json.dumps({{"rc": rc, "modules": sorted(m for m in sys.modules if m.startswith("jobctl") or m in watched)}}),
      file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(proc.stderr.strip().splitlines()[-1]) | {"out": proc.stdout}


def test_one_command_imports_only_its_module_of_commands():
    seen = _probe(["redrive", "--help"])
    assert seen["rc"] == 0 and "Move dead jobs back to ready" in seen["out"]
    assert "jobctl.cli.ops_cmds" in seen["modules"]
    assert [m for m in _NOT_FOR_AN_OPERATION if m in seen["modules"]] == []


def test_help_lists_every_command_in_module_order():
    expected = [c.name for n in cli_main._COMMAND_MODULES
                for c in importlib.import_module(f"jobctl.cli.{n}").COMMANDS]
    assert list(cli_main.cli.commands) == expected
    assert cli_main.cli.list_commands(None) == expected
    listed = _probe(["--help"])["out"].split("Commands:", 1)[1]
    names = [line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.split()]
    assert names[:len(expected)] == expected


def test_a_mistyped_command_still_suggests_the_closest(capsys):
    assert cli_main.main(["redrivex"]) == 2
    assert "Did you mean 'redrive'?" in capsys.readouterr().err


def test_an_unfiltered_operation_imports_no_filter_compiler(redis_url, tmp_path, monkeypatch):
    config = tmp_path / "jobctl.toml"
    config.write_text('[queues."q"]\nlayout = "reliable-list"\ntag = "q"\n')
    monkeypatch.setenv("JOBCTL_CONFIG", str(config))
    for argv in (["--url", redis_url, "redrive", "q", "--yes", "--json"],
                 ["--url", redis_url, "purge", "q", "--state", "dead", "--no-export", "--yes", "--json"]):
        seen = _probe(argv)
        assert seen["rc"] == 0
        assert json.loads(seen["out"])["planned"] == 0
        assert [m for m in _NOT_FOR_AN_OPERATION if m in seen["modules"]] == []
    seen = _probe(["--url", redis_url, "redrive", "q", "--filter", "tenant = t1", "--dry-run", "--json"])
    assert seen["rc"] == 0 and "jobctl.filter.compiler" in seen["modules"]


def test_the_client_reports_redis_py_s_own_version():
    """CLIENT SETINFO LIB-VER: the version redis-py would look up itself."""
    from importlib import metadata

    import redis

    from jobctl.config import Config
    from jobctl.connection import make_client, resolve_target

    client = make_client(resolve_target(Config(), url="redis://127.0.0.1:1/0"))
    info = client.connection_pool.connection_kwargs.get("driver_info")
    if hasattr(redis, "DriverInfo"):
        assert info.lib_version == metadata.version("redis")
        assert info.formatted_name == "redis-py"
    client.close()


def _whole_process(argv: list[str]) -> dict:
    """``main()`` as the console script runs it (no ``argv``: ``sys.argv``),
    then the collector's state: enabled again, and how many objects the
    start-up froze."""
    code = f"""
import gc, json, sys
from jobctl.cli.main import main
sys.argv = ["jobctl", *{argv!r}]
try:
    main()
except SystemExit as exc:
    rc = exc.code
sys.stdout.flush()
print(json.dumps({{"rc": rc, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}}), file=sys.stderr)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(proc.stderr.strip().splitlines()[-1]) | {"out": proc.stdout}


def test_a_whole_process_resumes_the_collector_after_start_up(redis_url, tmp_path, monkeypatch):
    """The start-up pause ends: at the operation's first connection (its
    start-up objects frozen), when any other command starts, and at exit
    whatever happened (a usage error before connecting, ``--help``)."""
    config = tmp_path / "jobctl.toml"
    config.write_text('[queues."q"]\nlayout = "reliable-list"\ntag = "q"\n')
    monkeypatch.setenv("JOBCTL_CONFIG", str(config))
    ran = _whole_process(["--url", redis_url, "redrive", "q", "--yes", "--json"])
    assert ran["rc"] == 0 and json.loads(ran["out"])["planned"] == 0
    assert ran["enabled"] and ran["frozen"] > 0
    for argv, rc in ((["--help"], 0), (["--url", redis_url, "redrive", "q", "--limit", "0", "--yes"], 2),
                     (["--url", redis_url, "status", "q", "--json"], 0)):
        ran = _whole_process(argv)
        assert (ran["rc"], ran["enabled"]) == (rc, True), argv


def test_in_process_callers_keep_their_collector(capsys):
    import gc

    frozen = gc.get_freeze_count()
    assert cli_main.main(["redrive", "--help"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_a_session_calls_on_connect_after_connecting(redis_url):
    from jobctl.session import Session

    calls = []
    session = Session(url=redis_url, on_connect=lambda: calls.append(session._client is not None))
    try:
        session.client.ping()
        session.client.ping()
        assert calls == [True]
    finally:
        session.close()
