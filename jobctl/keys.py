"""Every Redis key name jobctl reads or writes, in one place.

The queues belong to other teams' producers and workers; their key names come
from ``../shared/design/layouts.md`` (reliable-list: seed 000 sections 7-9, 18
and 20).  jobctl adds a few keys of its own (suppressed set, audit journal);
they carry the queue's hash tag too, so that every key of one queue lives in
one Redis Cluster slot and one Lua script may touch them all.

Nothing else in the package formats a key name: layouts, scripts, fixtures and
tests all ask this module.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

__all__ = [
    "ReliableListKeys",
    "shard_tags",
    "split_shard_tag",
    "RELIABLE_LIST_SCAN_PATTERN",
    "RELIABLE_LIST_KEY_RE",
    "JOURNAL_STREAM_MAXLEN",
    "OWNER_SUFFIX",
    "RELIABLE_LIST_SUFFIX_TYPES",
    "RELIABLE_LIST_PRIORITY_SUFFIX_RE",
    "utc_day",
]

#: SCAN MATCH pattern that finds the keys of every reliable-list queue.
RELIABLE_LIST_SCAN_PATTERN = "queue:{*}:*"

#: Parses ``queue:{tag}:<suffix>``; group 1 is the tag, group 2 the suffix.
RELIABLE_LIST_KEY_RE = re.compile(r"^queue:\{([^{}]+)\}:(.+)$")
#: Suffix of a reliable-list key (after ``queue:{tag}:``) -> the Redis type it
#: must have (discovery recognises a shard by them; layouts.md section 1).
RELIABLE_LIST_SUFFIX_TYPES: dict[str, bytes] = {
    "ready": b"list",
    "processing": b"list",
    "processing:deadline": b"zset",
    "scheduled": b"zset",
    "dead": b"list",
    "jobctl:suppressed": b"zset",
    "jobctl:paused": b"list",  # a queue whose every job is paused is still a queue
    "jobctl:migrating": b"list",
}
#: Suffix of a priority ready list (``ready:p<N>``, a list; seed 000 s.18).
RELIABLE_LIST_PRIORITY_SUFFIX_RE = re.compile(r"^ready:p(\d+)$")

#: Suffix of the owner-lease key ``job:{tag}:<id>:owner`` (seed 000 section 7);
#: such keys are not payloads.
OWNER_SUFFIX = ":owner"

#: Approximate cap (XADD MAXLEN ~) of the per-queue audit journal stream.
JOURNAL_STREAM_MAXLEN = 10_000

_SHARD_RE = re.compile(r"^(.+):(\d{2,})$")


def utc_day(epoch_ms: int) -> str:
    """The UTC day ``YYYY-MM-DD`` of ``epoch_ms``: the last part of a
    day-keyed jobctl key (:meth:`_WindowKeys.redriven`)."""
    return time.strftime("%Y-%m-%d", time.gmtime(epoch_ms // 1000))


def shard_tags(tag: str, shards: int | None) -> list[str]:
    """The hash tags of one logical queue.

    ``shards=None`` (or 0) means unsharded: ``[tag]``.  Otherwise tags are
    ``<tag>:00`` .. ``<tag>:<shards-1>``, zero-padded to at least two digits
    (seed 000 section 20: ``{email:00}`` .. ``{email:63}``).
    """
    if not shards:
        return [tag]
    width = max(2, len(str(shards - 1)))
    return [f"{tag}:{i:0{width}d}" for i in range(shards)]


def split_shard_tag(tag: str) -> tuple[str, int] | None:
    """``"email:07"`` -> ``("email", 7)``; ``None`` when the tag is no shard."""
    m = _SHARD_RE.match(tag)
    if not m:
        return None
    return m.group(1), int(m.group(2))


# -- jobctl's own keys, beside each queue's (same hash tag) ---------------------

class _JobctlKeys:
    """jobctl's keys of one queue (or shard): ``<jobctl_base>:jobctl:<name>``,
    where ``jobctl_base`` names the queue in the layout's own key style (so
    they share its hash tag)."""

    @property
    def jobctl_base(self) -> str:
        raise NotImplementedError

    @property
    def journal(self) -> str:
        """jobctl's capped audit stream for this queue (or shard)."""
        return f"{self.jobctl_base}:jobctl:journal"


