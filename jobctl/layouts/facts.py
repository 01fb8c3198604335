"""What a layout declares about itself, read by the core, the CLI, the TUI,
the config loader, discovery, the exporter and the dashboard instead of
branching on its name.

:class:`LayoutFacts` is the base of :class:`~jobctl.layouts.base.Layout`:
class attributes each layout overrides (its operations, capabilities,
visibility default, config options, discovery recogniser) and small hook
methods with a neutral default (what status, the dashboard and the resume
flow read from the layout's own keys).  A new layout overrides what
differs; every consumer reads the declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..ops.spec import Operation

if TYPE_CHECKING:
    from ..model import JobRecord

__all__ = ["LayoutFacts", "Option", "HOLDING_OPERATIONS", "IntOption", "StrOption", "AnyOption"]

#: The operations that take jobs out of the workers' reach: a layout has
#: either all of them (it can hold jobs back) or none.
HOLDING_OPERATIONS = frozenset({Operation.PAUSE, Operation.RESUME, Operation.MIGRATE, Operation.DRAIN,
                                Operation.TRANSFORM})


@dataclass(frozen=True)
class Option:
    """One layout-specific key of a ``[queues.NAME]`` table: ``kind`` is
    ``"int"`` (inclusive bounds ``lo``..``hi``), ``"str"`` (at most ``hi``
    characters) or ``"any"`` (not checked)."""

    kind: str
    lo: int = 1
    hi: int = 2 ** 31 - 1


def IntOption(lo: int, hi: int) -> Option:  # noqa: N802 - reads as a type in the tables
    """An integer option bounded to ``lo..hi`` (inclusive)."""
    return Option("int", lo, hi)


def StrOption(max_len: int) -> Option:  # noqa: N802
    """A string option of at most ``max_len`` characters."""
    return Option("str", 0, max_len)


def AnyOption() -> Option:  # noqa: N802
    """An option whose value is not checked on load (e.g. a list)."""
    return Option("any")


class LayoutFacts:
    """The declarations of a layout (class attributes) and the hooks whose
    default fits a layout without the feature."""

    #: Layout name as written in the config (``layout = "..."``).
    name: ClassVar[str]
    #: Operations :meth:`~jobctl.layouts.base.Layout.plan` accepts.
    operations: ClassVar[frozenset[Operation]] = frozenset()
    #: Sharded queues can be resharded (``migrate --shards``).
    reshardable: ClassVar[bool] = False
    #: :meth:`iter_raw_windows` is implemented (the exporter's unparsed path).
    raw_windows: ClassVar[bool] = False
    #: Visibility timeout (ms) used when the catalogue sets none, for a
    #: layout that stores no deadline; ``None``: its deadlines are stored.
    visibility_default_ms: ClassVar[int | None] = None
    #: Its keys put the tag inside ``{...}`` (a brace in the tag is refused).
    braced_tag: ClassVar[bool] = False
    #: Layout-specific config keys (kept in ``QueueConfig.options``) and their bounds.
    config_options: ClassVar[Mapping[str, Option]] = {}
    #: Its recogniser claims broad key patterns: discovery runs it after the others.
    recognize_last: ClassVar[bool] = False
    #: ``SCAN MATCH`` pattern of its keys, for discovery without a catalogue.
    scan_pattern: ClassVar[str | None] = None
    #: Its ``replay`` selects a stream range (``--from``/``--to``, which the TUI
    #: asks first); ``False``: the filter alone selects (only where it supports replay).
    replay_by_range: ClassVar[bool] = False
    #: What its ``replay`` sends again, in words (the TUI's scope of a replay).
    replay_source: ClassVar[str] = "history"

    @classmethod
    def supports(cls, operation: Operation) -> bool:
        """Whether ``operation`` is one of :attr:`operations`."""
        return operation in cls.operations

    @classmethod
    def holds_jobs(cls) -> bool:
        """Whether jobctl can hold this layout's jobs out of the workers'
        reach (:data:`HOLDING_OPERATIONS`: pause, resume, migrate, drain,
        transform)."""
        return HOLDING_OPERATIONS <= cls.operations

    @classmethod
    def recognizer(cls) -> Callable[..., Any] | None:
        """The discovery recogniser (``recognize(keys, *, client=None,
        rejected=None) -> [(QueueConfig, evidence keys)]``, see
        :mod:`jobctl.discovery`), or ``None``: not discovered."""
        return None

    # -- hooks read by status, the dashboard and the operations core --------
    def iter_raw_windows(self, state, batch: int = 1000):
        """The windows of :meth:`iter_batches`, unparsed
        (:class:`~jobctl.layouts.raw.RawWindow`); only where
        :attr:`raw_windows`.  Raises :class:`NotImplementedError` otherwise."""
        raise NotImplementedError(f"layout {type(self).__name__} has no raw windows")

    def slot_keys(self) -> list[str]:
        """The key names a multi-key script of this queue may touch together
        (Redis Cluster: they must share a slot); ``[]``: hash-tagged by design."""
        return []

    def dead_audits(self) -> list[tuple[str, Any, frozenset[bytes]]]:
        """``[(dead list key, id -> payload key or None, the payload key's
        allowed Redis types)]`` per shard, for the dead-list audit of
        status (:func:`jobctl.layouts.status_truth.audit_dlq`); ``[]``: none."""
        return []

    def unexplained_candidates(self) -> list[tuple[list[str], str]]:
        """``[(keys, the config key that would explain them)]``: keys of this
        queue the catalogue entry may not explain (status probes them with
        ``EXISTS``); ``[]``: none."""
        return []

    def history_key(self) -> str | None:
        """The history (completed) list whose depth status shows, or ``None``."""
        return None

    def due_counts(self, now: int, buckets: tuple[tuple[str, int | None, int | None], ...]) -> list[int] | None:
        """Scheduled jobs per due-time bucket (``lo <= due - now < hi``, ms)
        by a cheaper count than walking them; ``None``: the dashboard walks
        :meth:`iter_batches`."""
        return None

    def processing_by_deadline(self, limit: int) -> "list[JobRecord] | None":
        """Up to ``limit`` processing jobs, least time to the deadline first,
        read from a deadline index; ``None``: the dashboard sorts
        :meth:`list_jobs`."""
        return None

    def holds_to_lift(self, filter_text: str | None) -> list[dict[str, Any]]:
        """The hold records a resume of ``filter_text`` lifts (``[]``: the
        layout keeps none)."""
        return []

    def lift_holds(self, holds: list[dict[str, Any]], filter_text: str | None, plan, now: int
                   ) -> list[dict[str, Any]]:
        """Lift the confirmed ``holds`` still recorded (the caller holds the
        queue's lease) and take the jobs their cycles paused into ``plan``;
        returns the holds lifted."""
        return []

    def hold_records(self) -> list[dict[str, Any]]:
        """The hold records of the queue (``[{id, filter, reason, by,
        since_ms, ...}]``, oldest first); ``[]``: the layout keeps none."""
        return []

    def holds_left(self, filter_text: str | None) -> list[dict[str, Any]]:
        """The hold records a resume of ``filter_text`` leaves recorded
        (another filter)."""
        return []

    def record_hold(self, filter_text: str | None, reason: str, operator: str) -> dict[str, Any]:
        """Record a hold of ``filter_text`` and return it.  Raises
        :class:`~jobctl.errors.UsageError` for a layout without holds."""
        from ..errors import UsageError

        raise UsageError(f"holds are not supported for layout {self.name}")

    def new_cycle_marks(self) -> Any:
        """What one hold's cycles keep between them (passed back to
        :meth:`plan_hold_cycle`)."""
        return None

    def arrival_keys(self) -> list[str]:
        """The keys whose change starts a hold cycle early (the ready lists)."""
        return []

    def plan_hold_cycle(self, hold: dict[str, Any], marks: Any, budget: int):
        """The plan of one cycle of the hold record ``hold`` (at most
        ``budget`` jobs).  Raises :class:`~jobctl.errors.UsageError` for a
        layout without holds."""
        from ..errors import UsageError

        raise UsageError(f"holds are not supported for layout {self.name}")

    def planned_payload(self, job) -> bytes | None:
        """The stored payload of the planned job ``job`` (a
        :class:`~jobctl.ops.plan.PlannedJob`), for the before/after sample
        of a transformation; ``None``: unknown."""
        return None
