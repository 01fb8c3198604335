"""What one script call of an operation did (every layout yields these)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BatchResult"]


@dataclass
class BatchResult:
    """Outcome of one script call: job ids by outcome; ``reasons`` maps a
    skipped or failed id to its code (``changed``, ``gone``, ``moved``...)."""

    moved: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    #: more results of the same pipelined round trip follow: the engine
    #: does not stop between them (the calls already ran)
    more: bool = False
