"""The interface every queue layout implements.

A :class:`Layout` instance stands for one logical queue (all of its shards)
on one server.  The read side maps the layout's own keys into the shared read
model (:mod:`jobctl.model`); the operation engine drives its moves through
the same object.

The typed layout protocol (one way for a layout to provide each part; no
module-name strings, no ``getattr`` probing by the engine, the planner or
the exporter):

* **read model**: :meth:`Layout.status`, :meth:`~Layout.list_jobs`,
  :meth:`~Layout.inspect`, :meth:`~Layout.depth`,
  :meth:`~Layout.iter_batches`, :meth:`~Layout.shard_tags`;
* **plans and fences**: :meth:`Layout.plan` returns a
  :class:`~jobctl.ops.plan.Plan` whose fence data the apply re-checks
  atomically (each layout's fence is documented in ``docs/layouts.md``);
* **window sources**: :meth:`Layout.sources` returns the :class:`WindowSource`
  s (one per shard) of a (layout, source state) that the window engine
  (:mod:`jobctl.ops.walk`) drives: bounded, pipelined Lua window calls
  with a jobctl-owned hold list, server-side walk bookkeeping and a lease
  (the reliable-list, stream-group and json-list dead lists and the
  hash-job failed list today).  A layout (or source
  state) without one returns ``[]`` and the engine falls back to
  :meth:`Layout.apply`, which yields one
  :class:`~jobctl.ops.result.BatchResult` per script call.  To move a
  source onto the engine (the zsets, the PEL), implement :class:`WindowSource` for it and return
  them from :meth:`Layout.sources`;
* **checks**: :meth:`Layout.check` (the layout's own audit module,
  imported statically by the override).

Contract for implementers of the read model:

* ``status`` costs a bounded number of pipelined round trips whatever the
  depth (no full scans).
* ``list_jobs`` and ``iter_batches`` read at most ``limit``/``batch`` entries
  per command; nothing reads a whole key.
* The read model never writes to Redis; only :meth:`Layout.apply` and the
  window engine do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..clock import now_ms  # noqa: F401 - re-exported: layouts import it from here
from ..keys import shard_tags
from ..model import JobRecord, QueueStatus, State
from .facts import LayoutFacts

if TYPE_CHECKING:
    import redis

    from ..config import QueueConfig

__all__ = ["Layout", "KeyedLayout", "ShardedLayout", "ListStatesLayout", "WindowSource", "now_ms"]


def _noted_status(fn):
    def status(self, *args, **kwargs):
        from ..cluster import cross_slot_note

        st = fn(self, *args, **kwargs)
        note = cross_slot_note(self)
        if note and note not in st.warnings:
            st.warnings.append(note)
        return st

    status.__doc__, status.__name__, status._slot_guard = fn.__doc__, fn.__name__, True
    return status


def _slot_guarded_plan(fn):
    def plan(self, spec, *args, **kwargs):
        from ..cluster import refuse_cross_slot

        refuse_cross_slot(self, getattr(getattr(spec, "operation", None), "value", "operation"))
        plan = fn(self, spec, *args, **kwargs)
        if getattr(plan, "dangling", None):
            from .common import unreadable_not_dangling

            unreadable_not_dangling(self, plan)
        return plan

    plan.__doc__, plan.__name__, plan._slot_guard = fn.__doc__, fn.__name__, True
    return plan


def _slot_guarded_check(fn):
    def check(self, *args, repair: bool = False, **kwargs):
        if repair:
            from ..cluster import refuse_cross_slot

            refuse_cross_slot(self, "check --repair of")
        return fn(self, *args, repair=repair, **kwargs)

    check.__doc__, check.__name__, check._slot_guard = fn.__doc__, fn.__name__, True
    return check


class Layout(LayoutFacts, ABC):
    """One logical queue of one layout.

    ``client`` is a ``redis.Redis`` returning bytes; ``queue`` its catalogue
    entry.  Raises from redis-py propagate (the front ends translate them
    with :func:`jobctl.connection.translate`).  What the layout supports is
    declared in :class:`~jobctl.layouts.facts.LayoutFacts`.
    """

    #: States this layout has, in display order.
    states: ClassVar[tuple[State, ...]]

    def __init__(self, client: "redis.Redis", queue: "QueueConfig") -> None:
        self.client = client
        self.queue = queue

    def __init_subclass__(cls, **kwargs) -> None:
        # Redis Cluster: a queue whose keys span slots is noted in status and
        # refused by plan and check --repair (:mod:`jobctl.cluster`); a method
        # a mixin brings (layouts.package_layout) is guarded too
        super().__init_subclass__(**kwargs)
        for name, guard in (("status", _noted_status), ("plan", _slot_guarded_plan), ("check", _slot_guarded_check)):
            fn = getattr(cls, name, None)
            if fn is not None and not getattr(fn, "_slot_guard", False) and not getattr(fn, "__isabstractmethod__", 0):
                setattr(cls, name, guard(fn))

    @property
    def queue_name(self) -> str:
        return self.queue.name

    @property
    @abstractmethod
    def journal_key(self) -> str:
        """The capped audit stream of this queue (:mod:`jobctl.ops.journal`)."""

    @abstractmethod
    def status(self, now: int | None = None) -> QueueStatus:
        """Depths, overdue/stuck counts and oldest-ready age at ``now`` (epoch ms)."""

    def status_report(self, now: int | None = None, *, audit_dead: bool = True) -> QueueStatus:
        """:meth:`status` plus what it hides on real queues (a defaulted
        visibility timeout, keys the catalogue entry does not explain,
        dangling and duplicate dead entries, history depth, DLQ loss:
        :func:`jobctl.layouts.status_truth.annotate`).  What the front ends
        show.  A few more bounded round trips."""
        from .status_truth import annotate

        st = self.status(now)
        if st.errors:  # keys of the wrong type: the plain status says it all
            return st
        return annotate(self, st, audit_dead=audit_dead)

    @abstractmethod
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Up to ``limit`` jobs in ``state``, in the order the state is served.

        Ready: next to be claimed first.  Scheduled: earliest due first.
        Processing: earliest deadline first.  Dead and suppressed: newest
        first.  Raises :class:`~jobctl.errors.UsageError` for a state the
        layout does not have.
        """

    @abstractmethod
    def inspect(self, job_id: str) -> JobRecord:
        """The job ``job_id`` with its state, position/score and deadline.

        Raises :class:`~jobctl.errors.NotFound` when no state holds the id and
        no payload exists.
        """

    def depth(self, state: State) -> int:
        """How many jobs ``state`` holds: by default the count of one
        :meth:`status`; a layout with a cheaper count (one round trip per
        shard) overrides it.  Raises :class:`~jobctl.errors.UsageError` for a
        state the layout does not have."""
        self.check_supported(state)
        return self.status().count(state)

    @abstractmethod
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in batches of at most ``batch`` records with envelopes.

        ``sample=(windows, window_size)`` reads only that many windows at
        random offsets instead of the whole state.  Bounded per command.
        """

    def shard_tags(self) -> list[str]:
        """The hash tags of this queue's shards, for layouts whose keys are
        sharded by hash tag (reliable-list, stream-group); ``[]`` for the
        others."""
        return []

    # -- operations: overridden by each layout that has them ------------------
    def plan(self, spec, now: int | None = None):
        """Plan an :class:`~jobctl.ops.spec.OpSpec` at ``now`` (epoch ms;
        default the local clock); returns a :class:`~jobctl.ops.plan.Plan`.
        Reads only.  Raises :class:`~jobctl.errors.UsageError` when the
        layout cannot do it."""
        from ..errors import UsageError

        raise UsageError(f"{spec.operation.value} is not supported for layout {self.name}")

    def sources(self, spec) -> "list[WindowSource]":
        """The :class:`WindowSource` s (one per shard) the window engine
        drives for ``spec``'s source state; ``[]``: the engine applies
        through :meth:`apply` instead."""
        return []

    def apply(self, plan, *, batch: int | None = None):
        """Apply ``plan``, at most ``batch`` jobs per script call (default
        the layout's own); yields one
        :class:`~jobctl.ops.result.BatchResult` per script call, each job
        moved atomically and fenced to the plan."""
        from ..errors import UsageError

        raise UsageError(f"{plan.spec.operation.value} is not supported for layout {self.name}")

    def check(self, *, repair: bool = False):
        """Audit the layout's invariants (with ``repair``, apply the
        unambiguous fixes); returns a report with ``ok``, ``problems`` and
        ``to_json()``."""
        from ..errors import UsageError

        raise UsageError(f"check is not supported for layout {self.name}")

    def check_supported(self, state: State) -> None:
        """Raise :class:`~jobctl.errors.UsageError` if ``state`` is not one of ours."""
        if state not in self.states:
            from ..errors import UsageError

            names = ", ".join(s.value for s in self.states)
            raise UsageError(f"layout {self.name} has no state {state.value!r} (it has: {names})")


Layout.plan = _slot_guarded_plan(Layout.plan)
Layout.check = _slot_guarded_check(Layout.check)


class KeyedLayout(Layout):
    """A layout whose key names are one :mod:`jobctl.keys` object,
    ``self.keys`` (set by ``__init__``), journal included (delay-zset,
    redisson-delayed-queue, delayed-events, json-list, hash-job)."""

    keys: Any

    @property
    def journal_key(self) -> str:
        return self.keys.journal

    def slot_keys(self) -> list[str]:
        """Every string property of ``self.keys`` without a wildcard but the
        journal (written by its own XADD, never inside a script), plus a
        sample ``job("0")`` key when the keys have per-job ones."""
        from ..keys.common import fixed_key_names

        keys = self.keys
        journal = getattr(keys, "journal", None)
        out = [k for k in fixed_key_names(keys) if k != journal]
        job = getattr(keys, "job", None)
        if callable(job):
            try:
                out.append(job("0"))
            except Exception:  # noqa: BLE001 - keys without per-job names
                pass
        return out


class ShardedLayout(Layout):
    """A layout whose keys are sharded by hash tag ``<tag>:00..`` (seed 000
    section 20; reliable-list, stream-group): ``self.shards`` holds one
    :attr:`keys_class` object per shard, the journal is the base tag's."""

    #: The :mod:`jobctl.keys` class of one shard's key names.
    keys_class: ClassVar[type]

    def __init__(self, client: "redis.Redis", queue: "QueueConfig") -> None:
        super().__init__(client, queue)
        self.shards = [self.keys_class(t) for t in shard_tags(queue.base_tag, queue.shards)]

    def shard_tags(self) -> list[str]:
        return [k.tag for k in self.shards]

    @property
    def journal_key(self) -> str:
        return self.keys_class(self.queue.base_tag).journal

    def _pipeline(self):
        return self.client.pipeline(transaction=False)


