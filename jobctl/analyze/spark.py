"""The SparkSession of ``jobctl analyze``: defaults that run on one machine.

``local[*]`` by default; the web UI off (``spark.ui.enabled=false``); logs
at ERROR (a shipped ``log4j2.properties``); small
shuffle partitions (``2 x cores``, at least 4) for a local master; session
time zone UTC; and, for a local master, ``SPARK_LOCAL_IP=127.0.0.1`` so that
nothing listens beyond the loopback interface.  ``--conf KEY=VALUE`` settings
override all of them.  For a cluster pass ``--master spark://...`` (or
``yarn``, ``k8s://...``), or run the job file with ``spark-submit`` (see
:mod:`jobctl.analyze`).

An already active SparkSession (a notebook, the test suite's) is used as it
is and left running.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources

from ..errors import UsageError

__all__ = ["spark_session", "default_conf", "require_spark"]


def require_spark() -> None:
    """Raise :class:`UsageError` when pyspark or a Java runtime is missing."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UsageError("analyze needs PySpark: pip install 'jobctl[spark]' (the test install, "
                         "pip install -e '.[test]', includes it)") from None
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        raise UsageError("analyze needs a Java runtime (17 or newer) for Spark: e.g. apt-get install "
                         "default-jre-headless, or set JAVA_HOME")


def _log4j_file() -> str:
    return str(resources.files("jobctl.analyze").joinpath("log4j2.properties"))


def default_conf(master: str) -> dict[str, str]:
    """The Spark settings jobctl applies for ``master`` (before ``--conf``)."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{_log4j_file()}",
    }
    if master.startswith("local"):
        cores = os.cpu_count() or 2
        conf["spark.sql.shuffle.partitions"] = str(max(4, 2 * cores))
        conf["spark.driver.memory"] = "2g"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


@contextmanager
def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None,
                  app_name: str = "jobctl-analyze") -> Iterator["object"]:
    """Yield a SparkSession; stop it on exit when this call started it.

    Raises :class:`UsageError` when pyspark or Java is missing.
    """
    require_spark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**default_conf(master), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
