"""Small helpers shared by the layouts of ``../shared/design/layouts.md``.

Only what two or more layouts need lives here: decoding Redis replies,
turning WRONGTYPE replies into status errors, building an
:class:`~jobctl.model.Envelope` for layouts whose envelope is not seed 000's,
and turning a Lua script's ``{id, code, ...}`` reply into a
:class:`~jobctl.ops.result.BatchResult`.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..model import Envelope, parse_envelope
from ..ops.result import BatchResult

__all__ = ["text", "score_ms", "wrongtype_errors", "lenient_envelope", "batch_result",
           "suppression_record", "check_transition"]


def text(value: bytes | str) -> str:
    """A Redis reply as ``str``; undecodable bytes survive (surrogateescape)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def score_ms(value: Any) -> int | None:
    """A zset score (float or bytes) as integer epoch ms; ``None`` stays ``None``."""
    return None if value is None else int(float(value))


def wrongtype_errors(results: list[Any], keys: list[str]) -> list[str]:
    """``"key K holds the wrong Redis type"`` for each WRONGTYPE reply in a
    pipeline's ``results`` (``raise_on_error=False``); any other error reply
    is raised."""
    errors = []
    for res, key in zip(results, keys):
        if isinstance(res, Exception):
            if str(res).splitlines()[0].upper().startswith("WRONGTYPE"):
                errors.append(f"key {key} holds the wrong Redis type")
            else:
                raise res
    return errors


def lenient_envelope(raw: bytes | str | dict | None, *, required: tuple[str, ...] = ()) -> Envelope:
    """:func:`~jobctl.model.parse_envelope` for layouts whose documents are
    not seed 000 envelopes: the seed-000 required fields (jobId, jobType,
    createdAtEpochMs) are only required when named in ``required``.  A dict
    is serialised first.  Never raises."""
    if isinstance(raw, dict):
        raw = orjson.dumps(raw)
    env = parse_envelope(raw)
    keep = {f"missing field {f}" for f in required}
    env.problems = [p for p in env.problems if not p.startswith("missing field ") or p in keep]
    return env


def batch_result(reply: list[Any]) -> BatchResult:
    """A Lua ``{id1, code1, id2, code2, ...}`` reply: ``moved`` counts as
    moved, every other code is a skip reason (``gone``, ``changed``...)."""
    out = BatchResult()
    for i in range(0, len(reply), 2):
        job_id, code = text(reply[i]), text(reply[i + 1])
        if code == "moved":
            out.moved.append(job_id)
        else:
            out.skipped.append(job_id)
            out.reasons[job_id] = code
    return out


def suppression_record(spec, now: int, **extra: Any) -> bytes:
    """JSON ``{by, at_ms, reason, operation, ...extra}`` kept with a
    suppressed job (jobctl's own suppressed-info hash)."""
    return orjson.dumps({"by": spec.operator, "at_ms": now, "reason": spec.reason,
                         "operation": spec.op_id, **extra})


def check_transition(layout_name: str, transitions: dict, spec) -> None:
    """Raise :class:`~jobctl.errors.UsageError` unless ``(operation, source)
    -> target`` is in ``transitions`` (``{(Operation, State): (targets...)}``)."""
    from ..errors import UsageError

    allowed = transitions.get((spec.operation, spec.source))
    if allowed is None or spec.target not in allowed:
        target = spec.target.value if spec.target else "nowhere"
        raise UsageError(f"{spec.operation.value} from {spec.source.value} to {target} is not possible "
                         f"in layout {layout_name}")