class _SuppressionKeys(_JobctlKeys):
    """jobctl's suppressed state: a zset and an info hash."""

    @property
    def suppressed(self) -> str:
        """jobctl's zset: suppressed job id -> suppressed-at (epoch ms)."""
        return f"{self.jobctl_base}:jobctl:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's hash: suppressed job id -> JSON {by, at_ms, reason, operation}
        plus what the layout needs to put the job back (docs/layouts.md)."""
        return f"{self.jobctl_base}:jobctl:suppressed:info"


class _WindowKeys(_SuppressionKeys):
    """The keys of the window engine's dead-list walks (:mod:`jobctl.ops.window`)."""

    @property
    def hold(self) -> str:
        """jobctl's hold list: dead jobs a window-engine walk set aside,
        counted as dead by every read (put back where they were taken from)."""
        return f"{self.jobctl_base}:jobctl:hold"

    @property
    def walk(self) -> str:
        """jobctl's hash of the running dead-list walk: op, total, popped."""
        return f"{self.jobctl_base}:jobctl:walk"

    @property
    def lease(self) -> str:
        """jobctl's lease string: the operation that owns this queue's (or
        shard's) sources (``<op id> <host> <pid>``, PX TTL renewed by the runner)."""
        return f"{self.jobctl_base}:jobctl:lease"

    @property
    def redriven_undated(self) -> str:
        """jobctl's redrive record before it was kept by day (one hash for all
        time, written by jobctl until 2026-11-27): renamed into today's by
        the next walk (:func:`jobctl.ops.redrive_record.upkeep`)."""
        return f"{self.jobctl_base}:jobctl:redriven"

    def redriven(self, day: str) -> str:
        """jobctl's redrive record of one UTC day ``YYYY-MM-DD``
        (:func:`utc_day`), a hash: job id -> JSON [op id, redriven at
        (epoch ms), count] (:mod:`jobctl.ops.redrive_record`)."""
        return f"{self.jobctl_base}:jobctl:redriven:{day}"


