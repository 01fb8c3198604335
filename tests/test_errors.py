"""Every error a read command can hit: one line ``jobctl: error: ...`` on
stderr, no traceback, the documented exit code (jobctl.exitcodes), and never
a password in any output."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest
import redis

from jobctl.errors import JobctlError
from jobctl.exitcodes import ExitCode
from jobctl.keys import ReliableListKeys
from jobctl.server import EmbeddedServer
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, wall_ms

SECRET = "Zq7-sekret-Pw-4711"  # distinctive: must never show up in output
READ_COMMANDS = [
    ("status",),
    ("status", "--json"),
    ("ls", "email"),
    ("ls", "email", "--state", "dead", "--json"),
    ("inspect", "email", "job_x"),
    ("attempts", "email"),
    ("discover",),
]


def assert_one_line_error(code: int, out: str, err: str, expected: ExitCode, *, secret: str = SECRET) -> str:
    """The error contract; returns the message."""
    assert code == int(expected), (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert secret not in out and secret not in err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("jobctl: error: ")]
    assert len(errors) == 1, err
    return errors[0][len("jobctl: error: "):]


def with_credentials(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}"))


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_config(tmp_path, text: str) -> str:
    path = tmp_path / "jobctl.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def acl_user(redis_client):
    """Makes ACL users on the test server with a unique name; deletes them after."""
    made: list[str] = []

    def make(*rules: str) -> str:
        name = f"jobctl-test-{uuid.uuid4().hex[:8]}"
        redis_client.execute_command("ACL", "SETUSER", name, "on", f">{SECRET}", "~*", "&*", *rules)
        made.append(name)
        return name

    yield make
    for name in made:
        redis_client.execute_command("ACL", "DELUSER", name)


@pytest.fixture
def loaded(redis_client, redis_url):
    return load_scenario(redis_client, "dlq-spike", size=200, seed=41, now_ms=wall_ms())


# -- unknown names (5) --------------------------------------------------------------


@pytest.mark.parametrize("argv", [("status", "nosuch"), ("status", "email", "nosuch", "--json"),
                                  ("ls", "nosuch"), ("inspect", "nosuch", "job_1"),
                                  ("attempts", "nosuch")], ids=" ".join)
def test_unknown_queue_discovered(capsys, redis_url, loaded, argv):
    code, out, err = cli(capsys, "--url", redis_url, *argv)
    msg = assert_one_line_error(code, out, err, ExitCode.NOT_FOUND)
    assert msg == "unknown queue 'nosuch' (discovered queues: email)"
    assert out == ""


def test_unknown_queue_with_catalogue(capsys, tmp_path, redis_url, loaded):
    cfg = write_config(tmp_path, "[queues.email]\n[queues.webhooks]\n")
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "ls", "nosuch")
    msg = assert_one_line_error(code, out, err, ExitCode.NOT_FOUND)
    assert msg == "unknown queue 'nosuch' (configured queues: email, webhooks)"


def test_unknown_queue_on_an_empty_server(capsys, redis_url):
    code, out, err = cli(capsys, "--url", redis_url, "attempts", "email")
    msg = assert_one_line_error(code, out, err, ExitCode.NOT_FOUND)
    assert "(discovered queues: none)" in msg


def test_unknown_job(capsys, redis_url, loaded):
    code, out, err = cli(capsys, "--url", redis_url, "inspect", "email", "job_nope", "--json")
    msg = assert_one_line_error(code, out, err, ExitCode.NOT_FOUND)
    assert "job_nope" in msg and out == ""


def test_unknown_profile(capsys, tmp_path, redis_url):
    cfg = write_config(tmp_path, f'[profiles.local]\nurl = "{redis_url}"\n')
    code, out, err = cli(capsys, "--config", cfg, "--profile", "prod", "status")
    msg = assert_one_line_error(code, out, err, ExitCode.NOT_FOUND)
    assert msg == "unknown profile 'prod' (known: local)"


# -- connection (3) and authentication (4) -------------------------------------------


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=" ".join)
def test_unreachable_server(capsys, argv):
    url = f"redis://ops:{SECRET}@127.0.0.1:{closed_port()}/0"
    code, out, err = cli(capsys, "--url", url, "--timeout", "2", *argv)
    msg = assert_one_line_error(code, out, err, ExitCode.UNREACHABLE)
    assert "redis://ops:***@127.0.0.1:" in msg
    assert out == ""


def test_unreachable_exit_code_of_the_process():
    url = f"redis://:{SECRET}@127.0.0.1:{closed_port()}/0"
    proc = subprocess.run([sys.executable, "-m", "jobctl.cli.main", "--url", url, "status", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.startswith("jobctl: error: cannot reach redis://:***@127.0.0.1:")
    assert proc.stderr.count("\n") == 1 and SECRET not in proc.stderr


def test_wrong_password(capsys, redis_url, acl_user):
    user = acl_user("+@all")
    url = with_credentials(redis_url, user, SECRET + "-wrong")
    code, out, err = cli(capsys, "--url", url, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.AUTH, secret=SECRET)
    assert msg.startswith(f"authentication failed at redis://{user}:***@")


def test_unknown_user(capsys, redis_url):
    url = with_credentials(redis_url, "nobody-here", SECRET)
    code, out, err = cli(capsys, "--url", url, "ls", "email")
    msg = assert_one_line_error(code, out, err, ExitCode.AUTH)
    assert msg.startswith("authentication failed at redis://nobody-here:***@")


def test_right_password_works(capsys, redis_url, acl_user, loaded):
    user = acl_user("+@all")
    code, out, err = cli(capsys, "--url", with_credentials(redis_url, user, SECRET), "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["server"].startswith(f"redis://{user}:***@")
    assert SECRET not in out and SECRET not in err


@pytest.fixture(scope="module")
def password_server(redis_server):
    """A throwaway server of the test server's kind that requires a password."""
    kind = redis_server.kind if redis_server.source in ("redis", "valkey") else "auto"
    try:
        srv = EmbeddedServer(kind=kind).start()
    except JobctlError as exc:
        pytest.skip(f"no embedded server: {exc}")
    try:
        with redis.Redis.from_url(srv.url) as admin:
            admin.config_set("requirepass", SECRET)
        yield srv
    finally:
        srv.stop()


