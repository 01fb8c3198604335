"""The SparkSession of ``jobctl analyze``: every Spark setting in one place.

:func:`session_conf` is the whole configuration for a master: jobctl's
defaults (:func:`default_conf`) with the ``--conf KEY=VALUE`` settings on
top, for every master (``local[*]``, ``spark://``, ``yarn``, ``k8s://``):
driver memory 2g (a cluster's 1g default ran out collecting a large plan);
the driver JVM exits on ``OutOfMemoryError`` (``-XX:+ExitOnOutOfMemoryError``)
so a driver out of heap ends the command with an error instead of hanging,
and compiles with C2 only its hottest methods (:data:`JIT_OPTIONS`);
the web UI off; logs at ERROR (a shipped ``log4j2.properties``); session
time zone UTC.  A local master also gets small shuffle partitions
(``2 x cores``, at least 4) and the loopback interface only
(``SPARK_LOCAL_IP=127.0.0.1``).  A ``spark.driver.extraJavaOptions`` given
with ``--conf`` is added after jobctl's options, not instead of them.

An already active SparkSession (a notebook, the test suite's) is used as it
is and left running; only the runtime-modifiable ``--conf`` settings
(``spark.sql.*``) are applied to it.
"""

from __future__ import annotations

import os
import sys
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources

from ..errors import UsageError

__all__ = ["spark_session", "default_conf", "session_conf", "require_spark"]


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


#: The driver JVM compiles a method with its optimising compiler (C2) only
#: after 30x the default calls (150,000) or loop turns (1.2M): an analysis
#: runs each of the thousands of planning and generated methods a few
#: thousand times, and C2 compiling them cost more CPU than the query (1M rows,
#: one core: 34 of 82 CPU s); the per-row loops still reach C2.
JIT_OPTIONS = ("-XX:Tier4InvocationThreshold=150000 -XX:Tier4MinInvocationThreshold=20000 "
               "-XX:Tier4CompileThreshold=200000 -XX:Tier4BackEdgeThreshold=1200000")


def _log4j_file() -> str:
    return str(resources.files("jobctl.analyze").joinpath("log4j2.properties"))


def default_conf(master: str) -> dict[str, str]:
    """jobctl's Spark settings for ``master`` (before ``--conf``)."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{_log4j_file()} "
                                         f"-XX:+ExitOnOutOfMemoryError {JIT_OPTIONS}",
    }
    if master.startswith("local"):
        cores = os.cpu_count() or 2
        conf["spark.sql.shuffle.partitions"] = str(max(4, 2 * cores))
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def session_conf(master: str, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """Every Spark setting of a session on ``master``: :func:`default_conf`
    with ``overrides`` (``--conf``) on top; driver Java options are joined."""
    conf = default_conf(master)
    for key, value in (overrides or {}).items():
        if key == "spark.driver.extraJavaOptions":
            value = f"{conf[key]} {value}"
        conf[key] = value
    return conf


def _stop(spark) -> None:
    """Stop ``spark``; a JVM already gone (exited on OutOfMemoryError) is no error."""
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - Py4J raises on a dead gateway: nothing left to stop
        pass


@contextmanager
def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None,
                  app_name: str = "jobctl-analyze") -> Iterator["object"]:
    """Yield a SparkSession configured by :func:`session_conf`; stop it on
    exit when this call started it.

    Raises :class:`UsageError` when pyspark or Java is missing; Spark's own
    errors (a JVM that does not start) propagate.
    """
    require_spark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in (conf or {}).items():
            if active.conf.isModifiable(key):
                active.conf.set(key, value)
        yield active
        return
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the Python workers (Redis data source): this one
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_conf(master, conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        _stop(spark)
