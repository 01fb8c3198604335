"""TUI operations write nothing before the confirmation, and journal a
command that runs as printed.

* A purge (drain) plan opened in the TUI only says where the export will
  go: Cancel leaves no export (and says nothing was changed, truly); Apply
  exports first, then purges exactly the exported jobs.
* The journal's ``command`` of a TUI operation is a ``jobctl`` command
  line, quoted once: pasted with ``--dry-run`` it exits 0 and plans the
  same jobs.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from jobctl.cli.main import main
from jobctl.ops.journal import read_entries
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui.ask_modals import ReasonModal
from jobctl_tui.plan_modal import PlanModal
from jobctl_tui.queue_screen import QueueScreen
from jobctl_tui.testing import settle
from helpers import TUI_T0, load_spike, queues_toml, tui_export_root, write_config  # noqa: F401 - autouse fixture
from test_operations import snapshot
from test_tui_pilot import SIZE, dead_depth, run

CONFIG = queues_toml(email={"layout": "reliable-list", "shards": 2}, billing={"layout": "reliable-list"},
                     reports={"layout": "reliable-list"})


def _app(redis_url: str, tmp_path: Path):
    """The TUI on a config file (so the journal's command names it, like the CLI's)."""
    session = Session(config_file=write_config(tmp_path, CONFIG), url=redis_url)
    return make_app(session, refresh_s=3600, clock=lambda: TUI_T0 + 1000, server_label="redis://test",
                    export_root=str(tmp_path / "exports"))


async def _open_triage(pilot) -> QueueScreen:
    await settle(pilot)
    pilot.app.open_queue("email", tab="triage")
    await settle(pilot)
    assert isinstance(pilot.app.screen, QueueScreen)
    return pilot.app.screen


def _notices(app) -> list[str]:
    return [m for _, m in app.notices]


def test_cancelling_a_tui_purge_plan_writes_nothing(redis_url, redis_client, tmp_path) -> None:
    truth = load_spike(redis_client)["email"]
    before = snapshot(redis_client)
    exports = tmp_path / "exports"
    (jt, err), n = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    async def go():
        app = _app(redis_url, tmp_path)
        try:
            async with app.run_test(size=SIZE) as pilot:
                screen = await _open_triage(pilot)
                await pilot.press("X")
                await settle(pilot)
                modal = app.screen
                assert isinstance(modal, PlanModal) and modal.plan.planned == n
                assert not exports.exists() or not any(exports.iterdir())   # nothing written to show the plan
                assert "on Apply, first exported to" in str(modal.query_one("#plan-extra").render())
                await pilot.press("escape")                                  # Cancel
                await settle(pilot)
                assert app.screen is screen
                assert _notices(app)[-1] == "purge cancelled: nothing was changed"
                await pilot.press("1", "D", "enter")                         # a drain, the directory offered
                await settle(pilot)
                assert isinstance(app.screen, PlanModal)
                await pilot.press("escape")
                await settle(pilot)
                assert _notices(app)[-1] == "drain cancelled: nothing was changed"
        finally:
            app.session.close()

    run(go())
    assert not exports.exists() or not any(exports.iterdir())
    assert snapshot(redis_client) == before


def _dump(client) -> dict:
    return {k: (client.dump(k), client.pttl(k)) for k in client.scan_iter()}


def _restore(client, dump: dict) -> None:
    client.flushdb()
    for key, (value, ttl) in dump.items():
        client.restore(key, max(ttl, 0), value, replace=True)


def test_the_journaled_command_of_a_tui_operation_runs_as_printed(redis_url, redis_client, tmp_path,
                                                                    capsys) -> None:
    truth = load_spike(redis_client)["email"]
    (jt, err), n = sorted(truth.dead_breakdown.items(), key=lambda kv: (-kv[1], kv[0]))[1]
    state = _dump(redis_client)                   # the queue as the TUI planned it
    planned = {}

    async def go():
        app = _app(redis_url, tmp_path)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await _open_triage(pilot)
                await pilot.press("j", "S")           # suppress the second group: asks why first
                await settle(pilot)
                assert isinstance(app.screen, ReasonModal)
                await pilot.press(*"it's \"poison\", don't retry", "enter")
                await settle(pilot)
                modal = app.screen
                assert isinstance(modal, PlanModal)
                planned["n"] = modal.plan.planned
                await pilot.press("tab", "enter")
                await settle(pilot)
        finally:
            app.session.close()

    run(go())
    s = Session(config_file=str(tmp_path / "jobctl.toml"), url=redis_url)
    entry = read_entries(redis_client, [s.layout("email").journal_key])[0]
    s.close()
    assert entry["operation"] == "suppress" and entry["planned"] == planned["n"] == n
    words = shlex.split(entry["command"])
    assert words[0] == "jobctl" and "jobctl-tui" not in entry["command"]
    assert words[words.index("--reason") + 1] == "it's \"poison\", don't retry"
    assert "--filter" in words and words[words.index("--filter") + 1].startswith("type = ")

    _restore(redis_client, state)
    assert dead_depth(redis_client, "email", 2) == truth.expected["dead"]
    capsys.readouterr()
    code = main([*words[1:], "--dry-run", "--json"])          # as printed, plus --dry-run
    out, errs = capsys.readouterr()
    assert code == 0, errs
    assert json.loads(out)["plan"]["planned"] == n
