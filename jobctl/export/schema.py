"""The export row: one typed column per envelope field, plus where the job
was, its raw value and its fingerprint.

Every format holds the same columns in the same order (:data:`COLUMNS`).
Kinds:

``string``
    text (UTF-8);
``int64``
    signed 64-bit integer;
``bool``
    ``true``/``false``;
``timestamp``
    an instant.  Parquet: ``timestamp[us, UTC]`` (what Spark reads as
    ``TimestampType``); JSONL and CSV: ISO-8601 UTC text with milliseconds,
    ``2026-11-21T10:04:05.123Z``.  In Python rows (:func:`jobctl.export.rows.record_row`)
    and in what :mod:`jobctl.export.reader` returns: epoch milliseconds (int).

Envelope field names come from seed 000 section 5 (envelope) and section 10
(retry metadata), as mapped by :data:`jobctl.model.ENVELOPE_FIELDS`; jobctl's
own redrive record (``redrivenAtEpochMs``, ``redriveCount``) is typed too.
Unknown envelope keys stay in ``extra_json``.  ``raw`` holds the value as
stored when it is UTF-8, else ``raw_base64`` holds its bytes: a malformed
envelope is exported as it is, flagged with ``malformed`` and ``problems``,
never dropped.  ``payload_sha1`` is :func:`jobctl.ops.plan.payload_sha1` of
the raw value: the fence of "export, then purge" and of redrive plans.

Columns are only ever added (with a new :data:`~jobctl.export.SCHEMA_VERSION`),
never renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Column", "COLUMNS", "NAMES", "KINDS", "TIMESTAMP_COLUMNS", "column_index",
           "arrow_schema", "describe"]


@dataclass(frozen=True)
class Column:
    """One export column: ``name``, ``kind`` (see the module docstring), ``doc``."""

    name: str
    kind: str
    doc: str


#: The export columns, in file order (schema version 1).
COLUMNS: tuple[Column, ...] = (
    Column("queue", "string", "catalogue name of the logical queue"),
    Column("layout", "string", "queue layout, e.g. reliable-list"),
    Column("shard", "string", "shard (hash tag) holding the job"),
    Column("state", "string", "ready, scheduled, processing, dead or suppressed"),
    Column("job_id", "string", "job id as the state's index holds it"),
    Column("position", "int64", "0-based position from the end the state is walked from (lists)"),
    Column("score_ms", "int64", "zset score, epoch ms: due time (scheduled) or suppressed-at (suppressed)"),
    Column("visibility_deadline", "timestamp", "visibility deadline of a processing job, when known"),
    Column("envelope_job_id", "string", "jobId inside the envelope"),
    Column("job_type", "string", "jobType"),
    Column("job_version", "int64", "jobVersion"),
    Column("tenant_id", "string", "tenantId"),
    Column("idempotency_key", "string", "idempotencyKey"),
    Column("created_at", "timestamp", "createdAtEpochMs"),
    Column("not_before", "timestamp", "notBeforeEpochMs"),
    Column("deadline", "timestamp", "deadlineEpochMs (business deadline)"),
    Column("attempt", "int64", "attempt: attempts made so far"),
    Column("max_attempts", "int64", "maxAttempts"),
    Column("trace_id", "string", "traceId"),
    Column("correlation_id", "string", "correlationId"),
    Column("payload_ref", "string", "payloadRef"),
    Column("payload_json", "string", "payload, as compact JSON text"),
    Column("last_attempt_at", "timestamp", "lastAttemptAtEpochMs (for a dead job: when it died)"),
    Column("next_attempt_at", "timestamp", "nextAttemptAtEpochMs"),
    Column("last_error_code", "string", "lastErrorCode"),
    Column("last_error_message", "string", "lastErrorMessage"),
    Column("redriven_at", "timestamp", "redrivenAtEpochMs (jobctl's redrive record)"),
    Column("redrive_count", "int64", "redriveCount (jobctl's redrive record)"),
    Column("extra_json", "string", "envelope keys not listed above, as a JSON object"),
    Column("malformed", "bool", "true when the raw value is not a well-formed envelope"),
    Column("problems", "string", "what is wrong with the raw value, '; '-separated"),
    Column("raw", "string", "the stored value, when it is UTF-8 text"),
    Column("raw_base64", "string", "the stored bytes in base64, when they are not UTF-8"),
    Column("raw_bytes", "int64", "length of the stored value in bytes"),
    Column("payload_sha1", "string", "hex SHA1 of the stored value (jobctl.ops.plan.payload_sha1)"),
)

#: Column names in file order.
NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
#: Column name -> kind.
KINDS: dict[str, str] = {c.name: c.kind for c in COLUMNS}
#: Indexes (into a row tuple) of the timestamp columns.
TIMESTAMP_COLUMNS: tuple[int, ...] = tuple(i for i, c in enumerate(COLUMNS) if c.kind == "timestamp")


def column_index(name: str) -> int:
    """Position of column ``name`` in a row tuple; raises ``KeyError``."""
    try:
        return NAMES.index(name)
    except ValueError:
        raise KeyError(name) from None


def arrow_schema():
    """The explicit ``pyarrow.Schema`` of Parquet parts (imports pyarrow).

    Timestamps are ``timestamp[us, tz=UTC]``; the schema metadata carries
    ``jobctl.schema_version``.
    """
    from .arrow_memory import pa

    from . import SCHEMA_VERSION

    types = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(c.name, types[c.kind], nullable=True) for c in COLUMNS],
                     metadata={b"jobctl.schema_version": str(SCHEMA_VERSION).encode()})


def describe() -> list[dict[str, str]]:
    """``[{"name", "type", "doc"}]`` for the manifest."""
    return [{"name": c.name, "type": c.kind, "doc": c.doc} for c in COLUMNS]
