"""How the stream-group layout reads the server's error replies."""

from __future__ import annotations

__all__ = ["missing_stream_or_group"]


def missing_stream_or_group(exc: BaseException) -> bool:
    """True for the errors of a missing stream (``no such key``) or group (``NOGROUP``)."""
    msg = str(exc)
    return "no such key" in msg or msg.startswith("NOGROUP") or "NOGROUP" in msg.split(" ", 1)[0]
