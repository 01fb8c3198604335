"""``jobctl analyze`` when Spark fails: a one-line error on stderr, exit 1,
never a traceback or a hang.

Each case runs the CLI in a child process, so that it starts its own JVM
with the ``--conf`` settings under test (static settings such as
``spark.driver.maxResultSize`` cannot change in a running JVM).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import orjson
import pytest

from jobctl.config import QueueConfig
from jobctl.export.exporter import run_export
from jobctl.keys import ReliableListKeys
from jobctl.layouts import layout_for
from jobctl.model import State

pytest.importorskip("pyspark")
pytestmark = pytest.mark.server_agnostic  # Spark is the subject: the server only holds the data (one CI pass)

K = ReliableListKeys("fails")
#: a safety net for a hang: the command must end long before this
LIMIT_S = 600


@pytest.fixture
def export_dir(redis_client, tmp_path):
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")) and not os.environ.get("CI"):
        pytest.skip("no Java runtime for Spark (apt-get install default-jre-headless)")
    now = time.time_ns() // 1_000_000
    for i in range(200):
        job_id = f"f{i:03d}"
        redis_client.set(K.job(job_id), orjson.dumps({
            "jobId": job_id, "jobType": "t", "jobVersion": 1, "tenantId": "a", "idempotencyKey": f"k{i}",
            "createdAtEpochMs": now - 1_000, "attempt": 1, "maxAttempts": 3, "payload": {},
            "lastAttemptAtEpochMs": now - 10, "lastErrorCode": "HTTP_503", "lastErrorMessage": "down"}))
        redis_client.lpush(K.dead, job_id)
    run_export(layout_for(redis_client, QueueConfig(name="fails")), tmp_path / "dlq", states=[State.DEAD])
    return tmp_path / "dlq"


def _analyze(export_dir, out, *confs: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-c", "from jobctl.cli.main import main; raise SystemExit(main())",
            "analyze", str(export_dir), "--out", str(out), "--master", "local[1]"]
    for c in confs:
        args += ["--conf", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=LIMIT_S, stdin=subprocess.DEVNULL)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    ours = [line for line in proc.stderr.splitlines() if line.startswith("jobctl: error:")]
    assert len(ours) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return ours[0]


def test_a_failed_spark_job_ends_with_one_line_and_exit_1(export_dir, tmp_path):
    proc = _analyze(export_dir, tmp_path / "r", "spark.driver.maxResultSize=1k")
    assert proc.returncode == 1
    assert _one_error_line(proc).startswith("jobctl: error: Spark failed: org.apache.spark.SparkException: ")
    assert not (tmp_path / "r" / "report.json").exists()


def test_a_jvm_that_does_not_start_ends_with_one_line_and_exit_1(export_dir, tmp_path):
    proc = _analyze(export_dir, tmp_path / "r", "spark.driver.memory=1m")
    assert proc.returncode == 1
    assert "Java gateway process exited" in _one_error_line(proc)
