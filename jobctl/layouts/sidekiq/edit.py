"""The client-side edit of a Sidekiq redrive (:func:`redrive_bytes`): the
stored job JSON with ``enqueued_at`` and ``retry_count`` changed as
Sidekiq's own retry changes them, every other byte as stored (Redis's
cjson would round 64-bit integers and escape "/", and even Python's
``json.dumps`` would respell floats and escapes).

The fast path replaces ``"enqueued_at":<number>`` and
``"retry_count":<int>`` where each is spelled once in the bytes (then it is
the top-level field); a job that spells one more than once (also inside
an argument) or with spaces goes through :func:`edit_by_scan`, which walks
the top-level object's fields one by one.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring

import orjson

from jobctl.layouts.sidekiq.job import ms_clock

__all__ = ["redrive_bytes", "edit_by_scan"]

_DEC = json.JSONDecoder()
_WS = " \t\n\r"
_NUM = rb"(-?[0-9][0-9.eE+-]*)"
_ENQUEUED = re.compile(rb'"enqueued_at":' + _NUM)
_COUNT = re.compile(rb'"retry_count":(-?[0-9]+)(,?)')


def _stamp(doc: dict, now_ms: int) -> str:
    """``now_ms`` in the job's own unit: epoch ms (Sidekiq 8) or epoch seconds (float)."""
    return str(now_ms) if ms_clock(doc) else repr(now_ms / 1000)


def _once(raw: bytes, doc: dict, field: str) -> bool:
    """True when ``field`` is absent from the top level and the bytes, or is
    a top-level key spelled exactly once in the bytes (then that spelling
    is the top-level one: a string value cannot hold an unescaped quote)."""
    n = raw.count(b'"' + field.encode() + b'"')
    return n == 1 if field in doc else n == 0


def _fast(raw: bytes, doc: dict, now_ms: int, reset: bool) -> bytes | None:
    """The edit at the one spelling of each field; ``None`` when a field is
    spelled more than once or not as ``"field":<number>``."""
    if not (_once(raw, doc, "retry_count") and _once(raw, doc, "enqueued_at")):
        return None
    stamp = _stamp(doc, now_ms).encode()
    count = doc.get("retry_count")
    out = raw
    if "retry_count" in doc and isinstance(count, int) and not isinstance(count, bool):
        m = _COUNT.search(out)
        if m is None:
            return None
        start, comma_before = m.start(), out[m.start() - 1:m.start()] == b","
        if not reset:
            new = b'"retry_count":' + str(count - 1).encode() + m.group(2)
        elif comma_before and not m.group(2):  # the last field: drop the comma before it
            start, new = start - 1, b""
        else:  # drop the field and the comma after it
            new = b""
        out = out[:start] + new + out[m.end():]
    if "enqueued_at" in doc:
        m = _ENQUEUED.search(out)
        return None if m is None else out[:m.start(1)] + stamp + out[m.end(1):]
    end = out.rstrip().rfind(b"}")
    return out[:end] + (b"," if doc else b"") + b'"enqueued_at":' + stamp + out[end:]


def redrive_bytes(raw: bytes, now_ms: int, *, reset_attempts: bool = False) -> bytes:
    """The bytes Sidekiq's own retry (``SortedEntry#retry``: ``retry_count
    -= 1``, then ``Client.push``, which stamps ``enqueued_at``) would push
    for the job ``raw``: ``enqueued_at`` = ``now_ms`` in the job's own
    unit, ``retry_count`` minus one (with ``reset_attempts``: removed, so
    the next failure counts from 0); every other byte as stored.  Raises
    ``ValueError`` when ``raw`` is not a UTF-8 JSON object."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:  # not JSON, or an integer past 64 bits: the scan decides
        return edit_by_scan(raw, now_ms, reset_attempts=reset_attempts)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out = _fast(raw, doc, now_ms, reset_attempts)
    return edit_by_scan(raw, now_ms, reset_attempts=reset_attempts) if out is None else out


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _top_fields(s: str) -> tuple[dict[str, tuple[int, int, int]], int]:
    """``({key: (key start, value start, value end)}, index of the closing
    brace)`` of the top-level object ``s``.  Raises ``ValueError`` when
    ``s`` is not one JSON object."""
    i = _ws(s, 0)
    if s[i:i + 1] != "{":
        raise ValueError("not a JSON object")
    i = _ws(s, i + 1)
    spans: dict[str, tuple[int, int, int]] = {}
    while s[i:i + 1] != "}":
        if s[i:i + 1] != '"':
            raise ValueError(f"expected a key at {i}")
        start = i
        key, i = scanstring(s, i + 1)
        i = _ws(s, i)
        if s[i:i + 1] != ":":
            raise ValueError(f"expected ':' at {i}")
        i = _ws(s, i + 1)
        _, end = _DEC.raw_decode(s, i)
        spans[key] = (start, i, end)
        i = _ws(s, end)
        if s[i:i + 1] == ",":
            i = _ws(s, i + 1)
        elif s[i:i + 1] != "}":
            raise ValueError(f"expected ',' or '}}' at {i}")
    return spans, i


def edit_by_scan(raw: bytes, now_ms: int, *, reset_attempts: bool = False) -> bytes:
    """:func:`redrive_bytes` by a walk over the top-level object's fields
    (each value's span from Python's JSON scanner): whatever the job holds,
    only the two fields' spans change.  Raises ``ValueError`` when ``raw``
    is not a UTF-8 JSON object."""
    s = raw.decode("utf-8")
    spans, close = _top_fields(s)
    doc = {f: _DEC.raw_decode(s, spans[f][1])[0] for f in ("created_at", "enqueued_at", "failed_at", "retry_count")
           if f in spans}
    stamp = str(now_ms) if ms_clock(doc) else repr(now_ms / 1000)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), applied from the end
    if "enqueued_at" in spans:
        edits.append((spans["enqueued_at"][1], spans["enqueued_at"][2], stamp))
    else:
        edits.append((close, close, ("," if spans else "") + f'"enqueued_at":{stamp}'))
    count = doc.get("retry_count")
    if "retry_count" in spans and isinstance(count, int) and not isinstance(count, bool):
        start, vstart, vend = spans["retry_count"]
        if not reset_attempts:
            edits.append((vstart, vend, str(count - 1)))
        else:
            nxt = _ws(s, vend)
            if s[nxt:nxt + 1] == ",":  # drop the field and the comma after it
                edits.append((start, _ws(s, nxt + 1), ""))
            else:  # the last field: drop the comma before it (if any)
                before = len(s[:start].rstrip(_WS)) - 1
                edits.append((before if s[before] == "," else start, vend, ""))
    for start, end, new in sorted(edits, reverse=True):
        s = s[:start] + new + s[end:]
    return s.encode("utf-8")
