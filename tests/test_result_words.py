"""The one-line result of an operation says what happened, in the words of the operation."""

from __future__ import annotations

from collections import Counter

from jobctl.ops.engine import RunResult


def result(operation: str, **kw) -> RunResult:
    return RunResult(operation=operation, queue="email", operation_id="x", **kw)


def test_purge_says_deleted_drain_removed_transform_rewritten() -> None:
    assert "planned 210, deleted 210," in result("purge", planned=210, moved=210).summary()
    assert "removed 12," in result("drain", planned=12, moved=12).summary()
    assert "rewritten 3," in result("transform", planned=3, moved=3).summary()
    assert "moved 9," in result("redrive", planned=9, moved=9).summary()
    assert "moved" not in result("purge", planned=1, moved=1).summary()


def test_skips_say_why_not_a_code() -> None:
    res = result("pause", planned=2, moved=0, skipped=2, skipped_reasons=Counter({"moved": 2}))
    text = res.summary()
    assert text == "pause email: planned 2, moved 0, skipped 2 (taken by a worker since the plan: 2), failed 0"
    assert "(moved: 2)" not in text
    res = result("redrive", planned=3, moved=1, skipped=2, skipped_reasons=Counter({"changed": 2}))
    assert "skipped 2 (changed since the plan: 2)" in res.summary()
