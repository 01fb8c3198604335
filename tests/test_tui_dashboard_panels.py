"""The dashboard's side panels: the top error groups across every queue,
the holds and running operations, the newest journal entries (numbers from
the core, shown whole at 160x48; one summary line at 80x24 that keeps the
footer's keys and the queue rows' numbers)."""

from __future__ import annotations

import asyncio

import pytest

from jobctl.config import Config
from jobctl.dashboard import Dashboard
from jobctl.dashboard.overview import TOP_ERRORS, top_errors
from jobctl.dashboard.triage import triage
from jobctl.layouts.reliable_list.holds import add_hold
from jobctl.ops.journal import write_entry
from jobctl.ops.request import OpRequest
from jobctl.ops.spec import Operation
from jobctl.session import Session
from jobctl_tui import make_app
from jobctl_tui import format as fmt
from jobctl_tui.overview_panels import group_words
from jobctl_tui.testing import screen_text, settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, spike_queues, tui_export_root  # noqa: F401 - fixtures

NOW = TUI_T0 + 1000
#: A redrive stopped at 1,168 of 2,157 (the journal panel's known numbers).
ENTRY = {"id": "op-stopped", "operation": "redrive", "queue": "email", "planned": 2157, "moved": 1168,
         "skipped": 3, "failed": 0, "interrupted": True, "started_ms": NOW - 120_000, "ended_ms": NOW - 60_000}


def session(redis_url: str) -> Session:
    s = Session(url=redis_url, timeout_s=5.0)
    s._config = Config(queues=spike_queues())
    return s


def scenario(redis_client, s: Session) -> list:
    """The spike, a hold on email (5 minutes old) and one journal entry;
    returns the core's triage of each queue's DLQ."""
    load_spike(redis_client, now_ms=TUI_T0)
    add_hold(s.layout("email"), 'tenant = "tenant_1"', "noisy tenant", "tester", now=NOW - 300_000)
    write_entry(s.client, s.layout("email").journal_key, dict(ENTRY))
    return [triage(s.layout(q), now=NOW) for q in ("email", "billing", "reports")]


def line_with(lines: list[str], *words: str) -> str:
    found = [line for line in lines if all(w in line for w in words)]
    assert found, f"no line holds {words}:\n" + "\n".join(lines)
    return found[0]


def test_panels_show_the_cores_numbers_at_160x48(redis_client, redis_url) -> None:
    s = session(redis_url)
    triages = scenario(redis_client, s)
    expected = top_errors(triages)
    assert len(expected) == TOP_ERRORS and not any(g.sampled for g in expected)
    app = make_app(s, refresh_s=3600, clock=lambda: NOW, server_label="redis://test",
                   export_root=TUI_EXPORTS["root"])

    async def go() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            assert app.screen.panels.display and not app.screen.query_one("#overview-line").display
            lines = screen_text(app)
            line_with(lines, "top errors (dead, every queue)")
            for g in expected:  # count, queue and group, whole, on one line
                line_with(lines, f" {g.count:,}  {g.queue}", group_words(g))
            assert "sampled" not in "\n".join(lines)
            line_with(lines, "email: held", 'tenant = "tenant_1"', f"for {fmt.age(300_000)}", "(noisy tenant)")
            line_with(lines, "redrive", "email", "interrupted", "1,168", "2,157")

    try:
        asyncio.run(go())
    finally:
        s.close()


def test_panels_collapse_to_one_line_at_80x24(redis_client, redis_url) -> None:
    s = session(redis_url)
    top = top_errors(scenario(redis_client, s))[0]
    app = make_app(s, refresh_s=3600, clock=lambda: NOW, server_label="redis://test",
                   export_root=TUI_EXPORTS["root"])

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            lines = screen_text(app)
            assert not app.screen.panels.display
            line_with(lines, f"0 running · 1 held · top error {top.count:,} in email: {group_words(top)}")
            assert "q quit" in lines[-1] and "? help" in lines[-1]
            for row in app.snapshot.rows:
                line = line_with(lines, f" {row.name}")
                assert f"{row.status.dead:,}" in line and f"{row.status.stuck:,}" in line, line

    try:
        asyncio.run(go())
    finally:
        s.close()