@dataclass(frozen=True)
class ReliableListKeys(_WindowKeys):
    """Key names of one reliable-list shard (layouts.md section 1).

    ``tag`` is the Redis Cluster hash tag without braces, e.g. ``"email"`` or
    ``"email:07"``.
    """

    tag: str

    # -- keys written by the queue's producers and workers -----------------
    @property
    def ready(self) -> str:
        """List of job ids; producers LPUSH, workers BLMOVE RIGHT LEFT."""
        return f"queue:{{{self.tag}}}:ready"

    def ready_priority(self, priority: int) -> str:
        """Priority ready list ``ready:p<N>`` (p0 highest; seed 000 s.18)."""
        return f"queue:{{{self.tag}}}:ready:p{priority}"

    @property
    def ready_priority_pattern(self) -> str:
        """SCAN MATCH pattern for this shard's priority ready lists."""
        return f"queue:{{{self.tag}}}:ready:p*"

    @property
    def processing(self) -> str:
        """List of claimed job ids."""
        return f"queue:{{{self.tag}}}:processing"

    @property
    def deadline(self) -> str:
        """Zset job id -> visibility deadline (epoch ms)."""
        return f"queue:{{{self.tag}}}:processing:deadline"

    @property
    def scheduled(self) -> str:
        """Zset job id -> due time (epoch ms): delayed jobs and retries."""
        return f"queue:{{{self.tag}}}:scheduled"

    @property
    def dead(self) -> str:
        """List of dead-lettered job ids (the DLQ); workers LPUSH."""
        return f"queue:{{{self.tag}}}:dead"

    def job(self, job_id: str) -> str:
        """String key holding the JSON envelope of ``job_id``."""
        return f"job:{{{self.tag}}}:{job_id}"

    @property
    def job_prefix(self) -> str:
        """Prefix of every payload key of this shard."""
        return f"job:{{{self.tag}}}:"

    @property
    def job_pattern(self) -> str:
        """SCAN MATCH pattern for this shard's payload keys."""
        return f"job:{{{self.tag}}}:*"

    @property
    def queue_pattern(self) -> str:
        """SCAN MATCH pattern for every ``queue:{tag}:*`` key of this shard."""
        return f"queue:{{{self.tag}}}:*"

    # -- keys owned by jobctl (and :class:`_WindowKeys`) -------------------
    @property
    def jobctl_base(self) -> str:
        return f"queue:{{{self.tag}}}"

    @property
    def paused(self) -> str:
        """jobctl's list of paused job ids (``jobctl pause``), in ready order:
        head newest, tail the next one a worker would have taken."""
        return f"queue:{{{self.tag}}}:jobctl:paused"

    @property
    def paused_info(self) -> str:
        """jobctl's hash: paused job id -> JSON {by, at_ms, reason, operation, from, score}."""
        return f"queue:{{{self.tag}}}:jobctl:paused:info"

    @property
    def migrating(self) -> str:
        """jobctl's list of jobs taken out of this shard by ``jobctl migrate``
        and not yet deleted here (the crash journal of a copy-then-delete
        move; served end: the tail)."""
        return f"queue:{{{self.tag}}}:jobctl:migrating"

    @property
    def migrating_info(self) -> str:
        """jobctl's hash: migrating job id -> JSON {dst, from, score, sha1, operation, by, at_ms}."""
        return f"queue:{{{self.tag}}}:jobctl:migrating:info"

    @property
    def migrated_in(self) -> str:
        """jobctl's hash on a destination shard: job id copied in by ``jobctl migrate`` -> payload SHA1,
        until the source copy is deleted (a rerun then never copies it twice)."""
        return f"queue:{{{self.tag}}}:jobctl:migrated-in"

    @property
    def envelopes_before(self) -> str:
        """jobctl's hash: job id -> the envelopes ``jobctl migrate --transform``
        replaced, a stack of layers newest first (format: ``jobctl/lua/rl_transform.lua``;
        ``--rollback OPERATION`` pops OPERATION's layer back into the job)."""
        return f"queue:{{{self.tag}}}:jobctl:envelopes-before"

    @property
    def holds(self) -> str:
        """jobctl's hash: hold id -> JSON {filter, reason, by, since_ms} (``pause --hold``)."""
        return f"queue:{{{self.tag}}}:jobctl:holds"

    @property
    def fixed_keys(self) -> tuple[str, ...]:
        """The non-priority state keys, in a stable order."""
        return (self.ready, self.processing, self.deadline, self.scheduled,
                self.dead, self.suppressed)


# -- stream-group (layouts.md section 2; seed 000 sections 11-13) -------------

#: Parses ``stream:{tag}:jobs``; group 1 is the tag.
STREAM_GROUP_KEY_RE = re.compile(r"^stream:\{([^{}]+)\}:jobs$")


