"""The operations core (jobctl.ops.core): one flow and one set of policies
for the CLI, the TUI and runbook steps; facts written once (jobctl.ops.catalog)."""

from __future__ import annotations

from types import SimpleNamespace

import orjson
import pytest

from jobctl.dashboard import triage
from jobctl.errors import ReadOnlyRefused, UsageError
from jobctl.exitcodes import ExitCode
from jobctl.filter import compile_filter
from jobctl.keys import ReliableListKeys
from jobctl.model import State, parse_envelope
from jobctl.ops.catalog import OPERATIONS, group_key, needs_typed_count
from jobctl.ops.core import OperationCore, check_request
from jobctl.ops.journal import read_entries, read_local
from jobctl.ops.request import OpRequest, equivalent_command
from jobctl.ops.spec import Operation
from jobctl.runbook import Library
from jobctl.runbook.runner import Runner
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario


@pytest.mark.parametrize("req, message", [
    (OpRequest(Operation.REQUEUE, "q"), "requeue needs --stuck or --ids"),
    (OpRequest(Operation.REDRIVE, "q", delay_ms=1000), "--delay needs --to scheduled"),
    (OpRequest(Operation.REDRIVE, "q", plan_file="p.jsonl", ids=("a",)), "--plan and --ids exclude each other"),
    (OpRequest(Operation.SUPPRESS, "q", reason="  "), "--reason must not be empty"),
    (OpRequest(Operation.PURGE, "q"), "purge deletes jobs for good"),
    (OpRequest(Operation.PURGE, "q", export_to="d", no_export=True), "exclude each other"),
    (OpRequest(Operation.PURGE, "q", export_to="d", limit=5), "--limit cannot be combined with --export-to"),
])
def test_request_policies_are_usage_errors(req, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        check_request(req)


def test_read_only_refuses_everything_but_a_dry_run():
    ro = Session(url="redis://127.0.0.1:1/0", read_only_flag=True)  # never connects
    with pytest.raises(ReadOnlyRefused, match="redrive refused: read-only"):
        check_request(OpRequest(Operation.REDRIVE, "q"), ro)
    check_request(OpRequest(Operation.REDRIVE, "q", dry_run=True), ro)
    check_request(OpRequest(Operation.PURGE, "q", dry_run=True), ro)  # a dry purge needs no export


def test_catalog_defaults_and_equivalent_command():
    req = OpRequest(Operation.REDRIVE, "email", filter_text='error = "X"')
    assert (req.source, req.target) == (State.DEAD, State.READY)
    purge = OpRequest(Operation.PURGE, "email", source=State.SUPPRESSED, export_to="/tmp/x y")
    assert purge.target is None
    assert equivalent_command(purge) == ["jobctl", "purge", "email", "--state", "suppressed", "--export-to",
                                         "/tmp/x y"]  # words: the journal's command_line quotes them once
    assert [i.key for i in OPERATIONS.values() if i.key] == ["U", "P", "R", "S", "X"]
    assert OpRequest(Operation.PURGE, "q", older_than_ms=60_000, filter_text="tenant = t1"
                     ).effective_filter_text == "(tenant = t1) and dead_for >= 60000ms"


def _session(url: str, **kw) -> Session:
    return Session(url=url, **kw)


def test_run_confirms_then_applies_and_a_no_changes_nothing(redis_url, redis_client):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=200, seed=3)
    dead = truth.expected["dead"]
    keys = ReliableListKeys("email")
    s = _session(redis_url)
    try:
        core = OperationCore(s)
        asked = []
        out = core.run(OpRequest(Operation.REDRIVE, "email"), confirm=lambda p: asked.append(p) or False)
        assert out.status == "cancelled" and out.exit_code is ExitCode.ABORTED and out.result is None
        assert len(asked) == 1 and asked[0].plan.planned == dead and not asked[0].typed_count
        assert redis_client.llen(keys.dead) == dead
        assert read_entries(redis_client, [keys.journal]) == []

        out = core.run(OpRequest(Operation.REDRIVE, "email", dry_run=True), confirm=lambda p: pytest.fail("asked"))
        assert out.status == "dry-run" and out.exit_code is ExitCode.OK and out.result.dry_run
        assert redis_client.llen(keys.dead) == dead

        out = core.run(OpRequest(Operation.REDRIVE, "email"), confirm=lambda p: True, argv=["jobctl", "redrive"])
        assert out.status == "applied" and out.exit_code is ExitCode.OK and out.result.moved == dead
        assert redis_client.llen(keys.dead) == 0
        e = read_entries(redis_client, [keys.journal])[0]
        assert (e["operation"], e["moved"], e["command"]) == ("redrive", dead, "jobctl redrive")

        out = core.run(OpRequest(Operation.REDRIVE, "email"), confirm=lambda p: pytest.fail("asked"))
        assert out.status == "nothing" and out.exit_code is ExitCode.OK
    finally:
        s.close()


