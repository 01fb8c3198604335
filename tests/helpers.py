"""Helpers the test modules share: the wall clock, running the CLI
in-process with its output captured (one-off or through a per-test runner
on a config file), draining a fixture worker, reading a layout's batches,
crashing a Lua script call, and the TUI tests' scenario, queues, export
folder, snapshot fixture and queue-screen key presses."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pytest_textual_snapshot import SVGImageExtension
from textual._doc import take_svg_screenshot

from jobctl.cli.main import main
from jobctl.config import QueueConfig
from jobctl.model import State
from jobctl.ops.engine import run_plan
from jobctl.ops.spec import Operation, OpSpec
from jobctl_fixtures.scenarios import load_scenario
from jobctl_tui.testing import settle

__all__ = ["wall_ms", "cli", "run_with_config", "queues_toml", "write_config", "cli_runner", "config_fixtures",
           "drain", "claim_and_ack", "assert_batches_cover", "assert_every_state_batched", "export_dead",
           "purge_exported", "Killed", "crash_on_script_call", "TUI_T0", "TUI_EXPORTS", "tui_export_root", "snap",
           "open_and_press", "load_spike", "spike_queues", "redrive_records", "today_record"]


def wall_ms() -> int:
    """The local wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``jobctl *argv`` run in-process."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_with_config(capsys, url: str, cfg: str, *argv: str) -> tuple[int, dict | str, str]:
    """``(exit code, stdout, stderr)`` of ``jobctl --url url --config cfg
    *argv``; stdout parsed as JSON when it is JSON."""
    code = main(["--url", url, "--config", cfg, *argv])
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err


def queues_toml(**queues: dict) -> str:
    """A jobctl.toml text with one ``[queues.NAME]`` table per keyword
    argument, its options as TOML values (strings quoted, numbers as they
    are), e.g. ``queues_toml(email={"layout": "reliable-list"})``."""
    return "\n".join(f"[queues.{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in opts.items())
                     for name, opts in queues.items())


def write_config(tmp_path, toml: str) -> str:
    """Write ``toml`` to ``tmp_path/jobctl.toml``; returns that path."""
    path = tmp_path / "jobctl.toml"
    path.write_text(toml)
    return str(path)


def cli_runner(capsys, redis_url: str, cfg: str):
    """``run(*args, url=None)`` -> ``(exit code, stdout, stderr)`` of
    ``jobctl --url URL --config cfg *args`` run in-process; ``URL`` is
    ``redis_url`` unless ``url`` is given."""
    def _run(*args: str, url: str | None = None) -> tuple[int, str, str]:
        code = main(["--url", url or redis_url, "--config", cfg, *args])
        out, err = capsys.readouterr()
        return code, out, err
    return _run


def config_fixtures(toml: str):
    """The ``cfg`` and ``run`` fixtures of a test module whose queues are
    ``toml``: ``cfg`` is the path of a jobctl.toml holding it, ``run(*args,
    url=None)`` the :func:`cli_runner` on it (``cfg, run = config_fixtures(T)``)."""
    @pytest.fixture
    def cfg(tmp_path) -> str:
        return write_config(tmp_path, toml)

    @pytest.fixture
    def run(redis_url, cfg, capsys):
        return cli_runner(capsys, redis_url, cfg)
    return cfg, run


def drain(worker, limit: int = 10_000) -> list[str]:
    """What ``worker.claim()`` returns until it returns ``None`` (at most
    ``limit`` jobs)."""
    out = []
    while len(out) < limit:
        job = worker.claim()
        if job is None:
            return out
        out.append(job)
    return out


def claim_and_ack(worker) -> list[str]:
    """Claim and acknowledge with ``worker`` (a fixture ``Worker``) until it
    claims nothing; returns the claimed job ids in claim order."""
    served = []
    while (job := worker.claim()) is not None:
        served.append(job.job_id)
        worker.ack(job.job_id)
    return served


def assert_batches_cover(lay, state, batch: int = 7) -> list:
    """``lay.iter_batches(state, batch=batch)`` (``lay`` a layout) yields
    every job of ``state`` exactly once, in batches of at most ``batch``
    records of that state, and a ``sample=(2, 5)`` read yields at most 10 of
    those jobs.  Returns the records in the order read."""
    depth = lay.depth(state)
    batches = list(lay.iter_batches(state, batch=batch))
    assert sum(len(b) for b in batches) == depth, state
    assert all(len(b) <= batch for b in batches)
    assert {r.state for b in batches for r in b} <= {state}
    records = [r for b in batches for r in b]
    ids = [r.job_id for r in records]
    assert len(set(ids)) == depth
    sampled = [r for b in lay.iter_batches(state, batch=100, sample=(2, 5)) for r in b]
    assert len(sampled) <= 10 and set(r.job_id for r in sampled) <= set(ids)
    return records


def assert_every_state_batched(lay, queue: str, batch: int = 7) -> list:
    """Suppress two dead jobs of ``queue`` (``lay`` its layout; so that the
    suppressed state has jobs), then :func:`assert_batches_cover` for each
    of ``lay.states``.  Returns every record read."""
    run_plan(lay, lay.plan(OpSpec(Operation.SUPPRESS, queue, State.DEAD, State.SUPPRESSED, limit=2, reason="x")),
             journal=False)
    return [r for state in lay.states for r in assert_batches_cover(lay, state, batch=batch)]


