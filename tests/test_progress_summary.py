"""Long operations: the CLI's progress bar (rate, elapsed, ETA and a note),
the export's one-line summary with its time and rate, and the TUI's run
modal saying the rate and ETA (clock stepped, never slept)."""

from __future__ import annotations

import asyncio
import re

from jobctl.cli.main import main
from jobctl.filter import MATCH_ALL
from jobctl.model import State
from jobctl.ops.plan import Plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_tui.run_modal import RunModal, RunProgress
from jobctl_tui.testing import settle
from helpers import TUI_EXPORTS, TUI_T0, tui_export_root  # noqa: F401 - autouse fixture

from test_operations import simple_dead
from test_tui_pilot import app_for, session_for

#: `` in 4.21 s (512 jobs/s)`` at the end of a summary line
TOOK = re.compile(r" in [\d.,]+ (ms|s|m \d+ s)( \d+ ms)? \([\d.,]+ jobs/s\)")


def test_took_says_time_and_rate_or_nothing() -> None:
    from jobctl.humanize import took

    assert took(2_157, 4_210) == " in 4.21 s (512 jobs/s)"
    assert took(0, 1_500) == " in 1.50 s (0 jobs/s)"
    assert took(10, 0) == took(10, None) == took(10, -5) == ""


def test_progress_bar_shows_a_note_beside_rate_and_eta(capsys) -> None:
    from jobctl.cli import render

    update, stop = render.progress(30_000, "scanned")
    update(4_560, "· exported 1,200")
    stop()
    err = capsys.readouterr().err
    assert "scanned" in err and "4,560 of 30,000" in err and "jobs/s" in err and "ETA " in err
    assert "· exported 1,200" in err


def test_export_summary_says_how_long_and_how_fast(redis_url, redis_client, tmp_path, capsys) -> None:
    simple_dead(redis_client, "email", 40)
    assert main(["--url", redis_url, "export", "email", "--out", str(tmp_path / "e"), "--format", "jsonl"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("exported 40 job(s) of email"), out
    assert TOOK.search(out[0]), out[0]


def test_redrive_summary_is_one_line_with_time_and_rate(redis_url, redis_client, capsys) -> None:
    simple_dead(redis_client, "email", 12)
    assert main(["--url", redis_url, "redrive", "email", "--yes"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("redrive email: planned 12, moved 12, skipped 0, failed 0"), summary
    assert TOOK.search(summary) and "  [redrive-" in summary, summary


def test_tui_run_modal_says_rate_elapsed_and_eta(redis_url) -> None:
    now = [TUI_T0]
    plan = Plan(spec=OpSpec(Operation.REDRIVE, "email", State.DEAD, State.READY, filter=MATCH_ALL,
                            op_id="redrive-progress"), now_ms=TUI_T0)
    plan.jobs = [None] * 3_000  # only the count is shown

    async def go() -> str:
        app = app_for(session_for(redis_url), clock=lambda: now[0])
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            modal = RunModal(plan, autostart=False)
            await app.push_screen(modal)
            await settle(pilot)
            now[0] += 2_000
            modal.post_message(RunProgress(1_000, 3_000))
            await settle(pilot)
            text = str(modal.query_one("#run-status").render())
        app.session.close()
        return text

    text = asyncio.run(go())
    assert text == "1,000 of 3,000 done · 500 jobs/s · elapsed 2.00 s · ETA 4.00 s", text
