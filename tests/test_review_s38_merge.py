"""Review of forked walks' merged messages (processes.run_forked with
result.merged): every result arrives exactly once, across a stop, an early
close and an error, and ``more`` is the later result's.  No server: the
tasks are plain generators of BatchResult."""

from __future__ import annotations

import pytest

from jobctl.ops.result import LATE_RESULTS, BatchResult, merged
from jobctl.ops.walk.processes import FORKS, ITEMS_A_MESSAGE, run_forked

pytestmark = pytest.mark.skipif(not FORKS, reason="tasks run in threads where fork is not used")


def walking(label: str, limit: int | None, *, fail: bool = False, skip_every: int = 0):
    """A walk of one job a result; every ``skip_every``-th one skipped
    ("changed"), every third result ending a round trip (more=False)."""
    def task(halted):
        n = 0
        while limit is None or n < limit:
            if halted():
                return
            job = f"{label}{n}"
            br = BatchResult(more=n % 3 != 2)
            if skip_every and n % skip_every == 0:
                br.skipped.append(job)
                br.reasons[job] = "changed"
            else:
                br.moved.append(job)
            yield br
            n += 1
        if fail:
            raise ValueError("bad window")

    return task


def test_merged_results_arrive_once_each_with_their_reasons():
    got = list(run_forked([walking("a", 50, skip_every=4), walking("b", ITEMS_A_MESSAGE * 2 + 1)], ["a", "b"],
                          None, merge=merged))
    moved = [j for br in got for j in br.moved]
    skipped = [j for br in got for j in br.skipped]
    assert sorted(moved + skipped) == sorted([f"a{n}" for n in range(50)] + [f"b{n}" for n in range(17)])
    assert len(set(moved + skipped)) == len(moved + skipped)
    assert all(br.reasons.get(j) == "changed" for br in got for j in br.skipped)
    assert len(got) < 50 + 17


def test_a_merged_message_says_more_as_its_last_result_does():
    first = BatchResult(moved=["x"], more=False)
    later = BatchResult(moved=["y"], more=True)
    assert merged(first, later).more is True
    assert merged(later, first).more is False
    assert merged(first, later).moved == ["x", "y"]


def test_a_caller_that_closes_early_counts_every_result_once_through_late_results():
    """The caller reads a few messages then closes (a stop): what the
    children held merged and sent afterwards reaches LATE_RESULTS; nothing
    is counted twice."""
    late: list = []
    token = LATE_RESULTS.set(late.append)
    try:
        walks = run_forked([walking("a", None), walking("b", None)], ["a", "b"], None, merge=merged)
        early = [next(walks) for _ in range(3)]
        walks.close()
    finally:
        LATE_RESULTS.reset(token)
    ids = [j for br in early + late for j in br.moved]
    assert len(ids) == len(set(ids))
    for label in "ab":  # each walk's results form a prefix of its jobs: none lost in the middle
        ns = sorted(int(j[1:]) for j in ids if j[0] == label)
        assert ns == list(range(len(ns)))


def test_a_walks_error_comes_after_every_result_it_held_and_the_others_finish():
    got: list = []
    with pytest.raises(ValueError, match="bad window"):
        for br in run_forked([walking("a", 5, fail=True), walking("b", 40)], ["a", "b"], None, merge=merged,
                             halting=lambda br: setattr(br, "more", True)):
            got.append(br)
    ids = [j for br in got for j in br.moved]
    assert sorted(j for j in ids if j[0] == "a") == sorted(f"a{n}" for n in range(5))
    assert len(ids) == len(set(ids))
