#!/usr/bin/env python3
"""Smoke test of jobctl installed from its wheel (not editable).

Usage: python3 .ci/wheel_smoke.py VENV

VENV is a virtualenv into which the built wheel was installed (nothing else
of this repository). Every check runs the venv's own `python` and `jobctl`
in a temporary folder outside the repository, with no config file, so
nothing can be imported from the source tree:

1. `jobctl` is imported from the venv's site-packages, and every package of
   the source tree (a folder with an `__init__.py` under jobctl/, tui/,
   fixtures/, runbooks/) is installed;
2. every module of jobctl, jobctl_tui, jobctl_fixtures and jobctl_runbooks
   imports (a missing optional extra, such as pyspark, is reported, not
   failed; a missing jobctl package fails);
3. `jobctl [SUBCOMMAND...] --help` exits 0 for every command and subcommand
   of the click group (enumerated from it, so none is missed);
4. against a redis-server this script starts on a free loopback port, with a
   small reliable-list queue loaded by jobctl_fixtures: `jobctl status`,
   `status --json`, `discover`, `check`, `redrive --dry-run` and
   `runbook list` exit 0 and name the queue where they should.

Exits 0 when every check passed, 1 otherwise (each failure is printed).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER_START_S = 15.0
COMMAND_TIMEOUT_S = 120.0

#: Run in the venv: the command paths of the click group, as a JSON list.
LIST_COMMANDS = """
import json, click
from jobctl.cli.main import cli
def walk(cmd, path):
    yield path
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=" ".join(["jobctl", *path]))
        for name in cmd.list_commands(ctx):
            yield from walk(cmd.get_command(ctx, name), [*path, name])
print(json.dumps(list(walk(cli, []))))
"""

#: Run in the venv: import every module of the installed packages.
IMPORT_ALL = """
import importlib, json, pkgutil
ok, optional, broken = [], [], []
for top in ("jobctl", "jobctl_tui", "jobctl_fixtures", "jobctl_runbooks"):
    pkg = importlib.import_module(top)
    names = [top] + [m.name for m in pkgutil.walk_packages(pkg.__path__, top + ".", onerror=broken.append)]
    for name in names:
        try:
            importlib.import_module(name)
            ok.append(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0].startswith("jobctl"):
                broken.append(f"{name}: {exc}")
            else:
                optional.append(f"{name}: needs {exc.name}")
        except Exception as exc:
            broken.append(f"{name}: {type(exc).__name__}: {exc}")
