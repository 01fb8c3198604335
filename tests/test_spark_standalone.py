"""``jobctl analyze`` on a Spark standalone cluster (a master and one worker
started from the pyspark wheel by this module): the report of an export and
of a queue read straight from Redis, and a Spark failure that ends the
command with one line and exit 1 within a bounded time, never a hang."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

from helpers import queues_toml, wall_ms, write_config  # noqa: E402
from jobctl_fixtures.scenarios import load_scenario  # noqa: E402

#: a safety net for a hang: every command must end long before this
LIMIT_S = 600


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: every socket stays bound until all are chosen, so
    the master's and the worker's ports never coincide (Spark would then move one)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _spark_class(*args: str, log: Path) -> subprocess.Popen:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _alive_workers(ui: int) -> int:
    """Alive workers the master's UI reports; 0 while it is not up yet or answers
    with something that is not its JSON (another process on the port)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError, AttributeError):
        return 0


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")) and not os.environ.get("CI"):
        pytest.skip("no Java runtime for Spark (apt-get install default-jre-headless)")
    logs = tmp_path_factory.mktemp("spark-standalone")
    port, ui, worker_ui = _free_ports(3)
    procs = [_spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(ui), log=logs / "master.log")]
    try:
        procs.append(_spark_class("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                                  "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                                  str(worker_ui), "--work-dir", str(logs / "work"), log=logs / "worker.log"))
        deadline = time.monotonic() + 180
        while _alive_workers(ui) < 1:
            assert time.monotonic() < deadline, (logs / "worker.log").read_text()[-2000:]
            assert all(p.poll() is None for p in procs), (logs / "master.log").read_text()[-2000:]
            time.sleep(0.5)  # a JVM starting: polled, not timed
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _jobctl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-c", "from jobctl.cli.main import main; raise SystemExit(main())",
                           *args], capture_output=True, text=True, timeout=LIMIT_S, stdin=subprocess.DEVNULL, env=env)


def test_analyze_on_a_standalone_cluster(master, redis_client, redis_url, tmp_path):
    truth = load_scenario(redis_client, "dlq-spike", queue="email", shards=2, size=200, seed=11, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list", "tag": "email", "shards": 2}))
    base = ["--url", redis_url, "--config", cfg]
    assert _jobctl(*base, "export", "email", "--out", str(tmp_path / "x")).returncode == 0
    for source, out in (([str(tmp_path / "x")], "a"), (["--from-redis", "email"], "b")):
        proc = _jobctl(*base, "analyze", *source, "--out", str(tmp_path / out), "--master", master, "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("a", "b"))
    assert a["rows"] == b["rows"] == truth.expected["dead"]
    assert a["by_type_code"] == b["by_type_code"] and a["redrive"]["planned"] == b["redrive"]["planned"]
    assert a["spark"]["master"] == master


def test_a_spark_failure_on_a_standalone_cluster_ends_with_one_line(master, redis_client, redis_url, tmp_path):
    load_scenario(redis_client, "dlq-spike", queue="email", size=200, seed=12, now_ms=wall_ms())
    cfg = write_config(tmp_path, queues_toml(email={"layout": "reliable-list"}))
    assert _jobctl("--url", redis_url, "--config", cfg, "export", "email", "--out", str(tmp_path / "x")).returncode == 0
    proc = _jobctl("analyze", str(tmp_path / "x"), "--out", str(tmp_path / "r"), "--master", master,
                   "--conf", "spark.driver.maxResultSize=1k")
    assert proc.returncode == 1, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("jobctl: error:")]
    assert len(ours) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