class ListStatesLayout(KeyedLayout):
    """A layout whose states are each one Redis list (:meth:`_list_key`),
    except suppressed: jobctl's zset ``self.keys.suppressed`` (hash-job,
    json-list)."""

    @abstractmethod
    def _list_key(self, state: State) -> str:
        """The list holding ``state`` (any state but suppressed)."""

    def depth(self, state: State) -> int:
        """``LLEN`` of the state's list, ``ZCARD`` of the suppressed zset."""
        self.check_supported(state)
        if state is State.SUPPRESSED:
            return self.client.zcard(self.keys.suppressed)
        return self.client.llen(self._list_key(state))

    #: the layout's package: its ``ops`` module plans and applies
    #: (``plan_operation``, ``dead_sources``, ``apply_plan``, ``DEFAULT_BATCH``),
    #: its ``check`` module checks (``check_queue``); imported on first use
    package: ClassVar[str]

    def _module(self, name: str):
        from importlib import import_module

        return import_module(f"{self.package}.{name}")

    def plan(self, spec, now: int | None = None):
        """The plan of ``spec`` (the package's ``ops.plan_operation``)."""
        return self._module("ops").plan_operation(self, spec, now_ms() if now is None else now)

    def sources(self, spec):
        """The dead-list window sources of ``spec`` (``ops.dead_sources``)."""
        return self._module("ops").dead_sources(self, spec)

    def apply(self, plan, *, batch: int | None = None):
        """Apply ``plan`` (``ops.apply_plan``, ``ops.DEFAULT_BATCH`` jobs a batch by default)."""
        ops = self._module("ops")
        return ops.apply_plan(self, plan, batch=batch or ops.DEFAULT_BATCH)

    def check(self, *, repair: bool = False):
        """The queue's check report (``check.check_queue``)."""
        return self._module("check").check_queue(self, repair=repair)


