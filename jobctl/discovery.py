"""Find reliable-list queues in a keyspace with no catalogue.

A bounded ``SCAN MATCH queue:{*}:* COUNT n`` (never ``KEYS``), then a
pipelined ``TYPE`` per candidate: a tag counts as a queue only when at least
one of its keys has the name *and* the Redis type of a reliable-list state key
(layouts.md section 1).  Tags of the form ``<name>:NN`` group into one sharded
logical queue (seed 000 section 20); ``ready:pN`` lists give the priority
count (section 18).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .config import QueueConfig
from .keys import RELIABLE_LIST_KEY_RE, RELIABLE_LIST_SCAN_PATTERN, split_shard_tag

__all__ = ["Discovery", "discover_reliable_lists", "DEFAULT_SCAN_LIMIT"]

#: At most this many keys are examined by one discovery.
DEFAULT_SCAN_LIMIT = 200_000

_EXPECTED_TYPE = {
    "ready": b"list",
    "processing": b"list",
    "processing:deadline": b"zset",
    "scheduled": b"zset",
    "dead": b"list",
    "jobctl:suppressed": b"zset",
}
_PRIORITY_RE = re.compile(r"^ready:p(\d+)$")


@dataclass
class Discovery:
    """What a discovery found.

    ``queues`` are catalogue entries marked ``discovered=True``; ``evidence``
    maps queue name to the state keys seen; ``scanned`` counts keys examined;
    ``complete`` is False when the scan stopped at its bound; ``rejected``
    lists keys whose name matched but whose type did not.
    """

    queues: list[QueueConfig] = field(default_factory=list)
    evidence: dict[str, list[str]] = field(default_factory=dict)
    scanned: int = 0
    complete: bool = True
    rejected: list[str] = field(default_factory=list)


def discover_reliable_lists(client, *, limit: int = DEFAULT_SCAN_LIMIT, count: int = 1000) -> Discovery:
    """Scan for reliable-list queues; at most ``limit`` keys are examined.

    Cost: ``ceil(keys/count)`` SCAN calls plus one pipelined TYPE batch per
    SCAN page.  Raises redis-py errors unchanged.
    """
    out = Discovery()
    tags: dict[str, dict[str, str]] = {}  # tag -> suffix -> key
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor=cursor, match=RELIABLE_LIST_SCAN_PATTERN, count=count)
        candidates = []
        for raw in keys:
            key = raw.decode("utf-8", "replace")
            m = RELIABLE_LIST_KEY_RE.match(key)
            if not m:
                continue
            tag, suffix = m.group(1), m.group(2)
            expected = _EXPECTED_TYPE.get(suffix)
            if expected is None and _PRIORITY_RE.match(suffix):
                expected = b"list"
            if expected is None:
                continue
            candidates.append((raw, key, tag, suffix, expected))
        if candidates:
            pipe = client.pipeline(transaction=False)
            for raw, *_ in candidates:
                pipe.type(raw)
            for (raw, key, tag, suffix, expected), typ in zip(candidates, pipe.execute()):
                if typ == expected:
                    tags.setdefault(tag, {})[suffix] = key
                else:
                    out.rejected.append(key)
        out.scanned += len(keys)
        if cursor == 0:
            break
        if out.scanned >= limit:
            out.complete = False
            break

    groups: dict[str, dict[str, dict[str, str]]] = {}
    for tag, suffixes in tags.items():
        shard = split_shard_tag(tag)
        base = shard[0] if shard else tag
        groups.setdefault(base, {})[tag] = suffixes
    for base, members in sorted(groups.items()):
        shard_nums = [split_shard_tag(t) for t in members]
        sharded = all(s is not None for s in shard_nums) and base not in members
        if not sharded:
            # Mixed: treat every tag as its own queue.
            for tag, suffixes in sorted(members.items()):
                out.queues.append(_entry(tag, tag, None, suffixes))
                out.evidence[tag] = sorted(suffixes.values())
            continue
        nshards = max(s[1] for s in shard_nums if s) + 1
        all_suffixes: dict[str, str] = {}
        for tag, suffixes in members.items():
            all_suffixes.update(suffixes)
        out.queues.append(_entry(base, base, nshards, all_suffixes))
        out.evidence[base] = sorted(k for s in members.values() for k in s.values())
    return out


def _entry(name: str, tag: str, shards: int | None, suffixes: dict[str, str]) -> QueueConfig:
    prios = [int(m.group(1)) for s in suffixes if (m := _PRIORITY_RE.match(s))]
    return QueueConfig(name=name, layout="reliable-list", tag=tag, shards=shards,
                       priorities=(max(prios) + 1) if prios else None, discovered=True)
