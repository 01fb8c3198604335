"""The ``reliable-list`` layout (layouts.md section 1; seed 000 sections 5,
7-10, 18 and 20): ready/processing lists, a visibility-deadline zset, a
scheduled zset, a dead list and one JSON envelope string per job.

A logical queue may span shard tags ``<tag>:00..`` (section 20); every read
here is per shard and summed.  Keys come from :mod:`jobctl.keys` only.
Operations: :mod:`.ops` (pause/resume :mod:`.pause`, migrate :mod:`.migrate`,
transform :mod:`.transform`); checks: :mod:`.check`; discovery: :mod:`.discover`;
walks: :mod:`.raw_windows`; status and dashboard reads: :mod:`.reads`; hold
records for the core: :mod:`.resume`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jobctl.errors import DataError
from jobctl.keys import RELIABLE_LIST_SCAN_PATTERN, ReliableListKeys
from jobctl.model import JobRecord, QueueStatus, State, parse_envelope
from jobctl.ops.redrive_record import RETENTION_DAYS, lookup, merge, read_keys
from jobctl.layouts.base import ShardedLayout, now_ms
from jobctl.layouts.facts import HOLDING_OPERATIONS, StrOption
from jobctl.layouts.planning import TRANSITIONS_WITH_SCHEDULED
from jobctl.layouts.reliable_list.raw_windows import RawWindows
from jobctl.layouts.reliable_list.reads import IndexReads
from jobctl.layouts.reliable_list.resume import HoldHooks
from jobctl.layouts.common import (SCHEDULED_READS, first_found, fold_count, fold_scheduled, merge_shard_lists, read_scheduled,
                     mark_wrong_typed, score_ms, status_replies, text, wrong_type_note, wrongtype_errors)

__all__ = ["ReliableList"]

_RECORD_ATTRS = frozenset({"position", "score", "deadline_ms"})
#: Reads of a ready list's tail for the oldest ready job when workers keep taking it.
TAIL_READS = 5
#: Tail elements read again with a vanished oldest job: the deepest one is read next
#: (workers take the others first; it is at most this many jobs younger than the oldest).
TAIL_SLACK = 8


@dataclass(frozen=True)
class _ListRef:
    """A ready list of one shard and its priority label (``None``: plain)."""

    key: str
    priority: str | None


class ReliableList(RawWindows, IndexReads, HoldHooks, ShardedLayout):
    """A reliable-list queue; see the module docstring."""

    name = "reliable-list"
    states = (State.READY, State.SCHEDULED, State.PROCESSING, State.DEAD, State.SUPPRESSED, State.PAUSED)
    keys_class = ReliableListKeys
    shards: list[ReliableListKeys]
    operations = frozenset(op for op, _ in TRANSITIONS_WITH_SCHEDULED) | HOLDING_OPERATIONS
    reshardable = True
    raw_windows = True
    braced_tag = True
    config_options = {"shard_rule": StrOption(64)}
    recognize_last = True  # its recogniser claims broad name patterns
    scan_pattern = RELIABLE_LIST_SCAN_PATTERN

    @classmethod
    def recognizer(cls):
        from jobctl.layouts.reliable_list.discover import recognize

        return recognize

    def sources(self, spec):
        from jobctl.layouts.reliable_list.ops import dead_sources

        return dead_sources(self, spec)

    def check(self, *, repair: bool = False):
        from jobctl.layouts.reliable_list.check import check_queue

        return check_queue(self, repair=repair)

    # -- operations: pause/resume, migrate and transform in their own modules --
    def plan(self, spec, now: int | None = None):
        if spec.operation.value in ("pause", "resume"):
            from jobctl.layouts.reliable_list.pause import plan_operation

            return plan_operation(self, spec, now_ms() if now is None else now)
        if spec.operation.value in ("migrate", "drain"):
            from jobctl.layouts.reliable_list.migrate import plan_operation as plan_migrate

            return plan_migrate(self, spec, now_ms() if now is None else now)
        if spec.operation.value == "transform":
            from jobctl.layouts.reliable_list.transform import plan_operation as plan_transform

            return plan_transform(self, spec, now_ms() if now is None else now)
        from jobctl.layouts.reliable_list import ops as ops

        return ops.plan_operation(self, spec, now_ms() if now is None else now)

    def apply(self, plan, *, batch: int | None = None):
        if plan.spec.operation.value in ("pause", "resume"):
            from jobctl.layouts.reliable_list import pause as pause

            return pause.apply_plan(self, plan, batch=batch or pause.DEFAULT_BATCH)
        if plan.spec.operation.value in ("migrate", "drain"):
            from jobctl.layouts.reliable_list import migrate as migrate

            return migrate.apply_plan(self, plan, batch=batch or migrate.DEFAULT_BATCH)
        if plan.spec.operation.value == "transform":
            from jobctl.layouts.reliable_list import transform as transform

            return transform.apply_plan(self, plan, batch=batch or transform.DEFAULT_BATCH)
        from jobctl.layouts.reliable_list import ops as ops

        return ops.apply_plan(self, plan, batch=batch or ops.DEFAULT_BATCH)

    # -- helpers -----------------------------------------------------------
    def ready_lists(self, keys: ReliableListKeys) -> list[_ListRef]:
        """The shard's ready lists in serving order: p0..pN, then the plain list."""
        refs = [_ListRef(keys.ready_priority(p), f"p{p}") for p in range(self.queue.priorities or 0)]
        refs.append(_ListRef(keys.ready, None))
        return refs

    def _shard_label(self, keys: ReliableListKeys) -> str:
        return keys.tag

    def _records(self, keys: ReliableListKeys, ids: list[str], state: State | None,
                 extra: list[dict[str, Any]] | None = None) -> list[JobRecord]:
        """Load envelopes of ``ids`` (one pipelined round trip) into records."""
        if not ids:
            return []
        return self._records_from(keys, ids, self.client.mget([keys.job(i) for i in ids]), state, extra)

    def _records_from(self, keys: ReliableListKeys, ids: list[str], raws: list[bytes | None],
                      state: State | None, extra: list[dict[str, Any]] | None = None) -> list[JobRecord]:
        """Records of ``ids`` whose payload values ``raws`` were read already."""
        out = []
        for n, (job_id, raw) in enumerate(zip(ids, raws)):
            env = parse_envelope(raw)
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard=self._shard_label(keys),
                            job_id=job_id, state=state, envelope=env, raw=raw)
            for k, v in (extra[n] if extra else {}).items():
                if k in _RECORD_ATTRS:
                    setattr(rec, k, v)
                else:
                    rec.meta[k] = v
            if state in (State.DEAD, State.SUPPRESSED) and env.last_attempt_ms is not None:
                rec.meta.setdefault("dead_since_ms", env.last_attempt_ms)
            out.append(rec)
        mark_wrong_typed(self.client, out, lambda r: keys.job(r.job_id))
        return out

    # -- status --------------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        now = now_ms() if now is None else now
        st = QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now, shards=len(self.shards))
        pipe = self._pipeline()
        plan: list[tuple[str, str, Any]] = []  # (what, key, extra) per command

        def add(what: str, key: str, extra: Any, fn, *args, **kw):
            fn(*args, **kw)
            plan.append((what, key, extra))

        for keys in self.shards:
            for ref in self.ready_lists(keys):
                add("ready_len", ref.key, ref, pipe.llen, ref.key)
                add("ready_tail", ref.key, (keys, ref), pipe.lindex, ref.key, -1)
            plan.extend((what, keys.scheduled, None) for what in read_scheduled(pipe, keys.scheduled, now))
            add("processing", keys.processing, None, pipe.llen, keys.processing)
            add("stuck", keys.deadline, None, pipe.zcount, keys.deadline, "-inf", f"({now}")
            add("next_deadline", keys.deadline, None, pipe.zrange, keys.deadline, f"({now}", "+inf",
                byscore=True, offset=0, num=1, withscores=True)
            add("dead", keys.dead, None, pipe.llen, keys.dead)
            add("dead", keys.hold, None, pipe.llen, keys.hold)  # held by a window-engine walk: still dead
            add("suppressed", keys.suppressed, None, pipe.zcard, keys.suppressed)
            add("paused", keys.paused, None, pipe.llen, keys.paused)
            add("migrating", keys.migrating, None, pipe.llen, keys.migrating)
        add("holds", self.shards[0].holds, None, pipe.hgetall, self.shards[0].holds)
        results = status_replies(st, pipe.execute(raise_on_error=False), [p[1] for p in plan])

        tails: list[tuple[ReliableListKeys, str]] = []
        for (what, key, extra), res in zip(plan, results):
            if res is None or fold_count(st, what, res):  # an error reply, no ready tail, or a count
                continue
            if what == "ready_len":
                st.ready += res
                if extra.priority is not None:
                    st.ready_by_priority[extra.priority] = st.ready_by_priority.get(extra.priority, 0) + res
            elif what == "ready_tail":
                tails.append((extra[0], text(res), extra[1].key))
            elif what in SCHEDULED_READS:
                fold_scheduled(st, what, res, now)
            elif what == "next_deadline":
                if res:
                    d = score_ms(res[0][1])
                    st.next_deadline_ms = d if st.next_deadline_ms is None else min(st.next_deadline_ms, d)
            elif what == "holds":
                from jobctl.layouts.reliable_list.pause import holds_of

                st.held_filters = holds_of(res, now)

        for _ in range(TAIL_READS):  # a tail a worker took since it was read is read again
            tails = self._fold_ready_tails(st, tails, now)
            if not tails:
                break
        if st.oldest_ready_since_ms is not None:
            st.oldest_ready_age_ms = max(0, now - st.oldest_ready_since_ms)
        return st

    def _fold_ready_tails(self, st: QueueStatus, tails: list[tuple[ReliableListKeys, str, str]], now: int
                          ) -> list[tuple[ReliableListKeys, str, str]]:
        """Fold the oldest ready job of each ``(keys, id, ready list)`` into
        ``st``; returns the tails to read again: those whose payload was gone
        while the list's tail had changed since (a worker took the job)."""
        pipe = self._pipeline()
        for keys, job_id, ready in tails:
            pipe.get(keys.job(job_id))
            for key in read_keys(keys, now):  # a redrive makes it ready again (not in the envelope)
                pipe.hget(key, job_id)
            pipe.lrange(ready, -TAIL_SLACK, -1)
        replies = pipe.execute(raise_on_error=False)
        step = 1 + RETENTION_DAYS + 1 + 1  # the GET, read_keys' HGETs, then the tail again
        again = []
        for i, (keys, job_id, ready) in enumerate(tails):
            raw, rec = replies[i * step], merge(replies[i * step + 1:(i + 1) * step - 1])
            tail = replies[(i + 1) * step - 1]
            if raw is None and isinstance(tail, list) and job_id.encode("utf-8", "surrogateescape") not in tail:
                if tail:  # taken since it was read: the deepest of the tail now outlives the next read
                    again.append((keys, text(tail[0]), ready))
                continue
            if isinstance(raw, Exception):  # one job's payload: a warning naming it, the queue reads on
                if wrongtype_errors([raw], [keys.job(job_id)]):
                    st.warnings.append(f"oldest ready job {job_id} in shard {keys.tag}: "
                                       + wrong_type_note(keys.job(job_id), self.client.type(keys.job(job_id))))
                continue
            env = parse_envelope(raw)
            since = env.ready_since_ms
            if rec is not None and isinstance(rec["at_ms"], int) and since is not None:
                since = max(since, rec["at_ms"])
            if env.problems or since is None:
                problem = env.problems[0] if env.problems else "no timestamps"
                st.warnings.append(f"oldest ready job {job_id} in shard {keys.tag}: {problem}")
                continue
            if st.oldest_ready_since_ms is None or since < st.oldest_ready_since_ms:
                st.oldest_ready_since_ms = since
        return again

    def depth(self, state: State) -> int:
        self.check_supported(state)
        pipe = self._pipeline()
        for keys in self.shards:
            for key in self._state_keys(keys, state):
                (pipe.zcard if state in (State.SCHEDULED, State.SUPPRESSED) else pipe.llen)(key)  # paused: a list
        return sum(pipe.execute())

    def _state_keys(self, keys: ReliableListKeys, state: State) -> list[str]:
        if state is State.READY:
            return [r.key for r in self.ready_lists(keys)]
        if state is State.DEAD:
            # jobctl's hold list (a window-engine walk set those aside) is the
            # dead list's oldest part: its tail end comes first from the tail
            return [keys.hold, keys.dead]
        return [{State.SCHEDULED: keys.scheduled, State.PROCESSING: keys.processing,
                 State.SUPPRESSED: keys.suppressed, State.PAUSED: keys.paused}[state]]

    # -- listing ------------------------------------------------------------
    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        self.check_supported(state)
        return merge_shard_lists([self._list_shard(keys, state, limit) for keys in self.shards],
                                 _SORT_KEYS[state], limit)

    def _list_shard(self, keys: ReliableListKeys, state: State, limit: int) -> list[JobRecord]:
        if state is State.READY:
            out: list[JobRecord] = []
            for rank, ref in enumerate(self.ready_lists(keys)):
                if len(out) >= limit:
                    break
                ids = [text(x) for x in reversed(self.client.lrange(ref.key, -(limit - len(out)), -1))]
                extra = [{"position": n, "priority": ref.priority, "priority_rank": rank}
                         for n in range(len(ids))]
                out.extend(self._records(keys, ids, State.READY, extra))
            return out
        if state is State.SCHEDULED:
            pairs = self.client.zrange(keys.scheduled, 0, limit - 1, withscores=True)
            ids = [text(m) for m, _ in pairs]
            return self._records(keys, ids, state, [{"score": score_ms(sc)} for _, sc in pairs])
        if state is State.PROCESSING:
            ids = [text(x) for x in reversed(self.client.lrange(keys.processing, -limit, -1))]
            deadlines = self.client.zmscore(keys.deadline, ids) if ids else []
            extra = [{"position": n, "deadline_ms": score_ms(d)} for n, d in enumerate(deadlines)]
            recs = self._records(keys, ids, state, extra)
            for r in recs:
                if r.deadline_ms is None:
                    r.meta["problem"] = "no visibility deadline"
            return recs
        if state is State.PAUSED:  # served end first, as they will be on resume
            ids = [text(x) for x in reversed(self.client.lrange(keys.paused, -limit, -1))]
            return self._records(keys, ids, state, [{"position": n} for n in range(len(ids))])
        if state is State.DEAD:
            ids = [text(x) for x in self.client.lrange(keys.dead, 0, limit - 1)]
            if len(ids) < limit:  # the hold (a walk in progress) holds the oldest dead jobs
                ids += [text(x) for x in self.client.lrange(keys.hold, 0, limit - 1 - len(ids))]
            return self._records(keys, ids, state, [{"position": n} for n in range(len(ids))])
        pairs = self.client.zrange(keys.suppressed, 0, limit - 1, desc=True, withscores=True)
        ids = [text(m) for m, _ in pairs]
        return self._records(keys, ids, state, [{"score": score_ms(sc)} for _, sc in pairs])

    # -- inspect ------------------------------------------------------------
    def inspect(self, job_id: str) -> JobRecord:
        found: list[JobRecord] = []
        for keys in self.shards:
            lists = [(r.key, State.READY, r.priority) for r in self.ready_lists(keys)]
            lists += [(keys.processing, State.PROCESSING, None), (keys.dead, State.DEAD, None),
                      (keys.hold, State.DEAD, None),  # the hold: dead jobs a walk set aside
                      (keys.paused, State.PAUSED, None)]
            pipe = self._pipeline()
            pipe.get(keys.job(job_id))
            for key, _, _ in lists:
                pipe.lpos(key, job_id)
                pipe.llen(key)
            pipe.zscore(keys.scheduled, job_id)
            pipe.zscore(keys.deadline, job_id)
            pipe.zscore(keys.suppressed, job_id)
            res = pipe.execute(raise_on_error=False)
            errors = wrongtype_errors(res, [keys.job(job_id)] + [k for k, _, _ in lists for _ in (0, 1)]
                                        + [keys.scheduled, keys.deadline, keys.suppressed])
            if errors:
                raise DataError(errors[0])
            raw = res[0]
            states: list[tuple[State, dict[str, Any]]] = []
            for n, (key, state, prio) in enumerate(lists):
                idx, length = res[1 + 2 * n], res[2 + 2 * n]
                if idx is None:
                    continue
                pos = idx if state is State.DEAD else length - 1 - idx
                if key == keys.hold:  # after the dead list's own elements
                    pos += res[2 + 2 * (n - 1)] or 0
                info: dict[str, Any] = {"position": pos, "key": key}
                if prio is not None:
                    info["priority"] = prio
                states.append((state, info))
            sched, deadline, supp = (score_ms(x) for x in res[-3:])
            if sched is not None:
                states.append((State.SCHEDULED, {"score": sched, "key": keys.scheduled}))
            if supp is not None:
                states.append((State.SUPPRESSED, {"score": supp, "key": keys.suppressed}))
            if raw is None and not states and deadline is None:
                continue
            env = parse_envelope(raw)
            state, info = states[0] if states else (None, {})
            rec = JobRecord(queue=self.queue_name, layout=self.name, shard=keys.tag, job_id=job_id,
                            state=state, envelope=env, raw=raw, position=info.get("position"),
                            score=info.get("score"), deadline_ms=deadline)
            rec.meta["payload_key"] = keys.job(job_id)
            if "key" in info:
                rec.meta["state_key"] = info["key"]
            if "priority" in info:
                rec.meta["priority"] = info["priority"]
            if len(states) > 1:
                rec.meta["also_in"] = [s.value for s, _ in states[1:]]
            if raw is None:
                rec.meta["problem"] = "dangling id: no payload key"
            elif not states:
                rec.meta["problem"] = "orphan payload: no state holds this id"
            if deadline is not None and state is not State.PROCESSING:
                rec.meta["stray_deadline"] = True
            if state is State.DEAD and env.last_attempt_ms is not None:
                rec.meta["dead_since_ms"] = env.last_attempt_ms
            redriven = lookup(self.client, keys, job_id, now_ms())
            if redriven is not None:  # jobctl's record of its redrives (the envelope is not rewritten)
                rec.meta["redriven"] = redriven
            if state is State.PAUSED:
                from jobctl.layouts.reliable_list.pause import pause_info

                rec.meta["paused"] = pause_info(self.client, keys, job_id)
            found.append(rec)
        return first_found(found, job_id, self.queue_name)

    # -- batched walks --------------------------------------------------------
    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        self.check_supported(state)
        for keys in self.shards:
            yield from self.iter_batches_of(keys, state, batch, sample)


def _ready_sort(r: JobRecord):
    return (r.meta.get("priority_rank", 0), r.envelope.ready_since_ms or 0)


_SORT_KEYS = {
    State.READY: _ready_sort,
    State.SCHEDULED: lambda r: r.score or 0,
    State.PROCESSING: lambda r: (r.deadline_ms is not None, r.deadline_ms or 0),
    State.DEAD: lambda r: -(r.envelope.last_attempt_ms or 0),
    State.SUPPRESSED: lambda r: -(r.score or 0),
    State.PAUSED: lambda r: r.position or 0,
}
