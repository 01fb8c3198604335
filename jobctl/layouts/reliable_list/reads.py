"""What status and the dashboard read from the reliable-list keys
themselves (:class:`IndexReads`, a mixin of
:class:`~jobctl.layouts.reliable_list.layout.ReliableList`): the dead-list
audit's lists, the keys a catalogue entry may not explain, due-time counts
from the scheduled zsets and processing jobs from the deadline zsets."""

from __future__ import annotations

from typing import Any

from jobctl.keys import ReliableListKeys, shard_tags
from jobctl.model import JobRecord, State, parse_envelope
from jobctl.layouts.common import PAYLOAD_TYPES, score_ms

__all__ = ["IndexReads", "PRIORITY_PROBE", "SHARD_PROBE"]

#: How many ``ready:pN`` lists beyond the configured ones are probed.
PRIORITY_PROBE = 10
#: Shards probed for unexplained keys (the first ones).
SHARD_PROBE = 8


class IndexReads:
    """Hooks of :class:`~jobctl.layouts.facts.LayoutFacts` read from the
    shards' keys (the layout provides ``client``, ``queue``, ``shards``)."""

    def dead_audits(self) -> list[tuple[str, Any, frozenset[bytes]]]:
        """Each shard's dead list, its payload key and the string types."""
        return [(k.dead, k.job, PAYLOAD_TYPES) for k in self.shards]

    def unexplained_candidates(self) -> list[tuple[list[str], str]]:
        """``ready:pN`` lists beyond the configured priorities (the first
        :data:`SHARD_PROBE` shards), and the first two shard tags of an
        unsharded entry."""
        q = self.queue
        have = q.priorities or 0
        groups: list[tuple[list[str], str]] = []
        for keys in self.shards[:SHARD_PROBE]:
            groups.append(([keys.ready_priority(p) for p in range(have, have + PRIORITY_PROBE)],
                           "priorities" if not have else f"priorities = {have}"))
        if not q.shards:
            for tag in shard_tags(q.base_tag, 2):
                k = ReliableListKeys(tag)
                groups.append(([k.ready, k.processing, k.dead, k.scheduled], "shards"))
        return groups

    def due_counts(self, now: int, buckets) -> list[int] | None:
        """One pipelined ``ZCOUNT`` per bucket and shard (exact, whatever the depth)."""
        if not self.shards:
            return None
        pipe = self.client.pipeline(transaction=False)
        for keys in self.shards:
            for _, lo, hi in buckets:
                pipe.zcount(keys.scheduled, "-inf" if lo is None else now + lo, "+inf" if hi is None else f"({now + hi}")
        res = pipe.execute()
        n = len(buckets)
        return [sum(res[s * n + i] for s in range(len(self.shards))) for i in range(n)]

    def processing_by_deadline(self, limit: int) -> list[JobRecord] | None:
        """``ZRANGE processing:deadline 0 limit-1 WITHSCORES`` per shard plus
        one ``MGET`` of the envelopes; +inf/-inf deadlines read as never/always."""
        if not self.shards:
            return None
        records: list[JobRecord] = []
        for keys in self.shards:
            pairs = self.client.zrange(keys.deadline, 0, limit - 1, withscores=True)
            if not pairs:
                continue
            ids = [m.decode("utf-8", "surrogateescape") if isinstance(m, bytes) else m for m, _ in pairs]
            raws = self.client.mget([keys.job(i) for i in ids])
            for (_, score), job_id, raw in zip(pairs, ids, raws):
                records.append(JobRecord(queue=self.queue_name, layout=self.name, shard=keys.tag,
                                         job_id=job_id, state=State.PROCESSING, envelope=parse_envelope(raw),
                                         raw=raw, deadline_ms=score_ms(score)))
        records.sort(key=lambda r: (r.deadline_ms, r.job_id))
        return records[:limit]
