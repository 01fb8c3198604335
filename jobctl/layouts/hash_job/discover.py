"""Discovery of hash-job queues (:func:`recognize`)."""

from __future__ import annotations

from jobctl.config import QueueConfig
from jobctl.keys import HASH_JOB_KEY_RE, HASH_JOB_LIST_SUFFIXES, HashJobKeys

__all__ = ["recognize"]

_LIST_SUFFIXES = HASH_JOB_LIST_SUFFIXES


def recognize(keys: dict[str, bytes], *, client=None, rejected: list[str] | None = None
              ) -> list[tuple[QueueConfig, list[str]]]:
    """hash-job queues among ``keys`` (key name -> TYPE reply).

    A name counts as a queue only with both kinds of evidence: at least one
    of its ``queue:<name>:pending|processing|completed|failed`` keys is a
    list, and at least one ``queue:<name>:job:<id>`` key is a hash.  With a
    ``client``, one of those hashes must also carry a seed-001 ``status``
    (pending, processing, completed or failed).  Keys named like one of those
    but of another type go to ``rejected``.

    Real queues lose one kind of evidence (issue 12, item 4): the seed's
    workers put a TTL on job hashes, so a queue whose hashes all expired
    has only its lists left; a drained queue has no lists, only hashes.
    With a ``client`` these count too: lists only when a ``completed`` or
    ``failed`` list is among them (no other layout has one) and a sampled
    element is a plain id (not a JSON document), hashes only when a sampled
    hash carries the seed's ``status``.  Evidence: every such key of the
    right type, plus jobctl's own ``queue:<name>:jobctl:*`` keys.
    """
    lists: dict[str, list[str]] = {}
    hashes: dict[str, list[str]] = {}
    odd: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = HASH_JOB_KEY_RE.match(key)
        if not m:
            continue
        name, suffix = m.group(1), m.group(2)
        if suffix in _LIST_SUFFIXES:
            (lists if typ == b"list" else odd).setdefault(name, []).append(key)
        else:
            (hashes if typ == b"hash" else odd).setdefault(name, []).append(key)
    out = []
    names = set(lists) & set(hashes)
    if client is not None:
        names |= {n for n in set(lists) - set(hashes)  # hashes expired: completed/failed lists of plain ids
                  if any(k.endswith((":completed", ":failed")) for k in lists[n])
                  and _plain_id(client.lindex(min(lists[n]), 0))}
        names |= set(hashes) - set(lists)
    for name in sorted(names):
        if client is not None and name in hashes:
            status = client.hget(min(hashes[name]), "status")
            if status not in (b"pending", b"processing", b"completed", b"failed"):
                continue
        if rejected is not None:
            rejected.extend(sorted(odd.get(name, [])))
        own = HashJobKeys(name)
        jobctl = [key for key in (own.suppressed, own.suppressed_info, own.journal, own.hold) if key in keys]
        evidence = sorted(lists.get(name, [])) + sorted(hashes.get(name, [])) + jobctl
        out.append((QueueConfig(name=name, layout="hash-job", tag=name, discovered=True), evidence))
    return out


def _plain_id(raw: bytes | None) -> bool:
    """A list element that looks like a job id: short, one line, not JSON."""
    return raw is not None and 0 < len(raw) <= 512 and not raw.lstrip().startswith((b"{", b"[", b'"')) \
        and b"\n" not in raw
