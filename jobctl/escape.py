"""Text that came from Redis, made safe to show: ids and values are bytes,
decoded with ``surrogateescape`` (:func:`jobctl.layouts.common.text`), so
bytes that are not UTF-8 survive as lone surrogates, which no terminal,
JSON document or UTF-8 file can carry.

* :func:`shown`: the text with such bytes (and control characters) written
  ``\\xff``.
* :func:`json_safe`: a JSON-ready structure with every such string shown
  and every integer beyond 64 bits as a string (what orjson refuses).
"""

from __future__ import annotations

from typing import Any

__all__ = ["shown", "json_safe", "unshown"]


def shown(value: str) -> str:
    """Text as the operator should see it: bytes that were not UTF-8 (kept
    as surrogates by ``surrogateescape`` decoding, :func:`jobctl.layouts.common.text`)
    are written ``\\xff``; control characters are escaped the same way, so
    an id never rewrites the terminal."""
    if value.isprintable():
        return value
    out = []
    for ch in value:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif o < 0x80:  # \\x80-\\xff stand for undecodable bytes only
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out)


def json_safe(data: Any) -> Any:
    """``data`` with every string that JSON cannot carry (lone surrogates:
    undecodable bytes of ids and values) escaped by :func:`shown`, and every
    integer beyond 64 bits as a string.  Containers are copied only when
    needed."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
            return data
        except UnicodeEncodeError:
            return shown(data)
    if isinstance(data, bool) or data is None or isinstance(data, float):
        return data
    if isinstance(data, int):
        return data if -2 ** 63 <= data < 2 ** 64 else str(data)
    if isinstance(data, dict):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(v) for v in data]
    return data


def unshown(text: str) -> str:
    """The inverse of :func:`shown`: ``\\xNN`` back to the byte (a
    surrogate for 0x80-0xff, as ``surrogateescape`` decoding gives),
    ``\\uNNNN``/``\\UNNNNNNNN`` to the character.  For ids an operator
    typed as ``ls`` showed them, and ids read back from an export.  Text
    without a backslash is returned unchanged."""
    if "\\" not in text:
        return text
    import re

    def char(m: re.Match) -> str:
        x, u, big = m.group(1), m.group(2), m.group(3)
        if x is not None:
            value = int(x, 16)
            return chr(value + 0xDC00) if value >= 0x80 else chr(value)
        value = int(u or big, 16)
        return chr(value) if value <= 0x10FFFF else m.group(0)

    return re.sub(r"\\x([0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})", char, text)
