"""Config file lookup and parsing, server precedence (--url > --profile >
$JOBCTL_REDIS_URL > $REDIS_URL > default_profile > default), profile
passwords from the environment, and unix:// sockets."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from jobctl.config import Config, Profile, QueueConfig, config_path, load_config
from jobctl.connection import DEFAULT_URL, Target, redact_url, resolve_target
from jobctl.errors import ConfigError, NotFound, ReadOnlyRefused, UsageError
from jobctl.session import Session
from jobctl_fixtures.scenarios import load_scenario
from helpers import cli, wall_ms

SECRET = "Pw-9f3e-distinctive"


def closed_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def hostport(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


# -- config files ------------------------------------------------------------------


FULL = """
default_profile = "local"

[profiles.local]
url = "redis://localhost:6379/0"

[profiles.prod]
url = "rediss://ops@redis.prod.internal:6380/0"
password_env = "PROD_REDIS_PASSWORD"
environment = "production"
read_only = true

[queues.email]
layout = "reliable-list"
tag = "email"
shards = 8
priorities = 3

[queues.webhooks]
visibility_timeout_ms = 30000
dead_cap = 50
"""


def test_load_the_readme_example(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(FULL)
    cfg = load_config(path)
    assert cfg.path == path and cfg.default_profile == "local"
    assert cfg.profiles["prod"] == Profile(name="prod", url="rediss://ops@redis.prod.internal:6380/0",
                                           password_env="PROD_REDIS_PASSWORD", environment="production",
                                           read_only=True)
    assert cfg.profiles["local"].read_only is False
    assert cfg.queues["email"] == QueueConfig(name="email", layout="reliable-list", tag="email", shards=8,
                                              priorities=3)
    hooks = cfg.queues["webhooks"]
    assert hooks.base_tag == "webhooks" and hooks.shards is None and hooks.priorities is None
    assert hooks.visibility_timeout_ms == 30000 and hooks.options == {"dead_cap": 50}
    assert list(cfg.queues) == ["email", "webhooks"]  # file order


def test_config_lookup_order(tmp_path, monkeypatch):
    explicit, env_file = tmp_path / "explicit.toml", tmp_path / "env.toml"
    cwd = tmp_path / "cwd"
    user_dir = tmp_path / "xdg" / "jobctl"
    for p in (cwd, user_dir):
        p.mkdir(parents=True)
    for p, name in ((explicit, "a"), (env_file, "b"), (cwd / "jobctl.toml", "c"), (user_dir / "jobctl.toml", "d")):
        p.write_text(f"[queues.{name}]\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("JOBCTL_CONFIG", str(env_file))
    assert list(load_config(explicit).queues) == ["a"]
    assert list(load_config().queues) == ["b"]
    monkeypatch.delenv("JOBCTL_CONFIG")
    assert list(load_config().queues) == ["c"]
    (cwd / "jobctl.toml").unlink()
    assert config_path() == user_dir / "jobctl.toml"
    assert list(load_config().queues) == ["d"]
    (user_dir / "jobctl.toml").unlink()
    assert config_path() is None
    assert load_config() == Config()


def test_missing_explicit_config_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.setenv("JOBCTL_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError):
        load_config()


@pytest.mark.parametrize("text", ["[queues.e]\nshards = -1\n", "[queues.e]\nshards = true\n",
                                  "[queues.e]\npriorities = 1.5\n", "[queues]\ne = 1\n",
                                  "[profiles]\np = \"redis://x\"\n", "default_profile = 3\n",
                                  "[queues.e]\nvisibility_timeout_ms = 0\n", "=\n"])
def test_invalid_configs_raise_config_error(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_unreadable_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(path)


def test_catalogue_from_the_config_in_the_working_directory(capsys, tmp_path, monkeypatch, redis_client,
                                                            redis_url):
    truth = load_scenario(redis_client, "healthy", queue="email", shards=4, size=200, seed=1, now_ms=wall_ms())
    (tmp_path / "jobctl.toml").write_text('[queues.mail]\ntag = "email"\nshards = 4\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "--url", redis_url, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["catalogue"] == "config" and "discovered" not in err
    assert [(q["queue"], q["ready"]) for q in doc["queues"]] == [("mail", truth.expected["ready"])]


# -- server precedence ------------------------------------------------------------------


def _config(**profiles: str) -> Config:
    return Config(default_profile="dflt" if "dflt" in profiles else None,
                  profiles={n: Profile(name=n, url=u) for n, u in profiles.items()})


def test_precedence_unit(monkeypatch):
    cfg = _config(dflt="redis://default-profile:1/0", named="redis://named-profile:2/0")
    monkeypatch.setenv("JOBCTL_REDIS_URL", "redis://jobctl-env:3/0")
    monkeypatch.setenv("REDIS_URL", "redis://redis-env:4/0")
    t = resolve_target(cfg, url="redis://flag:5/0", profile="named")
    assert (t.url, t.source) == ("redis://flag:5/0", "--url")
    t = resolve_target(cfg, profile="named")
    assert (t.url, t.source) == ("redis://named-profile:2/0", "profile named")
    t = resolve_target(cfg)
    assert (t.url, t.source) == ("redis://jobctl-env:3/0", "$JOBCTL_REDIS_URL")
    monkeypatch.delenv("JOBCTL_REDIS_URL")
    t = resolve_target(cfg)
    assert (t.url, t.source) == ("redis://redis-env:4/0", "$REDIS_URL")
    monkeypatch.delenv("REDIS_URL")
    t = resolve_target(cfg)
    assert (t.url, t.source) == ("redis://default-profile:1/0", "profile dflt")
    t = resolve_target(Config())
    assert (t.url, t.source) == (DEFAULT_URL, "default") == ("redis://localhost:6379/0", "default")
    with pytest.raises(NotFound):
        resolve_target(cfg, profile="nope")
    with pytest.raises(UsageError):
        resolve_target(cfg, url="memcached://x")


def test_empty_env_vars_are_ignored(monkeypatch):
    monkeypatch.setenv("JOBCTL_REDIS_URL", "")
    monkeypatch.setenv("REDIS_URL", "redis://redis-env:4/0")
    assert resolve_target(Config()).source == "$REDIS_URL"


@pytest.mark.parametrize("winner", ["url", "profile", "jobctl_env", "redis_env", "default_profile"])
def test_precedence_end_to_end(capsys, tmp_path, monkeypatch, redis_client, redis_url, winner):
    """Only the winning source points at the live server; every lower one at a closed port."""
    load_scenario(redis_client, "healthy", size=100, seed=2, now_ms=wall_ms())
    order = ["url", "profile", "jobctl_env", "redis_env", "default_profile"]
    urls = {name: (redis_url if name == winner else closed_url()) for name in order}
    for name in order[:order.index(winner)]:
        urls[name] = None  # higher sources absent
    cfg = tmp_path / "jobctl.toml"
    profiles = {"named": urls["profile"] or closed_url(), "dflt": urls["default_profile"]}
    cfg.write_text('default_profile = "dflt"\n' + "".join(
        f'[profiles.{n}]\nurl = "{u}"\n' for n, u in profiles.items()))
    argv = ["--config", str(cfg)]
    if urls["url"]:
        argv += ["--url", urls["url"]]
    if urls["profile"]:
        argv += ["--profile", "named"]
    for var, name in (("JOBCTL_REDIS_URL", "jobctl_env"), ("REDIS_URL", "redis_env")):
        if urls[name]:
            monkeypatch.setenv(var, urls[name])
    code, out, err = cli(capsys, *argv, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["server"] == redis_url and doc["queues"][0]["queue"] == "email"


# -- passwords -------------------------------------------------------------------------------


@pytest.fixture
def acl_user(redis_client):
    made: list[str] = []

    def make(password: str) -> str:
        name = f"jobctl-test-{uuid.uuid4().hex[:8]}"
        redis_client.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", "+@all")
        made.append(name)
        return name

    yield make
    for name in made:
        redis_client.execute_command("ACL", "DELUSER", name)


@pytest.mark.parametrize("password", [SECRET, "p@ss:w/rd%20?#x"], ids=["plain", "special-chars"])
def test_profile_password_env(capsys, tmp_path, monkeypatch, redis_client, redis_url, acl_user, password):
    load_scenario(redis_client, "healthy", size=100, seed=3, now_ms=wall_ms())
    user = acl_user(password)
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f'[profiles.ops]\nurl = "redis://{user}@{hostport(redis_url)}/0"\n'
                   f'password_env = "JOBCTL_TEST_PASSWORD"\nenvironment = "staging"\n')
    monkeypatch.setenv("JOBCTL_TEST_PASSWORD", password)
    code, out, err = cli(capsys, "--config", str(cfg), "--profile", "ops", "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["server"] == f"redis://{user}:***@{hostport(redis_url)}/0"
    assert password not in out and password not in err
    session = Session(config_file=str(cfg), profile="ops")
    assert session.target.environment == "staging" and session.target.source == "profile ops"
    assert password not in session.target.display
    # a wrong password in the environment: exit 4, nothing leaked
    monkeypatch.setenv("JOBCTL_TEST_PASSWORD", "wrong-" + password)
    code, out, err = cli(capsys, "--config", str(cfg), "--profile", "ops", "status")
    assert code == 4 and password not in out + err and "Traceback" not in err


def test_password_in_the_url_wins_over_password_env(monkeypatch):
    monkeypatch.setenv("PW", "from-env")
    cfg = Config(profiles={"p": Profile(name="p", url="redis://u:in-url@h:1/0", password_env="PW")})
    assert resolve_target(cfg, profile="p").url == "redis://u:in-url@h:1/0"


def test_redaction():
    assert redact_url("redis://u:secret@h:1/0") == "redis://u:***@h:1/0"
    assert redact_url("rediss://:secret@h/3") == "rediss://:***@h/3"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("unix://u:secret@/tmp/r.sock?db=1") == "unix://u:***@/tmp/r.sock?db=1"
    assert redact_url("redis://u:secret@[::1]:6380/0") == "redis://u:***@[::1]:6380/0"
    # issue 12: a URL that does not parse cleanly is masked from the scheme to its last "@"
    assert redact_url("redis://u:secret@h:notaport/0") == "redis://***@h:notaport/0"
    t = Target(url="redis://u:p%40ss@h:1/0", source="--url")
    assert t.display == "redis://u:***@h:1/0"
    assert set(t.secrets) >= {"p%40ss", "p@ss"}


def test_redaction_of_unencoded_and_query_passwords(redis_url, capsys):
    """A password with an unencoded ``#``/``?``/``/`` (urlsplit cuts the
    netloc there) or given as redis-py's ``?password=`` query argument is
    never printed: not in the malformed-URL error, the display, the journal."""
    for url in (f"redis://:{SECRET}#x@127.0.0.1:1/0", f"redis://u:a?{SECRET}@127.0.0.1:1/0",
                f"redis://u:a/{SECRET}@127.0.0.1:1/0"):
        assert SECRET not in redact_url(url)
        code, out, err = cli(capsys, "--url", url, "status")
        assert code == 2 and SECRET not in out + err
    assert SECRET not in redact_url(f"redis://h:1/0?db=0&password={SECRET}")
    t = Target(url=f"redis://h:1/0?password={SECRET}", source="--url")
    assert SECRET not in t.display and SECRET in t.secrets
    with_query = f"{redis_url}?password={SECRET}"  # redis-py passes it as the password
    code, out, err = cli(capsys, "--url", with_query, "redrive", "nosuchqueue", "--yes")
    assert SECRET not in out + err
    code, out, err = cli(capsys, "--url", closed_url() + f"?password={SECRET}", "status")
    assert code == 3 and SECRET not in out + err


def test_profile_read_only(tmp_path):
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text('[profiles.prod]\nurl = "redis://h:1/0"\nread_only = true\n[profiles.dev]\nurl = "redis://h:2/0"\n')
    session = Session(config_file=str(cfg), profile="prod")
    assert session.read_only
    with pytest.raises(ReadOnlyRefused):
        session.require_writable("redrive")
    assert not Session(config_file=str(cfg), profile="dev").read_only
    assert Session(config_file=str(cfg), profile="dev", read_only_flag=True).read_only


# -- unix sockets --------------------------------------------------------------------------------


@pytest.fixture
def unix_server(redis_server):
    """``redis-server`` listening on a unix socket only (redis kind only)."""
    binary = shutil.which("redis-server")
    if redis_server.kind != "redis" or binary is None:
        pytest.skip("unix-socket test runs with the redis server kind (redis-server on PATH)")
    workdir = Path(tempfile.mkdtemp(prefix="jobctl-unix-", dir="/tmp"))
    sock = workdir / "redis.sock"
    proc = subprocess.Popen([binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                             "--dir", str(workdir), "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(unix_socket_path=str(sock)) as probe:
                    probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("redis-server on a unix socket did not start")
                time.sleep(0.02)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_unix_socket(capsys, unix_server):
    with redis.Redis(unix_socket_path=str(unix_server)) as client:
        truth = load_scenario(client, "stuck-workers", size=100, seed=4, now_ms=wall_ms())
    url = f"unix://{unix_server}?db=0"
    code, out, err = cli(capsys, "--url", url, "status", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["server"] == url
    assert doc["queues"][0]["stuck"] == truth.expected["stuck"]


def test_unix_socket_missing(capsys, tmp_path):
    code, out, err = cli(capsys, "--url", f"unix://{tmp_path}/none.sock", "status")
    assert code == 3 and err.startswith("jobctl: error: cannot reach unix://")