@dataclass(frozen=True)
class StreamGroupKeys(_WindowKeys):
    """Key names of one stream-group shard (layouts.md section 2).

    The scheduled zset, the dead list, the payload keys and jobctl's own
    keys are named as for reliable-list (seed 000 section 13 reuses them).
    """

    tag: str

    @property
    def jobctl_base(self) -> str:
        return f"queue:{{{self.tag}}}"

    @property
    def _rl(self) -> ReliableListKeys:
        return ReliableListKeys(self.tag)

    @property
    def stream(self) -> str:
        """Stream of entries ``jobId <id>`` (seed 000 s.11); read by a consumer group."""
        return f"stream:{{{self.tag}}}:jobs"

    @property
    def dead_stream(self) -> str:
        """Dead-letter stream (``dead = "stream"`` in the queue's config)."""
        return f"stream:{{{self.tag}}}:dead"

    @property
    def scheduled(self) -> str:
        """Zset job id -> due time (epoch ms); the scheduler XADDs due ids (s.13)."""
        return self._rl.scheduled

    @property
    def dead(self) -> str:
        """List of dead-lettered job ids (``dead = "list"``, the default)."""
        return self._rl.dead

    def job(self, job_id: str) -> str:
        """String key holding the JSON envelope of ``job_id`` (s.13)."""
        return self._rl.job(job_id)

    @property
    def replayed(self) -> str:
        """The set of the entry ids an earlier jobctl's ``replay`` re-added:
        still read (each is replayed no more), no longer written."""
        return f"queue:{{{self.tag}}}:jobctl:replayed"

    @property
    def replay_record(self) -> str:
        """jobctl's replay record (zset, every score 0): one member
        ``<original id, each part zero-padded to 20 digits> <replay id>`` per
        entry ``jobctl replay`` re-added, trimmed to the entries the stream
        still holds (``jobctl/lua/sg_replay.lua``)."""
        return f"queue:{{{self.tag}}}:jobctl:replay-record"


# -- delayed-events (layouts.md section 5; seed 003) ---------------------------

#: Separator of a delayed-events member ``<event class>###<event id>``.
DELAYED_EVENTS_SEPARATOR = "###"
#: Name (after the data-set prefix) of the delayed-events zset.
DELAYED_EVENTS_ZSET = "delayed_events"


@dataclass(frozen=True)
class DelayedEventsKeys(_SuppressionKeys):
    """Key names of one delayed-events service (layouts.md section 5).

    ``prefix`` is the library's data-set prefix ("" in the article; some
    versions default to ``"de_"``): every key of the service starts with it.
    """

    prefix: str = ""

    @property
    def jobctl_base(self) -> str:
        return f"{self.prefix}{DELAYED_EVENTS_ZSET}"

    @property
    def zset(self) -> str:
        """Zset member ``<class>###<id>`` -> next attempt time (epoch ms)."""
        return f"{self.prefix}{DELAYED_EVENTS_ZSET}"

    @property
    def events(self) -> str:
        """Hash member -> envelope JSON {type, payload, attempt, logContext}."""
        return f"{self.prefix}events"

    @property
    def lock(self) -> str:
        """The dispatcher's lock (SET NX EX)."""
        return f"{self.prefix}delayed_events_lock"

    def type_list(self, event_class: str) -> str:
        """List of envelopes dispatched for handling: the lowercase simple
        class name of ``event_class`` (``com.acme.PaymentCheck`` -> ``paymentcheck``)."""
        return f"{self.prefix}{simple_class_name(event_class).lower()}"


def simple_class_name(event_class: str) -> str:
    """Java's ``getSimpleName`` of a binary class name: the part after the
    last ``.`` and ``$``."""
    return event_class.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


def delayed_event_member(event_class: str, event_id: str) -> str:
    """``<event class>###<event id>``: the zset member and hash field."""
    return f"{event_class}{DELAYED_EVENTS_SEPARATOR}{event_id}"


def split_delayed_event_member(member: str) -> tuple[str, str] | None:
    """``("com.acme.X", "42")`` from ``"com.acme.X###42"``; ``None`` if malformed."""
    cls, sep, event_id = member.partition(DELAYED_EVENTS_SEPARATOR)
    return (cls, event_id) if sep and cls and event_id else None


# -- delay-zset and Redisson's delayed queue (layouts.md section 6; seed 004) --

@dataclass(frozen=True)
class DelayZsetKeys(_JobctlKeys):
    """The single zset of a delay-zset queue (e.g. ``delay_queue``)."""

    key: str

    @property
    def zset(self) -> str:
        """Zset member (job id or small payload) -> due time (epoch ms)."""
        return self.key

    @property
    def jobctl_base(self) -> str:
        return self.key


