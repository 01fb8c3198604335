"""The delayed-events envelope (seed 003) as the read model sees it
(:func:`event_envelope`), and the type lists workers take dispatched
events from (:class:`TypeLists`, a mixin of
:class:`~jobctl.layouts.delayed_events.layout.DelayedEvents`)."""

from __future__ import annotations

import orjson

from jobctl.keys import delayed_event_member, split_delayed_event_member
from jobctl.model import Envelope
from jobctl.layouts.common import json_object, lenient_envelope, text, wrongtype_errors

__all__ = ["event_envelope", "member_of", "TypeLists", "READY_BOUND", "TYPE_SAMPLE"]

#: At most this many type-list entries are read to find dispatched members.
READY_BOUND = 10_000
#: Members sampled to find the type lists when the config names none.
TYPE_SAMPLE = 1000


def event_envelope(raw: bytes | None, member: str | None = None) -> Envelope:
    """The read-model envelope of a stored event envelope (seed 003).

    ``type`` -> job type, ``attempt`` -> attempt, ``payload`` -> payload,
    the member (or ``type###payload.id``) -> job id; ``logContext`` stays in
    ``extra``.  ``document`` is the stored JSON as is.  Never raises.
    """
    if raw is None:
        return lenient_envelope(None)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return lenient_envelope(raw)
    if not isinstance(doc, dict):
        return lenient_envelope(raw)
    payload = doc.get("payload")
    job_id = member
    if job_id is None and isinstance(doc.get("type"), str) and isinstance(payload, dict) and "id" in payload:
        job_id = delayed_event_member(doc["type"], str(payload["id"]))
    model = {"jobId": job_id, "jobType": doc.get("type"), "attempt": doc.get("attempt"), "payload": payload}
    model.update({k: v for k, v in doc.items() if k not in ("type", "attempt", "payload")})
    env = lenient_envelope(model, required=("jobType",))
    if not isinstance(doc.get("attempt"), int):
        env.problems.append("field attempt is not an integer")
    env.document = doc
    return env


def member_of(raw: bytes) -> str | None:
    """``<type>###<payload.id>`` of a dispatched envelope; ``None`` if malformed."""
    doc = json_object(raw)
    if doc is None:
        return None
    payload = doc.get("payload")
    if not isinstance(doc.get("type"), str) or not isinstance(payload, dict) or "id" not in payload:
        return None
    return delayed_event_member(doc["type"], str(payload["id"]))


class TypeLists:
    """The type lists of a delayed-events service (the layout provides
    ``client``, ``keys`` and ``_event_lists``, the configured lists or ``None``)."""

    def event_lists(self) -> list[str]:
        """The type lists: from the config, else the lists of the event classes
        met among the first :data:`TYPE_SAMPLE` members of the zset and of the
        suppressed zset, that exist as lists."""
        if self._event_lists is not None:
            return self._event_lists
        classes = set()
        keys = [self.keys.zset, self.keys.suppressed]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.zrange(key, 0, TYPE_SAMPLE - 1)
        samples = pipe.execute(raise_on_error=False)
        wrongtype_errors(samples, keys)  # raises any other error; status reports a wrong type itself
        for m in (m for sample in samples if isinstance(sample, list) for m in sample):
            parts = split_delayed_event_member(text(m))
            if parts:
                classes.add(parts[0])
        names = sorted({self.keys.type_list(c) for c in classes})
        if not names:
            self._event_lists = []
            return []
        pipe = self.client.pipeline(transaction=False)
        for n in names:
            pipe.type(n)
        self._event_lists = [n for n, t in zip(names, pipe.execute()) if t == b"list"]
        return self._event_lists

    def dispatched(self) -> tuple[set[str], bool]:
        """Members with a copy on a type list, and whether every list was
        read (one pipelined ``LRANGE`` per list, :data:`READY_BOUND` entries
        each at most)."""
        lists = self.event_lists()
        if not lists:
            return set(), True
        pipe = self.client.pipeline(transaction=False)
        for key in lists:
            pipe.lrange(key, -READY_BOUND, -1)
        found: set[str] = set()
        complete = True
        for raws in pipe.execute():
            complete = complete and len(raws) < READY_BOUND
            for raw in raws:
                member = member_of(raw)
                if member is not None:
                    found.add(member)
        return found, complete
