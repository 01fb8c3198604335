"""``jobctl demo``: the embedded server never outlives jobctl (normal exit or
SIGKILL), and with ``--url`` the demo writes, checks and deletes only its
own ``jobctl-demo-*`` keys."""

from __future__ import annotations

import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from jobctl.keys import ReliableListKeys
from helpers import cli

EMBEDDED_RE = re.compile(r"embedded (valkey|redis) (\S+) at (redis://127\.0\.0\.1:(\d+)/0)")
DEMO_MARK = "{jobctl-demo-"


class Demo:
    """``jobctl demo`` in a subprocess, its stderr read line by line."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "jobctl.cli.main", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self.out = ""
        self._reader = threading.Thread(target=self._read_err, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_out, daemon=True)
        self._out_reader.start()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.err.append(line)
            self.lines.put(line)

    def _read_out(self) -> None:
        self.out = self.proc.stdout.read()

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match:
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            for line in list(self.err):
                m = rx.search(line)
                if m:
                    return m
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and self.lines.empty():
                raise AssertionError(f"demo never printed {pattern!r}; stderr: {''.join(self.err)}")
            try:
                self.lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                pass

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        self._out_reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()

    @property
    def stderr(self) -> str:
        return "".join(self.err)


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def process_gone(pid: int) -> bool:
    """No such process, or only a zombie left for its new parent to reap."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        return False
    return "State:\tZ" in status


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def server_pid(url: str) -> int:
    with redis.Redis.from_url(url, socket_timeout=5) as client:
        return int(client.info("server")["process_id"])


# -- embedded server -----------------------------------------------------------------------------


def test_demo_runs_and_leaves_no_server():
    demo = Demo("demo", "--duration", "2", "--size", "2000")
    try:
        m = demo.wait_for(EMBEDDED_RE.pattern)
        url, port = m.group(3), int(m.group(4))
        pid = server_pid(url)
        code = demo.finish()
    finally:
        demo.kill()
    assert code == 0, demo.stderr
    assert "Traceback" not in demo.stderr
    assert "loaded 2,000 jobs" in demo.stderr and "embedded server stopped" in demo.stderr
    # status tables on stdout, one per refresh
    assert demo.out.count("┏") >= 2
    for name in ("email x4", "webhooks", "reports", "billing"):
        assert name in demo.out
    assert not port_open(port)
    assert process_gone(pid)


def test_demo_killed_with_sigkill_leaves_no_server():
    demo = Demo("demo", "--duration", "120", "--size", "2000")
    try:
        m = demo.wait_for(EMBEDDED_RE.pattern)
        url, port = m.group(3), int(m.group(4))
        demo.wait_for(r"loaded [\d,]+ jobs")
        pid = server_pid(url)
        assert port_open(port)
        demo.proc.send_signal(signal.SIGKILL)
        demo.finish()
    finally:
        demo.kill()
    assert demo.proc.returncode == -signal.SIGKILL
    assert wait_until(lambda: not port_open(port), 5), "server port still open after jobctl was killed"
    assert wait_until(lambda: process_gone(pid), 5), f"server pid {pid} still alive"


def test_demo_interrupted_exits_cleanly():
    demo = Demo("demo", "--duration", "120", "--size", "500")
    try:
        m = demo.wait_for(EMBEDDED_RE.pattern)
        port = int(m.group(4))
        demo.wait_for(r"loaded [\d,]+ jobs")
        demo.proc.send_signal(signal.SIGINT)
        code = demo.finish()
    finally:
        demo.kill()
    assert code == 0, demo.stderr
    assert "Traceback" not in demo.stderr
    assert "embedded server stopped" in demo.stderr
    assert not port_open(port)


# -- --url: only jobctl-demo-* keys -----------------------------------------------------------------


PLANTED = {
    b"unrelated": b"keep me",
    ReliableListKeys("email").job("job_1").encode(): b'{"jobId": "job_1"}',
    b"jobctl-demo": b"no hash tag: not a demo key",
}


def plant(client) -> None:
    for key, value in PLANTED.items():
        client.set(key, value)
    client.rpush(ReliableListKeys("email").ready, "job_1")


def assert_only_planted(client) -> None:
    keys = set(client.scan_iter(count=1000))
    assert keys == set(PLANTED) | {ReliableListKeys("email").ready.encode()}
    for key, value in PLANTED.items():
        assert client.get(key) == value
    assert client.lrange(ReliableListKeys("email").ready, 0, -1) == [b"job_1"]


