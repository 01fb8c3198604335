"""The one read model every layout is mapped into.

A layout turns its own keys into :class:`JobRecord` values (one job, one
state) and :class:`QueueStatus` values (one logical queue).  Times are epoch
milliseconds (int) throughout; ``None`` means unknown.

The envelope field names come from seed 000 section 5 (job envelope) and
section 10 (retry metadata).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import orjson

__all__ = [
    "State",
    "Envelope",
    "parse_envelope",
    "JobRecord",
    "QueueStatus",
    "ENVELOPE_FIELDS",
]


class State(str, Enum):
    """Job states shared by every layout (layouts.md, "States")."""

    READY = "ready"
    SCHEDULED = "scheduled"
    PROCESSING = "processing"
    DEAD = "dead"
    SUPPRESSED = "suppressed"
    HISTORY = "history"
    #: jobctl's own state: taken out of the workers' reach by ``jobctl pause``
    PAUSED = "paused"

    def __str__(self) -> str:  # click prints choices with str()
        return self.value


#: Envelope keys (seed 000 sections 5 and 10) and the attribute they map to.
ENVELOPE_FIELDS: dict[str, str] = {
    "jobId": "job_id",
    "jobType": "job_type",
    "jobVersion": "job_version",
    "tenantId": "tenant_id",
    "idempotencyKey": "idempotency_key",
    "createdAtEpochMs": "created_ms",
    "notBeforeEpochMs": "not_before_ms",
    "deadlineEpochMs": "deadline_ms",
    "attempt": "attempt",
    "maxAttempts": "max_attempts",
    "traceId": "trace_id",
    "correlationId": "correlation_id",
    "payloadRef": "payload_ref",
    "payload": "payload",
    "lastAttemptAtEpochMs": "last_attempt_ms",
    "nextAttemptAtEpochMs": "next_attempt_ms",
    "lastErrorCode": "last_error_code",
    "lastErrorMessage": "last_error_message",
}

INT_FIELDS = {"jobVersion", "createdAtEpochMs", "notBeforeEpochMs", "deadlineEpochMs",
               "attempt", "maxAttempts", "lastAttemptAtEpochMs", "nextAttemptAtEpochMs"}
STR_FIELDS = {"jobId", "jobType", "tenantId", "idempotencyKey", "traceId",
               "correlationId", "payloadRef", "lastErrorCode", "lastErrorMessage"}


@dataclass
class Envelope:
    """A parsed job envelope.  Unknown keys are kept in ``extra``.

    ``problems`` lists what was wrong with the raw value (bad JSON, non-UTF-8
    bytes, a field of the wrong type); a record with problems is still
    returned so that read commands can report it and carry on.
    """

    job_id: str | None = None
    job_type: str | None = None
    job_version: int | None = None
    tenant_id: str | None = None
    idempotency_key: str | None = None
    created_ms: int | None = None
    not_before_ms: int | None = None
    deadline_ms: int | None = None
    attempt: int | None = None
    max_attempts: int | None = None
    trace_id: str | None = None
    correlation_id: str | None = None
    payload_ref: str | None = None
    payload: Any = None
    last_attempt_ms: int | None = None
    next_attempt_ms: int | None = None
    last_error_code: str | None = None
    last_error_message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    document: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the raw value parsed as a JSON object with sane fields."""
        return not self.problems

    @property
    def ready_since_ms(self) -> int | None:
        """When the job became claimable, as far as the envelope tells.

        The latest of created, notBefore, nextAttemptAt and jobctl's own
        ``redrivenAtEpochMs``: a retried or redriven job became ready again
        when it was due, not when it was created.
        """
        candidates = [self.created_ms, self.not_before_ms, self.next_attempt_ms,
                      _as_int(self.extra.get("redrivenAtEpochMs"))]
        known = [c for c in candidates if c is not None]
        return max(known) if known else None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_envelope(raw: bytes | str | None) -> Envelope:
    """Parse a raw envelope value (seed 000 section 5).

    Never raises: bad JSON, non-UTF-8 bytes, a non-object document and fields
    of the wrong type are recorded in :attr:`Envelope.problems`.
    """
    env = Envelope()
    if raw is None:
        env.problems.append("missing payload key")
        return env
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        env.problems.append(f"not UTF-8 at byte {exc.start}")
        return env
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        env.problems.append(f"bad JSON: {exc}".splitlines()[0][:120])
        return env
    if not isinstance(doc, dict):
        env.problems.append(f"envelope is a JSON {type(doc).__name__}, not an object")
        return env
    env.document = doc
    for key, value in doc.items():
        attr = ENVELOPE_FIELDS.get(key)
        if attr is None:
            env.extra[key] = value
            continue
        if value is None:
            continue
        if key in INT_FIELDS:
            iv = _as_int(value)
            if iv is None:
                env.problems.append(f"field {key} is not an integer")
                continue
            value = iv
        elif key in STR_FIELDS and not isinstance(value, str):
            if key == "jobId" and isinstance(value, int):
                value = str(value)
            else:
                env.problems.append(f"field {key} is not a string")
                continue
        setattr(env, attr, value)
    for required in ("jobId", "jobType", "createdAtEpochMs"):
        if doc.get(required) is None:
            env.problems.append(f"missing field {required}")
    return env


