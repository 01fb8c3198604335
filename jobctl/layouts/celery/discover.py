"""Discovery of Celery queues on kombu's Redis transport (:func:`recognize`)."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.layouts.celery.keys import BINDING_PREFIX, SEP, CeleryKeys
from jobctl.layouts.celery.message import loads
from jobctl.layouts.common import text

__all__ = ["recognize"]

#: Exchanges of Celery's control and event machinery (fanout, pub/sub): not task queues.
_MACHINERY = ("celeryev", "celery.pidbox", "reply.celery.pidbox")


def _bound_queues(client, keys: dict[str, bytes]) -> dict[str, list[str]]:
    """``{queue: [binding keys naming it]}`` from kombu's binding sets."""
    out: dict[str, list[str]] = {}
    for key, typ in sorted(keys.items()):
        if typ != b"set" or not key.startswith(BINDING_PREFIX) or key[len(BINDING_PREFIX):] in _MACHINERY:
            continue
        for member in client.smembers(key):
            parts = text(member).split(SEP)
            if len(parts) == 3 and parts[2]:
                out.setdefault(parts[2], []).append(key)
    return out


def _is_message(raw) -> bool:
    """Whether ``raw`` looks like a Celery message in kombu's envelope."""
    doc = loads(raw)
    return (isinstance(doc, dict) and isinstance(doc.get("headers"), dict) and "task" in doc["headers"]
            and isinstance(doc.get("properties"), dict) and "body" in doc)


def _unbound_queues(client, keys: dict[str, bytes], bound) -> dict[str, list[str]]:
    """``{queue: [its lists]}`` of lists whose oldest element is a Celery
    message, for queues no binding names (kombu declares a binding once per
    process: a flushed or restored server may lack it)."""
    names = sorted(k for k, t in keys.items() if t == b"list" and not k.startswith("jobctl:")
                   and k.split(SEP)[0] not in bound)
    pipe = client.pipeline(transaction=False)
    for key in names:
        pipe.lindex(key, -1)
    out: dict[str, list[str]] = {}
    for key, raw in zip(names, pipe.execute(raise_on_error=False)):
        if isinstance(raw, bytes) and _is_message(raw):
            out.setdefault(key.split(SEP)[0], []).append(key)
    return out


def recognize(keys: dict[str, bytes], *, client=None, rejected: list[str] | None = None
              ) -> list[tuple[QueueConfig, list[str]]]:
    """Celery queues among ``keys`` (key name -> TYPE reply).

    A queue counts when a ``_kombu.binding.<exchange>`` set binds it, or
    when one of its lists' oldest element is a Celery message (read with
    ``client``; without one nothing is recognised).  Evidence: the
    binding sets, the queue's ready lists that exist, kombu's ``unacked``
    hash and index when present, and jobctl's journal of it.  A ready list
    name holding another type goes to ``rejected``."""
    if client is None:
        return []
    out = []
    queues = _bound_queues(client, keys)
    queues.update(_unbound_queues(client, keys, queues))
    for name, bindings in sorted(queues.items()):
        own = CeleryKeys(name)
        evidence = sorted(set(bindings))
        for _, key in own.ready_lists():
            typ = keys.get(key)
            if typ == b"list" and key not in evidence:
                evidence.append(key)
            elif typ is not None and rejected is not None:
                rejected.append(key)
        evidence += [k for k, t in ((own.unacked, b"hash"), (own.unacked_index, b"zset"), (own.journal, b"stream"))
                     if keys.get(k) == t]
        out.append((QueueConfig(name=name, layout="celery", tag=name, discovered=True), evidence))
    return out
