"""Click parameter types that refuse absurd numbers before anything runs.

click's own ``IntRange(1)`` takes ``99999999999999999999`` and
``FloatRange(0.1)`` takes ``nan`` and ``inf`` (every comparison with NaN is
false): an operation would then start with a limit no server holds, a rate
that divides by NaN, or a ``--watch`` loop that never sleeps.  These types
bound every number and reject non-finite floats; a refusal is click's usage
error, so the CLI prints one line and exits with
:attr:`~jobctl.exitcodes.ExitCode.USAGE` (2) before connecting.

* :class:`Count`: an integer in ``[min, max]`` (both always bounded).
* :class:`Finite`: a finite float in ``[min, max]``.
* :class:`FilterText`: a filter expression that is not blank.
* :class:`BoundedDuration`: an operator duration (:func:`jobctl.durations.parse_duration`,
  ``30s``, ``1h30m``...) of at most ``max_ms`` milliseconds; the value stays
  the text the operator typed, so commands parse it as before.

The ``LIMIT``/``RATE``/... constants are the bounds the commands share.
"""

from __future__ import annotations

import math

import click

__all__ = ["complete_queue", "Count", "Finite", "BoundedDuration", "FilterText", "FILTER", "MAX_JOBS", "MAX_RATE",
           "MAX_PRIORITY", "MAX_DELAY_MS", "JOB_LIMIT", "RATE", "PRIORITY", "DELAY"]

#: The most jobs one command may touch or list (--limit): far above any
#: real queue, far below what overflows a Lua number or a Redis count.
MAX_JOBS = 1_000_000_000
#: Jobs per second (--rate).
MAX_RATE = 1_000_000.0
#: The highest ready list index pN (--priority); config priorities are bounded likewise.
MAX_PRIORITY = 999
#: The longest delay or age an operator may type: 10 years in ms.
MAX_DELAY_MS = 10 * 366 * 86_400_000


class Count(click.IntRange):
    """An integer in ``[min, max]``; ``max`` defaults to :data:`MAX_JOBS`."""

    name = "integer"

    def __init__(self, min: int = 0, max: int = MAX_JOBS) -> None:  # noqa: A002 - click's names
        super().__init__(min, max)

    def convert(self, value, param, ctx):
        # int() takes any Unicode digit ("١٢" is 12): an operator's count is ASCII only
        if isinstance(value, str) and not value.strip().lstrip("+-").isascii():
            self.fail(f"{value!r} is not an integer (ASCII digits only)", param, ctx)
        return click.IntRange.convert(self, value, param, ctx)


class Finite(click.FloatRange):
    """A finite float in ``[min, max]``: ``nan``, ``inf`` and ``-inf`` are refused."""

    name = "number"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        rv = click.FloatRange.convert(self, value, param, ctx)
        if isinstance(rv, float) and not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


class BoundedDuration(click.ParamType):
    """An operator duration (``30s``, ``5m``, ``7d``) of at most ``max_ms``;
    converts to the text itself (validated), so callers parse it unchanged."""

    name = "duration"

    def __init__(self, max_ms: int = MAX_DELAY_MS) -> None:
        self.max_ms = max_ms

    def convert(self, value, param, ctx):
        from ..durations import format_duration, parse_duration
        from ..errors import UsageError

        if value is None:
            return None
        try:
            ms = parse_duration(str(value))
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        if ms > self.max_ms:
            self.fail(f"{str(value)[:40]!r} is longer than the maximum {format_duration(self.max_ms)}", param, ctx)
        return value


class FilterText(click.ParamType):
    """A filter expression (docs/filter.md); blank text is refused, so an
    unset shell variable never widens a command to every job."""

    name = "filter"

    def convert(self, value, param, ctx):
        from ..filter import FilterError, checked_filter_text

        try:
            return checked_filter_text(value)
        except FilterError as exc:
            self.fail(str(exc), param, ctx)


#: --filter of every command that takes one.
FILTER = FilterText()
#: --limit of the operations: at least one job, at most MAX_JOBS.
JOB_LIMIT = Count(1, MAX_JOBS)
#: --rate: jobs per second.
RATE = Finite(0.1, MAX_RATE)
#: --priority: a ready list index.
PRIORITY = Count(0, MAX_PRIORITY)
#: --delay / --older-than.
DELAY = BoundedDuration()


class WritableDir(click.Path):
    """A directory jobctl will create or write into: refused up front (before
    any read of Redis) when it is an existing file, or when its nearest
    existing ancestor is not a writable, searchable directory."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, dir_okay=True)

    def convert(self, value, param, ctx):
        import os

        rv = super().convert(value, param, ctx)
        path = os.path.abspath(os.fsdecode(rv))
        if os.path.exists(path):
            if not os.path.isdir(path):
                self.fail(f"{value!r} exists and is not a directory", param, ctx)
            if not os.access(path, os.W_OK | os.X_OK):
                self.fail(f"directory {value!r} is not writable", param, ctx)
            return rv
        parent = os.path.dirname(path)
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            self.fail(f"cannot create {value!r}: {parent} is not a writable directory", param, ctx)
        return rv


#: --out / --export-to directories.
OUT_DIR = WritableDir()


def complete_queue(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a queue argument: the names of the config's queues
    (``--config`` if given on the line, else the usual search); it never
    connects to Redis and, on a config it cannot read, offers nothing."""
    from click.shell_completion import CompletionItem

    from ..config import load_config

    try:
        names = list(load_config(ctx.find_root().params.get("config_file")).queues)
    except Exception:  # noqa: BLE001 - a completion never prints an error into the shell
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]
