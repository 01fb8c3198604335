"""Every Redis key name jobctl reads or writes, in one place.

The queues belong to other teams' producers and workers; their key names come
from ``../shared/design/layouts.md`` (reliable-list: seed 000 sections 7-9, 18
and 20).  jobctl adds a few keys of its own (suppressed set, audit journal);
they carry the queue's hash tag too, so that every key of one queue lives in
one Redis Cluster slot and one Lua script may touch them all.

Nothing else in the package formats a key name: layouts, scripts, fixtures and
tests all ask this package (one module per layout family,
:mod:`.common` for what they share); every name is importable from here.
"""

from __future__ import annotations

from .common import (JOURNAL_STREAM_MAXLEN, JobctlKeys, SuppressionKeys, WindowKeys, glob_escape, shard_tags,
                     split_shard_tag, utc_day)
from .delayed import (DELAYED_EVENTS_SEPARATOR, DELAYED_EVENTS_ZSET, REDISSON_DELAY_KEY_RE, DelayedEventsKeys,
                      DelayZsetKeys, RedissonDelayedKeys, delayed_event_member, simple_class_name,
                      split_delayed_event_member)
from .hash_job import HASH_JOB_KEY_RE, HASH_JOB_LIST_SUFFIXES, HashJobKeys
from .json_list import JSON_LIST_DEFAULT_PREFIX, JSON_LIST_SUFFIX_TYPES, JsonListKeys
from .reliable_list import (OWNER_SUFFIX, RELIABLE_LIST_KEY_RE, RELIABLE_LIST_PRIORITY_SUFFIX_RE,
                            RELIABLE_LIST_SCAN_PATTERN, RELIABLE_LIST_SUFFIX_TYPES, ReliableListKeys)
from .stream_group import STREAM_GROUP_KEY_RE, StreamGroupKeys

__all__ = [
    "ReliableListKeys", "shard_tags", "split_shard_tag", "RELIABLE_LIST_SCAN_PATTERN", "RELIABLE_LIST_KEY_RE",
    "JOURNAL_STREAM_MAXLEN", "OWNER_SUFFIX", "RELIABLE_LIST_SUFFIX_TYPES", "RELIABLE_LIST_PRIORITY_SUFFIX_RE",
    "utc_day", "JobctlKeys", "SuppressionKeys", "WindowKeys",
    "STREAM_GROUP_KEY_RE", "StreamGroupKeys", "DELAYED_EVENTS_SEPARATOR", "DELAYED_EVENTS_ZSET",
    "DelayedEventsKeys", "simple_class_name", "delayed_event_member", "split_delayed_event_member",
    "DelayZsetKeys", "REDISSON_DELAY_KEY_RE", "RedissonDelayedKeys",
    "glob_escape", "HASH_JOB_KEY_RE", "HASH_JOB_LIST_SUFFIXES", "HashJobKeys", "JSON_LIST_DEFAULT_PREFIX",
    "JSON_LIST_SUFFIX_TYPES", "JsonListKeys",
]
