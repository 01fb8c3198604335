"""Triage of the dead-letter queue: dead (or suppressed) jobs grouped by
(job type, error) with counts and first/last seen (seed 000 section 22:
"classify first"), and the filter text that selects one group.  The group
key is :func:`jobctl.ops.catalog.group_key`, the same as a plan's breakdown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..filter import MATCH_ALL, Filter
from ..model import State
from ..ops.catalog import group_key

if TYPE_CHECKING:
    from ..layouts.base import Layout

__all__ = ["TriageGroup", "Triage", "triage", "group_filter_text", "field_filter_text", "quote_filter_value",
           "TRIAGE_EXACT_BOUND", "SCOPE_TENANTS"]

#: Dead jobs read exactly by :func:`triage`; beyond, a sample is scaled up.
TRIAGE_EXACT_BOUND = 50_000


def quote_filter_value(value: str) -> str:
    """``value`` as a quoted string literal of the filter language."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'


def _glob_literal(text: str) -> str:
    """``text`` as an fnmatch glob matching only itself (``[``, ``*``, ``?`` bracketed)."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in text)


def group_filter_text(job_type: str | None, error: str | None, *, by_message: bool = False) -> str:
    """The filter that selects one triage group, e.g.
    ``type = "webhook.deliver" and error = "HTTP_503"``.  A missing field is
    matched by ``not <field> ~ "*"`` (a missing value never matches ``~``).
    ``by_message``: ``error`` is the first characters of the last error
    message of jobs without an error code (:func:`jobctl.ops.catalog.group_key`)."""
    from ..ops.catalog import GROUP_MESSAGE_CHARS

    parts = ['not type ~ "*"' if job_type is None else f"type = {quote_filter_value(job_type)}"]
    if error is None:
        parts.append('not error ~ "*"')
    elif by_message:
        parts.append('not error ~ "*"')
        parts.append(f"message ~ {quote_filter_value(_glob_literal(error) + '*')}"
                     if len(error) >= GROUP_MESSAGE_CHARS else f"message = {quote_filter_value(error)}")
    else:
        parts.append(f"error = {quote_filter_value(error)}")
    return " and ".join(parts)


def field_filter_text(name: str, value: str | None) -> str:
    """The filter selecting the jobs whose field ``name`` (``type``,
    ``tenant``) is ``value``: ``type = "webhook.deliver"``; ``None`` (the
    field is missing) gives ``not type ~ "*"``."""
    return f'not {name} ~ "*"' if value is None else f"{name} = {quote_filter_value(value)}"


#: Tenants of a triage group offered as a pause/resume scope (the largest first).
SCOPE_TENANTS = 3


@dataclass
class TriageGroup:
    """Dead jobs sharing a job type and last error code (else the first
    characters of the last error message: :func:`jobctl.ops.catalog.group_key`).

    ``count`` is exact unless the triage was sampled (then scaled);
    ``first_seen_ms``/``last_seen_ms`` are the earliest/latest time a job of
    the group became dead (its ``lastAttemptAtEpochMs``; ``None`` if no job
    said).  ``tenants`` counts the jobs read per tenant; ``sample_ids`` holds
    up to 20 ids.
    """

    job_type: str | None
    error: str | None
    count: int = 0
    #: ``error`` is a message prefix (the jobs have no error code)
    by_message: bool = False
    first_seen_ms: int | None = None
    last_seen_ms: int | None = None
    tenants: Counter = field(default_factory=Counter)
    sample_ids: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        """A stable key for this group (``type|error``)."""
        return f"{self.job_type or ''}|{self.error or ''}"

    @property
    def filter_text(self) -> str:
        return group_filter_text(self.job_type, self.error, by_message=self.by_message)

    def top_tenants(self, n: int = 2) -> list[tuple[str, int]]:
        return self.tenants.most_common(n)

    def scopes(self, tenants: int = SCOPE_TENANTS) -> list[tuple[str, str]]:
        """What a pause or resume started from this group applies to, as
        ``(label, filter text)``: the group's job type, then its ``tenants``
        largest tenants (``("tenant t1 (62% of the group)", 'tenant = "t1"')``).
        The filters select on the job type or tenant only (never the error:
        ready jobs have none), so they match the group's ready jobs."""
        out = [(f"job type {self.job_type or '(none)'}", field_filter_text("type", self.job_type))]
        read = max(1, sum(self.tenants.values()))
        for tenant, n in self.tenants.most_common(tenants):
            out.append((f"tenant {tenant} ({n * 100 / read:.0f}% of the group)", field_filter_text("tenant", tenant)))
        return out


@dataclass
class Triage:
    """The DLQ (``state``: dead or suppressed) grouped for triage at ``now_ms``.

    ``depth`` is the state's size, ``read`` the envelopes read, ``matched``
    the jobs that passed ``filter_text``; ``sampled`` says the counts are
    scaled from a random sample (the state held more than the exact bound).
    ``malformed`` counts jobs whose envelope did not parse (never redriven;
    they are not in any group).
    """

    queue: str
    state: str
    now_ms: int
    depth: int = 0
    read: int = 0
    matched: int = 0
    sampled: bool = False
    malformed: int = 0
    filter_text: str = ""
    groups: list[TriageGroup] = field(default_factory=list)

    def group(self, key: str) -> TriageGroup | None:
        return next((g for g in self.groups if g.key == key), None)


def triage(layout: "Layout", *, flt: Filter = MATCH_ALL, now: int, state: State = State.DEAD,
           exact_bound: int = TRIAGE_EXACT_BOUND) -> Triage:
    """Group ``state`` of ``layout`` by (job type, last error code).

    Reads the whole state in batches (``layout.iter_batches``) when it holds
    at most ``exact_bound`` jobs, else random windows whose counts are scaled
    to the depth.  Groups are sorted by count, largest first.
    """
    from ..attempts import SAMPLE_WINDOW, SAMPLE_WINDOWS

    depth = layout.depth(state)
    out = Triage(queue=layout.queue_name, state=state.value, now_ms=now, depth=depth,
                 filter_text=flt.text)
    sample = None
    if depth > exact_bound:
        out.sampled = True
        sample = (SAMPLE_WINDOWS, SAMPLE_WINDOW)
    groups: dict[tuple[str | None, str | None], TriageGroup] = {}
    for batch in layout.iter_batches(state, batch=1000, sample=sample):
        for rec in batch:
            out.read += 1
            env = rec.envelope
            if env.problems:
                out.malformed += 1
                continue
            if not flt.matches(rec, now):
                continue
            out.matched += 1
            k = group_key(env)
            g = groups.get(k)
            if g is None:
                g = groups[k] = TriageGroup(job_type=k[0], error=k[1],
                                            by_message=k[1] is not None and env.last_error_code is None)
            g.count += 1
            if env.tenant_id:
                g.tenants[env.tenant_id] += 1
            seen = rec.meta.get("dead_since_ms", env.last_attempt_ms)
            if seen is not None:
                g.first_seen_ms = seen if g.first_seen_ms is None else min(g.first_seen_ms, seen)
                g.last_seen_ms = seen if g.last_seen_ms is None else max(g.last_seen_ms, seen)
            if len(g.sample_ids) < 20:
                g.sample_ids.append(rec.job_id)
    if out.sampled and out.read:
        scale = depth / out.read
        for g in groups.values():
            g.count = round(g.count * scale)
        out.malformed = round(out.malformed * scale)
        out.matched = round(out.matched * scale)
    out.groups = sorted(groups.values(), key=lambda g: (-g.count, g.job_type or "", g.error or ""))
    return out
