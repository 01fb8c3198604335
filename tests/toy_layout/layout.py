"""The ``toy-list`` layout: a ready list and a dead list of job ids
(``toy:{<tag>}:ready``, ``toy:{<tag>}:dead``; producers and the workers'
failures ``LPUSH``, workers ``RPOP`` the ready list) and one JSON envelope
string per job (``toy:{<tag>}:job:<id>``).

It declares its facts (:class:`~jobctl.layouts.facts.LayoutFacts`), reads
through the shared walks (:func:`~jobctl.layouts.walks.walk_list`), plans
through the shared planning loop (:func:`~jobctl.layouts.planning.plan_by_payload`:
filter, fence = the payload's SHA1) and applies redrive (dead -> ready) and
purge with one fenced script call per batch, read back by
:func:`~jobctl.layouts.moves.move_result`.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobctl.errors import NotFound
from jobctl.layouts.base import KeyedLayout, now_ms
from jobctl.layouts.common import PAYLOAD_TYPES, text
from jobctl.layouts.facts import IntOption
from jobctl.layouts.moves import move_result
from jobctl.layouts.planning import plan_by_payload
from jobctl.layouts.walks import walk_list
from jobctl.model import JobRecord, QueueStatus, State, parse_envelope
from jobctl.ops.spec import Operation

__all__ = ["ToyList", "ToyKeys", "TRANSITIONS"]

#: ``(operation, source) -> targets`` (``None``: purge).
TRANSITIONS = {(Operation.REDRIVE, State.DEAD): (State.READY,), (Operation.PURGE, State.DEAD): (None,)}

#: KEYS: dead, ready, then one job key per job; ARGV: mode, then (id, payload SHA1) per job.
#: A job moves only while it is on the dead list with the payload the plan saw.
MOVE_LUA = """
local out = {}
for n = 2, #ARGV, 2 do
  local id, fence, job = ARGV[n], ARGV[n + 1], KEYS[2 + n / 2]
  local raw = redis.call('GET', job)
  local code = 'moved'
  if not raw then code = 'gone'
  elseif redis.sha1hex(raw) ~= fence then code = 'changed'
  elseif redis.call('LREM', KEYS[1], -1, id) == 0 then code = 'gone'
  elseif ARGV[1] == 'purge' then redis.call('DEL', job)
  else redis.call('LPUSH', KEYS[2], id) end
  out[#out + 1] = id
  out[#out + 1] = code
end
return out
"""


class ToyKeys:
    """Key names of one toy-list queue (one hash tag: one cluster slot)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    @property
    def ready(self) -> str:
        return f"toy:{{{self.tag}}}:ready"

    @property
    def dead(self) -> str:
        return f"toy:{{{self.tag}}}:dead"

    @property
    def journal(self) -> str:
        return f"toy:{{{self.tag}}}:journal"

    def job(self, job_id: str) -> str:
        return f"toy:{{{self.tag}}}:job:{job_id}"


class ToyList(KeyedLayout):
    """A toy-list queue; see the module docstring."""

    name = "toy-list"
    states = (State.READY, State.DEAD)
    operations = frozenset(op for op, _ in TRANSITIONS)
    braced_tag = True
    config_options = {"max_attempts": IntOption(1, 100)}

    def __init__(self, client, queue) -> None:
        super().__init__(client, queue)
        self.keys = ToyKeys(queue.base_tag)

    def _key(self, state: State) -> str:
        self.check_supported(state)
        return self.keys.ready if state is State.READY else self.keys.dead

    def _records(self, state: State, ids: list[bytes], start: int) -> list[JobRecord]:
        names = [text(i) for i in ids]
        raws = self.client.mget([self.keys.job(i) for i in names]) if names else []
        return [JobRecord(queue=self.queue_name, layout=self.name, shard="", job_id=i, state=state,
                          envelope=parse_envelope(raw), raw=raw, position=start + n)
                for n, (i, raw) in enumerate(zip(names, raws))]

    # -- the read model ------------------------------------------------------
    def status(self, now: int | None = None) -> QueueStatus:
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.ready)
        pipe.llen(self.keys.dead)
        ready, dead = pipe.execute()
        return QueueStatus(queue=self.queue_name, layout=self.name, now_ms=now_ms() if now is None else now,
                           ready=ready, dead=dead)

    def list_jobs(self, state: State, limit: int = 20, now: int | None = None) -> list[JobRecord]:
        # ready: the next to be taken (the right) first; dead: the newest (the left) first
        if state is State.READY:
            ids = list(reversed(self.client.lrange(self._key(state), -limit, -1)))
        else:
            ids = self.client.lrange(self._key(state), 0, limit - 1)
        return self._records(state, ids, 0)

    def inspect(self, job_id: str) -> JobRecord:
        for state in self.states:
            if self.client.lpos(self._key(state), job_id) is not None:
                return self._records(state, [job_id.encode()], 0)[0]
        raise NotFound(f"job {job_id} not found in queue {self.queue_name}")

    def iter_batches(self, state: State, batch: int = 1000,
                     sample: tuple[int, int] | None = None) -> Iterator[list[JobRecord]]:
        for start, chunk in walk_list(self.client, self._key(state), from_right=True, batch=batch, sample=sample):
            yield self._records(state, chunk, start)

    def dead_audits(self):
        return [(self.keys.dead, self.keys.job, PAYLOAD_TYPES)]

    # -- operations ----------------------------------------------------------
    def plan(self, spec, now: int | None = None):
        return plan_by_payload(self, spec, now_ms() if now is None else now, TRANSITIONS)

    def apply(self, plan, *, batch: int | None = None):
        script = self.client.register_script(MOVE_LUA)
        mode = "purge" if plan.spec.operation is Operation.PURGE else "redrive"
        size = batch or 100
        for i in range(0, len(plan.jobs), size):
            chunk = plan.jobs[i:i + size]
            keys = [self.keys.dead, self.keys.ready] + [self.keys.job(j.job_id) for j in chunk]
            args = [mode] + [x for j in chunk for x in (j.job_id, j.sha1)]
            yield move_result(script(keys=keys, args=args))
