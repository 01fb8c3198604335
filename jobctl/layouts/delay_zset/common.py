"""What the two delay layouts of layouts.md section 6 (seed 004) share:
:mod:`.delay_zset` and :mod:`.redisson_delayed_queue` read members that are
a job id or a small JSON payload, and search them with ``ZSCAN MATCH``."""

from __future__ import annotations

import re

from jobctl.model import Envelope
from jobctl.layouts.common import lenient_envelope, text

__all__ = ["member_envelope", "glob_escape", "SEARCH_BOUND", "EPOCH_MS_RANGE"]

#: ``inspect`` scans at most this many members for a job id inside payloads.
SEARCH_BOUND = 100_000
#: Scores a due time in epoch ms can have (2001-01-01 .. 2100-01-01):
#: discovery and check use it to tell a delay queue from other zsets.
EPOCH_MS_RANGE = (978_307_200_000, 4_102_444_800_000)


def member_envelope(raw: bytes) -> Envelope:
    """A JSON-object member as an envelope (``jobId`` or ``id`` as the job
    id); any other member is a bare job id: an envelope with no document and
    no problem."""
    stripped = raw.lstrip()
    if stripped.startswith(b"{"):
        env = lenient_envelope(raw)
        if env.document is not None and env.job_id is None and isinstance(env.document.get("id"), (str, int)):
            env.job_id = str(env.document["id"])
        return env
    return Envelope(job_id=text(raw))


def glob_escape(value: bytes) -> bytes:
    """``value`` with the glob characters of ``SCAN MATCH`` escaped."""
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", value)
