"""The code's shape, checked on the source of ``jobctl/`` and ``tui/`` (no server):

* no function over :data:`MAX_FUNCTION_LINES` lines, no module over
  :data:`MAX_MODULE_LINES` lines;
* no ``from X import _name``: another module's private name;
* ``send_packed_command`` (RESP packed by hand) only in the walk driver,
  ``jobctl/ops/walk/``;
* no layout's name (``"reliable-list"``, ``"hash-job"``, ...: the names of
  :func:`jobctl.layouts.known_layouts`) as a string outside that layout's
  package ``jobctl/layouts/<name>/`` and ``jobctl/layouts/__init__.py``;
* Lua only in ``jobctl/lua/``, run only through :mod:`jobctl.scripts`: no
  ``register_script(`` / ``.eval(`` call and no Lua (``redis.call(``,
  ``redis.pcall(``) in a Python string outside ``jobctl/scripts.py``, so
  every script is in ``SCRIPT_NAMES`` and in the wrong-type matrix
  (``tests/test_script_wrong_types.py``).

Each rule has an allowlist of the offenders there were when the rule was
written.  A new offender fails the rule; so does an allowlisted entry that no
longer offends (delete it from the list: the list only shrinks).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from jobctl.layouts import known_layouts

REPO = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400
DRIVER = "jobctl/ops/walk/"
SCRIPTS_MODULE = "jobctl/scripts.py"


def _sources() -> list[Path]:
    return sorted(p for folder in ("jobctl", "tui") for p in (REPO / folder).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _functions(node: ast.AST, prefix: str = ""):
    """``(qualified name, function node)`` of every function and method under ``node``, nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                yield name, child
            yield from _functions(child, name + ".")
        else:
            yield from _functions(child, prefix)


def long_functions() -> dict[str, int]:
    """``{"path::qualname": lines}`` of the functions over the limit."""
    found = {}
    for path in _sources():
        for name, fn in _functions(_tree(path)):
            lines = fn.end_lineno - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found[f"{_rel(path)}::{name}"] = lines
    return found


def long_modules() -> dict[str, int]:
    """``{path: lines}`` of the modules over the limit."""
    found = {}
    for path in _sources():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found[_rel(path)] = lines
    return found


def private_imports() -> set[str]:
    """``"path: from module import _name"`` for every import of a private (not dunder) name."""
    found = set()
    for path in _sources():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add(f"{_rel(path)}: from {module} import {alias.name}")
    return found


def packed_command_senders() -> set[str]:
    """Files outside the walk driver that mention ``send_packed_command``."""
    word = re.compile(r"\bsend_packed_command\b")
    return {_rel(p) for p in _sources()
            if not _rel(p).startswith(DRIVER) and word.search(p.read_text(encoding="utf-8"))}


def layout_name_strings() -> set[str]:
    """``"path: 'name'"`` for each string constant equal to a layout's name outside its package."""
    names = known_layouts()
    found = set()
    for path in _sources():
        rel = _rel(path)
        if rel == "jobctl/layouts/__init__.py":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                if not rel.startswith(f"jobctl/layouts/{node.value.replace('-', '_')}/"):
                    found.add(f"{rel}: {node.value!r}")
    return found


def inline_scripts() -> set[str]:
    """``"path:line: ..."`` for each ``register_script(`` / ``.eval(`` call
    and each string holding Lua (``redis.call(`` / ``redis.pcall(``) outside
    :data:`SCRIPTS_MODULE`."""
    lua = re.compile(r"\bredis\.p?call\s*\(")
    found = set()
    for path in _sources():
        rel = _rel(path)
        if rel == SCRIPTS_MODULE:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in ("register_script", "eval", "eval_ro"):
                    found.add(f"{rel}:{node.lineno}: {name}(")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and lua.search(node.value):
                found.add(f"{rel}:{node.lineno}: Lua in a string")
    return found


def _check(rule: str, found, allowed: set[str]) -> None:
    """No offender outside ``allowed``; every ``allowed`` entry still an offender."""
    new = sorted(set(found) - set(allowed))
    stale = sorted(set(allowed) - set(found))
    assert not new, f"{rule}: new offenders (fix them; do not add them to the allowlist): {new}"
    assert not stale, f"{rule}: these no longer offend, delete them from the allowlist: {stale}"


# -- the rules -------------------------------------------------------------------------------------------------------

# Functions over 80 lines ("path::qualname"): none left.
LONG_FUNCTIONS_ALLOWED: set[str] = set()

# Modules over 400 lines when the rule was written.
LONG_MODULES_ALLOWED: set[str] = set()

# Imports of another module's private name when the rule was written ("path: from module import _name").
PRIVATE_IMPORTS_ALLOWED: set[str] = set()

# Files outside jobctl/ops/walk/ that pack RESP themselves (send_packed_command): none left.
PACKED_COMMAND_ALLOWED: set[str] = set()

# Layout names as strings outside their package when the rule was written ("path: 'name'").
LAYOUT_NAMES_ALLOWED: set[str] = set()

# Scripts registered or Lua held outside jobctl/scripts.py ("path:line: ..."): none left.
INLINE_SCRIPTS_ALLOWED: set[str] = set()


def test_no_function_over_80_lines():
    found = long_functions()
    _check(f"functions over {MAX_FUNCTION_LINES} lines", found, LONG_FUNCTIONS_ALLOWED)


def test_no_module_over_400_lines():
    _check(f"modules over {MAX_MODULE_LINES} lines", long_modules(), LONG_MODULES_ALLOWED)


def test_no_import_of_another_modules_private_name():
    _check("imports of a private name", private_imports(), PRIVATE_IMPORTS_ALLOWED)


def test_send_packed_command_only_in_the_walk_driver():
    assert (REPO / DRIVER).is_dir(), f"no {DRIVER}"
    _check(f"send_packed_command outside {DRIVER}", packed_command_senders(), PACKED_COMMAND_ALLOWED)


def test_no_layout_name_outside_its_package():
    for name in known_layouts():
        assert (REPO / "jobctl/layouts" / name.replace("-", "_")).is_dir(), f"layout {name!r} has no package"
    _check("layout names outside their package", layout_name_strings(), LAYOUT_NAMES_ALLOWED)


def test_lua_only_in_jobctl_lua_run_through_jobctl_scripts():
    assert (REPO / SCRIPTS_MODULE).is_file(), f"no {SCRIPTS_MODULE}"
    _check(f"Lua scripts outside jobctl/lua/ or registered outside {SCRIPTS_MODULE}", inline_scripts(),
           INLINE_SCRIPTS_ALLOWED)


if __name__ == "__main__":  # `python tests/test_code_shape.py`: today's offenders, rule by rule
    for rule in (long_functions, long_modules, private_imports, packed_command_senders, layout_name_strings,
                 inline_scripts):
        print(f"# {rule.__name__}")
        for entry in sorted(rule()):
            print(f"    {entry!r},")
