"""Error-message fingerprints: the message with its variable parts normalised away.

``"invoice_987 not found (after 3 tries, trace 0af7651916cd43dd)"`` and
``"invoice_12 not found (after 5 tries, trace 9c1f00aa11bb22cc)"`` both become
``"invoice_<n> not found (after <n> tries, trace <hex>)"``.  The
replacements, in order (:data:`NORMALISERS`): UUIDs, e-mail addresses, IPv4
addresses, hex (``0x..``), durations (a number and a time unit: ``250ms``,
``1500ms``, ``2.5s``, ``3 min`` -> ``<duration>``), sizes (a number and a
byte unit: ``2048MiB``, ``10KB``, ``512 bytes`` -> ``<size>``), hex (8+ hex
digits holding a digit and a letter), ids (6+ letters and digits mixed, e.g.
ULIDs), numbers (``<n>``); then whitespace runs become one space and the text
is cut to :data:`MAX_LENGTH` characters.  The fingerprint id is the first 12
hex digits of the SHA1 of that text.

Each pattern is valid in both Python ``re`` and Java regex, and no
replacement uses a group reference, so :func:`normalise` (Python) and
:func:`normalise_column` (Spark's ``regexp_replace``) agree.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["NORMALISERS", "MAX_LENGTH", "normalise", "fingerprint_id", "normalise_column",
           "fingerprint_column"]

_NOT_ALNUM_BEFORE = r"(?<![A-Za-z0-9])"
_NOT_ALNUM_AFTER = r"(?![A-Za-z0-9])"
#: a number not inside a word, an id or a dotted number (a version, an address)
_NUMBER = r"(?<![A-Za-z0-9.])[0-9]+(?:\.[0-9]+)?"
_SPACE = r" ?"

#: (regex, replacement), applied in order.
NORMALISERS: tuple[tuple[str, str], ...] = (
    (r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", "<uuid>"),
    (r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", "<email>"),
    (r"(?<![0-9.])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![0-9.])", "<ip>"),
    (_NOT_ALNUM_BEFORE + r"0[xX][0-9A-Fa-f]+" + _NOT_ALNUM_AFTER, "<hex>"),
    (_NUMBER + r"(?:(?:ns|us|µs|ms|s|m|h|d)|" + _SPACE + r"(?:ns|us|ms|sec|secs|seconds?|min|mins|minutes?|hrs?"
     r"|hours?|days?))" + _NOT_ALNUM_AFTER, "<duration>"),
    (_NUMBER + _SPACE + r"(?:[KkMGTPE]i?B|bytes?|B)" + _NOT_ALNUM_AFTER, "<size>"),
    (_NOT_ALNUM_BEFORE + r"(?=[0-9A-Fa-f]*[0-9])(?=[0-9A-Fa-f]*[A-Fa-f])[0-9A-Fa-f]{8,}" + _NOT_ALNUM_AFTER,
     "<hex>"),
    (_NOT_ALNUM_BEFORE + r"(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{6,}" + _NOT_ALNUM_AFTER,
     "<id>"),
    (r"[0-9]+(?:\.[0-9]+)?", "<n>"),
    (r"[ \t\n\x0B\f\r]+", " "),
)

#: Fingerprint texts are cut to this many characters.
MAX_LENGTH = 200

_COMPILED = tuple((re.compile(p), r) for p, r in NORMALISERS)


def normalise(message: str | None) -> str | None:
    """The fingerprint text of ``message`` (``None`` stays ``None``)."""
    if message is None:
        return None
    text = message
    for rx, repl in _COMPILED:
        text = rx.sub(repl, text)
    return text.strip(" ")[:MAX_LENGTH]


def fingerprint_id(text: str | None) -> str | None:
    """First 12 hex digits of the SHA1 of a fingerprint text."""
    if text is None:
        return None
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def normalise_column(col):
    """Spark column: :func:`normalise` of a string column."""
    from pyspark.sql import functions as F

    out = col
    for pattern, repl in NORMALISERS:
        out = F.regexp_replace(out, pattern, repl)
    return F.substring(F.trim(out), 1, MAX_LENGTH)


def fingerprint_column(text_col):
    """Spark column: :func:`fingerprint_id` of a fingerprint-text column."""
    from pyspark.sql import functions as F

    return F.substring(F.sha1(F.encode(text_col, "UTF-8")), 1, 12)
