"""Discovery of json-list queues (seed 002): the recognizer
:mod:`jobctl.discovery` calls."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.keys import JSON_LIST_SUFFIX_TYPES, JsonListKeys
from jobctl.layouts.common import json_object

__all__ = ["recognize"]

_SUFFIX_TYPES = JSON_LIST_SUFFIX_TYPES


def recognize(keys: dict[str, bytes], *, client=None, rejected: list[str] | None = None
              ) -> list[tuple[QueueConfig, list[str]]]:
    """json-list queues among ``keys`` (key name -> TYPE reply).

    A prefix counts as a queue only when at least one of its
    ``<prefix>:pending|processing|dead`` keys is a list *and* one of its
    bookkeeping keys has the seed's type: ``<prefix>:processing:times`` a
    zset, ``<prefix>:attempts`` or ``<prefix>:errors`` a hash.  With a
    ``client``, one element of one of its lists (``LINDEX -1``) must also be a
    JSON object with an ``id``.  Keys named like one of those but of another
    type go to ``rejected``.  Evidence: those keys plus jobctl's own
    ``<prefix>:jobctl:*`` keys.

    Real queues (issue 12, item 4): with workers down only ``<prefix>:pending``
    may exist (the backlog that matters most): with a ``client``, lists
    without bookkeeping keys count when their sampled element is a job;
    a drained queue keeps only bookkeeping keys: two of them, or one with
    jobctl's own keys, count.
    """
    found: dict[str, dict[str, str]] = {}
    for key, typ in keys.items():
        for suffix in (":processing:times", ":pending", ":processing", ":dead", ":attempts", ":errors"):
            if key.endswith(suffix) and len(key) > len(suffix):
                if typ == _SUFFIX_TYPES[suffix]:
                    found.setdefault(key[:-len(suffix)], {})[suffix] = key
                elif rejected is not None:
                    rejected.append(key)
                break
    out = []
    for prefix in sorted(found):
        parts = found[prefix]
        lists = [parts[s] for s in (":pending", ":processing", ":dead") if s in parts]
        books = sum(s in parts for s in (":processing:times", ":attempts", ":errors"))
        own = JsonListKeys(prefix)
        ours = any(key in keys for key in (own.suppressed, own.journal))
        if not lists:  # drained
            if books >= 2 or (books and ours):
                out.append((QueueConfig(name=prefix, layout="json-list", tag=prefix, discovered=True),
                            sorted(parts.values()) + [k for k in (own.suppressed, own.journal) if k in keys]))
            continue
        if not books and (client is None or not _looks_like_a_job(client.lindex(lists[0], -1))):
            continue  # a bare list of something else: not evidence, not rejected
        if client is not None and not _looks_like_a_job(client.lindex(lists[0], -1)):
            if rejected is not None:
                rejected.append(lists[0])
            continue
        own = JsonListKeys(prefix)
        jobctl = [key for key in (own.suppressed, own.suppressed_raw, own.suppressed_info, own.journal)
                  if key in keys]
        out.append((QueueConfig(name=prefix, layout="json-list", tag=prefix, discovered=True),
                    sorted(parts.values()) + jobctl))
    return out


def _looks_like_a_job(raw: bytes | None) -> bool:
    """A JSON object with an ``id`` (seed 002's job strings)."""
    doc = None if raw is None else json_object(raw)
    return doc is not None and doc.get("id") not in (None, "")
