"""Discovery of reliable-list queues (layouts.md section 1; seed 000
sections 5, 18 and 20): the recognizer :mod:`jobctl.discovery` calls last
(the layout declares ``recognize_last``: its name pattern is broad)."""

from __future__ import annotations

from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import RELIABLE_LIST_KEY_RE, RELIABLE_LIST_SUFFIX_TYPES, split_shard_tag
from jobctl.keys import RELIABLE_LIST_PRIORITY_SUFFIX_RE as priority_re

__all__ = ["recognize"]

#: Reliable-list state-key suffixes and the Redis type each must have.
_EXPECTED_TYPE = RELIABLE_LIST_SUFFIX_TYPES


def _looks_like_id(value: bytes | None) -> bool:
    """A job id: 1-256 bytes of visible ASCII/UTF-8, no whitespace, not a
    JSON document or quoted string."""
    if not value or len(value) > 256 or value[:1] in (b"{", b"[", b'"'):
        return False
    return not any(c <= 0x20 or c == 0x7F for c in value)


def recognize(keys: dict[str, bytes], client=None,
              rejected: list[str] | None = None) -> list[tuple[Any, list[str]]]:
    """Reliable-list queues among ``keys`` (key name -> TYPE reply).

    A tag counts as a queue when at least one ``queue:{tag}:<state>`` key
    has the name *and* the Redis type of a reliable-list state key
    (layouts.md section 1); names that match with the wrong type go to
    ``rejected``.  With a ``client``, one member of one state key per tag
    (one pipelined round trip for all tags) must look like a job id, not
    free text or JSON; a tag that fails goes to ``rejected`` too.  Tags
    ``<name>:NN`` group into one sharded queue (seed 000 section 20) when
    no plain ``<name>`` tag exists; ``ready:pN`` lists give the priority
    count (section 18).  A drained queue whose state keys are
    all gone (empty lists do not exist) is still found by jobctl's own
    journal stream ``queue:{tag}:jobctl:journal``.
    """
    tags: dict[str, dict[str, str]] = {}  # tag -> suffix -> key
    journals: dict[str, str] = {}  # tag -> jobctl's journal stream (a drained queue may keep only it)
    for key, typ in keys.items():
        m = RELIABLE_LIST_KEY_RE.match(key)
        if not m:
            continue
        tag, suffix = m.group(1), m.group(2)
        if suffix == "jobctl:journal" and typ == b"stream":
            journals[tag] = key
            continue
        expected = _EXPECTED_TYPE.get(suffix) or (b"list" if priority_re.match(suffix) else None)
        if expected is None:
            continue
        if typ == expected:
            tags.setdefault(tag, {})[suffix] = key
        elif rejected is not None:
            rejected.append(key)

    if client is not None and tags:
        pipe = client.pipeline(transaction=False)
        order = sorted(tags)
        for tag in order:
            suffix, key = sorted(tags[tag].items())[0]
            if keys[key] == b"list":
                pipe.lindex(key, 0)
            else:
                pipe.zrange(key, 0, 0)
        for tag, sample in zip(order, pipe.execute(raise_on_error=False)):
            if isinstance(sample, list):
                sample = sample[0] if sample else None
            if isinstance(sample, Exception) or (sample is not None and not _looks_like_id(sample)):
                if rejected is not None:
                    rejected.extend(sorted(tags[tag].values()))
                del tags[tag]
    for tag, key in journals.items():  # drained: nothing but jobctl's journal of it is left
        if tag not in tags:
            tags[tag] = {"jobctl:journal": key}
        else:
            tags[tag]["jobctl:journal"] = key

    def entry(name: str, shards: int | None, suffixes: dict[str, str]) -> Any:
        prios = [int(p.group(1)) for s in suffixes if (p := priority_re.match(s))]
        return QueueConfig(name=name, layout="reliable-list", tag=name, shards=shards,
                           priorities=(max(prios) + 1) if prios else None, discovered=True)

    groups: dict[str, dict[str, dict[str, str]]] = {}
    for tag, suffixes in tags.items():
        shard = split_shard_tag(tag)
        groups.setdefault(shard[0] if shard else tag, {})[tag] = suffixes
    out = []
    for base, members in sorted(groups.items()):
        nums = [split_shard_tag(t) for t in members]
        if base in members or not all(n is not None for n in nums):
            for tag, suffixes in sorted(members.items()):  # mixed: every tag is its own queue
                out.append((entry(tag, None, suffixes), sorted(suffixes.values())))
            continue
        merged: dict[str, str] = {}
        for suffixes in members.values():
            merged.update(suffixes)
        out.append((entry(base, max(n[1] for n in nums if n) + 1, merged),
                    sorted(k for s in members.values() for k in s.values())))
    return out
