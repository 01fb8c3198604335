"""A layout whose reads and operations live in modules of its own package,
under the names every foreign layout uses: ``discover.recognize``,
``ops.plan_operation``, ``ops.apply_plan`` with ``ops.DEFAULT_BATCH``, and
``status.queue_status``.  :class:`PackageModules` delegates to them, so a
layout class declares only what differs."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from .base import now_ms

__all__ = ["PackageModules"]


class PackageModules:
    """Mixin (before the layout's base class): ``recognizer``, ``plan``,
    ``apply`` and ``status`` from the layout package's modules."""

    @classmethod
    def module(cls, name: str) -> ModuleType:
        """The layout package's module ``name``, imported on first use."""
        return import_module(f"{cls.__module__.rpartition('.')[0]}.{name}")

    @classmethod
    def recognizer(cls):
        """``discover.recognize``: the discovery recogniser."""
        return cls.module("discover").recognize

    def plan(self, spec, now: int | None = None):
        """``ops.plan_operation``: the plan of an operation (reads only; ``now`` epoch ms)."""
        return self.module("ops").plan_operation(self, spec, now_ms() if now is None else now)

    def apply(self, plan, *, batch: int | None = None):
        """``ops.apply_plan``: fenced script calls of ``batch`` jobs (default ``ops.DEFAULT_BATCH``)."""
        ops = self.module("ops")
        return ops.apply_plan(self, plan, batch=batch or ops.DEFAULT_BATCH)

    def status(self, now: int | None = None):
        """``status.queue_status``: the queue's :class:`~jobctl.model.QueueStatus` at ``now`` (epoch ms)."""
        return self.module("status").queue_status(self, now_ms() if now is None else now)
