"""The one SparkSession of a test session (``local[2]``, jobctl's defaults),
shared through conftest.py by every Spark test.

Without a Java runtime the Spark tests are skipped, except in CI (``$CI``
set), where .ci/run installs one and a skip would hide a gap.
"""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from jobctl.analyze.spark import spark_session

    if not (shutil.which("java") or os.environ.get("JAVA_HOME")) and not os.environ.get("CI"):
        pytest.skip("no Java runtime for Spark (apt-get install default-jre-headless)")
    with spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"}) as session:
        yield session