#: Parses Redisson's ``redisson_delay_queue_timeout:{name}`` / ``redisson_delay_queue:{name}``.
REDISSON_DELAY_KEY_RE = re.compile(r"^redisson_delay_queue(_timeout)?:\{(.+)\}$")


@dataclass(frozen=True)
class RedissonDelayedKeys(_JobctlKeys):
    """Key names of one Redisson ``RDelayedQueue`` whose destination queue is ``name``."""

    name: str

    @property
    def timeout(self) -> str:
        """Zset packed member -> due time (epoch ms)."""
        return f"redisson_delay_queue_timeout:{{{self.name}}}"

    @property
    def order(self) -> str:
        """List of the same packed members, in insertion order."""
        return f"redisson_delay_queue:{{{self.name}}}"

    @property
    def destination(self) -> str:
        """The destination list (an ``RQueue``): due values, codec bytes only."""
        return self.name

    @property
    def jobctl_base(self) -> str:
        """Its journal is never written: the layout is read-only in jobctl."""
        return f"redisson_delay_queue:{{{self.name}}}"


__all__ += ["STREAM_GROUP_KEY_RE", "StreamGroupKeys", "DELAYED_EVENTS_SEPARATOR", "DELAYED_EVENTS_ZSET",
            "DelayedEventsKeys",
            "simple_class_name", "delayed_event_member", "split_delayed_event_member", "DelayZsetKeys",
            "REDISSON_DELAY_KEY_RE", "RedissonDelayedKeys"]


# -- hash-job (layouts.md section 3; seed 001 "Data model") -------------------

def glob_escape(text: str) -> str:
    """``text`` with the SCAN MATCH glob characters ``* ? [ ] \\`` escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


#: Parses a hash-job key ``queue:<name>:<suffix>``; group 1 is the queue
#: name, group 2 the state list (``pending``...) or ``job:<id>``.
HASH_JOB_KEY_RE = re.compile(r"^queue:(.+?):(pending|processing|completed|failed|job:.+)$")
#: The state lists of a hash-job queue (``queue:<name>:<suffix>``, lists).
HASH_JOB_LIST_SUFFIXES = ("pending", "processing", "completed", "failed")


@dataclass(frozen=True)
class HashJobKeys:
    """Key names of one hash-job queue (layouts.md section 3; seed 001).

    ``name`` is the queue name of ``queue:<name>:...`` (the seed's
    ``queueName``, ``"jobs"`` in its examples).  The seed puts no hash tag in
    its keys; on Redis Cluster, jobctl's per-job scripts need a name that is
    one (e.g. ``{jobs}``).
    """

    name: str

    # -- keys written by the queue's producers and workers -----------------
    @property
    def pending(self) -> str:
        """List of job ids; producers LPUSH, workers BLMOVE RIGHT LEFT."""
        return f"queue:{self.name}:pending"

    @property
    def processing(self) -> str:
        """List of claimed job ids (claims land at the head)."""
        return f"queue:{self.name}:processing"

    @property
    def completed(self) -> str:
        """List of recently completed ids, newest at the head, LTRIM-capped."""
        return f"queue:{self.name}:completed"

    @property
    def failed(self) -> str:
        """List of terminally failed ids (the DLQ), newest at the head, LTRIM-capped."""
        return f"queue:{self.name}:failed"

    @property
    def events(self) -> str:
        """Pub/sub channel of completion notifications (never written by jobctl)."""
        return f"queue:{self.name}:events"

    def job(self, job_id: str) -> str:
        """Hash of the job's metadata: id, payload, status, attempts, *_at_ms..."""
        return f"queue:{self.name}:job:{job_id}"

    @property
    def job_prefix(self) -> str:
        """Prefix of every job hash of this queue."""
        return f"queue:{self.name}:job:"

    @property
    def job_pattern(self) -> str:
        """SCAN MATCH pattern for this queue's job hashes."""
        return f"queue:{glob_escape(self.name)}:job:*"

    # -- keys owned by jobctl ----------------------------------------------
    @property
    def suppressed(self) -> str:
        """jobctl's zset: suppressed job id -> suppressed-at (epoch ms)."""
        return f"queue:{self.name}:jobctl:suppressed"

    @property
    def suppressed_info(self) -> str:
        """jobctl's hash: suppressed job id -> JSON {by, at_ms, reason, operation, ttl_ms}."""
        return f"queue:{self.name}:jobctl:suppressed:info"

    @property
    def journal(self) -> str:
        """jobctl's capped audit stream for this queue."""
        return f"queue:{self.name}:jobctl:journal"

    @property
    def hold(self) -> str:
        """jobctl's hold list: failed ids a window-engine walk set aside,
        counted as dead by every read (restored to the failed list's tail)."""
        return f"queue:{self.name}:jobctl:hold"

    @property
    def walk(self) -> str:
        """jobctl's hash of the running failed-list walk: op, total, popped."""
        return f"queue:{self.name}:jobctl:walk"

    @property
    def lease(self) -> str:
        """jobctl's lease string (``<op id> <host> <pid>``, PX TTL)."""
        return f"queue:{self.name}:jobctl:lease"

    @property
    def state_lists(self) -> tuple[str, ...]:
        """The four state lists, in a stable order."""
        return (self.pending, self.processing, self.completed, self.failed)


