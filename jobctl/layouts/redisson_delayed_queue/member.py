"""Redisson's delayed-queue member format (layouts.md section 6; seed 004).

``RDelayedQueue.offer`` stores ``struct.pack('dLc0', randomId, len(value),
value)`` in both ``redisson_delay_queue_timeout:{name}`` (zset, score = due
ms) and ``redisson_delay_queue:{name}`` (list): an 8-byte IEEE-754 double
(a random id that makes equal values distinct), an 8-byte unsigned length,
then the codec's bytes.  Redis's Lua ``struct`` packs in the server's native
byte order: little-endian on every platform Redis ships for.  When the due
time passes, Redisson's transfer script ``RPUSH``es the bare codec bytes to
the destination list ``{name}``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["RedissonMember", "decode_member", "encode_member", "HEADER_SIZE"]

#: Bytes before the codec's value: double random id + unsigned 64-bit length.
HEADER_SIZE = 16
_HEADER = struct.Struct("<dQ")


@dataclass(frozen=True)
class RedissonMember:
    """One decoded member.  ``job_id`` is the random id's 8 bytes in hex
    (what jobctl shows and ``inspect`` takes); ``problem`` is set (and
    ``value`` holds the whole member) when the bytes are not that format."""

    job_id: str
    random_id: float | None
    value: bytes
    problem: str | None = None


def decode_member(raw: bytes) -> RedissonMember:
    """Split a packed member; never raises."""
    if len(raw) < HEADER_SIZE:
        return RedissonMember(raw.hex()[:16] or "empty", None, raw, f"{len(raw)} bytes: shorter than the "
                              f"{HEADER_SIZE}-byte header")
    random_id, length = _HEADER.unpack_from(raw)
    if HEADER_SIZE + length != len(raw):
        return RedissonMember(raw[:8].hex(), None, raw, f"length field says {length} bytes, "
                              f"{len(raw) - HEADER_SIZE} follow")
    return RedissonMember(raw[:8].hex(), random_id, raw[HEADER_SIZE:])


def encode_member(random_id: float, value: bytes) -> bytes:
    """The packed form of ``value`` (for tests and fixtures)."""
    return _HEADER.pack(random_id, len(value)) + value