def test_a_running_operation_shows_its_progress(redis_client, redis_url) -> None:
    """While the dashboard applies a redrive, its overview lists it with the
    progress so far; once done, it is gone and journaled."""
    s = session(redis_url)
    load_spike(redis_client, now_ms=TUI_T0)
    dash = Dashboard(s)
    snap = dash.refresh()
    prepared = dash.prepare(OpRequest(Operation.REDRIVE, "email", no_export=True))
    seen = []

    def progress(done: int, total: int) -> None:
        seen.append(((done, total), [(op.operation, op.queue, op.done, op.total) for op in dash.overview(snap).active]))

    out = dash.apply(prepared, progress=progress, batch=50)
    assert seen and all(active == [("redrive", "email", done, total)] for (done, total), active in seen)
    after = dash.overview(snap)
    assert after.active == []
    assert after.journal[0].operation == "redrive" and after.journal[0].moved == out.result.moved
    s.close()


@pytest.mark.parametrize("bound", [10])
def test_top_errors_are_sampled_beyond_the_bound(redis_client, redis_url, bound) -> None:
    """Above the bound a DLQ is grouped from a sample, and the panel says so."""
    from jobctl.dashboard.overview import TriageCache

    s = session(redis_url)
    load_spike(redis_client, now_ms=TUI_T0)
    cache = TriageCache()
    cache.refresh({"email": s.layout("email")}, NOW, exact_bound=bound)
    (t,) = cache.get(["email"])
    assert t.sampled and all(g.sampled for g in top_errors([t]))
    cache.refresh({"email": s.layout("email")}, NOW + 1000, exact_bound=bound)  # within the TTL: not re-read
    assert cache.get(["email"])[0] is t
    s.close()


def test_an_operation_of_another_process_shows_its_walk(redis_client, redis_url) -> None:
    """A lease held by another jobctl process (another host) on email's
    shards is listed with its walk's counts summed over the shards."""
    from jobctl.keys import ReliableListKeys

    s = session(redis_url)
    load_spike(redis_client, now_ms=TUI_T0)
    op_id = "redrive-20261128T030000Z-0badcafe"
    for n, (total, popped) in enumerate(((600, 250), (400, 100))):
        keys = ReliableListKeys(f"email:{n:02d}")
        redis_client.set(keys.lease, f"{op_id} other-host 4242", px=30_000)
        redis_client.hset(keys.walk, mapping={"op": op_id, "total": total, "popped": popped})
    app = make_app(s, refresh_s=3600, clock=lambda: NOW, server_label="redis://test",
                   export_root=TUI_EXPORTS["root"])

    async def go() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            (op,) = app.screen.panels.overview.active
            assert (op.operation, op.queue, op.done, op.total, op.by) == ("redrive", "email", 350, 1000,
                                                                         "other-host 4242")
            line_with(screen_text(app), "redrive email by other-host 4242: 350 of 1,000 walked")

    try:
        asyncio.run(go())
    finally:
        s.close()


def test_a_refused_read_is_a_note_not_a_failure(redis_client, redis_url) -> None:
    """A user whose ACL refuses the journal streams still gets the other panels, and one note."""
    s = session(redis_url)
    load_spike(redis_client, now_ms=TUI_T0)
    redis_client.execute_command("ACL", "SETUSER", "nolease", "on", ">pw", "~*", "&*", "+@all", "-xrevrange")
    user = Session(url=redis_url.replace("redis://", "redis://nolease:pw@"), timeout_s=5.0)
    user._config = Config(queues=spike_queues())
    try:
        dash = Dashboard(user, clock=lambda: NOW)
        write_entry(redis_client, s.layout("email").journal_key, dict(ENTRY))
        ov = dash.overview(dash.refresh())
        assert ov.errors and ov.journal == []
        assert len(ov.notes) == 1 and "xrevrange" in ov.notes[0].lower()
    finally:
        user.close()
        s.close()
        redis_client.execute_command("ACL", "DELUSER", "nolease")