# -- json-list (layouts.md section 4; seed 002) --------------------------------

#: Key prefix of a json-list queue when the config names none (seed 002).
JSON_LIST_DEFAULT_PREFIX = "jobs"
#: Suffix of a json-list key (after ``<prefix>``) -> the Redis type it must
#: have (discovery recognises a queue by them; layouts.md).
JSON_LIST_SUFFIX_TYPES: dict[str, bytes] = {
    ":pending": b"list", ":processing": b"list", ":dead": b"list",
    ":processing:times": b"zset", ":attempts": b"hash", ":errors": b"hash",
}


@dataclass(frozen=True)
class JsonListKeys(_WindowKeys):
    """Key names of one json-list queue (layouts.md section 4; seed 002).

    ``prefix`` replaces the seed's fixed ``jobs`` so that several queues can
    share a server (``jobs:pending``, ``jobs:processing``...).
    """

    prefix: str = JSON_LIST_DEFAULT_PREFIX

    # -- keys written by the queue's producers and workers -----------------
    @property
    def pending(self) -> str:
        """List of whole job JSON strings; producers LPUSH, workers BLMOVE RIGHT LEFT
        (a retry RPUSHes, so it is claimed next)."""
        return f"{self.prefix}:pending"

    @property
    def processing(self) -> str:
        """List of the claimed JSON strings (claims land at the head)."""
        return f"{self.prefix}:processing"

    @property
    def processing_times(self) -> str:
        """Zset job id -> claim time in epoch *seconds* (float)."""
        return f"{self.prefix}:processing:times"

    @property
    def attempts(self) -> str:
        """Hash job id -> failed attempts so far (HINCRBY on each failure)."""
        return f"{self.prefix}:attempts"

    @property
    def dead(self) -> str:
        """List of dead JSON strings, newest at the tail (workers RPUSH)."""
        return f"{self.prefix}:dead"

    @property
    def errors(self) -> str:
        """Hash job id -> last error message (written when a job dies)."""
        return f"{self.prefix}:errors"

    # -- keys owned by jobctl (and :class:`_WindowKeys`) -------------------
    @property
    def jobctl_base(self) -> str:
        return self.prefix

    @property
    def suppressed_raw(self) -> str:
        """jobctl's hash: suppressed job id -> the job's JSON string, byte for byte."""
        return f"{self.prefix}:jobctl:suppressed:raw"


__all__ += ["glob_escape", "HASH_JOB_KEY_RE", "HASH_JOB_LIST_SUFFIXES", "HashJobKeys", "JSON_LIST_DEFAULT_PREFIX",
            "JSON_LIST_SUFFIX_TYPES", "JsonListKeys"]
