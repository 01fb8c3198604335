"""The runbook machinery: format, conditions, library, runner rules, CLI,
and the shipped runbooks' and alert rules' consistency."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from jobctl.cli.main import cli, main
from jobctl.ops.journal import read_local
from jobctl.runbook import Library, RunbookError, compile_condition, parse_runbook
from jobctl.runbook.condition import ConditionError, condition_values
from jobctl.runbook.library import shipped_file
from jobctl.runbook.runner import Runner, resolve_params
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario

SHIPPED = ["dlq-spike", "poison-message", "purge-with-export", "redis-failover", "retry-storm",
           "scheduler-lag", "stuck-processing"]
SECTIONS = ["Symptoms", "Diagnosis", "Decision points", "Remediation", "Verification", "Rollback"]
REPO = Path(__file__).resolve().parent.parent


# -- conditions ----------------------------------------------------------------------


@pytest.mark.parametrize("text, values, expected", [
    ("stuck > 0", {"stuck": 3}, True),
    ("stuck > 0", {"stuck": 0}, False),
    ("oldest_ready_age < 5m", {"oldest_ready_age_ms": 299_999}, True),
    ("oldest_ready_age < 5m", {"oldest_ready_age_ms": 300_000}, False),
    ("overdue_age < 1m30s", {"scheduled_overdue_max_age_ms": 89_000}, True),
    ("dead == 0 and stuck == 0", {"dead": 0, "stuck": 1}, False),
    ("dead == 0 or stuck == 0", {"dead": 0, "stuck": 1}, True),
    ("not (dead > 10 or stuck > 0) and ready >= 2", {"dead": 3, "stuck": 0, "ready": 2}, True),
    ("overdue = 0", {"scheduled_overdue": 0}, True),
    ("next_due_ms > 5", {"next_due_ms": None}, False),
    ("next_due_ms != 5", {"next_due_ms": None}, True),
    ("next_due_ms == null", {"next_due_ms": None}, True),
    ("out.planned == 0", {"out.planned": 0}, True),
    ("out.planned == 0", {}, False),
    ("out.ok == true", {"out.ok": True}, True),
    ("out.ok > 0", {"out.ok": True}, False),
    ("ready > 2.5", {"ready": 3}, True),
])
def test_condition_evaluation(text, values, expected):
    assert compile_condition(text).evaluate(values) is expected


@pytest.mark.parametrize("text, message", [
    ("stuk > 0", "unknown field 'stuk'"),
    ("stuck >", "expected a value"),
    ("stuck > 0 and", "expected"),
    ("(stuck > 0", "(expected 'and', 'or' or ')')"),
    ("stuck ! 0", "unexpected character '!' at column 7"),
    ("stuck ~ 3", "operator '~' does not apply to conditions"),
    ("stuck > abc", "expected a number, a duration, true, false or null"),
    ("", "empty condition"),
])
def test_condition_errors(text, message):
    with pytest.raises(ConditionError, match=re.escape(message)):
        compile_condition(text)


def test_condition_values_read_null_ages_as_zero():
    values = condition_values({"ready": 0, "oldest_ready_age_ms": None, "scheduled_overdue_max_age_ms": None,
                               "next_due_ms": None}, {"planned": 4, "plan": {"scanned": 9}, "list": [1]})
    assert values["oldest_ready_age_ms"] == 0 and values["scheduled_overdue_max_age_ms"] == 0
    assert values["next_due_ms"] is None
    assert values["out.planned"] == 4 and values["out.plan.scanned"] == 9 and "out.list" not in values
    cond = compile_condition("oldest_ready_age < 5m and out.plan.scanned > 3")
    assert cond.evaluate(values)
    assert cond.explain({"oldest_ready_age_ms": 125_000}) == "oldest_ready_age_ms=2m5s, out.plan.scanned=missing"


# -- format ------------------------------------------------------------------------------

BOOK = '''---
alerts: A1, A2
params: rate=50 dir=out-{queue} flt='error = "HTTP 503"'
---
# A test book

## Diagnosis

```sh
echo not a step
```

```jobctl
jobctl status {queue} --json
# a comment
jobctl ls {queue} \\
   --state dead
```

## Remediation

```jobctl step=fix guard="dead > 0" ok=0,8
jobctl redrive {queue} --filter {flt} --rate {rate}
```

## Verification

```jobctl step=verify expect="dead == 0"
jobctl check {queue} --repair
```

## Rollback

```jobctl step=undo
jobctl unsuppress {queue} --filter 'error = HTTP_400'
```
'''


def test_parse_runbook():
    book = parse_runbook("t", BOOK)
    assert book.title == "A test book" and book.alerts == ("A1", "A2")
    assert book.params == {"rate": "50", "dir": "out-{queue}", "flt": 'error = "HTTP 503"'}
    assert book.sections == ("Diagnosis", "Remediation", "Verification", "Rollback")
    assert [s.name for s in book.steps] == ["diagnosis-1", "fix", "verify", "undo"]
    diag, fix, verify, undo = book.steps
    assert [c.tokens for c in diag.commands] == [("status", "{queue}", "--json"),
                                                ("ls", "{queue}", "--state", "dead")]
    assert not diag.mutating and fix.mutating and verify.mutating
    assert fix.guard.text == "dead > 0" and fix.ok_codes == {0, 8}
    assert undo.manual and not fix.manual
    assert book.placeholders == {"queue", "flt", "rate"}
    values = resolve_params(book, "email", {"rate": "7"})
    assert values == {"queue": "email", "rate": "7", "dir": "out-email", "flt": 'error = "HTTP 503"'}
    assert fix.commands[0].argv(values) == ["redrive", "email", "--filter", 'error = "HTTP 503"', "--rate", "7"]


@pytest.mark.parametrize("body, message", [
    ("```jobctl\nls q\n```", "must be a jobctl command"),
    ("```jobctl\njobctl --url redis://x status\n```", "global options"),
    ("```jobctl\njobctl runbook run x\n```", "cannot run inside a runbook step"),
    ("```jobctl\njobctl status --watch 1\n```", "--watch never ends"),
    ("```jobctl colour=red\njobctl status\n```", "unknown step attribute 'colour'"),
    ("```jobctl guard=\"stuk > 1\"\njobctl status\n```", "unknown field 'stuk'"),
    ("```jobctl ok=x\njobctl status\n```", "expected exit codes"),
    ("```jobctl\n```", "without a command"),
    ("```jobctl\njobctl status\n", "not closed"),
    ("```jobctl step=a\njobctl status\n```\n```jobctl step=a\njobctl ls q\n```", "used twice"),
    ("---\nparams: x\n---\n", "is not name=value"),
])
def test_parse_errors(body, message):
    with pytest.raises(RunbookError, match=re.escape(message)):
        parse_runbook("bad", body)


def test_resolve_params_errors():
    book = parse_runbook("t", BOOK)
    with pytest.raises(Exception, match="needs --queue"):
        resolve_params(book, None, {})
    with pytest.raises(Exception, match="has no parameter 'nope'"):
        resolve_params(book, "q", {"nope": "1"})


# -- the shipped runbooks -------------------------------------------------------------


def test_library_lists_the_shipped_runbooks():
    lib = Library()
    assert lib.names() == SHIPPED
    assert (REPO / "runbooks" / "dlq-spike.md").read_text() == lib.load("dlq-spike").text


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_runbook_is_complete(name):
    book = Library().load(name)
    assert [s for s in book.sections if s in SECTIONS] == SECTIONS, name
    assert book.alerts, "every runbook names the alerts it answers"
    sections = {s.section for s in book.steps}
    assert {"Diagnosis", "Remediation", "Verification"} <= sections
    verify = [s for s in book.steps if s.section == "Verification"]
    assert all(s.expect is not None for s in verify), "verification steps say what must hold"
    assert any(s.mutating for s in book.steps if s.section == "Remediation")
    assert not any(s.mutating for s in book.steps if s.section in ("Diagnosis", "Verification"))
    # every command parses with the real CLI (placeholders filled in)
    values = resolve_params(book, "q", {})
    for step in book.steps:
        for cmd in step.commands:
            argv = cmd.argv(values)
            command = cli.commands.get(argv[0])
            if command is None:  # a command another issue has not shipped yet
                pytest.skip(f"jobctl {argv[0]} is not available")
            ctx = command.make_context(argv[0], argv[1:], parent=None)
            ctx.close()
    # {placeholders} are documented in the text (front matter or prose)
    for p in book.placeholders - {"queue"}:
        assert p in book.params


def test_alert_rules_link_to_runbooks():
    rules = yaml.safe_load(shipped_file("alerts.yml").read_text("utf-8"))
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    lib = Library()
    answered = {a: b.name for b in lib.all() for a in b.alerts}
    assert set(alerts) == set(answered), "every alert has a runbook and every runbook alert a rule"
    from jobctl.metrics.families import STATUS_GAUGES

    exported = {name for name, _, _ in STATUS_GAUGES} | {
        "redis_job_attempts_count", "redis_job_attempts_bucket", "jobctl_redis_uptime_seconds",
        "jobctl_redis_info", "jobctl_exporter_up", "jobctl_redis_used_memory_bytes",
        "jobctl_redis_maxmemory_bytes"}
    for name, rule in alerts.items():
        url = rule["annotations"]["runbook_url"]
        assert url == f"runbooks/{answered[name]}.md" and (REPO / url).is_file(), name
        assert rule["annotations"]["runbook_command"].startswith(f"jobctl runbook run {answered[name]} ")
        used = set(re.findall(r"\b(?:redis_job|jobctl)_[a-z_]+", rule["expr"]))
        assert used and used <= exported, (name, used - exported)


def test_alert_rules_pass_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    res = subprocess.run([promtool, "check", "rules", str(REPO / "runbooks" / "alerts.yml")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


# -- CLI --------------------------------------------------------------------------------


def test_runbook_list_and_show(capsys):
    assert main(["runbook", "list", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert [b["name"] for b in doc["runbooks"]] == SHIPPED
    assert main(["runbook", "show", "scheduler-lag"]) == 0
    assert capsys.readouterr().out.startswith("---\nalerts: RedisJobSchedulerLag")
    assert main(["runbook", "show", "scheduler-lag", "--json"]) == 0
    steps = orjson.loads(capsys.readouterr().out)["steps"]
    promote = next(s for s in steps if s["name"] == "promote-overdue")
    assert promote["mutating"] and promote["guard"] == "scheduled_overdue > 0"
    assert main(["runbook", "show", "scheduler-lag", "--steps"]) == 0
    assert "promote-overdue" in capsys.readouterr().out
    assert main(["runbook", "show", "nope"]) == 5
    assert "unknown runbook 'nope'" in capsys.readouterr().err


def _own_book(tmp_path: Path, text: str, name: str = "mine") -> Path:
    d = tmp_path / "books"
    d.mkdir(exist_ok=True)
    (d / f"{name}.md").write_text(text)
    return d


def test_run_needs_queue_and_known_steps(redis_url, capsys):
    assert main(["--url", redis_url, "runbook", "run", "stuck-processing"]) == 2
    assert "needs --queue" in capsys.readouterr().err
    assert main(["--url", redis_url, "runbook", "run", "stuck-processing", "--queue", "q", "--step", "nope"]) == 5
    assert "has no step 'nope'" in capsys.readouterr().err
    assert main(["--url", redis_url, "runbook", "run", "stuck-processing", "--queue", "nope"]) == 5
    assert "unknown queue 'nope'" in capsys.readouterr().err
    assert main(["--url", redis_url, "runbook", "run", "scheduler-lag", "--queue", "q", "--set", "x"]) == 2


def test_failing_command_stops_the_run(redis_url, redis_client, tmp_path, capsys):
    load_scenario(redis_client, "healthy", queue="email", size=50, seed=1)
    d = _own_book(tmp_path, "# t\n## Diagnosis\n```jobctl step=a\njobctl inspect {queue} no-such-job\n```\n"
                            "```jobctl step=b\njobctl status {queue}\n```\n")
    assert main(["--url", redis_url, "runbook", "--dir", str(d), "run", "mine", "--queue", "email"]) == 5
    err = capsys.readouterr().err
    assert "step a failed: jobctl inspect exited 5" in err
    steps = [e["step"] for e in read_local(100) if e.get("operation") == "runbook-step"]
    assert steps == ["a"]


def test_read_only_runs_mutating_steps_dry(redis_url, redis_client, capsys):
    load_scenario(redis_client, "stuck-workers", queue="billing", size=100, seed=2)
    before = redis_client.llen("queue:{billing}:processing")
    assert main(["--url", redis_url, "--read-only", "runbook", "run", "stuck-processing", "--queue", "billing",
                 "--yes"]) == 0
    err = capsys.readouterr().err
    assert "read-only mode: step requeue-stuck runs as a dry run" in err
    assert "--dry-run" in err and "not enforced" in err
    assert redis_client.llen("queue:{billing}:processing") == before
    # read-only: journaled locally, never written to the server's stream
    assert redis_client.exists("queue:{billing}:jobctl:journal") == 0
    assert {e["result"] for e in read_local(100) if e.get("operation") == "runbook-step"} == {"ok", "dry-run"}


def test_interactive_confirmation_per_step(redis_url, redis_client):
    load_scenario(redis_client, "stuck-workers", queue="billing", size=100, seed=3)
    book = Library().load("stuck-processing")
    asked = []

    def confirm(step):
        asked.append(step.name)
        return False

    session = Session(url=redis_url)
    try:
        report = Runner(session, book, queue="billing", confirm=confirm, say=lambda _t: None,
                        execute=lambda argv, capture: (0, None)).run()
    finally:
        session.close()
    assert asked == ["requeue-stuck"]
    assert report.dry_run and report.ok
    requeue = next(s for s in report.steps if s.step.name == "requeue-stuck")
    assert requeue.result == "dry-run" and requeue.commands[0].argv[-1] == "--dry-run"


def test_check_repair_dry_run_drops_repair(redis_url, redis_client, tmp_path, capsys):
    load_scenario(redis_client, "healthy", queue="email", size=30, seed=4)
    redis_client.zrem("queue:{email}:processing:deadline",
                      redis_client.lindex("queue:{email}:processing", -1))  # a missing deadline
    d = _own_book(tmp_path, "# t\n## Remediation\n```jobctl step=repair\njobctl check {queue} --repair\n```\n")
    assert main(["--url", redis_url, "runbook", "--dir", str(d), "run", "mine", "--queue", "email"]) == 0
    err = capsys.readouterr().err
    assert "$ jobctl check email\n" in err
    assert main(["--url", redis_url, "check", "email"]) == 7  # nothing was repaired


def test_guard_rechecked_before_each_command(redis_url, redis_client, tmp_path, capsys):
    load_scenario(redis_client, "stuck-workers", queue="billing", size=60, seed=5)
    d = _own_book(tmp_path, "# t\n## Remediation\n```jobctl step=fix guard=\"stuck > 0\"\n"
                            "jobctl requeue {queue} --stuck\njobctl requeue {queue} --stuck\n```\n")
    assert main(["--url", redis_url, "runbook", "--dir", str(d), "run", "mine", "--queue", "billing", "--yes"]) == 0
    entry = next(e for e in read_local(100) if e.get("operation") == "runbook-step")
    assert entry["result"] == "partial" and entry["exit_codes"] == [0]
    assert "--url" not in entry["command"] and entry["command"].startswith("jobctl requeue billing --stuck --yes")
    ops = [e for e in read_local(100) if e.get("operation") == "requeue"]
    assert len(ops) == 1 and ops[0]["command"].endswith("requeue billing --stuck --yes")
