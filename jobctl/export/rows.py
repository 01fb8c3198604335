"""A :class:`~jobctl.model.JobRecord` as an export row (:mod:`.schema` order).

Timestamps are epoch milliseconds here; the writers encode them
(:func:`iso_ms` for text formats).  Values a column cannot hold (an integer
outside int64, a time outside years 1..9999) become null and are named in
``problems``, which flags the row ``malformed``.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

import orjson

from ..escape import json_safe, shown
from ..model import JobRecord
from ..ops.plan import payload_sha1

__all__ = ["record_row", "iso_ms", "parse_iso_ms", "TS_MIN_MS", "TS_MAX_MS", "int64_or_none", "ts_or_none",
           "utf8_text", "json_text"]

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
#: 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the range Spark and ISO text hold.
TS_MIN_MS, TS_MAX_MS = -62_135_596_800_000, 253_402_300_799_999
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso_ms(ms: int) -> str:
    """Epoch ms -> ``2026-11-21T10:04:05.123Z`` (UTC, always milliseconds)."""
    seconds, milli = divmod(ms, 1000)
    return f"{_iso_seconds(seconds)}.{milli:03d}Z"


@lru_cache(maxsize=1 << 16)
def _iso_seconds(seconds: int) -> str:
    """Epoch seconds -> ``2026-11-21T10:04:05`` (cached: a DLQ's times repeat
    their seconds, and the text formats write six times per row)."""
    dt = _EPOCH + timedelta(seconds=seconds)
    return f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"


def parse_iso_ms(text: str) -> int:
    """Inverse of :func:`iso_ms` (also accepts ``+00:00``); raises ``ValueError``."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def int64_or_none(value: Any, name: str, problems: list[str]) -> int | None:
    """``value`` as an int64 (an integral float converted), else ``None``;
    out of the int64 range it is ``None`` and a line naming field ``name`` is
    appended to ``problems``."""
    if value is None:
        return None
    if type(value) is int and _I64_MIN <= value <= _I64_MAX:  # the common case, first
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            return None
    if _I64_MIN <= value <= _I64_MAX:
        return value
    problems.append(f"field {name} out of the int64 range")
    return None


def ts_or_none(value: Any, name: str, problems: list[str]) -> int | None:
    """``value`` as epoch ms between :data:`TS_MIN_MS` and :data:`TS_MAX_MS`
    (years 1..9999), else ``None`` with a line in ``problems`` (as
    :func:`int64_or_none`)."""
    if value is None:
        return None
    if type(value) is int and TS_MIN_MS <= value <= TS_MAX_MS:
        return value
    value = int64_or_none(value, name, problems)
    if value is None or TS_MIN_MS <= value <= TS_MAX_MS:
        return value
    problems.append(f"field {name} is not a time between years 1 and 9999")
    return None


def record_row(rec: JobRecord) -> tuple:
    """The export row of ``rec``: a tuple in :data:`~jobctl.export.schema.COLUMNS` order.

    Never raises for odd contents: what cannot be typed is null and listed
    in ``problems``.
    """
    env = rec.envelope
    problems = list(env.problems)
    raw = rec.raw
    text = b64 = None
    if raw is not None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            b64 = base64.b64encode(raw).decode("ascii")
    extra = env.extra
    payload_json = None if env.payload is None else json_text(env.payload)
    extra_json = json_text(extra) if extra else None
    redrive_count = extra.get("redriveCount")
    row = (
        rec.queue,
        rec.layout,
        rec.shard,
        None if rec.state is None else getattr(rec.state, "value", str(rec.state)),
        rec.job_id,
        int64_or_none(rec.position, "position", problems),
        int64_or_none(rec.score, "score", problems),
        ts_or_none(rec.deadline_ms, "visibility deadline", problems),
        env.job_id,
        env.job_type,
        int64_or_none(env.job_version, "jobVersion", problems),
        env.tenant_id,
        env.idempotency_key,
        ts_or_none(env.created_ms, "createdAtEpochMs", problems),
        ts_or_none(env.not_before_ms, "notBeforeEpochMs", problems),
        ts_or_none(env.deadline_ms, "deadlineEpochMs", problems),
        int64_or_none(env.attempt, "attempt", problems),
        int64_or_none(env.max_attempts, "maxAttempts", problems),
        env.trace_id,
        env.correlation_id,
        env.payload_ref,
        payload_json,
        ts_or_none(env.last_attempt_ms, "lastAttemptAtEpochMs", problems),
        ts_or_none(env.next_attempt_ms, "nextAttemptAtEpochMs", problems),
        env.last_error_code,
        env.last_error_message,
        ts_or_none(extra.get("redrivenAtEpochMs"), "redrivenAtEpochMs", problems),
        int64_or_none(redrive_count, "redriveCount", problems),
        extra_json,
        bool(problems),
        "; ".join(problems) if problems else None,
        text,
        b64,
        None if raw is None else len(raw),
        payload_sha1(raw),
    )
    # ids and fields with bytes that are not UTF-8 (surrogates): escaped,
    # ``\\xff``; the value itself is exact in raw_b64
    return tuple(utf8_text(v) if isinstance(v, str) else v for v in row)


def utf8_text(value: str) -> str:
    """``value`` when it encodes as UTF-8; else its escaped form
    (:func:`jobctl.escape.shown`: surrogate escapes as ``\\xff``)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return shown(value)


def json_text(value) -> str:
    """JSON text of ``value``; undecodable bytes and huge integers made safe."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError
        return orjson.dumps(json_safe(value)).decode("utf-8")
