"""Package discovery for setuptools (the rest of the build is in pyproject.toml).

Every package is found, none listed by hand: ``jobctl`` and each package
under it, and the three folders installed under project-scoped names (so a
pip install never shadows another distribution's generic ``tui`` or
``fixtures``) with their own subpackages.  A package is a folder holding
an ``__init__.py``.
"""

from setuptools import find_packages, setup

#: Installed name -> folder in this repository.
RENAMED = {"jobctl_tui": "tui", "jobctl_fixtures": "fixtures", "jobctl_runbooks": "runbooks"}


def packages() -> list[str]:
    """Dotted names of every package the wheel installs."""
    found = find_packages(include=["jobctl", "jobctl.*"])
    for name, folder in RENAMED.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


if __name__ == "__main__":
    setup(packages=packages(), package_dir=RENAMED)
