"""The one formatter of times and numbers (jobctl.humanize), CLI and TUI alike."""

from __future__ import annotations

import pytest

from jobctl import humanize as hz

S, M, H, D = 1_000, 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize("ms, text", [
    (0, "0 ms"),
    (1, "1 ms"),
    (53, "53 ms"),
    (715, "715 ms"),
    (999, "999 ms"),
    (1_000, "1.00 s"),
    (1_880, "1.88 s"),
    (2_070, "2.07 s"),
    (2_700, "2.70 s"),
    (9_999, "9.99 s"),
    (10_000, "10 s"),
    (29_400, "29 s"),
    (59_999, "59 s"),
    (M, "1 m"),
    (5 * M + 17 * S, "5 m 17 s"),
    (59 * M + 59 * S + 999, "59 m 59 s"),
    (H, "1 h"),
    (4 * H + 41 * M + 30 * S, "4 h 41 m"),
    (23 * H + 59 * M, "23 h 59 m"),
    (D, "1 d"),
    (3 * D + 2 * H + 5 * M, "3 d 2 h"),
    (30 * D, "30 d"),
    (30 * D + 23 * H, "30 d 23 h"),
    (-5, "0 ms"),
    (-3 * M, "0 ms"),
    (None, "-"),
])
def test_duration_table(ms, text) -> None:
    assert hz.duration(ms) == text


NOW = 1_795_796_533_321


@pytest.mark.parametrize("delta, text", [
    (0, "now"),
    (715, "715 ms ago"),
    (2_070, "2.07 s ago"),
    (5 * M + 17 * S, "5 m 17 s ago"),
    (30 * D, "30 d ago"),
    (-53, "now"),          # the event's clock is 53 ms ahead of ours: never "in 53 ms"
    (-715, "now"),
    (-2 * H, "now"),
])
def test_ago_never_in_the_future(delta, text) -> None:
    assert hz.ago(NOW, NOW - delta) == text


@pytest.mark.parametrize("ahead, text", [
    (0, "now"),
    (715, "in 715 ms"),
    (4 * H + 41 * M, "in 4 h 41 m"),
    (-2_070, "2.07 s ago"),
])
def test_rel_for_times_that_may_lie_ahead(ahead, text) -> None:
    assert hz.rel(NOW, NOW + ahead) == text


def test_infinite_scores_and_none() -> None:
    assert hz.rel(NOW, 2 ** 60) == "never" and hz.rel(NOW, -(2 ** 60)) == "always"
    assert hz.ago(NOW, None) == hz.rel(NOW, None) == "-"


@pytest.mark.parametrize("n, text", [(0, "0"), (999, "999"), (1_000, "1,000"), (28_417, "28,417"),
                                     (1_234_567, "1,234,567"), (-2_157, "-2,157"), (None, "-")])
def test_count_separators(n, text) -> None:
    assert hz.count(n) == text


@pytest.mark.parametrize("x, text", [(0, "0 jobs/s"), (0.05, "0.05 jobs/s"), (1.234, "1.23 jobs/s"),
                                     (12.34, "12.3 jobs/s"), (123.4, "123 jobs/s"),
                                     (1_234.5, "1,230 jobs/s"), (45_678, "45,700 jobs/s"), (None, "-")])
def test_rate_three_significant_figures(x, text) -> None:
    assert hz.rate(x) == text


def test_ms_field_time_or_duration() -> None:
    assert hz.ms_field("dead_since_ms", NOW - 5 * M, NOW) == f"{hz.stamp(NOW - 5 * M)}, 5 m ago"
    assert hz.ms_field("dead_since_ms", NOW + 53, NOW).endswith(", now")  # skew
    assert hz.ms_field("deadline_ms", NOW + 30 * S, NOW).endswith(", in 30 s")
    assert hz.ms_field("age_ms", 2_070, NOW) == "2.07 s"
    assert hz.ms_field("age_ms", "x", NOW) is None and hz.ms_field("flag_ms", True, NOW) is None


def test_stamp_and_clock() -> None:
    assert hz.stamp(1_795_796_533_321) == "2026-11-27 16:22:13.321Z"
    assert hz.clock(1_795_796_533_321) == "16:22:13Z"


def test_target_words_name_queue_server_and_environment() -> None:
    assert hz.target_words("email", "redis://:***@h:6379/0", "production") == \
        "queue email on redis://:***@h:6379/0 (PRODUCTION)"
    assert hz.target_words("email", "redis://h:6379/0", None) == "queue email on redis://h:6379/0"


def test_outcome_of_a_journal_entry() -> None:
    assert hz.outcome({"moved": 3, "failed": 0}) == "ok"
    assert hz.outcome({"moved": 1_168, "interrupted": True}) == "interrupted"
    assert hz.outcome({"failed": 2}) == "failed" and hz.outcome({"error": "connection lost"}) == "failed"


def test_tui_progress_words_label_rate_elapsed_and_eta() -> None:
    from jobctl_tui.format import progress_words

    assert progress_words(959, 2_157, 0) == "959 of 2,157 done"
    assert progress_words(1_000, 3_000, 2_000) == "1,000 of 3,000 done · 500 jobs/s · elapsed 2.00 s · ETA 4.00 s"
    assert progress_words(0, 3_000, 2_000).endswith("0 jobs/s · elapsed 2.00 s · ETA -")