def export_dead(base: list[str], queue: str, out) -> set[str]:
    """``jobctl *base export QUEUE --state dead --out OUT --format jsonl``
    (``base`` the global options) run in-process, asserted to exit 0; the
    ids of the jobs it wrote."""
    assert main(base + ["export", queue, "--state", "dead", "--out", str(out), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for part in sorted(out.glob("part-*.jsonl")) for line in part.read_text().splitlines()]
    return {r["job_id"] for r in rows}


def purge_exported(capsys, base: list[str], queue: str, out) -> dict:
    """``jobctl *base purge QUEUE --state dead --export-to OUT --yes --json``
    run in-process (output captured so far is dropped), asserted to exit 0;
    its JSON result."""
    capsys.readouterr()
    assert main(base + ["purge", queue, "--state", "dead", "--export-to", str(out), "--yes", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


class Killed(BaseException):
    """A crash between two script calls (as kill -9 would leave it)."""


def crash_on_script_call(monkeypatch, module, name: str, nth: int = 1):
    """Make the nth call of the Lua script `name`, got through `module.script`,
    raise Killed (before it runs); returns a function that puts the real
    `module.script` back."""
    real = module.script
    calls = {"n": 0}

    def crashing(client, script_name):
        s = real(client, script_name)
        if script_name != name:
            return s

        def call(**kw):
            calls["n"] += 1
            if calls["n"] == nth:
                raise Killed
            return s(**kw)
        return call

    monkeypatch.setattr(module, "script", crashing)
    return lambda: monkeypatch.setattr(module, "script", real)


# -- the TUI tests -------------------------------------------------------------------------------

#: The instant the TUI tests load their scenarios at and pin the app's clock near (epoch ms).
TUI_T0 = 1_790_000_000_000
#: Where a purge started from the TUI exports first: ``TUI_EXPORTS["root"]``, set by :func:`tui_export_root`.
TUI_EXPORTS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def tui_export_root(tmp_path) -> str:
    """A folder of each test's own for the exports of TUI purges (also put
    in ``TUI_EXPORTS["root"]``); autouse in each module that imports it."""
    TUI_EXPORTS["root"] = str(tmp_path / "tui-exports")
    return TUI_EXPORTS["root"]


def load_spike(client, now_ms: int = TUI_T0) -> dict:
    """dlq-spike on email (2 shards, 4 malformed), stuck-workers on billing,
    scheduler-lag on reports, loaded at ``now_ms``: queue name -> truth."""
    return {
        "email": load_scenario(client, "dlq-spike", queue="email", shards=2, size=600, seed=11, now_ms=now_ms,
                               malformed=4),
        "billing": load_scenario(client, "stuck-workers", queue="billing", size=300, seed=12, now_ms=now_ms),
        "reports": load_scenario(client, "scheduler-lag", queue="reports", size=200, seed=13, now_ms=now_ms),
    }


def spike_queues() -> dict[str, QueueConfig]:
    """The queues of :func:`load_spike`, email with a dead-depth SLO (warn
    100, breach 1000) and an oldest-ready-age SLO of 10 minutes."""
    return {
        "email": QueueConfig("email", shards=2, options={"slo": {"dead": {"warn": 100, "breach": 1000},
                                                                 "oldest_ready_age": "10m"}}),
        "billing": QueueConfig("billing"),
        "reports": QueueConfig("reports"),
    }


class _TuiSnapshots(SVGImageExtension):
    """Stores the SVGs under tests/snapshots/<test module>/."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(Path(test_location.filepath).parent / "snapshots" / test_location.basename)


@pytest.fixture
def snap(snapshot):
    """``compare(app, run_before=None, size=(130, 36))`` -> whether the app's
    SVG screenshot (after ``run_before(pilot)``) matches the stored one; it
    closes the app's session."""
    snapshot = snapshot.use_extension(_TuiSnapshots)

    def compare(app, run_before=None, size=(130, 36)) -> bool:
        svg = take_svg_screenshot(app=app, terminal_size=size, run_before=run_before)
        app.session.close()
        return snapshot == svg

    return compare


async def open_and_press(pilot, queue: str, *steps: str | tuple[str, ...]) -> None:
    """Open ``queue``'s screen, then press each step's key (a tuple: its keys
    in one go), settling the app before and after each."""
    await settle(pilot)
    pilot.app.open_queue(queue)
    await settle(pilot)
    for keys in steps:
        await pilot.press(*((keys,) if isinstance(keys, str) else keys))
        await settle(pilot)


def redrive_records(client, keys) -> dict[bytes, bytes]:
    """Every value of jobctl's redrive record of a queue (shard) with window
    keys ``keys``, over the days a read looks at (newest day wins)."""
    from jobctl.ops.redrive_record import read_keys

    out: dict[bytes, bytes] = {}
    for key in reversed(read_keys(keys, wall_ms())):
        out.update(client.hgetall(key))
    return out


def today_record(keys) -> str:
    """The redrive-record hash an operation applying now writes."""
    from jobctl.ops.redrive_record import record_key

    return record_key(keys, wall_ms())
