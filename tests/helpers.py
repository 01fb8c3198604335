"""Helpers the test modules share: the wall clock, running the CLI
in-process with its output captured, and draining a fixture worker."""

from __future__ import annotations

import json
import time

from jobctl.cli.main import main

__all__ = ["wall_ms", "cli", "run_with_config", "drain"]


def wall_ms() -> int:
    """The local wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``jobctl *argv`` run in-process."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_with_config(capsys, url: str, cfg: str, *argv: str) -> tuple[int, dict | str, str]:
    """``(exit code, stdout, stderr)`` of ``jobctl --url url --config cfg
    *argv``; stdout parsed as JSON when it is JSON."""
    code = main(["--url", url, "--config", cfg, *argv])
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err


def drain(worker, limit: int = 10_000) -> list[str]:
    """What ``worker.claim()`` returns until it returns ``None`` (at most
    ``limit`` jobs)."""
    out = []
    while len(out) < limit:
        job = worker.claim()
        if job is None:
            return out
        out.append(job)
    return out
