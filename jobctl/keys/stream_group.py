"""Key names of the stream-group layout (layouts.md section 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .common import WindowKeys
from .reliable_list import ReliableListKeys

__all__ = ["STREAM_GROUP_KEY_RE", "StreamGroupKeys"]

#: Parses ``stream:{tag}:jobs``; group 1 is the tag.
STREAM_GROUP_KEY_RE = re.compile(r"^stream:\{([^{}]+)\}:jobs$")


@dataclass(frozen=True)
class StreamGroupKeys(WindowKeys):
    """Key names of one stream-group shard (layouts.md section 2).

    The scheduled zset, the dead list, the payload keys and jobctl's own
    keys are named as for reliable-list (seed 000 section 13 reuses them).
    """

    tag: str

    @property
    def jobctl_base(self) -> str:
        return f"queue:{{{self.tag}}}"

    @property
    def _rl(self) -> ReliableListKeys:
        return ReliableListKeys(self.tag)

    @property
    def stream(self) -> str:
        """Stream of entries ``jobId <id>`` (seed 000 s.11); read by a consumer group."""
        return f"stream:{{{self.tag}}}:jobs"

    @property
    def dead_stream(self) -> str:
        """Dead-letter stream (``dead = "stream"`` in the queue's config)."""
        return f"stream:{{{self.tag}}}:dead"

    @property
    def scheduled(self) -> str:
        """Zset job id -> due time (epoch ms); the scheduler XADDs due ids (s.13)."""
        return self._rl.scheduled

    @property
    def dead(self) -> str:
        """List of dead-lettered job ids (``dead = "list"``, the default)."""
        return self._rl.dead

    def job(self, job_id: str) -> str:
        """String key holding the JSON envelope of ``job_id`` (s.13)."""
        return self._rl.job(job_id)

    @property
    def replayed(self) -> str:
        """The set of the entry ids an earlier jobctl's ``replay`` re-added:
        still read (each is replayed no more), no longer written."""
        return f"queue:{{{self.tag}}}:jobctl:replayed"

    @property
    def replay_record(self) -> str:
        """jobctl's replay record (zset, every score 0): one member
        ``<original id, each part zero-padded to 20 digits> <replay id>`` per
        entry ``jobctl replay`` re-added, trimmed to the entries the stream
        still holds (``jobctl/lua/sg_replay.lua``)."""
        return f"queue:{{{self.tag}}}:jobctl:replay-record"
