"""Counts typed on the command line are ASCII integers: ``int()`` alone
takes any Unicode digit (``--limit ١٢`` was 12).  Refused before connecting
(exit 2, one line); no server needed."""

from __future__ import annotations

import pytest

from helpers import cli

CASES = [
    ["redrive", "q", "--limit", "١٢"],
    ["journal", "--limit", "٣"],
    ["ls", "q", "--limit", "１２"],
    ["pause", "q", "--reason", "r", "--budget", "٥"],
]


@pytest.mark.parametrize("argv", CASES, ids=" ".join)
def test_unicode_digits_are_refused(capsys, argv):
    code, out, err = cli(capsys, "--url", "redis://127.0.0.1:1/0", *argv)
    assert code == 2, (out, err)
    assert out == "" and len(err.strip().splitlines()) == 1 and "ASCII" in err


def test_ascii_counts_still_parse(capsys):
    code, out, err = cli(capsys, "redrive", "--help")
    assert code == 0 and "--limit" in out
