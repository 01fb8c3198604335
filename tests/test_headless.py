"""The core is headless: importing ``jobctl`` or any ``jobctl.*`` module never
imports Textual (or the TUI package), and ``jobctl --help`` needs neither
Textual nor PySpark.  Checked in fresh interpreters, so nothing the test
process imported earlier can hide an import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from jobctl.exitcodes import ExitCode

#: Never imported by the headless core.
FORBIDDEN = ("textual", "jobctl_tui")
#: Not needed to print --help.
NOT_FOR_HELP = ("textual", "jobctl_tui", "pyspark")


def run_python(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_core_module_imports_without_textual():
    result = run_python(f"""
        import importlib, json, pkgutil, sys
        import jobctl
        forbidden = {FORBIDDEN!r}
        culprits, modules = {{}}, ["jobctl"]
        modules += sorted(m.name for m in pkgutil.walk_packages(jobctl.__path__, "jobctl."))
        for name in modules:
            importlib.import_module(name)
            for f in forbidden:
                if f in sys.modules and f not in culprits:
                    culprits[f] = name
        print(json.dumps({{"modules": modules, "culprits": culprits}}))
    """)
    assert "jobctl.cli.main" in result["modules"] and "jobctl.session" in result["modules"]
    assert len(result["modules"]) > 20
    assert result["culprits"] == {}, f"imported by: {result['culprits']}"


def test_help_does_not_import_textual_or_pyspark():
    result = run_python("""
        import contextlib, io, json, sys
        from jobctl.cli.main import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--help"])
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"textual", "jobctl_tui", "pyspark",
                                                                    "pyarrow", "rich", "redis"})
        print(json.dumps({"code": code, "help": out.getvalue(), "heavy": heavy}))
    """)
    assert result["code"] == 0
    assert not set(result["heavy"]) & set(NOT_FOR_HELP), result["heavy"]
    assert "Exit codes:" in result["help"]


def test_console_script_help():
    proc = subprocess.run([sys.executable, "-m", "jobctl.cli.main", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for command in ("status", "ls", "inspect", "attempts", "discover", "demo"):
        assert f"  {command} " in proc.stdout
    for c in ExitCode:
        assert f"{c.value:>3}  {c.doc}" in proc.stdout


def test_core_entry_points_need_no_rich():
    """What a front end starts from loads neither Textual nor rich."""
    result = run_python("""
        import json, sys
        import jobctl.session, jobctl.layouts, jobctl.attempts, jobctl.discovery
        print(json.dumps({"textual": "textual" in sys.modules, "rich": "rich" in sys.modules}))
    """)
    assert result == {"textual": False, "rich": False}
