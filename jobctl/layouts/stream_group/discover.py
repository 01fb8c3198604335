"""Discovery of stream-group queues (layouts.md section 2; seed 000
sections 11-13): the recognizer :mod:`jobctl.discovery` calls."""

from __future__ import annotations

from typing import Any

from jobctl.config import QueueConfig
from jobctl.keys import STREAM_GROUP_KEY_RE, ReliableListKeys, StreamGroupKeys, split_shard_tag
from jobctl.layouts.common import text
from jobctl.layouts.stream_group.layout import DEFAULT_GROUP

__all__ = ["recognize"]


def recognize(keys: dict[str, bytes], client=None) -> list[tuple[Any, list[str]]]:
    """Stream-group queues in a scanned keyspace (:mod:`jobctl.discovery`).

    Evidence: ``stream:{tag}:jobs`` of type stream; with a client, it must
    also have a consumer group (its first group's name goes to the config
    when it is not ``workers``).  The tag's ``queue:{tag}:scheduled`` (zset),
    ``queue:{tag}:dead`` (list), ``stream:{tag}:dead`` (stream) and jobctl's
    ``queue:{tag}:jobctl:*`` keys are claimed with it, unless the tag also
    has reliable-list ready/processing lists.  Shard tags ``<name>:NN``
    group into one queue.
    """
    tags: dict[str, list[str]] = {}
    for key, typ in keys.items():
        m = STREAM_GROUP_KEY_RE.match(key)
        if m and typ == b"stream":
            tags[m.group(1)] = [key]
    groups: dict[str, Any] = {}
    if client is not None and tags:
        pipe = client.pipeline(transaction=False)
        order = sorted(tags)
        for tag in order:
            pipe.xinfo_groups(StreamGroupKeys(tag).stream)
        groups = dict(zip(order, pipe.execute(raise_on_error=False)))
    found: dict[str, dict[str, Any]] = {}
    for tag, evidence in sorted(tags.items()):
        k = StreamGroupKeys(tag)
        group = DEFAULT_GROUP
        if client is not None:
            infos = groups.get(tag)
            if isinstance(infos, Exception) or not infos:
                continue  # no consumer group: nobody works this stream
            names = [text(g.get("name", b"")) for g in infos]
            group = DEFAULT_GROUP if DEFAULT_GROUP in names else names[0]
        rk = ReliableListKeys(tag)
        rl_lists = any(keys.get(x) == b"list" for x in (rk.ready, rk.processing)) or \
            any(key.startswith(rk.ready_priority_pattern[:-1]) for key in keys)
        dead_kind = "stream" if keys.get(k.dead_stream) == b"stream" else "list"
        if keys.get(k.dead_stream) == b"stream":
            evidence.append(k.dead_stream)
        if not rl_lists:
            for key, want in ((k.scheduled, b"zset"), (k.dead, b"list"), (k.suppressed, b"zset"),
                              (k.suppressed_info, b"hash"), (k.journal, b"stream")):
                if keys.get(key) == want:
                    evidence.append(key)
        shard = split_shard_tag(tag)
        base = shard[0] if shard else tag
        entry = found.setdefault(base, {"tags": {}, "group": group, "dead": dead_kind})
        entry["tags"][tag] = evidence
    out = []
    for base, entry in sorted(found.items()):
        members = entry["tags"]
        nums = [split_shard_tag(t) for t in members]
        sharded = base not in members and all(n is not None for n in nums)
        opts: dict[str, Any] = {}
        if entry["group"] != DEFAULT_GROUP:
            opts["group"] = entry["group"]
        if entry["dead"] != "list":
            opts["dead"] = entry["dead"]
        if sharded:
            nshards = max(n[1] for n in nums if n) + 1
            out.append((QueueConfig(name=base, layout="stream-group", tag=base, shards=nshards, options=opts,
                                    discovered=True), sorted(k for ev in members.values() for k in ev)))
        else:
            for tag, ev in sorted(members.items()):
                out.append((QueueConfig(name=tag, layout="stream-group", tag=tag, options=dict(opts),
                                        discovered=True), sorted(ev)))
    return out