@dataclass
class JobRecord:
    """One job as jobctl sees it, in one state.

    ``position`` is the 0-based distance from the end a list is served from
    (ready and processing: the right, next to be claimed or oldest claim;
    dead: the left, newest first).  ``score`` is the zset score (epoch ms) for
    scheduled and suppressed jobs.  ``raw`` is the payload key's value as
    stored.  ``state`` is ``None`` for an orphan payload that no state holds.
    """

    queue: str
    layout: str
    shard: str
    job_id: str
    state: State | None
    envelope: Envelope
    raw: bytes | None = None
    position: int | None = None
    score: int | None = None
    deadline_ms: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def attempts(self) -> int | None:
        """Attempts made so far (envelope ``attempt``)."""
        return self.envelope.attempt

    def to_json(self, *, with_raw: bool = True) -> dict[str, Any]:
        """A JSON-ready dict; ``raw`` is text when UTF-8, else ``raw_hex``."""
        out: dict[str, Any] = {
            "queue": self.queue,
            "layout": self.layout,
            "shard": self.shard,
            "id": self.job_id,
            "state": self.state.value if self.state else None,
            "position": self.position,
            "score": self.score,
            "deadline_ms": self.deadline_ms,
            "envelope": self.envelope.document,
            "problems": list(self.envelope.problems),
            "meta": self.meta,
        }
        if with_raw:
            if self.raw is None:
                out["raw"] = None
            else:
                try:
                    out["raw"] = self.raw.decode("utf-8")
                except UnicodeDecodeError:
                    out["raw"] = None
                    out["raw_hex"] = self.raw.hex()
        return out


@dataclass
class QueueStatus:
    """Status of one logical queue; the ``jobctl status --json`` contract.

    Counts are integers summed over shards.  Times are epoch ms; ages are ms.
    ``oldest_ready_age_ms`` is ``None`` when nothing is ready.  The fields
    from ``history`` on are filled by
    :func:`jobctl.layouts.status_truth.annotate` (``None``: not known for
    this layout): ``history`` the completed-list depth; ``dead_dangling``
    and ``dead_duplicates`` among the ``dead_audited`` newest dead entries;
    ``dead_expiring`` dead jobs whose payload TTL is under an hour,
    ``dead_min_ttl_ms`` the soonest expiry (ms); ``dead_cap`` the configured
    DLQ cap; ``dead_pinned`` the DLQ length stayed put between two samples
    while its newest entry changed (trimmed by the workers); ``visibility_default_ms`` the defaulted visibility timeout;
    ``unexplained_keys`` keys the catalogue entry does not explain.
    """

    queue: str
    layout: str
    now_ms: int
    shards: int = 1
    ready: int = 0
    ready_by_priority: dict[str, int] = field(default_factory=dict)
    scheduled: int = 0
    scheduled_overdue: int = 0
    scheduled_overdue_max_age_ms: int | None = None
    next_due_ms: int | None = None
    processing: int = 0
    stuck: int = 0
    next_deadline_ms: int | None = None
    dead: int = 0
    suppressed: int = 0
    #: jobs in jobctl's paused state (``jobctl pause``), and the active holds
    #: (``pause --hold``): ``[{id, filter, reason, by, since_ms, age_ms}]``
    paused: int = 0
    #: jobs between two queues: taken out by a ``jobctl migrate`` that has not finished them
    migrating: int = 0
    #: dead jobs (counted in ``dead``) left in jobctl's hold lists by an operation that no longer runs
    held: int = 0
    held_filters: list[dict[str, Any]] = field(default_factory=list)
    oldest_ready_since_ms: int | None = None
    oldest_ready_age_ms: int | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    history: int | None = None
    dead_dangling: int | None = None
    dead_duplicates: int | None = None
    dead_audited: int | None = None
    dead_expiring: int | None = None
    dead_min_ttl_ms: int | None = None
    dead_cap: int | None = None
    dead_pinned: bool = False
    visibility_default_ms: int | None = None
    unexplained_keys: list[str] = field(default_factory=list)

    def count(self, state: State) -> int:
        """How many jobs ``state`` holds (ready, scheduled, processing, dead,
        suppressed or paused: the field of that name).  Raises ``KeyError``
        for a state the status does not count (history)."""
        return {State.READY: self.ready, State.SCHEDULED: self.scheduled, State.PROCESSING: self.processing,
                State.DEAD: self.dead, State.SUPPRESSED: self.suppressed, State.PAUSED: self.paused}[state]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
