"""A Celery message (protocol 2, kombu's JSON envelope) as the read model
sees it, never unpickled.

The envelope is JSON: ``body`` (base64 when ``properties.body_encoding`` is
``base64``), ``content-type``, ``headers`` (``task``, ``id``, ``retries``,
``eta``, ``expires``, ``root_id``, ...) and ``properties`` (``priority``,
``delivery_tag``, ``delivery_info``).  A JSON body (``[args, kwargs,
embed]``) is decoded with the standard library (64-bit integers exact); any
other content type (pickle, yaml, msgpack) is shown as opaque bytes.

An ``unacked`` value is JSON ``[message, exchange, routing_key]``:
:func:`unacked_parts` finds the message's exact bytes inside it, so a
requeue pushes them unchanged.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect
from datetime import datetime, timezone
from typing import Any

from jobctl.layouts.celery.keys import PRIORITY_STEPS
from jobctl.model import Envelope

__all__ = ["loads", "unacked_parts", "priority_step", "envelope_of", "iso_ms", "UnackedParts"]

_DECODER = json.JSONDecoder()


def loads(raw: bytes | str | None) -> Any:
    """``json.loads`` of ``raw``; ``None`` when it is not JSON."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None


class UnackedParts:
    """An ``unacked`` value split: ``message`` (dict), ``exchange``,
    ``routing_key`` and ``span`` = ``(start, end)`` byte offsets of the
    message inside the value (0-based, end exclusive)."""

    __slots__ = ("message", "exchange", "routing_key", "span")

    def __init__(self, message: dict, exchange: str, routing_key: str, span: tuple[int, int]) -> None:
        self.message, self.exchange, self.routing_key, self.span = message, exchange, routing_key, span


def unacked_parts(stored: bytes) -> UnackedParts | None:
    """The parts of an ``unacked`` value; ``None`` when it is not kombu's
    ``[message, exchange, routing_key]``."""
    whole = loads(stored)
    if not (isinstance(whole, list) and len(whole) == 3 and isinstance(whole[0], dict)):
        return None
    # latin-1 maps each byte to one character: offsets in the text are byte offsets
    doc = stored.decode("latin-1")
    start = doc.index("[") + 1
    while doc[start] in " \t\r\n":
        start += 1
    try:
        _, end = _DECODER.raw_decode(doc, start)
    except ValueError:
        return None
    return UnackedParts(whole[0], str(whole[1] or ""), str(whole[2] or ""), (start, end))


def priority_step(message: dict) -> int:
    """The priority step kombu files ``message`` under (``properties.priority``
    clamped to 0..9, then the highest step not above it; 0 when unset)."""
    try:
        pri = max(min(int(message["properties"]["priority"]), 9), 0)
    except (TypeError, ValueError, KeyError):
        pri = 0
    return PRIORITY_STEPS[bisect(PRIORITY_STEPS, pri) - 1]


def iso_ms(value: Any) -> int | None:
    """Epoch ms of an ISO 8601 time (Celery's ``eta``/``expires``); ``None`` when blank or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def _body(message: dict) -> tuple[Any, str | None]:
    """``(decoded body, None)`` for a JSON body, else ``(note, None)`` or
    ``(None, problem)``."""
    props = message.get("properties") if isinstance(message.get("properties"), dict) else {}
    body = message.get("body")
    ctype = str(message.get("content-type") or "")
    raw: bytes | str | None = body if isinstance(body, str) else None
    if raw is not None and props.get("body_encoding") == "base64":
        try:
            raw = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return None, "body is not base64"
    if raw is None:
        return None, "no body"
    if ctype != "application/json":
        return f"<{len(raw)} bytes, {ctype or 'no content type'}: not decoded>", None
    decoded = loads(raw)
    return (decoded, None) if decoded is not None else (None, "body is not JSON")


def envelope_of(message: Any) -> Envelope:
    """The :class:`Envelope` of a message: id = ``headers.id``, type =
    ``headers.task``, attempt = ``headers.retries``, not before = ``eta``,
    deadline = ``expires``, payload = ``{args, kwargs}`` (a JSON body) or a
    note (any other content type); document = the message with its body
    decoded.  Never raises; problems are listed in ``envelope.problems``."""
    env = Envelope()
    headers = message.get("headers") if isinstance(message, dict) else None
    if not isinstance(headers, dict) or not headers.get("id"):
        env.problems.append("not a Celery protocol 2 message (no headers.id)")
        env.document = message if isinstance(message, dict) else None
        return env
    props = message.get("properties") if isinstance(message.get("properties"), dict) else {}
    env.job_id, env.job_type = str(headers["id"]), headers.get("task")
    env.attempt = headers.get("retries") if isinstance(headers.get("retries"), int) else None
    env.not_before_ms, env.deadline_ms = iso_ms(headers.get("eta")), iso_ms(headers.get("expires"))
    env.trace_id, env.correlation_id = headers.get("root_id"), props.get("correlation_id")
    body, problem = _body(message)
    if problem:
        env.problems.append(problem)
    if isinstance(body, list) and len(body) == 3:
        env.payload = {"args": body[0], "kwargs": body[1]}
    else:
        env.payload = body
    env.document = {**message, "body": body}
    return env
