"""What a plain status hides on real queues (issue 12, items 2, 3, 8 and 9).

:func:`annotate` adds to a layout's :class:`~jobctl.model.QueueStatus`, with a
bounded number of pipelined reads:

* ``visibility_default_ms``: the visibility timeout the layout fell back to
  because the catalogue sets none (:func:`jobctl.config.defaulted_visibility`),
  with a warning;
* ``unexplained_keys``: keys of the queue the catalogue entry does not
  explain (``ready:p0..`` without ``priorities`` or beyond them, shard tags
  ``<tag>:00`` of an unsharded entry), with a warning: such
  jobs show as zeros otherwise;
* ``dead_dangling`` / ``dead_duplicates`` / ``dead_audited``: among the
  newest :data:`DEAD_AUDIT_MAX` entries of the dead-letter lists (split
  over the shards, at least 50 each), the ids
  without a payload and the repeated ids (``dead`` counts list entries, not
  jobs);
* ``history``: the depth of the history (``completed``) list where the
  layout has one (hash-job);
* DLQ loss: ``dead_cap`` (the config's ``dead_cap``: the workers ``LTRIM``
  the DLQ to it, so the oldest dead jobs are dropped once it is reached),
  ``dead_pinned`` (seen across two samples of one process: the DLQ length
  stayed put while its newest entry changed: a cap nobody configured),
  ``dead_expiring`` (payloads of audited dead entries whose TTL is below
  :data:`DLQ_EXPIRY_WARN_MS`, or the dead list's own TTL) and
  ``dead_min_ttl_ms``, each with a warning that says to export the DLQ now.

Commands: ``LLEN``, ``LRANGE 0 DEAD_AUDIT_MAX-1``, ``PTTL`` per audited id
(pipelined), ``EXISTS`` of a few candidate keys.  Nothing is written.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..config import defaulted_visibility
from ..durations import format_duration
from ..model import QueueStatus
from .common import text, wrong_type_note, wrongtype_errors

__all__ = ["annotate", "audit_dlq", "catalogue_warnings", "AUDIT_FIELDS", "DEAD_AUDIT_MAX", "DLQ_EXPIRY_WARN_MS"]

#: Entries of the dead-letter lists (all shards together, at least 50 per
#: shard) audited for dangling ids, duplicates and payload TTLs: the newest.
DEAD_AUDIT_MAX = 2_000
#: A dead job whose payload expires within this (ms) is about to be lost.
DLQ_EXPIRY_WARN_MS = 3_600_000
#: Dead lists sampled twice for a pinned DLQ (the first ones).
SHARD_PROBE = 8


def annotate(layout, st: QueueStatus, *, audit_dead: bool = True) -> QueueStatus:
    """Add the facts of the module docstring to ``st`` (in place; returned).
    ``audit_dead=False`` leaves out the dead-list audit (its cost grows with
    the DLQ up to :data:`DEAD_AUDIT_MAX`: the exporter runs it with its slow
    metrics, :func:`audit_dlq`)."""
    q = layout.queue
    default = defaulted_visibility(q)
    if default is not None:
        st.visibility_default_ms = default
        st.warnings.append(f"visibility_timeout_ms is not configured: stuck counts use the {q.layout} default "
                           f"of {format_duration(default)}; set it to the workers' timeout")
    _unexplained(layout, st)
    if audit_dead:
        audit_dlq(layout, st)
    _held(layout, st)
    history = layout.history_key()
    if history is not None:
        res = layout.client.pipeline(transaction=False).llen(history).execute(raise_on_error=False)
        st.errors.extend(wrongtype_errors(res, [history]))  # one queue's wrong type, not the catalogue's
        st.history = None if isinstance(res[0], Exception) else int(res[0] or 0)
    _pinned(layout, st)
    cap = q.options.get("dead_cap")
    if isinstance(cap, int) and not isinstance(cap, bool):
        st.dead_cap = cap
        if st.dead >= cap:
            st.warnings.append(f"DLQ at its cap: {st.dead:,} dead >= dead_cap {cap:,}: the workers drop the "
                               "oldest dead jobs from now on; export the DLQ now (runbook dlq-spike, step export-now)")
    return st


#: (client, dead list) -> (length, newest entry) at the previous status of
#: this process: the exporter, the TUI and ``status --watch`` compare
#: successive samples.  Bounded: cleared when it grows past 10,000 lists.
_LAST_DEAD: dict[tuple[int, str], tuple[int, Any]] = {}


def _pinned(layout, st: QueueStatus) -> None:
    """A DLQ whose length stays put while its newest entry changes is being
    trimmed by its workers (``LPUSH`` + ``LTRIM``): dead jobs are dropped.
    Needs two samples; ``LLEN`` + ``LINDEX 0`` of at most
    :data:`SHARD_PROBE` dead lists."""
    lists = [audit[0] for audit in _dead_audits(layout)][:SHARD_PROBE]
    if not lists or not st.dead:
        return
    pipe = layout.client.pipeline(transaction=False)
    for key in lists:
        pipe.llen(key)
        pipe.lindex(key, 0)
    res = pipe.execute(raise_on_error=False)
    if len(_LAST_DEAD) > 10_000:
        _LAST_DEAD.clear()
    pinned = 0
    for n, key in enumerate(lists):
        length, head = res[2 * n], res[2 * n + 1]
        if isinstance(length, Exception) or isinstance(head, Exception):
            continue
        ident = (id(layout.client), key)
        prev = _LAST_DEAD.get(ident)
        _LAST_DEAD[ident] = (length, head)
        if prev is not None and length and prev[0] == length and prev[1] != head:
            pinned = max(pinned, length)
    if pinned:
        st.dead_pinned = True
        st.warnings.append(f"DLQ pinned at {pinned:,} entries while new failures arrive: the workers trim it "
                           "(LTRIM), the oldest dead jobs are being dropped; export the DLQ now "
                           "(runbook dlq-spike, step export-now) and set dead_cap")


def _held(layout, st: QueueStatus) -> None:
    """``st.held``: dead jobs a killed operation left in jobctl's hold lists
    (counted in ``dead`` too), and a warning naming them."""
    from ..ops.orphan_holds import find, summary

    orphans = find(layout)
    if orphans:
        st.held = sum(o.jobs for o in orphans)
        st.warnings.append(f"{summary(orphans)}: the next operation on the queue, or `jobctl check --repair`, "
                           "gives them back to their dead lists")


def catalogue_warnings(layout) -> list[str]:
    """The warnings about the catalogue entry alone (a defaulted visibility
    timeout, keys it does not explain), for commands other than status
    (``check``).  A few ``EXISTS``."""
    st = QueueStatus(queue=layout.queue.name, layout=layout.queue.layout, now_ms=0)
    annotate(layout, st, audit_dead=False)
    return [w for w in st.warnings if not w.startswith("DLQ")]


def audit_dlq(layout, st: QueueStatus) -> QueueStatus:
    """The dead-list audit alone (dangling, duplicates, expiring payloads)
    into ``st``; a no-op for layouts without a dead list of ids."""
    audits = _dead_audits(layout)
    if audits:
        _audit_dead(layout.client, st, audits)
    return st


#: The fields :func:`audit_dlq` sets (the exporter caches them).
AUDIT_FIELDS = ("dead_dangling", "dead_duplicates", "dead_audited", "dead_expiring", "dead_min_ttl_ms")


def _unexplained(layout, st: QueueStatus) -> None:
    """The layout's :meth:`~jobctl.layouts.facts.LayoutFacts.unexplained_candidates`:
    one multi-key ``EXISTS`` per group (its keys share the hash tag), then
    one per existing candidate to name it.  On a cluster, one single-key
    ``EXISTS`` per candidate at once: a multi-key one over absent keys gets
    ``TRYAGAIN`` while their slot migrates (a single-key one is answered
    where its key lives)."""
    from ..cluster import is_cluster

    q = layout.queue
    groups = layout.unexplained_candidates()
    if not groups:
        return
    if not is_cluster(layout.client):
        pipe = layout.client.pipeline(transaction=False)
        for keys, _ in groups:
            pipe.exists(*keys)
        groups = [(keys, why) for (keys, why), n in zip(groups, pipe.execute()) if n]
    pipe = layout.client.pipeline(transaction=False)
    candidates = [(key, why) for keys, why in groups for key in keys]
    for key, _ in candidates:
        pipe.exists(key)
    found = [(key, why) for (key, why), n in zip(candidates, pipe.execute() if candidates else []) if n]
    if not found:
        return
    st.unexplained_keys = [key for key, _ in found]
    whys = sorted({why for _, why in found})
    shown = ", ".join(st.unexplained_keys[:3]) + (", ..." if len(found) > 3 else "")
    st.warnings.append(f"{len(found)} key(s) the catalogue entry does not explain ({shown}): their jobs are not "
                       f"counted; check {' / '.join(whys)} in [queues.{q.name}]")


def _dead_audits(layout) -> list[tuple[str, Any]]:
    """``[(dead list key, id -> payload key or None, the payload key's Redis
    types)]`` per shard: the layout's
    :meth:`~jobctl.layouts.facts.LayoutFacts.dead_audits`."""
    return layout.dead_audits()


def _audit_dead(client, st: QueueStatus, audits: list[tuple[str, Any]]) -> None:
    dangling = duplicates = audited = expiring = 0
    min_ttl: int | None = None
    wrong: list[tuple[str, bytes, str]] = []  # (payload key, its type, the type it should have)
    per_list = max(50, DEAD_AUDIT_MAX // len(audits))  # the whole audit stays bounded, whatever the shards
    for dead_key, payload_key, types in audits:
        pipe = client.pipeline(transaction=False)
        pipe.lrange(dead_key, 0, per_list - 1)
        pipe.pttl(dead_key)
        try:
            entries, list_ttl = pipe.execute()
        except Exception as exc:  # noqa: BLE001 - WRONGTYPE is reported by the layout's status
            if "WRONGTYPE" in str(exc).upper():
                continue
            raise
        audited += len(entries)
        counts = Counter(entries)
        duplicates += sum(n - 1 for n in counts.values() if n > 1)
        if isinstance(list_ttl, int) and list_ttl >= 0:
            min_ttl = list_ttl if min_ttl is None else min(min_ttl, list_ttl)
            if list_ttl < DLQ_EXPIRY_WARN_MS:
                expiring += len(entries)
        if payload_key is None or not counts:
            continue
        ids = list(counts)
        pipe = client.pipeline(transaction=False)
        for raw in ids:
            pipe.pttl(payload_key(text(raw)).encode("utf-8", "surrogateescape"))  # the exact bytes
            pipe.type(payload_key(text(raw)).encode("utf-8", "surrogateescape"))
        replies = pipe.execute()
        for raw, ttl, redis_type in zip(ids, replies[::2], replies[1::2]):
            if ttl != -2 and redis_type not in types:
                wrong.append((payload_key(text(raw)), redis_type, "hash" if b"hash" in types else "string"))
            elif ttl == -2:
                dangling += counts[raw]
            elif ttl >= 0:
                min_ttl = ttl if min_ttl is None else min(min_ttl, ttl)
                if ttl < DLQ_EXPIRY_WARN_MS:
                    expiring += counts[raw]
    st.dead_audited, st.dead_dangling, st.dead_duplicates = audited, dangling, duplicates
    st.dead_expiring, st.dead_min_ttl_ms = expiring, min_ttl
    partial = "" if audited >= st.dead else f" (among the newest {audited:,} of {st.dead:,})"
    if wrong:
        st.warnings.append(f"{len(wrong):,} dead job(s) whose {wrong_type_note(*wrong[0])}"
                           f"{' (and others)' if len(wrong) > 1 else ''}{partial}; see `jobctl check`")
    if dangling or duplicates:
        st.warnings.append(f"dead counts list entries: {dangling:,} dangling id(s) without a payload and "
                           f"{duplicates:,} duplicate(s){partial}; see `jobctl check`")
    if expiring:
        st.warnings.append(f"DLQ payloads about to expire: {expiring:,} dead job(s) expire within "
                           f"{format_duration(DLQ_EXPIRY_WARN_MS)} (soonest in {format_duration(min_ttl or 0)})"
                           f"{partial}; export the DLQ now (runbook dlq-spike, step export-now)")
