"""A blank filter is refused everywhere a filter is taken.

``--filter ""`` from an unset shell variable must not turn a filtered purge
into a full one: the empty and the whitespace-only filter exit 2 with one
line on stderr, and nothing in Redis changes (CLI, the core's request that
the TUI builds, runbook steps run the CLI; a redrive plan file names ids,
not a filter).
"""

from __future__ import annotations

import pytest

from jobctl.errors import UsageError
from jobctl.model import State
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation
from helpers import config_fixtures, queues_toml
from test_operations import simple_dead, snapshot

cfg, run = config_fixtures(queues_toml(email={"layout": "reliable-list"}))

BLANKS = ["", " ", "\t\n"]

COMMANDS = [
    ["purge", "email", "--state", "dead", "--no-export", "--yes"],
    ["purge", "email", "--state", "dead", "--no-export", "--dry-run"],
    ["redrive", "email", "--yes"],
    ["redrive", "email", "--dry-run"],
    ["suppress", "email", "--reason", "r", "--yes"],
    ["promote", "email", "--yes"],
    ["pause", "email", "--reason", "r", "--yes"],
    ["resume", "email", "--yes"],
    ["migrate", "email", "other", "--yes"],
    ["ls", "email", "--state", "dead"],
]


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2] + a[-1:]))
def test_cli_refuses_a_blank_filter(redis_client, run, argv, blank):
    simple_dead(redis_client, "email", 4)
    before = snapshot(redis_client)
    code, out, err = run(*argv, "--filter", blank)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "filter" in err, err
    assert "Traceback" not in err
    assert snapshot(redis_client) == before


def test_export_refuses_a_blank_filter(redis_client, run, tmp_path):
    simple_dead(redis_client, "email", 4)
    before = snapshot(redis_client)
    code, out, err = run("export", "email", "--filter", " ", "--out", str(tmp_path / "x"))
    assert code == 2, (out, err)
    assert snapshot(redis_client) == before
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
def test_the_core_request_refuses_a_blank_filter(blank):
    """What every front end builds (the TUI passes ``None`` for no filter)."""
    with pytest.raises(UsageError, match="filter"):
        OpRequest(Operation.PURGE, "email", source=State.DEAD, filter_text=blank, no_export=True)
    assert OpRequest(Operation.PURGE, "email", source=State.DEAD, no_export=True).effective_filter_text is None