print(json.dumps({"ok": ok, "optional": optional, "broken": [str(b) for b in broken]}))
"""

#: Run in the venv with package names: those that are not installed, as a JSON list.
FIND_SPECS = """
import importlib.util, json, sys
print(json.dumps([name for name in sys.argv[1:] if importlib.util.find_spec(name) is None]))
"""

#: Run in the venv with the server's URL: load a small queue "email".
LOAD_QUEUE = """
import sys, time, redis
from jobctl_fixtures.scenarios import load_scenario
load_scenario(redis.Redis.from_url(sys.argv[1]), "dlq-spike", size=60, seed=1, now_ms=time.time_ns() // 1_000_000)
"""


class Smoke:
    """The checks' runner: the venv, a scratch folder, and the failures so far."""

    def __init__(self, venv: Path) -> None:
        self.venv = venv
        self.python = venv / "bin" / "python"
        self.jobctl = venv / "bin" / "jobctl"
        self.work = Path(tempfile.mkdtemp(prefix="jobctl-wheel-smoke-"))
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("JOBCTL_") and k not in ("REDIS_URL", "PYTHONPATH", "VIRTUAL_ENV")}
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            self.env[var] = str(self.work / var.lower())
        self.env["JOBCTL_JOURNAL"] = str(self.work / "journal.jsonl")
        self.failures: list[str] = []
        self.passed = 0

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def check(self, what: str, argv: list[str], *, expect_out: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv``; a pass is exit 0 (and ``expect_out`` in stdout when given)."""
        res = self.run(argv)
        if res.returncode != 0 or (expect_out is not None and expect_out not in res.stdout):
            tail = (res.stderr.strip() or res.stdout.strip())[-600:]
            self.failures.append(f"{what}: exit {res.returncode}: {tail}")
            print(f"FAIL {what} (exit {res.returncode})", flush=True)
        else:
            self.passed += 1
        return res

    def python_json(self, what: str, code: str) -> object:
        res = self.check(what, [str(self.python), "-c", code])
        try:
            return json.loads(res.stdout)
        except ValueError:
            return None


#: Installed name -> folder of this repository (setup.py's RENAMED, and jobctl itself).
SOURCE_FOLDERS = {"jobctl": "jobctl", "jobctl_tui": "tui", "jobctl_fixtures": "fixtures", "jobctl_runbooks": "runbooks"}


def source_packages() -> list[str]:
    """Dotted names of the packages of the source tree (folders with an ``__init__.py``)."""
    root = Path(__file__).resolve().parent.parent
    names = []
    for name, folder in SOURCE_FOLDERS.items():
        for init in sorted((root / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(root / folder).parts
            names.append(".".join((name, *rel)))
    return names


def check_install(smoke: Smoke) -> None:
    """1 and 2: jobctl comes from the venv, every package of the source tree
    is installed, and every installed module imports."""
    expected = source_packages()
    res = smoke.run([str(smoke.python), "-c", FIND_SPECS, *expected])
    missing = json.loads(res.stdout) if res.returncode == 0 else [f"(check failed: {res.stderr.strip()[-300:]})"]
    smoke.failures += [f"package {name} of the source tree is not installed" for name in missing]
    print(f"{len(expected) - len(missing)} of {len(expected)} source packages installed", flush=True)
    where = smoke.python_json("import jobctl", "import json, jobctl; print(json.dumps(jobctl.__file__))")
    prefix = str(smoke.venv.resolve())
    if not isinstance(where, str) or not str(Path(where).resolve()).startswith(prefix):
        smoke.failures.append(f"jobctl imported from {where!r}, not from the venv {prefix}")
    found = smoke.python_json("import every module", IMPORT_ALL) or {}
    smoke.failures += [f"import {b}" for b in found.get("broken", [])]
    print(f"imported {len(found.get('ok', []))} modules; optional extras missing: "
          f"{found.get('optional') or 'none'}", flush=True)
    if len(found.get("ok", [])) < 50:
        smoke.failures.append(f"only {len(found.get('ok', []))} modules imported")


def check_help(smoke: Smoke) -> None:
    """3: ``--help`` of every command and subcommand."""
    paths = smoke.python_json("list the commands", LIST_COMMANDS) or []
    if len(paths) < 20:
        smoke.failures.append(f"the click group lists only {len(paths)} commands")
    for path in paths:
        smoke.check(f"jobctl {' '.join(path)} --help".replace("  ", " "), [str(smoke.jobctl), *path, "--help"],
                    expect_out="Usage:")
    print(f"--help of {len(paths)} commands", flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(smoke: Smoke) -> tuple[subprocess.Popen, str]:
    """redis-server on a free loopback port, no persistence; (process, URL)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not on PATH")
    port = free_port()
    data = smoke.work / "redis"
    data.mkdir()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"redis-server did not answer on port {port}")


def check_server_commands(smoke: Smoke) -> None:
    """4: the read commands and a dry run against a live server."""
    proc, url = start_server(smoke)
    try:
        smoke.check("load a queue with jobctl_fixtures", [str(smoke.python), "-c", LOAD_QUEUE, url])
        jobctl = [str(smoke.jobctl), "--url", url]
        smoke.check("jobctl status", [*jobctl, "status"], expect_out="email")
        res = smoke.check("jobctl status --json", [*jobctl, "status", "--json"], expect_out="email")
        try:
            json.loads(res.stdout)
        except ValueError:
            smoke.failures.append("jobctl status --json: stdout is not JSON")
        smoke.check("jobctl discover", [*jobctl, "discover"], expect_out="email")
        smoke.check("jobctl check", [*jobctl, "check", "email"])
        smoke.check("jobctl redrive --dry-run", [*jobctl, "redrive", "email", "--dry-run"])
        smoke.check("jobctl runbook list", [*jobctl, "runbook", "list"], expect_out="dlq-spike")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not (Path(argv[1]) / "bin" / "jobctl").exists():
        print("usage: wheel_smoke.py VENV  (a venv with the jobctl wheel installed)", file=sys.stderr)
        return 2
    smoke = Smoke(Path(argv[1]))
    try:
        check_install(smoke)
        check_help(smoke)
        check_server_commands(smoke)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        smoke.failures.append(f"smoke aborted: {type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(smoke.work, ignore_errors=True)
    for failure in smoke.failures:
        print(f"wheel smoke FAILED: {failure}")
    print(f"wheel smoke: {smoke.passed} checks ok, {len(smoke.failures)} failures")
    return 1 if smoke.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
