"""How a runbook step's command runs: as the CLI in a child process of this
interpreter (:func:`run_subprocess`), with the runner's global options in
front (:func:`global_args`) and its ``--url`` in the child's environment
(:func:`child_env`), never on a command line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

__all__ = ["global_args", "child_env", "run_subprocess"]


def global_args(session) -> list[str]:
    """The global options that make a step talk to the runner's server
    (a ``--url`` travels in :func:`child_env` instead)."""
    args: list[str] = []
    if session.config_file:
        args += ["--config", str(session.config_file)]
    if session.profile and not session.url:
        args += ["--profile", session.profile]
    if session.read_only_flag:
        args.append("--read-only")
    args += ["--timeout", f"{session.timeout_s:g}"]
    return args


def child_env(session) -> dict[str, str]:
    """The environment of a step's process: ours, plus the session's
    ``--url`` as ``$JOBCTL_REDIS_URL`` (never on a command line), and
    colours and width of our terminal when stdout is one."""
    env = dict(os.environ)
    if session.url:
        env["JOBCTL_REDIS_URL"] = session.url
    try:
        if sys.stdout.isatty():
            import shutil

            env.setdefault("FORCE_COLOR", "1")
            env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    except (AttributeError, ValueError):
        pass
    return env


def _write(stream, data: bytes) -> None:
    buf = getattr(stream, "buffer", None)
    if buf is not None:
        buf.write(data)
        buf.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()


def _pump(pipe, stream, copy: bytearray | None) -> None:
    for chunk in iter(lambda: pipe.read1(65536), b""):
        if copy is not None:
            copy += chunk
        _write(stream, chunk)


#: The child's program: the CLI's entry point (``jobctl`` may not be on PATH).
_CLI = "import sys; from jobctl.cli.main import main; sys.argv[0] = 'jobctl'; main()"


def run_subprocess(argv: list[str], capture: bool = False, *, env: dict[str, str] | None = None,
                   ) -> tuple[int, bytes | None]:
    """Run ``jobctl ARGV`` in a child process (this interpreter).

    Its stdout and stderr are copied to ours as they come; returns the exit
    code and, when ``capture``, a copy of its stdout.  A Ctrl-C reaches the
    child too (same process group): we wait for it to stop after its
    current batch and return its code (130).
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    proc = subprocess.Popen([sys.executable, "-c", _CLI, *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    copy = bytearray() if capture else None
    err = threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, None), daemon=True)
    err.start()
    while True:
        try:
            _pump(proc.stdout, sys.stdout, copy)
            code = proc.wait()
            break
        except KeyboardInterrupt:  # the child got it too: let it stop cleanly
            continue
    err.join()
    return code, (bytes(copy) if copy is not None else None)
