"""Records of a Celery queue's ready messages and of its unacked
(in-flight) ones, read from kombu's keys directly (never through kombu,
whose reads restore and clean up).

The ``unacked`` store is global: an entry belongs to this queue when its
exchange and routing key route to it (:class:`Router`: the anonymous
exchange routes to the queue named by the routing key, any other exchange
by its ``_kombu.binding.<exchange>`` members, matched as a direct
exchange, Celery's default).  An entry's deadline is its delivery time
(the index score) plus the visibility timeout: past it, kombu's own
``restore_visible`` would put it back (it is overdue, "stuck").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from jobctl.layouts.celery.keys import SEP
from jobctl.layouts.celery.message import envelope_of, loads, priority_step, unacked_parts
from jobctl.layouts.common import score_ms, text
from jobctl.layouts.walks import list_window, walk_list, walk_zset
from jobctl.model import JobRecord, State

__all__ = ["Router", "ready_record", "unacked_records", "walk_ready", "walk_unacked", "first_ready"]


class Router:
    """Queue names of an (exchange, routing key), kombu's bindings read once per exchange."""

    def __init__(self, client, keys) -> None:
        self.client, self.keys = client, keys
        self._tables: dict[str, list[tuple[str, str]]] = {}

    def queues(self, exchange: str, routing_key: str) -> list[str]:
        """The queues ``routing_key`` reaches through ``exchange`` (sorted)."""
        if not exchange:
            return [routing_key] if routing_key else []
        if exchange not in self._tables:
            members = self.client.smembers(self.keys.binding(exchange))
            parts = [text(m).split(SEP) for m in members]
            self._tables[exchange] = [(p[0], p[-1]) for p in parts if len(p) == 3]
        return sorted({q for rk, q in self._tables[exchange] if rk == routing_key})


def ready_record(layout, raw: bytes, position: int, step: int, key: str) -> JobRecord:
    """The record of one ready message (``position`` from the list's right, oldest, end)."""
    message = loads(raw)
    env = envelope_of(message)
    job_id = env.job_id or f"?{hashlib.sha1(raw).hexdigest()[:12]}"
    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=job_id, state=State.READY,
                    envelope=env, raw=raw, position=position)
    rec.meta.update(list=key, priority=step, sha1=hashlib.sha1(raw).hexdigest())
    _message_meta(rec, message)
    return rec


def _message_meta(rec: JobRecord, message) -> None:
    if not isinstance(message, dict):
        return
    props = message.get("properties") if isinstance(message.get("properties"), dict) else {}
    rec.meta["delivery_tag"] = props.get("delivery_tag")
    rec.meta["content_type"] = message.get("content-type")
    info = props.get("delivery_info") if isinstance(props.get("delivery_info"), dict) else {}
    if info.get("redelivered") or (message.get("headers") or {}).get("redelivered"):
        rec.meta["redelivered"] = True


def walk_ready(layout, batch: int, sample=None) -> Iterator[list[JobRecord]]:
    """Every ready list in the order kombu serves them, oldest first, in windows."""
    for step, key in layout.keys.ready_lists():
        for start, chunk in walk_list(layout.client, key, from_right=True, batch=batch, sample=sample):
            yield [ready_record(layout, raw, start + n, step, key) for n, raw in enumerate(chunk)]


def first_ready(layout, limit: int) -> list[JobRecord]:
    """Up to ``limit`` ready messages, the next served first."""
    out: list[JobRecord] = []
    for step, key in layout.keys.ready_lists():
        if len(out) >= limit:
            break
        chunk = list_window(layout.client, key, 0, limit - len(out), from_right=True)
        out += [ready_record(layout, raw, n, step, key) for n, raw in enumerate(chunk)]
    return out


def _unacked_record(layout, tag: str, score: float, stored: bytes | None, router: Router) -> JobRecord | None:
    """The record of one unacked entry of this queue; ``None`` for another queue's."""
    parts = unacked_parts(stored) if stored is not None else None
    if parts is None or layout.keys.name not in router.queues(parts.exchange, parts.routing_key):
        return None
    start, end = parts.span
    env = envelope_of(parts.message)
    delivered = score_ms(float(score) * 1000)
    rec = JobRecord(queue=layout.queue_name, layout=layout.name, shard="", job_id=env.job_id or tag,
                    state=State.PROCESSING, envelope=env, raw=stored[start:end], score=delivered,
                    deadline_ms=delivered + layout.visibility_ms)
    step = priority_step(parts.message)
    rec.meta.update(delivery_tag=tag, unacked_index_score=repr(float(score)), delivered_at_ms=delivered,
                    unacked_sha1=hashlib.sha1(stored).hexdigest(), span=[start, end],
                    exchange=parts.exchange, routing_key=parts.routing_key, priority=step,
                    list=layout.keys.priority_list(step))
    _message_meta(rec, parts.message)
    if env.not_before_ms is not None and env.not_before_ms > rec.deadline_ms:
        rec.meta["eta_beyond_visibility"] = True
    return rec


def unacked_records(layout, pairs: list, router: Router) -> list[JobRecord]:
    """Records of this queue among ``pairs`` ((tag, index score) of ``unacked_index``): one ``HMGET``."""
    if not pairs:
        return []
    tags = [text(m) for m, _ in pairs]
    values = layout.client.hmget(layout.keys.unacked, tags)
    out = []
    for tag, (_, score), stored in zip(tags, pairs, values):
        rec = _unacked_record(layout, tag, score, stored, router)
        if rec is not None:
            out.append(rec)
    return out


def walk_unacked(layout, batch: int, sample=None) -> Iterator[list[JobRecord]]:
    """This queue's unacked messages, earliest delivery (deadline) first, in windows of the index."""
    router = Router(layout.client, layout.keys)
    for _, pairs in walk_zset(layout.client, layout.keys.unacked_index, batch=batch, sample=sample):
        yield unacked_records(layout, pairs, router)

