"""One threshold set: the levels of each measure, and the CLI's status
table and the TUI's dashboard row colouring the same queue the same way."""

from __future__ import annotations

import pytest
from rich.text import Text

from jobctl import thresholds
from jobctl.thresholds import Level, Threshold


@pytest.mark.parametrize(("measure", "value", "want"), [
    ("dead", 0, Level.OK), ("dead", 1, Level.WARN), ("dead", 999, Level.WARN), ("dead", 1_000, Level.BREACH),
    ("dead_growth", 0.5, Level.OK), ("dead_growth", 1, Level.WARN), ("dead_growth", 60, Level.BREACH),
    ("oldest_ready_age", None, Level.OK), ("oldest_ready_age", 59_999, Level.OK),
    ("oldest_ready_age", 60_000, Level.WARN), ("oldest_ready_age", 600_000, Level.BREACH),
    ("stuck", 0, Level.OK), ("stuck", 1, Level.BREACH),
    ("scheduled_overdue_max_age", 60_000, Level.WARN), ("scheduled_overdue_max_age", 600_000, Level.BREACH),
    ("ready", 10 ** 9, Level.OK), ("suppressed", 10 ** 6, Level.OK),
])
def test_default_levels(measure, value, want) -> None:
    assert thresholds.level(measure, value) is want


def test_configured_bounds_replace_the_default_and_unknown_measures_raise() -> None:
    mine = {"dead": Threshold(warn=100, breach=500)}
    assert thresholds.level("dead", 99, mine) is Level.OK
    assert thresholds.level("dead", 500, mine) is Level.BREACH
    assert thresholds.level("stuck", 5, mine) is Level.OK  # no bound given: OK
    with pytest.raises(KeyError):
        thresholds.level("latency", 1)


def test_worst_cells_and_styles() -> None:
    assert thresholds.worst() is Level.OK
    assert thresholds.worst(None, Level.WARN, Level.OK) is Level.WARN
    cells = thresholds.cell_levels({"scheduled_overdue": Level.OK, "scheduled_overdue_max_age": Level.BREACH})
    assert cells["overdue"] is Level.BREACH and cells["dead"] is Level.OK
    assert thresholds.style(Level.OK) == thresholds.style(None) == ""
    assert thresholds.style(Level.WARN) != thresholds.style(Level.BREACH)


#: CLI status column -> TUI dashboard column key
_SAME = {"ready": "ready", "oldest ready": "age", "scheduled": "scheduled", "overdue": "overdue",
         "processing": "processing", "stuck": "stuck", "dead": "dead", "suppressed": "suppressed"}


def _cli_style(markup: str) -> str:
    text = Text.from_markup(markup)
    return str(text.spans[0].style) if text.spans and text.spans[0].start == 0 else ""


@pytest.mark.parametrize("slo_options", [{}, {"slo": {"dead": {"warn": 100, "breach": 1000}, "stuck": 50}}])
def test_cli_status_and_tui_dashboard_colour_a_row_alike(slo_options) -> None:
    from jobctl.cli.render import STATUS_COLUMNS, _status_cells
    from jobctl.dashboard import Slo, slo_values
    from jobctl.dashboard.facade import QueueRow
    from jobctl.model import QueueStatus
    from jobctl_tui.dashboard_screen import COLUMNS, row_cells

    st = QueueStatus(queue="email", layout="reliable-list", now_ms=10 ** 12, ready=40, oldest_ready_age_ms=90_000,
                     scheduled=3, scheduled_overdue=2, scheduled_overdue_max_age_ms=700_000, processing=9, stuck=4,
                     dead=6_554, suppressed=1)
    slo = Slo.from_options(slo_options)
    cli = dict(zip((c for c, _ in STATUS_COLUMNS), _status_cells(st, slo)))
    tui = dict(zip((k for k, _ in COLUMNS), row_cells(QueueRow("email", st, levels=slo.evaluate(slo_values(st, None))))))
    styles = {col: (_cli_style(cli[col]), str(tui[key].style)) for col, key in _SAME.items()}
    assert all(a == b for a, b in styles.values()), styles
    assert styles["dead"][0] == thresholds.style(Level.BREACH)
    assert styles["oldest ready"][0] == thresholds.style(Level.WARN)
    assert styles["overdue"][0] == thresholds.style(Level.BREACH)
    assert styles["stuck"][0] == thresholds.style(Level.BREACH if not slo_options else Level.OK)


def test_cli_journal_and_tui_journal_colour_a_result_alike() -> None:
    from jobctl.cli.admin_cmds import _journal_table
    from jobctl_tui.queue_views import journal_view

    for entry, word in (({"interrupted": True}, "interrupted"), ({"failed": 2}, "failed"), ({}, "ok")):
        e = {"operation": "redrive", "queue": "email", "ended_ms": 10 ** 12, "id": "redrive-1", **entry}
        cli_cell = list(_journal_table([e], server=False).columns[1].cells)[0]
        rows, _ = journal_view([e], 10 ** 12)
        tui_cell = rows[0][1][1]
        assert str(tui_cell) == word and _cli_style(cli_cell) == str(tui_cell.style) == thresholds.OUTCOME_STYLES[word]
