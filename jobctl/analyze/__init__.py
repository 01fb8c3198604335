"""DLQ triage on Spark: ``jobctl analyze EXPORT_DIR --out REPORT_DIR``.

The input is a ``jobctl export`` directory (:mod:`jobctl.export`); the
output is ``report.json``, ``report.md`` and ``redrive-plan.jsonl``
(:mod:`.job`).  Classification rules: :mod:`.rules` (default set in
``rules.toml``); error-message fingerprints: :mod:`.fingerprint`; the
SparkSession defaults: :mod:`.spark`; the Markdown report: :mod:`.report`.

Install: pyspark is the ``spark`` extra (``pip install 'jobctl[spark]'``),
which the test extra includes (``pip install -e '.[test]'``); Spark needs a
Java runtime, 17 or newer (Debian: ``default-jre-headless``).

On one machine ``jobctl analyze`` runs Spark in local mode (``local[*]``,
no UI, ERROR logs, small shuffle partitions, loopback only).  On a cluster:

* ``jobctl analyze s3a://bucket/dlq-2026-11-21 --master spark://host:7077
  --out ./report`` (client mode: the driver runs here and writes ``./report``;
  the executors write the redrive plan's part files under it, so it must be
  a directory they share; ``--conf KEY=VALUE`` passes any Spark setting over
  jobctl's defaults, :func:`jobctl.analyze.spark.session_conf`), or
* ``spark-submit --master yarn "$(python3 -c 'import jobctl.analyze.job as j;
  print(j.__file__)')" hdfs:///exports/dlq --out ./report`` (the job file is
  a Spark application; jobctl must be installed where the driver runs).

The job uses only Spark's built-in functions (no Python UDF), so executors
need no Python packages; the export directory must be readable by them.

Nothing here imports pyspark at import time.
"""
