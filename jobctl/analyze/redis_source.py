"""Spark reads a queue's dead jobs straight from Redis: the ``jobctl``
data source (Spark 4's Python Data Source API), for a dead-letter queue too
big to export first.

    spark.dataSource.register(JobctlSource)
    spark.read.format("jobctl").option("url", URL).option("queue", QUEUE_JSON).load()

``queue`` is the queue's catalogue entry as JSON (:func:`queue_option`).
The rows have the export's columns (:mod:`jobctl.export.schema`), so the
analysis and the redrive plan it writes are the same as from an export:
``redrive --plan`` applies it with the same skip-if-changed rule (each row
carries the job's position and the SHA1 of its stored bytes).  One Spark
partition per shard tag, read on the executors window by window (the
export's bounded reads: ``LRANGE`` plus one ``MGET`` of payloads a window).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..config import QueueConfig
from ..model import State

__all__ = ["JobctlSource", "queue_option", "read_redis", "WINDOW"]

#: Jobs a read window holds (one Arrow batch each).
WINDOW = 1000


def queue_option(queue: QueueConfig) -> str:
    """The ``queue`` option of the data source: ``queue``'s catalogue entry as JSON."""
    return json.dumps(dataclasses.asdict(queue))


def _without_password(url: str) -> tuple[str, str | None]:
    """``(url without its password, the password)``: the password travels in
    the ``password`` option, whose name Spark redacts in plans and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{parts.username}@{host}" if parts.username else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), parts.password


def _with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` put back (:func:`_without_password`)."""
    from urllib.parse import urlsplit, urlunsplit

    if not password:
        return url
    parts = urlsplit(url)
    user, host = parts.username or "", parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{user}:{password}@{host}", parts.path, parts.query, parts.fragment))


def read_redis(spark, url: str, queue: QueueConfig, server: str):
    """``(DataFrame of the queue's dead jobs, a Manifest describing the
    read)``, the shape :func:`jobctl.analyze.job.read_export` returns:
    ``snapshot_ms`` the time the read began, ``format`` ``"redis"``,
    ``server`` the redacted URL.  Reads happen when Spark runs the plan."""
    import time

    from ..export.manifest import Manifest

    spark.dataSource.register(JobctlSource)
    bare, password = _without_password(url)
    reader = spark.read.format("jobctl").option("url", bare).option("queue", queue_option(queue))
    if password:
        reader = reader.option("password", password)
    now = time.time_ns() // 1_000_000
    m = Manifest(selector={"queue": queue.name, "layout": queue.layout, "states": ["dead"], "filter": "",
                           "format": "redis"},
                 source={"server": server, "queue": queue.name, "layout": queue.layout}, snapshot_ms=now,
                 started_ms=now, complete=True)
    return reader.load(), m


def _queue(option: str) -> QueueConfig:
    raw = json.loads(option)
    return QueueConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


class _Shard(InputPartition):
    """One shard tag of the queue (the whole queue when it has none)."""

    def __init__(self, tag: str | None) -> None:
        super().__init__(tag)
        self.tag = tag


class JobctlSource(DataSource):
    """``spark.read.format("jobctl")``: options ``url`` (a jobctl URL:
    ``redis://``, ``rediss://``, ``redis+cluster://``, ``redis+sentinel://``)
    and ``queue`` (:func:`queue_option`); the export's schema."""

    @classmethod
    def name(cls) -> str:
        return "jobctl"

    def schema(self):
        from .job import spark_schema

        return spark_schema()

    def reader(self, schema) -> "DataSourceReader":
        return _DeadReader(self.options["url"], _queue(self.options["queue"]), self.options.get("password"))


class _DeadReader(DataSourceReader):
    def __init__(self, url: str, queue: QueueConfig, password: str | None) -> None:
        self.url, self.queue, self.password = url, queue, password

    def partitions(self) -> list[InputPartition]:
        from ..keys import shard_tags

        return [_Shard(t) for t in shard_tags(self.queue.base_tag, self.queue.shards)] if self.queue.shards \
            else [_Shard(None)]

    def read(self, partition: _Shard) -> Iterator[Any]:
        """The export rows of the partition's dead jobs, one Arrow record batch a window."""
        from ..connection import Target, make_client
        from ..layouts import layout_for

        queue = self.queue if partition.tag is None else dataclasses.replace(self.queue, tag=partition.tag,
                                                                             shards=None)
        client = make_client(Target(url=_with_password(self.url, self.password), source="spark data source"))
        try:
            layout = layout_for(client, queue)
            yield from _dead_batches(layout)
        finally:
            client.close()


def _dead_batches(layout) -> Iterator[Any]:
    """Arrow batches (the export's schema) of every dead job of ``layout``."""
    import pyarrow as pa

    from ..export.arrow_columns import window_record_batch
    from ..export.rows import record_row
    from ..export.schema import arrow_schema
    from ..export.source import walk

    schema = arrow_schema()
    for sb in walk(layout, [State.DEAD], WINDOW, raw=True):
        if sb.window is not None:
            fast = window_record_batch(sb.window, layout.queue_name, layout.name)
            if fast is not None:
                yield fast
                continue
        rows = [record_row(rec) for rec in sb.records]
        yield pa.RecordBatch.from_arrays([_column([r[i] for r in rows], f.type) for i, f in enumerate(schema)],
                                         schema=schema)


def _column(values: list, typ) -> Any:
    """One Arrow column of record rows (timestamps there are epoch ms)."""
    import pyarrow as pa

    if pa.types.is_timestamp(typ):
        values = [None if v is None else v * 1000 for v in values]  # the schema's unit: µs
    return pa.array(values, type=typ)

