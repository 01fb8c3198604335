"""Printing benchmark tables and writing results JSON under ``bench/results/``.

Results files are ``bench/results/<bench>-<UTC stamp>.json`` plus a copy at
``bench/results/<bench>-latest.json`` (the directory is gitignored).  Each
holds ``{"bench", "args", "env", "results"}``; ``env`` records what the
figures depend on (server kind and version, Python, CPU count, load average
before and after, jobctl's git revision and whether the tree was dirty).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

__all__ = ["RESULTS_DIR", "environment", "write_results", "table", "fmt", "note"]

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"


def note(text: str) -> None:
    """A progress line on stderr (stdout carries the tables)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=BENCH_DIR.parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment(server=None) -> dict[str, Any]:
    """What the figures depend on; ``server`` is a started EmbeddedServer."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": list(os.getloadavg()),
        "git_rev": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "jobctl")),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if server is not None:
        env["server_kind"] = server.kind
        env["server_version"] = server.version
    return env


def write_results(bench: str, args: dict[str, Any], env: dict[str, Any], results: dict[str, Any]) -> Path:
    """Write the results document, say where on stderr; returns the timestamped path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(env, loadavg_end=list(os.getloadavg()))
    doc = {"bench": bench, "args": args, "env": env, "results": results}
    data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = RESULTS_DIR / f"{bench}-{stamp}.json"
    path.write_bytes(data)
    (RESULTS_DIR / f"{bench}-latest.json").write_bytes(data)
    start, end = env.get("loadavg_start", [None])[0], env["loadavg_end"][0]
    print(f"\nload average (1 min) at start {fmt(start)}, at end {fmt(end)}, on {env.get('cpus')} CPUs: "
          "other work on the machine slows every figure", flush=True)
    note(f"results: {path}")
    return path


def fmt(value: Any, digits: int = 3) -> str:
    """A compact cell: ``None`` -> "-", floats with ``digits`` significant
    figures (thousands separators above 1000), ints with separators."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table (Markdown pipe syntax, so it pastes into the README)."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    lines = [f"\n{title}\n"]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        lines.append("| " + " | ".join(c.rjust(w) if i else c.ljust(w)
                                        for i, (c, w) in enumerate(zip(r, widths))) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    return text
