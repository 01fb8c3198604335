"""Connection URLs: no output ever shows a password whatever the URL's
shape, and every bad or unreachable target ends in one line with a
documented exit code (2: bad input, 3: unreachable or not a Redis server,
4: refused).  Each case runs ``jobctl`` as a child process, with the URL
given by ``--url``, ``$JOBCTL_REDIS_URL`` or ``$REDIS_URL``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from urllib.parse import quote, urlsplit

import pytest

from jobctl_fixtures.scenarios import load_scenario
from helpers import wall_ms

#: Both halves of every password below hold this word; nothing else does.
WORD = "Zq7Secret"
A, B = f"Alpha{WORD}", f"Bravo{WORD}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jobctl(*argv: str, env_url: tuple[str, str] | None = None, cwd=None, timeout: float = 60):
    """``(exit code, stdout, stderr)`` of ``jobctl *argv`` in a child
    process, with ``env_url = (VAR, URL)`` put in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "JOBCTL_REDIS_URL", "JOBCTL_CONFIG")}
    if env_url:
        env[env_url[0]] = env_url[1]
    res = subprocess.run([sys.executable, "-m", "jobctl.cli.main", *argv], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return res.returncode, res.stdout, res.stderr


def run_url(url: str, source: str, cwd, *argv: str):
    if source == "--url":
        return jobctl("--url", url, *argv, cwd=cwd)
    return jobctl(*argv, env_url=(source, url), cwd=cwd)


def assert_one_line(code: int, out: str, err: str, expected: int) -> None:
    assert code == expected, (code, out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("jobctl: error: "), err


P = free_port()  # nothing listens here (a port just freed; a connection is refused)
LONG_LABEL = "a" * 64

#: id -> (URL, exit code): 2 where the URL cannot be read, 3 where it can
#: (the server is unreachable).
SHAPES = {
    "slash": (f"redis://ops:{A}/{B}@127.0.0.1:{P}/0", 2),
    "question": (f"redis://ops:{A}?{B}@127.0.0.1:{P}/0", 2),
    "hash": (f"redis://ops:{A}#{B}@127.0.0.1:{P}/0", 2),
    "at": (f"redis://ops:{A}@{B}@127.0.0.1:{P}/0", 3),
    "slash-and-at": (f"redis://ops:{A}/x@{B}@127.0.0.1:{P}/0", 2),
    "colon": (f"redis://ops:{A}:{B}@127.0.0.1:{P}/0", 3),
    "no-user-slash": (f"redis://:{A}/{B}@127.0.0.1:{P}/0", 2),
    "token-slash": (f"redis://{A}/{B}@127.0.0.1:{P}/0", 2),
    "rediss-slash": (f"rediss://ops:{A}/{B}@127.0.0.1:{P}/0", 2),
    "rediss-question": (f"rediss://ops:{A}?{B}@127.0.0.1:{P}/0", 2),
    "unix-slash": (f"unix://ops:{A}/{B}@/tmp/jobctl-none-{P}.sock", 2),
    "unix-hash": (f"unix://ops:{A}#{B}@/tmp/jobctl-none-{P}.sock", 2),
    "cluster-slash": (f"redis+cluster://ops:{A}/{B}@127.0.0.1:{P},127.0.0.1:{P}", 2),
    "sentinel-slash": (f"redis+sentinel://ops:{A}/{B}@127.0.0.1:{P}/svc/0", 2),
    "bad-port": (f"redis://ops:{A}@127.0.0.1:99999/0", 2),
    "port-not-a-number": (f"redis://ops:{A}@127.0.0.1:x1/0", 2),
    "broken-ipv6": (f"redis://ops:{A}@[::1/0", 2),
    "long-label": (f"redis://ops:{A}@{LONG_LABEL}.example:{P}/0", 2),
    "query-password": (f"redis://127.0.0.1:{P}/0?password={A}/{B}", 3),
    "percent-garbage": (f"redis://ops:{A}%zz{B}@127.0.0.1:{P}/0", 3),
    "encoded-slash": (f"redis://ops:{A}%2F{B}@127.0.0.1:{P}/0", 3),
}


@pytest.mark.parametrize("source", ["--url", "REDIS_URL", "JOBCTL_REDIS_URL"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_no_password_in_any_output(shape, source, tmp_path):
    url, expected = SHAPES[shape]
    code, out, err = run_url(url, source, tmp_path, "status")
    assert WORD not in out + err, (shape, err)
    assert_one_line(code, out, err, expected)


@pytest.mark.parametrize("argv", [("discover",), ("status", "--json"), ("ls", "email")])
def test_no_password_from_other_commands(tmp_path, argv):
    for shape in ("slash", "question", "at"):
        url, expected = SHAPES[shape]
        code, out, err = run_url(url, "--url", tmp_path, *argv)
        assert WORD not in out + err, (shape, argv, err)
        assert_one_line(code, out, err, expected)


@pytest.fixture
def acl_user(redis_client):
    made: list[str] = []

    def make(password: str, *rules: str) -> str:
        name = f"jobctl-test-{uuid.uuid4().hex[:8]}"
        redis_client.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", *(rules or ("+@all",)))
        made.append(name)
        return name

    yield make
    for name in made:
        redis_client.execute_command("ACL", "DELUSER", name)


def test_real_server_passwords_with_delimiters(redis_url, acl_user, tmp_path):
    password = f"{A}/?#@{B}"
    user = acl_user(password)
    host = urlsplit(redis_url).netloc
    code, out, err = jobctl("--url", f"redis://{user}:{quote(password, safe='')}@{host}/0", "status", cwd=tmp_path)
    assert code == 0, err
    assert WORD not in out + err
    code, out, err = jobctl("--url", f"redis://{user}:{password}@{host}/0", "status", cwd=tmp_path)
    assert WORD not in out + err
    assert_one_line(code, out, err, 2)
    code, out, err = jobctl("status", env_url=("REDIS_URL", f"redis://{user}:wrong{quote(password, safe='')}@{host}/0"),
                            cwd=tmp_path)
    assert WORD not in out + err
    assert_one_line(code, out, err, 4)


# -- the other connection cases: empty URL, host names, a server that is not Redis, ACLs ----------


@pytest.mark.parametrize("url", ["", " ", "\t"])
def test_empty_url_is_refused(url, tmp_path, redis_url):
    code, out, err = jobctl("--url", url, "status", cwd=tmp_path, env_url=("REDIS_URL", redis_url))
    assert_one_line(code, out, err, 2)
    assert out == "" and "--url" in err


@pytest.mark.parametrize("host", [LONG_LABEL, f"{LONG_LABEL}.example.com", "a..b", "x" * 20 + ("." + "y" * 60) * 5,
                                  f"ok.{LONG_LABEL}"])
def test_bad_host_names_are_refused(host, tmp_path):
    for url in (f"redis://{host}:6379/0", f"redis+cluster://127.0.0.1:1,{host}:6379"):
        code, out, err = jobctl("--url", url, "status", cwd=tmp_path)
        assert_one_line(code, out, err, 2)
        assert "host" in err


class FakeServer:
    """A TCP server on a free loopback port that answers each connection's
    first read with ``reply`` (``None``: closes at once), then closes it."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.settimeout(2)
                    if self.reply is not None:
                        conn.recv(65536)
                        conn.sendall(self.reply)
                except OSError:
                    pass

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    b"\x00\xff\xfe\x01 binary garbage\r\n",
    b"SSH-2.0-OpenSSH_9.2\r\n",
    None,
], ids=["http-400", "binary", "ssh-banner", "closes"])
@pytest.mark.parametrize("argv", [("status",), ("discover",)])
def test_a_server_that_is_not_redis_is_unreachable(reply, argv, tmp_path):
    server = FakeServer(reply)
    try:
        code, out, err = jobctl("--url", f"redis://ops:{A}@127.0.0.1:{server.port}/0", *argv, cwd=tmp_path)
    finally:
        server.stop()
    assert_one_line(code, out, err, 3)
    assert WORD not in out + err


def test_a_read_only_acl_user_runs_status(redis_client, redis_url, acl_user, tmp_path):
    load_scenario(redis_client, "healthy", size=50, seed=2, now_ms=wall_ms())
    user = acl_user("pw", "+@read")
    host = urlsplit(redis_url).netloc
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text('[queues.email]\nlayout = "reliable-list"\n')
    code, out, err = jobctl("--url", f"redis://{user}:pw@{host}/0", "--config", str(cfg), "status", "--json",
                            cwd=tmp_path)
    assert code == 0, err
    assert '"email"' in out


def test_a_wrong_password_on_a_cluster_is_refused_not_unreachable(cluster, tmp_path):
    """A refused AUTH is exit 4 on a cluster as on one server (redis-py
    words it "Redis Cluster cannot be connected: invalid username-password pair")."""
    user = f"jobctl-test-{uuid.uuid4().hex[:8]}"
    for node in cluster.nodes:
        node.client().execute_command("ACL", "SETUSER", user, "on", f">{A}", "~*", "&*", "+@all")
    hosts = cluster.url.partition("://")[2]
    try:
        code, out, err = jobctl("--url", f"redis+cluster://{user}:{A}@{hosts}", "status", "--json", cwd=tmp_path)
        assert code == 0, err
        for url in (f"redis+cluster://{user}:wrong{B}@{hosts}", f"redis+cluster://nobody-{user}:{A}@{hosts}"):
            code, out, err = jobctl("--url", url, "status", cwd=tmp_path)
            assert WORD not in out + err
            assert_one_line(code, out, err, 4)
    finally:
        for node in cluster.nodes:
            node.client().execute_command("ACL", "DELUSER", user)