def test_password_required_but_missing(capsys, password_server):
    code, out, err = cli(capsys, "--url", password_server.url, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.AUTH)
    assert msg.startswith(f"authentication failed at {password_server.url}")


def test_password_required_and_wrong(capsys, password_server):
    url = with_credentials(password_server.url, "", "not-" + SECRET)
    code, out, err = cli(capsys, "--url", url, "ls", "email")
    assert_one_line_error(code, out, err, ExitCode.AUTH, secret="not-" + SECRET)
    assert SECRET not in err


def test_password_required_and_given(capsys, password_server):
    url = with_credentials(password_server.url, "", SECRET)
    code, out, err = cli(capsys, "--url", url, "status", "--json")
    assert code == 0, err
    assert SECRET not in out + err
    assert json.loads(out)["queues"] == []


@pytest.mark.parametrize("argv,denied", [
    (("status",), "llen"),
    (("status", "--json"), "scan"),
    (("ls", "email", "--state", "dead"), "lrange"),
    (("inspect", "email", "job_x"), "lpos"),
    (("attempts", "email"), "mget"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_acl_denies_a_read_command(capsys, redis_url, acl_user, loaded, argv, denied):
    user = acl_user("+@all", f"-{denied}")
    url = with_credentials(redis_url, user, SECRET)
    code, out, err = cli(capsys, "--url", url, *argv)
    msg = assert_one_line_error(code, out, err, ExitCode.AUTH)
    assert msg.removeprefix("queue email: ").startswith(f"permission denied at redis://{user}:***@")
    assert f"may not run {denied.upper()}" in msg


# -- data (6) ---------------------------------------------------------------------


@pytest.fixture
def wrongtype(redis_client, redis_url, loaded):
    """The dlq-spike queue with its ready list replaced by a hash."""
    k = ReliableListKeys("email")
    redis_client.delete(k.ready)
    redis_client.hset(k.ready, "not", "a list")
    return k


@pytest.mark.parametrize("catalogue", [True, False], ids=["config", "discovered"])
def test_wrongtype_status_reports_what_it_could_read(capsys, tmp_path, redis_url, wrongtype, loaded, catalogue):
    argv = ["--url", redis_url]
    if catalogue:
        argv += ["--config", write_config(tmp_path, "[queues.email]\n")]
    code, out, err = cli(capsys, *argv, "status", "--json")
    assert code == int(ExitCode.DATA)
    assert "Traceback" not in err
    entry = json.loads(out)["queues"][0]
    assert entry["errors"] == ["key queue:{email}:ready holds the wrong Redis type"]
    assert entry["ready"] == 0 and entry["dead"] == loaded.expected["dead"]
    assert entry["scheduled"] == loaded.expected["scheduled"]
    assert err.count("jobctl: error: queue email: key queue:{email}:ready holds the wrong Redis type") == 1


def test_wrongtype_status_table(capsys, redis_url, wrongtype):
    code, out, err = cli(capsys, "--url", redis_url, "status")
    assert code == int(ExitCode.DATA)
    assert "email" in out and "wrong Redis type" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [("ls", "email"), ("ls", "email", "--json"), ("inspect", "email", "job_x"),
                                  ("attempts", "email", "--state", "ready")], ids=" ".join)
def test_wrongtype_read_commands(capsys, redis_url, wrongtype, argv):
    code, out, err = cli(capsys, "--url", redis_url, *argv)
    msg = assert_one_line_error(code, out, err, ExitCode.DATA)
    assert "wrong" in msg.lower() and "type" in msg.lower()
    assert out == ""


def test_wrongtype_scheduled_zset_is_a_list(capsys, redis_client, redis_url, loaded):
    k = ReliableListKeys("email")
    redis_client.delete(k.scheduled)
    redis_client.rpush(k.scheduled, "x")
    code, out, err = cli(capsys, "--url", redis_url, "ls", "email", "--state", "scheduled")
    assert_one_line_error(code, out, err, ExitCode.DATA)


# -- malformed envelopes: warnings, exit 0 --------------------------------------------------


@pytest.mark.parametrize("raw,problem", [
    (b'{"jobId": "job_m", "jobType": "t", "createdAtEpochMs": 1', "bad JSON"),
    (b'{"jobId": "job_m"}', "missing field jobType"),
    (b'{"jobId": "job_m", "jobType": "t", "createdAtEpochMs": 1, "name": "Ren\xe9"}', "not UTF-8"),
    (b'[1, 2]', "not an object"),
    (b'{"jobId": "job_m", "jobType": "t", "createdAtEpochMs": "yesterday"}', "not an integer"),
], ids=["bad-json", "missing-fields", "non-utf8", "array", "wrong-field-type"])
@pytest.mark.parametrize("argv", [("status", "--json"), ("ls", "email", "--state", "dead"),
                                  ("ls", "email", "--state", "ready", "--json"), ("inspect", "email", "job_m"),
                                  ("attempts", "email", "--state", "ready")], ids=" ".join)
def test_malformed_envelope_warns_and_carries_on(capsys, redis_client, redis_url, raw, problem, argv):
    k = ReliableListKeys("email")
    good = {"jobId": "job_g", "jobType": "t", "createdAtEpochMs": wall_ms() - 1000, "attempt": 2}
    redis_client.set(k.job("job_g"), orjson.dumps(good))
    redis_client.set(k.job("job_m"), raw)
    redis_client.lpush(k.ready, "job_m", "job_g")  # job_m at the claim end
    redis_client.lpush(k.dead, "job_m")
    code, out, err = cli(capsys, "--url", redis_url, *argv)
    assert code == 0, err
    assert "Traceback" not in err and "error:" not in err
    assert "warning" in err
    assert out.strip()
    if argv[0] == "attempts":
        assert "1 job(s) without a readable attempt field" in err
    else:
        assert problem in err
    if "--json" in argv and argv[0] == "ls":
        jobs = json.loads(out)["jobs"]
        assert [j["id"] for j in jobs] == ["job_m", "job_g"]
        assert jobs[0]["problems"] and not jobs[1]["problems"]


# -- usage and config (2) -----------------------------------------------------------------


@pytest.mark.parametrize("url", [f"http://ops:{SECRET}@127.0.0.1:6379/0", f"redis://ops:{SECRET}@host:port/0",
                                 "localhost:6379"], ids=["http", "bad-port", "no-scheme"])
def test_bad_url(capsys, url):
    code, out, err = cli(capsys, "--url", url, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert msg.startswith("--url:")


def test_bad_url_in_environment(capsys, monkeypatch):
    monkeypatch.setenv("REDIS_URL", f"mysql://root:{SECRET}@db/0")
    code, out, err = cli(capsys, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert msg.startswith("$REDIS_URL:") and "mysql://root:***@db/0" in msg


@pytest.mark.parametrize("text,fragment", [
    ("[queues.email\nlayout = 1\n", "config"),
    ("[queues.email]\nshards = 0\n", "shards must be an integer from 1"),
    ("[queues.email]\npriorities = \"3\"\n", "priorities must be an integer from 1"),
    ("[queues.email]\nlayout = \"kafka\"\n", "unknown layout 'kafka'"),
    ("default_profile = \"prod\"\n", "default_profile 'prod' is not a profile"),
    ("[profiles.prod]\nurl = \"redis://h/0\"\ncolour = \"red\"\n", "unknown key 'colour'"),
    ("queues = 3\n[profiles]\n", "config"),
], ids=["toml-syntax", "shards-0", "priorities-string", "unknown-layout", "default-profile", "profile-key",
        "queues-not-a-table"])
def test_bad_config(capsys, tmp_path, redis_url, text, fragment):
    cfg = write_config(tmp_path, text)
    code, out, err = cli(capsys, "--config", cfg, "--url", redis_url, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert fragment in msg


def test_config_file_not_found(capsys, tmp_path):
    code, out, err = cli(capsys, "--config", str(tmp_path / "nope.toml"), "status")
    msg = assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert "config file not found" in msg


def test_profile_password_env_unset(capsys, tmp_path, redis_url):
    cfg = write_config(tmp_path, f'[profiles.p]\nurl = "{redis_url}"\npassword_env = "JOBCTL_TEST_PW_UNSET"\n')
    code, out, err = cli(capsys, "--config", cfg, "--profile", "p", "status")
    msg = assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert "JOBCTL_TEST_PW_UNSET" in msg


@pytest.mark.parametrize("argv", [("status", "--bogus"), ("ls",), ("ls", "email", "--state", "history"),
                                  ("ls", "email", "--limit", "0"), ("nocommand",),
                                  ("status", "--watch", "0.01")], ids=" ".join)
def test_bad_command_line(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert_one_line_error(code, out, err, ExitCode.USAGE)
    assert out == ""


def test_help_lists_the_exit_codes(capsys):
    code, out, err = cli(capsys, "--help")
    assert code == 0
    for c in ExitCode:
        assert f"{c.value:>3}  {c.doc}" in out


def test_ctrl_c_is_interrupted_not_aborted(capsys, redis_url, loaded, monkeypatch):
    """click reports Ctrl-C as Abort; jobctl exits 130, not 10 (a declined confirmation)."""
    import jobctl.cli.read_cmds

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(jobctl.cli.read_cmds, "status_per_queue", interrupted)
    code, out, err = cli(capsys, "--url", redis_url, "status")
    msg = assert_one_line_error(code, out, err, ExitCode.INTERRUPTED)
    assert msg == "interrupted"