class WindowSource(Protocol):
    """One (layout, source state, shard) the window engine drives
    (:mod:`jobctl.ops.walk`; :class:`~jobctl.ops.walk.ListSource` is
    the implementation for dead lists).

    A source is a list walked from its tail (the end workers do not push
    at) by bounded Lua window calls (the window scripts (``rl_window.lua``, ``rl_tail.lua``, ...)): each call pops up
    to ``batch`` tail positions, moves the planned jobs whose fence holds
    (one atomic, ``redis.pcall``-guarded step per job, per-job codes in the
    reply) and parks the rest on the jobctl-owned ``hold`` list, in order;
    restore calls (``list_restore.lua``) put the hold back at the tail.  The
    walk's bookkeeping lives in the jobctl-owned ``walk`` hash, so calls are
    independent and pipelined; the ``lease`` keeps a second operation off.
    """

    client: Any
    #: ``"rl"`` (elements are ids), ``"jl"`` (elements are the payloads) or
    #: ``"hj"`` (hash-job ids, fenced by their job hash's fields)
    kind: str
    #: index of the plan's shard this source walks
    shard: int
    dead: str
    hold: str
    walk: str
    lease: str

    def fixed_keys(self) -> list[str]:
        """The window script's fixed KEYS, in its header's order."""

    def ident(self, job: Any) -> str:
        """The identity the window script matches a planned job by."""