def test_demo_on_a_server_touches_only_its_keys(redis_client, redis_url):
    plant(redis_client)
    demo = Demo("--url", redis_url, "demo", "--duration", "2.5", "--size", "500", "--refresh", "0.5")
    try:
        demo.wait_for(r"loaded [\d,]+ jobs")
        foreign = set()
        for _ in range(5):  # while the simulated workers run
            keys = set(redis_client.scan_iter(count=1000))
            foreign |= {k for k in keys - set(PLANTED) - {ReliableListKeys("email").ready.encode()}
                        if DEMO_MARK.encode() not in k}
            assert any(DEMO_MARK.encode() in k for k in keys)
            time.sleep(0.2)
        code = demo.finish()
    finally:
        demo.kill()
    assert code == 0, demo.stderr
    assert foreign == set(), f"demo wrote keys outside jobctl-demo-* tags: {sorted(foreign)[:5]}"
    assert "embedded" not in demo.stderr
    assert re.search(r"deleted [\d,]+ demo key\(s\)", demo.stderr)
    assert_only_planted(redis_client)


def test_demo_refuses_when_its_keys_exist(capsys, redis_client, redis_url):
    plant(redis_client)
    leftover = ReliableListKeys("jobctl-demo-webhooks").job("job_left")
    redis_client.set(leftover, b"from an earlier demo")
    code, out, err = cli(capsys, "--url", redis_url, "demo", "--duration", "0.2", "--size", "100")
    assert code == 2
    assert [line for line in err.splitlines() if line.startswith("jobctl: error:")] == [
        f"jobctl: error: demo keys exist already (e.g. {leftover}); pass --reset to delete the "
        "jobctl-demo-* keys first"]
    assert "Traceback" not in err and out == ""
    # refused: nothing written, nothing deleted
    assert redis_client.get(leftover) == b"from an earlier demo"
    redis_client.delete(leftover)
    assert_only_planted(redis_client)


def test_demo_finds_leftovers_in_a_large_keyspace(capsys, redis_client, redis_url):
    pipe = redis_client.pipeline(transaction=False)
    for i in range(5000):
        pipe.set(f"bulk:{i}", b"x")
    pipe.execute()
    leftover = ReliableListKeys("jobctl-demo-email:02").dead
    redis_client.rpush(leftover, "job_old")
    code, out, err = cli(capsys, "--url", redis_url, "demo", "--duration", "0.2", "--size", "100")
    assert code == 2, err
    assert "demo keys exist already" in err
    assert redis_client.lrange(leftover, 0, -1) == [b"job_old"]
    assert redis_client.dbsize() == 5001


def test_demo_reset_deletes_leftovers_then_runs(capsys, redis_client, redis_url):
    plant(redis_client)
    redis_client.rpush(ReliableListKeys("jobctl-demo-reports").dead, "job_old")
    redis_client.set(ReliableListKeys("jobctl-demo-email:03").job("job_old"), b"{}")
    code, out, err = cli(capsys, "--url", redis_url, "demo", "--reset", "--duration", "0.2", "--size", "200",
                         "--no-workers")
    assert code == 0, err
    assert "reports" in out and "billing" in out
    assert_only_planted(redis_client)


def test_demo_profile_counts_as_a_server(capsys, tmp_path, redis_client, redis_url):
    """--profile, like --url, means "use this server": no embedded one."""
    cfg = tmp_path / "jobctl.toml"
    cfg.write_text(f'[profiles.mine]\nurl = "{redis_url}"\n')
    plant(redis_client)
    code, out, err = cli(capsys, "--config", str(cfg), "--profile", "mine", "demo", "--duration", "0.2",
                         "--size", "100", "--no-workers")
    assert code == 0, err
    assert "embedded" not in err
    assert_only_planted(redis_client)


def test_demo_on_a_server_honours_read_only(capsys, redis_client, redis_url):
    plant(redis_client)
    code, out, err = cli(capsys, "--url", redis_url, "--read-only", "demo", "--duration", "0.2", "--size", "100")
    assert code == 9
    assert err.startswith("jobctl: error: demo refused: read-only")
    assert_only_planted(redis_client)
