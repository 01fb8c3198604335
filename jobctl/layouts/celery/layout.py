"""The ``celery`` layout: a Celery queue on kombu's Redis transport,
read-mostly (``docs/layouts.md``, "celery"; keys: :mod:`.keys`).

States: ready = the queue's priority lists (``LPUSH`` by producers,
``BRPOP`` by workers: the right end is served first); processing = the
queue's entries of kombu's global ``unacked`` hash, deadline = delivery
time (``unacked_index`` score) + the visibility timeout (the catalogue's
``visibility_timeout_ms``, default kombu's 3600 s).  There is no dead
state in the broker: Celery keeps no dead-letter store in Redis; with
``replay_results = 1`` the dead state is Celery's failed result records
(``result_extended`` data, :mod:`.results`), which ``jobctl replay`` sends
again, once each (:mod:`.replay`).

Message bodies are JSON by default and decoded as such; any other content
type (pickle) is shown as opaque bytes, never decoded.

Operations: requeue of unacked messages past their visibility timeout
(``requeue --stuck`` or ``--ids``), what kombu's ``restore_visible`` does,
fenced and bounded (:mod:`.ops`); purge of ready messages, each by its
exact bytes (:mod:`.purge`).  Config: ``tag`` = the Celery queue name
(default the catalogue name), ``key_prefix`` = kombu's ``global_keyprefix``,
``replay_results`` = 0 (default) or 1: read Celery's result records (a
SCAN of ``celery-task-meta-*``) and allow ``replay``.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import NotFound
from jobctl.layouts.package_layout import PackageModules
from jobctl.layouts.base import KeyedLayout
from jobctl.layouts.celery.keys import CeleryKeys
from jobctl.layouts.celery.ops import TRANSITIONS
from jobctl.layouts.celery.records import first_ready, walk_ready, walk_unacked
from jobctl.layouts.celery.results import RESULT_SCAN_CAP, opted_in, walk_failed
from jobctl.layouts.facts import IntOption, StrOption
from jobctl.model import JobRecord, State

__all__ = ["Celery", "VISIBILITY_DEFAULT_MS"]

#: kombu's default visibility timeout (``Channel.visibility_timeout``, 3600 s).
VISIBILITY_DEFAULT_MS = 3_600_000


class Celery(PackageModules, KeyedLayout):
    """A Celery queue; see the module docstring."""

    name = "celery"
    #: DEAD only for a queue that opted in (``replay_results = 1``: set per instance); the class names it
    #: as a state the layout can have.
    states = (State.READY, State.PROCESSING, State.DEAD)
    operations = frozenset(op for op, _ in TRANSITIONS)
    visibility_default_ms = VISIBILITY_DEFAULT_MS
    config_options = {"key_prefix": StrOption(512), "replay_results": IntOption(0, 1)}
    replay_source = "failed tasks of Celery's result records"  # selected by the filter alone

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = CeleryKeys(queue.base_tag, str(queue.options.get("key_prefix") or ""))
        self.visibility_ms = queue.visibility_timeout_ms or VISIBILITY_DEFAULT_MS
        if not opted_in(self):  # no dead state: status shows "n/a", the TUI no triage
            self.states = (State.READY, State.PROCESSING)

    # -- operations (jobctl.layouts.celery.ops) ----------------------------------
    def check(self, *, repair: bool = False):
        """kombu's invariants, report only (:mod:`jobctl.layouts.celery.check`)."""
        from jobctl.layouts.celery.check import check_queue

        return check_queue(self, repair=repair)

    # -- the read model ----------------------------------------------------------
    def depth(self, state: State) -> int:
        """Ready: one ``LLEN`` per priority list; processing: this queue's
        unacked entries (walked); dead: the failed result records among the
        first :data:`RESULT_SCAN_CAP` keys (status' bound)."""
        self.check_supported(state)
        if state is State.READY:
            pipe = self.client.pipeline(transaction=False)
            for _, key in self.keys.ready_lists():
                pipe.llen(key)
            return sum(pipe.execute())
        if state is State.DEAD:
            return sum(len(recs) for recs in walk_failed(self, cap=RESULT_SCAN_CAP))
        return sum(len(recs) for recs in walk_unacked(self, 1000))

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        """Ready: the next served first; processing: the earliest deadline
        first; dead: failed result records in SCAN order, among the first
        :data:`RESULT_SCAN_CAP` keys."""
        self.check_supported(state)
        if state is State.READY:
            return first_ready(self, limit)
        out: list[JobRecord] = []
        walk = walk_failed(self, cap=RESULT_SCAN_CAP) if state is State.DEAD else walk_unacked(self, max(limit, 100))
        for recs in walk:
            out += recs
            if len(out) >= limit:
                break
        return out[:limit]

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        """Walk ``state`` in windows (ready: each priority list, oldest first;
        dead: one window per SCAN step over the first :data:`RESULT_SCAN_CAP`
        keys, ``batch`` does not apply, ``sample=(windows, size)``: the
        first ``windows`` steps, SCAN's hash order being no order of time)."""
        self.check_supported(state)
        if state is State.DEAD:
            yield from walk_failed(self, cap=RESULT_SCAN_CAP, steps=sample[0] if sample else None)
            return
        walk = walk_ready if state is State.READY else walk_unacked
        yield from walk(self, batch, sample)

    def processing_by_deadline(self, limit: int) -> list[JobRecord]:
        """Unacked messages of this queue, least time to the deadline first (the index's order)."""
        return self.list_jobs(State.PROCESSING, limit)

    def inspect(self, job_id: str) -> JobRecord:
        """The message whose task id or delivery tag is ``job_id``, decoded
        (a JSON body) or opaque.  Raises :class:`NotFound` when neither the
        ready lists nor the queue's unacked entries hold it."""
        from jobctl.layouts.celery.inspect import find_message

        rec = find_message(self, job_id)
        if rec is None:
            raise NotFound(f"message {job_id!r} not found in queue {self.queue_name}")
        if rec.state is State.PROCESSING:
            rec.meta["visibility_timeout_ms"] = self.visibility_ms
        return rec
