"""What a wheel of jobctl installs, as setuptools itself reads the project
(``setup.py`` + ``pyproject.toml``): every package folder of the source tree
(a folder with an ``__init__.py`` under ``jobctl/``, and ``tui/``,
``fixtures/``, ``runbooks/`` under their installed names) and every data file
in them.  No server needed; ``.ci/wheel_smoke.py`` checks a built wheel."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Installed name -> folder of the repository.
FOLDERS = {"jobctl": "jobctl", "jobctl_tui": "tui", "jobctl_fixtures": "fixtures", "jobctl_runbooks": "runbooks"}

#: Run in the repository: what setuptools makes of the project's configuration.
READ_CONFIG = """
import json
from distutils.core import run_setup
dist = run_setup("setup.py", stop_after="config")
print(json.dumps({"packages": dist.packages, "package_dir": dist.package_dir or {},
                  "package_data": dist.package_data or {}}))
"""


@pytest.fixture(scope="module")
def setuptools_config() -> dict:
    pytest.importorskip("setuptools")
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", READ_CONFIG], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def source_packages() -> dict[str, Path]:
    """Installed dotted name -> folder, for every package folder of the source tree."""
    found = {}
    for name, folder in FOLDERS.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found[".".join((name, *init.parent.relative_to(base).parts))] = init.parent
    return found


def test_every_jobctl_package_folder_is_found(setuptools_config):
    found = set(setuptools_config["packages"])
    under_jobctl = [n for n in source_packages() if n == "jobctl" or n.startswith("jobctl.")]
    assert "jobctl.discovery" in under_jobctl and len(under_jobctl) >= 10
    assert not set(under_jobctl) - found, f"not installed: {sorted(set(under_jobctl) - found)}"


def test_every_package_folder_is_found_under_its_installed_name(setuptools_config):
    found = set(setuptools_config["packages"])
    assert set(source_packages()) == found, (sorted(set(source_packages()) - found),
                                             sorted(found - set(source_packages())))
    assert {k: v for k, v in setuptools_config["package_dir"].items() if k} == \
        {name: folder for name, folder in FOLDERS.items() if name != folder}
    assert not any(p.split(".")[0] in ("tui", "fixtures", "runbooks", "tests", "bench") for p in found)


def _matches(rel: PurePosixPath, pattern: str) -> bool:
    want = PurePosixPath(pattern).parts
    return len(want) == len(rel.parts) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(rel.parts, want))


def test_every_data_file_is_package_data(setuptools_config):
    """Each file of a package folder that is not Python (Lua scripts, the
    analyzer's rules.toml, the runbooks...) is matched by a package-data
    pattern of the package that holds it."""
    packages = source_packages()
    data = setuptools_config["package_data"]
    missed = []
    for name, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            owner = max((n for n, d in packages.items() if d in path.parents), key=lambda n: n.count("."))
            rel = PurePosixPath(path.relative_to(packages[owner]).as_posix())
            if not any(_matches(rel, pattern) for pattern in data.get(owner, [])):
                missed.append(f"{path.relative_to(ROOT)} (package {owner})")
    assert not missed, f"not shipped in the wheel: {missed}"
