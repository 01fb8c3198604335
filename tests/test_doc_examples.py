"""Every ``$ jobctl ...`` line of the ``console`` blocks of README.md and
docs/*.md runs against the demo's queues and exits 0 (a mutation without
``--dry-run`` gets one: the examples must not need a fresh server each)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from jobctl.cli.demo_cmd import DEMO_QUEUES
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli

ROOT = Path(__file__).resolve().parents[1]
MUTATING = {"requeue", "redrive", "promote", "suppress", "unsuppress", "purge", "pause", "resume", "migrate",
            "drain", "replay", "reshard"}


def examples() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of every example, ``argv`` without the leading ``jobctl``."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"^```console\n(.*?)^```", path.read_text(), re.M | re.S):
            for line in block.splitlines():
                if line.startswith("$ jobctl "):
                    argv = shlex.split(line[2:], comments=True)[1:]
                    out.append((f"{path.name}: {line[2:60]}", argv))
    return out


def test_the_docs_have_examples() -> None:
    assert len(examples()) >= 8


@pytest.fixture
def demo(redis_client, redis_url, monkeypatch):
    """The demo's queues (as `jobctl demo` loads them, smaller), found by discovery."""
    for n, (name, scenario, shards, share) in enumerate(DEMO_QUEUES):
        load_scenario(redis_client, scenario, queue=name, tag=name, shards=shards, size=max(100, int(2_000 * share)),
                      seed=7 + n)
    monkeypatch.setenv("JOBCTL_REDIS_URL", redis_url)  # as the README's first example says


@pytest.mark.parametrize("where, argv", examples(), ids=[w for w, _ in examples()])
def test_every_example_runs_against_the_demo(capsys, demo, where, argv) -> None:
    if argv and argv[0] in MUTATING and "--dry-run" not in argv:
        argv = [*argv, "--dry-run"]
    code, out, err = cli(capsys, *argv)
    assert code == 0, f"{where}: exit {code}: {err.strip()[:300]}"
    assert "no job matches" not in err, f"{where}: the example matches nothing on the demo"
