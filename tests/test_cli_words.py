"""What the CLI says to a person: bare ``jobctl``, help text, confirmations."""

from __future__ import annotations

from helpers import cli


def test_bare_jobctl_prints_help_and_exits_0(capsys) -> None:
    code, out, err = cli(capsys)
    assert code == 0, err
    assert out.startswith("Usage: jobctl") and "redrive" in out and "Exit codes:" in out
    assert err == ""
