"""Where runbooks come from: the shipped ones, plus an operator's directory.

The shipped runbooks are the repository's ``runbooks/*.md``.  They are
installed as the data-only package ``jobctl_runbooks`` (pyproject maps it to
``runbooks/``, as it maps ``jobctl_fixtures`` to ``fixtures/``), so the same
:func:`importlib.resources.files` lookup finds them in an editable install
(the repository's directory itself) and in a wheel (package data).  No
symlink, no search of parent directories.

``--dir DIR`` (or ``$JOBCTL_RUNBOOKS``) adds a directory of the operator's
own runbooks; a runbook there overrides a shipped one of the same name.
``README.md`` is never a runbook.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ..errors import NotFound, UsageError
from .model import Runbook
from .parse import parse_runbook

__all__ = ["RUNBOOKS_ENV", "SHIPPED_PACKAGE", "Library", "shipped_file"]

RUNBOOKS_ENV = "JOBCTL_RUNBOOKS"
SHIPPED_PACKAGE = "jobctl_runbooks"
_NOT_RUNBOOKS = {"readme.md"}


def _shipped_root() -> Traversable | None:
    try:
        return resources.files(SHIPPED_PACKAGE)
    except ModuleNotFoundError:
        return None


def shipped_file(name: str) -> Traversable:
    """A file shipped next to the runbooks, e.g. ``alerts.yml``; raises
    :class:`NotFound` when the package is not installed or lacks it."""
    root = _shipped_root()
    if root is None or not root.joinpath(name).is_file():
        raise NotFound(f"{name} is not shipped with this installation (package {SHIPPED_PACKAGE})")
    return root.joinpath(name)


@dataclass
class Library:
    """The runbooks available: shipped ones plus ``directory`` (optional)."""

    directory: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if self.directory is None and os.environ.get(RUNBOOKS_ENV):
            self.directory = os.environ[RUNBOOKS_ENV]
        if self.directory is not None and not Path(self.directory).is_dir():
            raise UsageError(f"runbook directory {self.directory} does not exist")

    def _files(self) -> dict[str, tuple[Traversable, str]]:
        found: dict[str, tuple[Traversable, str]] = {}
        roots: list[tuple[Traversable, str]] = []
        shipped = _shipped_root()
        if shipped is not None:
            roots.append((shipped, "shipped"))
        if self.directory is not None:
            roots.append((Path(self.directory), str(self.directory)))
        for root, label in roots:
            for entry in root.iterdir():
                if entry.name.endswith(".md") and entry.name.lower() not in _NOT_RUNBOOKS and entry.is_file():
                    found[entry.name[:-3]] = (entry, label)
        return found

    def names(self) -> list[str]:
        """Runbook names, sorted."""
        return sorted(self._files())

    def load(self, name: str) -> Runbook:
        """Parse runbook ``name``; raises :class:`NotFound` or
        :class:`~jobctl.runbook.parse.RunbookError`."""
        files = self._files()
        if name.endswith(".md"):
            name = name[:-3]
        if name not in files:
            known = ", ".join(sorted(files)) or "none"
            raise NotFound(f"unknown runbook {name!r} (runbooks: {known})")
        entry, label = files[name]
        source = f"runbooks/{entry.name}" if label == "shipped" else str(entry)
        return parse_runbook(name, entry.read_text("utf-8"), source)

    def all(self) -> list[Runbook]:
        return [self.load(n) for n in self.names()]
