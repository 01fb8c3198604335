"""The filter language's fields (:data:`FIELDS`): kinds, getters and help,
the one field vocabulary shared with the export columns and the analyze
rules.  Durations are milliseconds, timestamps epoch milliseconds."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from ..model import JobRecord, State

__all__ = ["FieldKind", "FieldSpec", "FIELDS", "Predicate", "Getter", "STATE_NAMES", "NO_PAYLOAD_FIELDS", "path_getter"]

#: ``(record, now_ms) -> bool``
Predicate = Callable[[JobRecord, int], bool]
#: ``(record, now_ms) -> value or None``
Getter = Callable[[JobRecord, int], Any]


class FieldKind(str, Enum):
    """What values a field holds, and therefore what a clause may compare it with."""

    TEXT = "text"            #: str; any value literal, compared as text
    NUMBER = "number"        #: int; number literals
    DURATION = "duration"    #: int ms; duration literals (``5m``)
    TIMESTAMP = "timestamp"  #: int epoch ms; ISO-8601 literals
    STATE = "state"          #: a :class:`~jobctl.model.State` value
    JSON = "json"            #: any JSON value from the payload; typed at match time

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class FieldSpec:
    """One filterable field.

    ``get(record, now_ms)`` returns the value (``None`` when unknown): ``str``
    for TEXT and STATE, ``int`` for NUMBER, ``int`` milliseconds for DURATION,
    ``int`` epoch milliseconds for TIMESTAMP, any JSON value for JSON.
    """

    name: str
    kind: FieldKind
    get: Getter
    help: str


def _dead_for(r: JobRecord, now_ms: int) -> int | None:
    since = r.meta.get("dead_since_ms") if r.meta else None
    if isinstance(since, bool) or not isinstance(since, int):
        since = None
        if _state_value(r) == State.DEAD.value:
            since = r.envelope.last_attempt_ms
    return None if since is None else now_ms - since


def _overdue_for(r: JobRecord, now_ms: int) -> int | None:
    """Scheduled jobs only: now - due time (the zset score) once due; else missing."""
    if _state_value(r) != State.SCHEDULED.value or r.score is None or r.score > now_ms:
        return None
    return now_ms - r.score


def _age(r: JobRecord, now_ms: int) -> int | None:
    created = r.envelope.created_ms
    return None if created is None else now_ms - created


def _state_value(r: JobRecord) -> str | None:
    """The state as text; ``None`` for an orphan payload that no state holds."""
    state = r.state
    if state is None:
        return None
    return state.value if isinstance(state, State) else str(state)


def _spec(name: str, kind: FieldKind, get: Getter, help: str) -> tuple[str, FieldSpec]:
    return name, FieldSpec(name, kind, get, help)


#: Every field the language knows, in display order.  ``payload`` stands for
#: ``payload`` itself and ``payload.<path>`` (see :func:`field_getter`).
FIELDS: dict[str, FieldSpec] = dict([
    _spec("id", FieldKind.TEXT, lambda r, n: r.job_id, "job id"),
    _spec("type", FieldKind.TEXT, lambda r, n: r.envelope.job_type, "jobType"),
    _spec("version", FieldKind.NUMBER, lambda r, n: r.envelope.job_version, "jobVersion"),
    _spec("tenant", FieldKind.TEXT, lambda r, n: r.envelope.tenant_id, "tenantId"),
    _spec("error", FieldKind.TEXT, lambda r, n: r.envelope.last_error_code,
          "last error code (lastErrorCode)"),
    _spec("message", FieldKind.TEXT, lambda r, n: r.envelope.last_error_message,
          "last error message (lastErrorMessage)"),
    _spec("attempts", FieldKind.NUMBER, lambda r, n: r.envelope.attempt,
          "attempts made so far (attempt)"),
    _spec("max_attempts", FieldKind.NUMBER, lambda r, n: r.envelope.max_attempts,
          "maxAttempts"),
    _spec("age", FieldKind.DURATION, _age, "now - createdAtEpochMs"),
    _spec("dead_for", FieldKind.DURATION, _dead_for,
          "now - when the job became dead (meta dead_since_ms, else "
          "lastAttemptAtEpochMs for dead jobs)"),
    _spec("overdue_for", FieldKind.DURATION, _overdue_for,
          "scheduled jobs: now - due time (zset score) once due; missing before"),
    _spec("created", FieldKind.TIMESTAMP, lambda r, n: r.envelope.created_ms,
          "createdAtEpochMs"),
    _spec("state", FieldKind.STATE, lambda r, n: _state_value(r),
          "ready, scheduled, processing, dead, suppressed or history "
          "(missing for an orphan payload)"),
    _spec("idempotency_key", FieldKind.TEXT, lambda r, n: r.envelope.idempotency_key,
          "idempotencyKey"),
    _spec("trace", FieldKind.TEXT, lambda r, n: r.envelope.trace_id, "traceId"),
    _spec("correlation", FieldKind.TEXT, lambda r, n: r.envelope.correlation_id,
          "correlationId"),
    _spec("payload", FieldKind.JSON, lambda r, n: r.envelope.payload,
          "the envelope payload; payload.a.b[0] walks into it"),
])

#: Fields that can be evaluated without loading the envelope.
NO_PAYLOAD_FIELDS = frozenset({"id", "state"})

STATE_NAMES = [s.value for s in State]


def _walk(value: Any, path: tuple[str | int, ...]) -> Any:
    """Follow ``path`` (str keys, int list indexes) into JSON; ``None`` if absent."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list):
                return None
            try:
                value = value[step]
            except IndexError:
                return None
        else:
            if not isinstance(value, dict):
                return None
            value = value.get(step)
    return value


def path_getter(path: tuple[str | int, ...]) -> Getter:
    def get(r: JobRecord, now_ms: int) -> Any:
        return _walk(r.envelope.payload, path)
    return get

