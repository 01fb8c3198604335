"""The conformance suite: every layout, through the same CLI, against its own
producers and workers (``jobctl_fixtures.layouts``, one ``ADAPTER`` per
layout).

For each layout and each scenario that applies to it: the adapter writes the
scenario through the layout's protocol, then ``status`` must match the
adapter's expected counts, ``ls`` must list exactly the ids of each state,
``inspect`` must show the layout's metadata and ``check`` must find exactly
the problems the scenario planted.

For each operation that makes sense for a layout: the operation runs through
the CLI (``--yes --json``, a ``--config`` naming the queue), the counts move
as they must, and then the layout's *own* worker claims, completes and fails
the jobs jobctl touched (and never sees the ones it suppressed or purged).
A layout whose workers prove ownership with a claim token must refuse the
old claimant of a job jobctl requeued.

Adapters may return, besides the status counts and ``ids_by_state``:
``stuck_ids``, ``overdue_ids``, ``dangling_ids`` (dead ids without their
data: no operation takes them), ``malformed_ids`` (never redriven) and
``check_problems`` (``{kind: count}`` that ``check`` must report).  An
adapter attribute ``lands_in`` (``{operation: status count}``) names where
redriven or promoted jobs are counted when it is not ``ready``;
``stale_claim_refused`` says its workers prove ownership; ``inspect_meta``
(``{state: meta keys}``) what ``inspect`` must show.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobctl.cli.main import main
from jobctl_fixtures.layouts import ADAPTERS
from helpers import wall_ms

SIZE = 120
QUEUE = "confq"
STATUS_KEYS = ("ready", "scheduled", "scheduled_overdue", "processing", "stuck", "dead", "suppressed")
#: Which scenario each operation is exercised on (it has material for it).
OP_SCENARIO = {"requeue": "stuck-workers", "redrive": "dlq-spike", "suppress": "dlq-spike",
               "unsuppress": "dlq-spike", "purge": "dlq-spike", "promote": "scheduler-lag"}


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


class Conformance:
    """One adapter's queue on the test server, driven through the CLI."""

    def __init__(self, adapter, client, url: str, tmp_path: Path, capsys) -> None:
        self.adapter = adapter
        self.client = client
        self.url = url
        self.capsys = capsys
        qc = adapter.queue_config(QUEUE)
        lines = [f"[queues.{qc.name}]", f"layout = {_toml(qc.layout)}"]
        for key in ("tag", "shards", "priorities", "visibility_timeout_ms"):
            if getattr(qc, key) is not None:
                lines.append(f"{key} = {_toml(getattr(qc, key))}")
        lines += [f"{k} = {_toml(v)}" for k, v in (qc.options or {}).items()]
        self.config = tmp_path / "jobctl.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.expected: dict[str, Any] = {}

    def load(self, scenario: str) -> dict[str, Any]:
        self.expected = self.adapter.load(self.client, scenario, queue=QUEUE, size=SIZE, seed=7, now_ms=wall_ms())
        return self.expected

    def run(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(["--url", self.url, "--config", str(self.config), *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
        code, out, err = self.run(*argv, "--json")
        assert code in codes, f"jobctl {' '.join(argv)} exited {code}: {err}"
        return json.loads(out)

    def layout(self):
        from jobctl.layouts import layout_for

        return layout_for(self.client, self.adapter.queue_config(QUEUE))

    def listed(self, state: str) -> set[str]:
        """The ids ``ls`` lists in ``state``."""
        return {j["id"] for j in self.json("ls", QUEUE, "--state", state, "--limit", str(10 * SIZE))["jobs"]}

    def status(self) -> dict[str, Any]:
        [q] = self.json("status", QUEUE)["queues"]
        return q

    def ids(self, state: str) -> set[str]:
        return set(self.expected["ids_by_state"].get(state, set()))

    def lands_in(self, op: str) -> str:
        """The status count an operation's jobs join: ``ready``, unless the
        adapter's ``lands_in`` says otherwise (e.g. ``scheduled_overdue``
        for a layout whose dispatcher moves due jobs to ready)."""
        return getattr(self.adapter, "lands_in", {}).get(op, "ready")

    @property
    def unreachable(self) -> set[str]:
        """Dead ids no operation takes: their data is gone."""
        return set(self.expected.get("dangling_ids", set()))

    def drain(self, touched: set[str], *, forbidden: set[str] = frozenset()) -> set[str]:
        """Run the layout's own worker until it claimed every id of
        ``touched``: those it completes and fails in turn (each call must
        succeed), any other it completes.  Returns the ids claimed; none of
        ``forbidden`` may be among them."""
        worker = self.adapter.worker(self.client, QUEUE)
        claimed: set[str] = set()
        flip = False
        for _ in range(20 * SIZE):
            if touched <= claimed:
                break
            job_id = worker.claim()
            if job_id is None:
                break
            assert job_id not in forbidden, f"the worker claimed {job_id}, which jobctl took out of reach"
            claimed.add(job_id)
            if job_id in touched:
                flip = not flip
                assert (worker.complete(job_id) if flip else worker.fail(job_id)), job_id
            else:
                worker.complete(job_id)
        assert touched <= claimed, f"the worker never got {sorted(touched - claimed)[:5]}"
        return claimed

    def check_ok(self) -> None:
        """``check`` reports only problems the scenario planted."""
        doc = self.json("check", QUEUE, codes=(0, 7))
        kinds = set(doc["queues"][0]["counts"])
        assert kinds <= set(self.expected.get("check_problems", {})), doc["queues"][0]["problems"][:5]


@pytest.fixture
def conf(request, redis_client, redis_url, tmp_path, capsys) -> Conformance:
    return Conformance(ADAPTERS[request.param], redis_client, redis_url, tmp_path, capsys)


READ_CASES = [pytest.param(name, scenario, id=f"{name}-{scenario}")
              for name, adapter in ADAPTERS.items() for scenario in adapter.scenarios]
OP_CASES = [pytest.param(name, op, id=f"{name}-{op}")
            for name, adapter in ADAPTERS.items() for op in adapter.operations
            if OP_SCENARIO[op] in adapter.scenarios]
STALE_CASES = [pytest.param(name, id=name) for name, adapter in ADAPTERS.items()
               if getattr(adapter, "stale_claim_refused", False)]


def test_every_layout_has_an_adapter():
    from jobctl.layouts import known_layouts

    missing = {"reliable-list", "hash-job", "json-list"} - set(ADAPTERS)
    assert not missing, missing
    assert set(ADAPTERS) <= known_layouts()


# -- read side ---------------------------------------------------------------------

@pytest.mark.parametrize("conf,scenario", READ_CASES, indirect=["conf"])
def test_read_side(conf: Conformance, scenario: str):
    exp = conf.load(scenario)
    q = conf.status()
    assert q["layout"] == conf.adapter.name
    assert q["errors"] == []
    for key in STATUS_KEYS:
        if key in exp:
            assert q[key] == exp[key], (key, q[key], exp[key])

    states = {s.value for s in conf.layout().states}
    for state, ids in exp["ids_by_state"].items():
        if state == "history" or (state not in states and not ids):  # `ls` takes no history
            continue
        doc = conf.json("ls", QUEUE, "--state", state, "--limit", str(10 * SIZE))
        assert {j["id"] for j in doc["jobs"]} == set(ids), state
        assert all(j["state"] == state for j in doc["jobs"])
        if not ids:
            continue
        job_id = sorted(ids)[len(ids) // 2]
        rec = conf.json("inspect", QUEUE, job_id)
        assert rec["id"] == job_id and rec["state"] == state and rec["layout"] == conf.adapter.name
        for key in getattr(conf.adapter, "inspect_meta", {}).get(state, ()):
            if job_id in conf.unreachable and key not in rec["meta"]:
                continue
            assert key in rec["meta"], (state, key, rec["meta"])

    doc = conf.json("check", QUEUE, codes=(0, 7))
    [report] = doc["queues"]
    assert report["counts"] == exp.get("check_problems", {}), report["problems"][:5]
    assert doc["ok"] is (not exp.get("check_problems"))

    if exp.get("dead"):
        hist = conf.json("attempts", QUEUE, "--state", "dead")
        assert sum(hist["counts"].values()) + hist["unknown"] == exp["dead"]


# -- operations ---------------------------------------------------------------------

@pytest.mark.parametrize("conf,op", OP_CASES, indirect=["conf"])
def test_operation(conf: Conformance, op: str):
    exp = conf.load(OP_SCENARIO[op])
    before = conf.status()
    dead = conf.ids("dead")
    takeable = dead - conf.unreachable

    if op == "requeue":
        processing = conf.listed("processing")
        res = conf.json("requeue", QUEUE, "--stuck", "--yes")
        stuck = set(exp["stuck_ids"]) if "stuck_ids" in exp else processing - conf.listed("processing")
        assert stuck and len(stuck) == exp["stuck"], "the scenario has stuck jobs"
        assert res["moved"] == len(stuck) and res["skipped"] == 0
        assert not stuck & conf.listed("processing")
        after = conf.status()
        assert after["stuck"] == 0
        assert after["processing"] == before["processing"] - len(stuck)
        assert after["ready"] == before["ready"] + len(stuck)
        conf.check_ok()
        conf.drain(stuck)

    elif op == "redrive":
        redrivable = takeable - set(exp.get("malformed_ids", set()))
        res = conf.json("redrive", QUEUE, "--yes")
        assert res["moved"] == len(redrivable) and res["skipped"] == 0
        assert res["plan"]["malformed"] == len(takeable - redrivable)
        after = conf.status()
        assert after["dead"] == len(dead) - len(redrivable)
        lands = conf.lands_in("redrive")
        assert after[lands] == before[lands] + len(redrivable)
        conf.check_ok()
        conf.drain(redrivable)

    elif op == "suppress":
        res = conf.json("suppress", QUEUE, "--filter", "state = dead", "--reason", "conformance", "--yes")
        assert res["moved"] == len(takeable)
        after = conf.status()
        assert (after["dead"], after["suppressed"]) == (len(dead) - len(takeable), len(takeable))
        assert conf.listed("suppressed") == takeable
        some = sorted(takeable)[0]
        assert conf.json("inspect", QUEUE, some)["state"] == "suppressed"
        conf.check_ok()
        conf.drain(set(), forbidden=takeable)

    elif op == "unsuppress":
        conf.json("suppress", QUEUE, "--filter", "state = dead", "--reason", "conformance", "--yes")
        res = conf.json("unsuppress", QUEUE, "--yes")
        assert res["moved"] == len(takeable)
        after = conf.status()
        assert (after["dead"], after["suppressed"]) == (len(dead), 0)
        conf.check_ok()
        redrivable = takeable - set(exp.get("malformed_ids", set()))
        res = conf.json("redrive", QUEUE, "--yes")
        assert res["moved"] == len(redrivable)
        conf.drain(redrivable)

    elif op == "purge":
        res = conf.json("purge", QUEUE, "--state", "dead", "--no-export", "--yes")
        assert res["moved"] == len(takeable)
        after = conf.status()
        assert after["dead"] == len(dead) - len(takeable)
        code, out, err = conf.run("inspect", QUEUE, sorted(takeable)[0], "--json")
        assert code == 5 or (code == 0 and json.loads(out)["state"] is None), (code, err)
        conf.check_ok()
        conf.drain(set(), forbidden=takeable)

    elif op == "promote":
        scheduled = conf.ids("scheduled")
        res = conf.json("promote", QUEUE, "--yes")
        assert res["moved"] == len(scheduled)
        after = conf.status()
        if conf.lands_in("promote") == "ready":
            assert (after["scheduled"], after["ready"]) == (0, before["ready"] + len(scheduled))
        else:  # e.g. due now, for the layout's own dispatcher to hand out
            assert after[conf.lands_in("promote")] == len(scheduled)
        conf.check_ok()
        conf.drain(scheduled)

    else:  # pragma: no cover - a new operation needs its case here
        pytest.fail(f"no conformance case for {op}")


@pytest.mark.parametrize("conf", STALE_CASES, indirect=True)
def test_requeued_jobs_old_claimant_is_refused(conf: Conformance):
    """requeue --ids clears the claim: the old claimant's complete and fail
    are refused by its own ownership check, the new claimant's succeed."""
    conf.load("healthy")
    old = conf.adapter.worker(conf.client, QUEUE)
    job_id = old.claim()
    assert job_id is not None
    res = conf.json("requeue", QUEUE, "--ids", job_id, "--yes")
    assert res["moved"] == 1
    new = conf.adapter.worker(conf.client, QUEUE)
    for _ in range(20 * SIZE):
        got = new.claim()
        assert got is not None, "the requeued job never came back"
        if got == job_id:
            break
        new.complete(got)
    assert old.complete(job_id) is False
    assert old.fail(job_id) is False
    assert new.complete(job_id) is True
    conf.check_ok()
