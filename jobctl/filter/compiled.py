"""The compiled filter: :class:`Filter` and :data:`MATCH_ALL`."""

from __future__ import annotations

from ..model import JobRecord
from .fields import NO_PAYLOAD_FIELDS, Predicate

__all__ = ["Filter", "MATCH_ALL"]


class Filter:
    """A compiled filter.  Immutable; safe to share between threads.

    Attributes (read-only):
        text: the filter as typed (``""`` for :data:`MATCH_ALL`).
        fields: top-level field names used (``frozenset[str]``; a payload
            path counts as ``"payload"``).
        needs_payload: ``False`` only when the filter uses nothing but ``id``
            and ``state``, i.e. it can be evaluated without loading the
            envelope.
        normalized: the canonical text of the parsed filter (``""`` for
            :data:`MATCH_ALL`): equivalent spellings (spaces, quotes, field
            aliases, ``5m`` / ``300s``, the order of ``and`` / ``or``
            operands, redundant parentheses) give the same text.  What
            identifies a filter where two commands must agree on it (the
            holds of ``pause --hold`` and ``resume``).
    """

    __slots__ = ("_text", "_fields", "_pred", "_normalized")

    def __init__(self, text: str, pred: Predicate, fields: frozenset[str], normalized: str | None = None) -> None:
        self._text = text
        self._pred = pred
        self._fields = fields
        self._normalized = text if normalized is None else normalized

    @property
    def text(self) -> str:
        return self._text

    @property
    def normalized(self) -> str:
        return self._normalized

    @property
    def fields(self) -> frozenset[str]:
        return self._fields

    @property
    def needs_payload(self) -> bool:
        return not self._fields <= NO_PAYLOAD_FIELDS

    @property
    def is_match_all(self) -> bool:
        """True for :data:`MATCH_ALL` (no filter given)."""
        return self is MATCH_ALL

    def matches(self, record: JobRecord, now_ms: int) -> bool:
        """Whether ``record`` passes the filter.

        Args:
            record: the job, in one state.
            now_ms: the current time, epoch milliseconds (for ``age`` and
                ``dead_for``); pass one value for a whole scan.

        Never raises for odd record contents: a missing or mistyped value
        just fails to match (and matches ``!=``).
        """
        return bool(self._pred(record, now_ms))

    def __repr__(self) -> str:
        return f"Filter({self._text!r})"


#: The filter used when no ``--filter`` was given: matches every record.
MATCH_ALL = Filter("", lambda record, now_ms: True, frozenset())