def test_purge_exports_first_and_is_fenced_to_the_export(redis_url, redis_client, tmp_path):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", size=200, seed=4)
    keys = ReliableListKeys("email")
    s = _session(redis_url)
    notes: list[str] = []
    try:
        core = OperationCore(s)
        prepared = core.prepare(OpRequest(Operation.PURGE, "email", export_to=str(tmp_path / "x")), note=notes.append)
        assert prepared.exported == str(tmp_path / "x") and prepared.typed_count  # every purge: typed count
        assert any("exported" in n for n in notes)
        assert {j.job_id for j in prepared.plan.jobs} <= set(prepared.spec.fence)
        out = core.apply(prepared)
        assert out.exit_code is ExitCode.OK and out.result.moved == prepared.plan.planned
        assert redis_client.llen(keys.dead) == truth.expected["dead"] - prepared.plan.planned
    finally:
        s.close()


def test_typed_count_only_destructive_or_in_production(redis_url, redis_client):
    """A large redrive is a plain yes/no; a purge, drain or transform needs the
    count typed, and so does every operation in a production environment."""
    load_scenario(redis_client, "dlq-spike", queue="big", size=3600, seed=21)
    s = _session(redis_url)
    try:
        p = OperationCore(s).prepare(OpRequest(Operation.REDRIVE, "big", dry_run=True))
        assert p.plan.planned > 1000 and not p.typed_count
    finally:
        s.close()
    for op in (Operation.PURGE, Operation.DRAIN, Operation.TRANSFORM):
        assert needs_typed_count(SimpleNamespace(spec=SimpleNamespace(operation=op)), None)
    redrive = SimpleNamespace(spec=SimpleNamespace(operation=Operation.REDRIVE))
    assert not needs_typed_count(redrive, "staging") and not needs_typed_count(redrive, None)
    assert needs_typed_count(redrive, "production") and needs_typed_count(redrive, " Prod ")


def test_plan_breakdown_and_triage_group_alike(redis_url, redis_client):
    """Jobs without an error code are grouped by their message in both, and
    the triage group's filter selects exactly that group."""
    load_scenario(redis_client, "dlq-spike", queue="email", size=300, seed=5)
    keys = ReliableListKeys("email")
    ids = [i.decode() for i in redis_client.lrange(keys.dead, 0, 9)]
    long_msg = "upstream [pool] * exhausted after 30s? while calling the ledger service"
    for n, job_id in enumerate(ids):
        env = orjson.loads(redis_client.get(keys.job(job_id)))
        env.pop("lastErrorCode", None)
        env["lastErrorMessage"] = long_msg if n % 2 else "short msg"
        redis_client.set(keys.job(job_id), orjson.dumps(env))
    s = _session(redis_url)
    try:
        layout = s.layout("email")
        tri = triage(layout, now=0)
        core = OperationCore(s)
        plan = core.prepare(OpRequest(Operation.REDRIVE, "email", dry_run=True)).plan
        assert {(g.job_type or "?", g.error or "-"): g.count for g in tri.groups} == dict(plan.breakdown)
        by_msg = [g for g in tri.groups if g.by_message]
        assert sum(g.count for g in by_msg) == len(ids)
        for g in by_msg:
            compile_filter(g.filter_text)
            p = core.prepare(OpRequest(Operation.REDRIVE, "email", filter_text=g.filter_text, dry_run=True)).plan
            assert p.planned == g.count and set(p.breakdown) == {(g.job_type or "?", g.error)}
        env = parse_envelope(orjson.dumps({"jobType": "t", "lastErrorMessage": long_msg}))
        assert group_key(env) == ("t", long_msg[:40])
    finally:
        s.close()


def test_acceptance_a_runbook_step_runs_through_the_core(redis_url, redis_client, capsys):
    """A runbook's mutating step runs as the CLI in a child process, whose
    operation goes through the operations core: same journal entry as the
    command typed by hand, the URL never on a command line, and the runner
    never imports jobctl.cli."""
    import subprocess
    import sys

    truth = load_scenario(redis_client, "stuck-workers", queue="billing", size=100, seed=6)
    s = _session(redis_url)
    try:
        report = Runner(s, Library().load("stuck-processing"), queue="billing", yes=True,
                        say=lambda _t: None).run()
    finally:
        s.close()
    assert report.ok, report.message
    step = next(st for st in report.steps if st.step.name == "requeue-stuck")
    assert step.result == "ok" and step.commands[0].code == 0
    op = next(e for e in read_local(100) if e.get("operation") == "requeue")
    assert op["moved"] == len(truth.stuck_ids) and op["command"].startswith("jobctl ")
    assert "--url" not in op["command"] and "requeue billing --stuck" in op["command"]
    assert redis_client.llen(ReliableListKeys("billing").processing) == \
        truth.expected["processing"] - len(truth.stuck_ids)
    probe = ("import sys, jobctl.runbook.runner, jobctl.ops.core; "
             "print(sorted(m for m in sys.modules if m.startswith('jobctl.cli')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_step_gets_the_url_in_its_environment_never_on_its_command_line():
    from jobctl.runbook.runner import child_env, global_args

    s = Session(url="redis://default:s3cret-pw@127.0.0.1:1/0", timeout_s=2.0)
    assert "s3cret-pw" not in " ".join(global_args(s)) and "--url" not in global_args(s)
    assert child_env(s)["JOBCTL_REDIS_URL"] == "redis://default:s3cret-pw@127.0.0.1:1/0"
