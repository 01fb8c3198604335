"""Pilot tests: the job inspector offers only the operations that apply to
the job's state (:func:`jobctl.ops.catalog.job_operations`)."""

from __future__ import annotations

import asyncio

import pytest

from jobctl.keys import ReliableListKeys
from jobctl.model import State
from jobctl.ops.catalog import job_operations
from jobctl.ops.spec import Operation
from jobctl_tui.inspector import InspectorScreen
from jobctl_tui.testing import settle
from helpers import TUI_EXPORTS, TUI_T0, load_spike, spike_queues, tui_export_root  # noqa: F401 - autouse fixture

from test_tui_pilot import app_for, spike_session

OPS = {Operation.REQUEUE, Operation.PROMOTE, Operation.REDRIVE, Operation.SUPPRESS, Operation.UNSUPPRESS,
       Operation.PURGE}


@pytest.mark.parametrize(("state", "stuck", "want"), [
    (State.DEAD, False, (Operation.REDRIVE, Operation.SUPPRESS, Operation.PURGE)),
    (State.SUPPRESSED, False, (Operation.UNSUPPRESS, Operation.PURGE)),
    (State.SCHEDULED, False, (Operation.PROMOTE,)),
    (State.PROCESSING, True, (Operation.REQUEUE,)),
    (State.PROCESSING, False, ()),
    (State.READY, False, ()),
    (None, False, ()),
])
def test_job_operations_by_state(state, stuck, want) -> None:
    assert job_operations(state, stuck=stuck) == want


def _offered(screen) -> set[Operation]:
    """The operations whose keys the inspector's footer shows."""
    out = set()
    for _node, binding, _enabled, _tip in screen.active_bindings.values():
        if binding.action.startswith("op("):
            out.add(Operation(binding.action[4:-2]))
    return out


def _by_deadline(client, keys, *, past: bool) -> str:
    """A processing job whose visibility deadline is past (or ahead) at the app's clock."""
    now = TUI_T0 + 1000
    ids = (client.zrangebyscore(keys.deadline, "-inf", now - 1, start=0, num=1) if past
           else client.zrangebyscore(keys.deadline, now + 1, "+inf", start=0, num=1))
    assert ids, "the scenario has no such processing job"
    return ids[0].decode()


def test_inspector_offers_the_operations_of_each_state(redis_url, redis_client) -> None:
    truth = load_spike(redis_client, now_ms=TUI_T0)
    billing = truth["billing"]
    moved = sorted(billing.ids_by_state["dead"])[0]  # one dead billing job made suppressed
    keys = ReliableListKeys("billing")
    assert redis_client.lrem(keys.dead, 1, moved) == 1
    redis_client.zadd(keys.suppressed, {moved: TUI_T0 - 5_000})
    cases = {
        "dead": ("email", sorted(truth["email"].ids_by_state["dead"] - truth["email"].malformed_ids)[0]),
        "ready": ("email", sorted(truth["email"].ids_by_state["ready"])[0]),
        "scheduled": ("reports", sorted(truth["reports"].ids_by_state["scheduled"])[0]),
        "suppressed": ("billing", moved),
        "processing:stuck": ("billing", _by_deadline(redis_client, keys, past=True)),
        "processing:running": ("billing", _by_deadline(redis_client, keys, past=False)),
    }

    async def go():
        app = app_for(spike_session(redis_url))
        seen = {}
        async with app.run_test(size=(140, 40)) as pilot:
            await settle(pilot)
            for name, (queue, job_id) in cases.items():
                app.open_job(queue, job_id)
                await settle(pilot)
                scr = app.screen
                assert isinstance(scr, InspectorScreen) and scr.record is not None and scr.record.job_id == job_id
                stuck = scr.record.deadline_ms is not None and scr.record.deadline_ms < app.clock()
                seen[name.split(":")[0], stuck] = (scr.record.state, _offered(scr) & OPS)
                if name == "ready":  # a refused key does nothing but say why
                    await pilot.press("X")
                    await settle(pilot)
                    assert app.screen is scr
                app.pop_screen()
                await settle(pilot)
        return seen

    seen = asyncio.run(go())
    assert seen["dead", False] == (State.DEAD, {Operation.REDRIVE, Operation.SUPPRESS, Operation.PURGE})
    assert seen["ready", False] == (State.READY, set())
    assert seen["scheduled", False] == (State.SCHEDULED, {Operation.PROMOTE})
    assert seen["suppressed", False] == (State.SUPPRESSED, {Operation.UNSUPPRESS, Operation.PURGE})
    assert seen["processing", True] == (State.PROCESSING, {Operation.REQUEUE})
    assert seen["processing", False] == (State.PROCESSING, set())
