"""The import contract, checked on the source (every import statement,
including the ones inside functions and under ``TYPE_CHECKING``):

1. the core (``jobctl`` outside ``jobctl/cli``) never imports ``jobctl.cli``,
   ``jobctl_tui`` or textual: front ends call the core, never the reverse
   (``jobctl/cli`` may start the TUI);
2. the TUI (``tui/``, installed as ``jobctl_tui``) never imports redis: it
   reads and writes through :class:`jobctl.dashboard.Dashboard`;
3. no cycles between jobctl's packages and top-level modules in the imports
   that run when a module is imported (function-level and ``TYPE_CHECKING``
   imports are deferred on purpose).  ``jobctl.ops`` holds two layers: the
   operation model (spec, plan, catalog, request, journal, result) that the
   layouts build on, and the runners (``engine``, ``core``) that drive the
   layouts; they count as two nodes;
4. the operation model never imports the layouts, the exporter, the
   dashboard, the runbooks or a front end, not even lazily.

An equivalent of an import-linter contract, without a tool to install: the
graph is built with :mod:`ast` from the files themselves.

The same rules at run time, in fresh interpreters (so nothing this process
imported can hide an import): importing any ``jobctl.*`` module never loads
textual or the TUI; the core's entry points load no front end and no rich;
``jobctl --help`` needs neither textual nor PySpark.  This is the one file
for the import boundary.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobctl.exitcodes import ExitCode

REPO = Path(__file__).resolve().parent.parent
RUNNERS = {"engine", "core", "policies", "prepared"}  # policies, prepared: the core's checks and results, split from core.py


def _module(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[0] == "tui":
        parts[0] = "jobctl_tui"
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def _imports(path: Path, *, deferred: bool) -> list[tuple[int, str]]:
    """``(line, imported module or module.name)`` of ``path``; without
    ``deferred``, only the imports that run at module import time."""
    name, is_pkg = _module(path)
    out: list[tuple[int, str]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((node.lineno, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                out.append((node.lineno, mod))
                out.extend((node.lineno, f"{mod}.{a.name}") for a in node.names)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                if deferred:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if deferred:
                    visit(node.body)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    sub = getattr(node, field, None)
                    if isinstance(sub, list):
                        visit(sub)
            if isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return out


def _files(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def _violations(files, banned) -> list[str]:
    bad = []
    for path in files:
        for line, mod in _imports(path, deferred=True):
            if any(mod == b or mod.startswith(b + ".") for b in banned):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {mod}")
    return sorted(set(bad))


def test_the_core_never_imports_a_front_end():
    core = [p for p in _files("jobctl") if "cli" not in p.relative_to(REPO / "jobctl").parts[:1]]
    assert _violations(core, ("jobctl.cli", "jobctl_tui", "textual")) == []


def test_the_tui_never_imports_redis():
    assert _violations(_files("tui"), ("redis",)) == []


def test_the_operation_model_never_imports_what_it_serves():
    model = [p for p in _files("jobctl/ops") if p.stem not in RUNNERS]
    banned = ("jobctl.layouts", "jobctl.export", "jobctl.dashboard", "jobctl.runbook", "jobctl.cli",
              "jobctl.session", "jobctl_tui")
    assert _violations(model, banned) == []


def _node(mod: str) -> str | None:
    parts = mod.split(".")
    if parts[0] != "jobctl" or len(parts) < 2:
        return None
    if parts[1] == "ops" and len(parts) > 2 and parts[2] in RUNNERS:
        return "ops.runners"
    if (REPO / "jobctl" / parts[1]).is_dir() or (REPO / "jobctl" / f"{parts[1]}.py").is_file():
        return parts[1]
    return None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def test_no_import_cycles_between_packages():
    edges: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for path in _files("jobctl"):
        src = _node(_module(path)[0])
        for line, mod in _imports(path, deferred=False):
            dst = _node(mod)
            if src and dst and src != dst:
                edges.setdefault(src, set()).add(dst)
                where.setdefault((src, dst), f"{path.relative_to(REPO)}:{line}")
    cycles = _cycles(edges)
    detail = [f"{a} -> {b} ({where[a, b]})" for comp in cycles for a in comp for b in comp
              if b in edges.get(a, ())]
    assert cycles == [], detail


# -- the same boundary at run time -------------------------------------------------

#: Never imported by the headless core.
FORBIDDEN = ("textual", "jobctl_tui")
#: Not needed to print --help.
NOT_FOR_HELP = ("textual", "jobctl_tui", "pyspark")


def run_python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line, as JSON."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["jobctl.runbook.runner", "jobctl.ops.core", "jobctl.dashboard"])
def test_no_front_end_is_loaded_with_the_core(module):
    probe = (f"import sys, {module}; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jobctl_tui', 'textual') "
             "or m.split('.')[:2] == ['jobctl', 'cli']))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_core_module_imports_without_textual():
    """Every ``jobctl.*`` module (the CLI's included) imported in turn: none loads textual or the TUI."""
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


def test_core_entry_points_need_no_rich():
    """What a front end starts from loads neither Textual nor rich."""
    result = run_python("""
        import json, sys
        import jobctl.session, jobctl.layouts, jobctl.attempts, jobctl.discovery
        print(json.dumps({"textual": "textual" in sys.modules, "rich": "rich" in sys.modules}))
    """)
    assert result == {"textual": False, "rich": False}


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
    """``python -m jobctl.cli.main --help`` (no TUI needed) lists the commands and every exit code."""
    proc = subprocess.run([sys.executable, "-m", "jobctl.cli.main", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for command in ("status", "ls", "inspect", "attempts", "discover", "demo"):
        assert f"  {command} " in proc.stdout
    for c in ExitCode:
        assert f"{c.value:>3}  {c.doc}" in proc.stdout
