"""Every runbook the library lists, run end to end with ``--yes`` while a
live worker pool serves the queue.

One parametrized test over :meth:`jobctl.runbook.Library.names`: a runbook
without an entry in :data:`CASES` fails here, so a new runbook cannot go
untested.  Each case loads its incident (a :mod:`jobctl_fixtures.scenarios`
scenario, plus what the incident adds), starts a
:class:`jobctl_fixtures.live.LivePool` on the queue (producers, workers
and a scheduler racing every step), runs ``jobctl runbook run NAME --queue
Q --yes`` through the CLI, then the manual steps that reach the runbook's
goal, and checks:

- exit 0 for each run, and every selected step journaled as run (``ok``):
  no step stopped the run, none was skipped by its guard, every
  verification ran and held;
- the runbook's goal state, read back from Redis after the pool stopped.

The pools' workers are the ones after the fix (they ack every job): a
runbook's verification is about the incident, not about new failures.
They still take jobs the runbook planned while it runs, which is the race
every step must survive with exit 0.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from jobctl.cli.main import main
from jobctl.keys import ReliableListKeys
from jobctl.ops.journal import read_local
from jobctl.runbook import Library
from jobctl_fixtures.live import LivePool, with_behaviour
from jobctl_fixtures.protocol import now_ms
from jobctl_fixtures.scenarios import load_scenario

MIN = 60_000

#: Workers after the fix: they ack every job (a job failed again would be a
#: new incident, which a runbook's verification rightly reports).
FIXED = with_behaviour("healthy", ack=1.0, retry=0.0, dead=0.0, crash=0.0, delayed=0.0)
#: The same, slow enough (20-40 ms a job) that a backlog lasts through a run.
SLOW = with_behaviour("healthy", ack=1.0, retry=0.0, dead=0.0, crash=0.0, delayed=0.0, run_ms=(20, 40))
#: one worker of this takes about 3 jobs/s: it cannot empty a 300-job queue before a loaded machine's
#: runbook reaches its split step (SLOW's 30 jobs/s did, and the step was rightly skipped)
CRAWL = with_behaviour("healthy", ack=1.0, retry=0.0, dead=0.0, crash=0.0, delayed=0.0, run_ms=(250, 400))


@dataclass
class Ctx:
    """What a case's hooks see: the server, the incident's truth, the pool."""

    url: str
    client: Any
    queue: str
    tmp_path: Any
    capsys: Any
    config: str | None = None
    truth: Any = None
    pool: LivePool | None = None
    params: dict[str, str] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)

    def cli(self, *argv: str) -> int:
        """``jobctl --url URL [--config CFG] *argv`` in-process (its output captured)."""
        return main(["--url", self.url, *(["--config", self.config] if self.config else []), *argv])

    def status(self, queue: str | None = None) -> dict:
        self.capsys.readouterr()
        assert self.cli("status", queue or self.queue, "--json") == 0
        return orjson.loads(self.capsys.readouterr().out)["queues"][0]

    def check_ok(self, queue: str | None = None) -> bool:
        self.capsys.readouterr()
        code = self.cli("check", queue or self.queue, "--json")
        return code == 0 and orjson.loads(self.capsys.readouterr().out)["ok"]


@dataclass(frozen=True)
class Case:
    """One runbook's incident and goal.

    ``scenario``/``size``/``load``: the :func:`load_scenario` incident on
    ``queue`` (``load``: more of its keyword arguments);
    ``prepare(ctx)``: what the incident adds, before the pool starts (may
    set ``ctx.params``, passed as ``--set``); ``pool``: LivePool keyword
    arguments; ``ready(ctx)``: polled (at most ``READY_S``) before the run,
    the moment the runbook is meant for; ``manual``: manual steps run
    after, in order, each ``(step, extra --set params(ctx))``; ``goal(ctx)``
    asserts the end state after the pool stopped.  ``others``: more pools,
    ``(queue, LivePool keyword arguments)``; ``declared``: queues the
    config declares (reliable-list; default none: queues are discovered)."""

    scenario: str
    size: int = 300
    queue: str = "email"
    load: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[Ctx], None] | None = None
    pool: dict[str, Any] = field(default_factory=dict)
    ready: Callable[[Ctx], bool] | None = None
    manual: tuple[tuple[str, Callable[[Ctx], dict[str, str]] | None], ...] = ()
    goal: Callable[[Ctx], None] | None = None
    others: tuple[tuple[str, dict[str, Any]], ...] = ()
    declared: tuple[str, ...] = ()


READY_S = 5.0


def _journaled(name: str) -> list[dict]:
    return [e for e in read_local(100_000) if e.get("operation") == "runbook-step" and e.get("runbook") == name]


def run_and_journal(ctx: Ctx, name: str, *extra: str) -> tuple[int, list[dict]]:
    """Exit code of ``jobctl runbook run NAME --queue Q --yes [--set ...] *extra``
    and the step entries that run journaled."""
    before = {e["run_id"] for e in _journaled(name)}
    sets = [a for k, v in ctx.params.items() for a in ("--set", f"{k}={v}")]
    code = ctx.cli("runbook", "run", name, "--queue", ctx.queue, "--yes", *sets, *extra)
    out, err = ctx.capsys.readouterr()
    ctx.memo.setdefault("log", []).append(out + err)
    return code, sorted((e for e in _journaled(name) if e["run_id"] not in before), key=lambda e: e["id"])


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# -- the cases ------------------------------------------------------------------------------


def _payloads(ctx: Ctx, ids) -> dict[str, bytes | None]:
    k = ReliableListKeys(ctx.queue)
    ids = list(ids)
    return dict(zip(ids, ctx.client.mget([k.job(i) for i in ids]))) if ids else {}


def _dead_of(ctx: Ctx, error: str) -> dict[str, bytes]:
    k = ReliableListKeys(ctx.queue)
    ids = [i.decode() for i in ctx.client.lrange(k.dead, 0, -1)]
    return {i: raw for i, raw in _payloads(ctx, ids).items()
            if raw is not None and orjson.loads(raw).get("lastErrorCode") == error}


def _upv_prepare(ctx: Ctx) -> None:
    transform = ctx.tmp_path / "v-fix.toml"
    transform.write_text('bump_version = true\n[set]\n"payload.schema" = 1\n')
    ctx.params.update(transform=str(transform), rate="100000")
    ctx.memo["originals"] = _dead_of(ctx, "SERIALIZATION_ERROR")
    assert len(ctx.memo["originals"]) > 10


def _upv_operation(ctx: Ctx) -> dict[str, str]:
    ops = [e for e in read_local(100_000) if e.get("operation") == "transform"]
    assert ops, "the transform step journaled no operation"
    return {"operation": ops[0]["id"]}


def _upv_goal(ctx: Ctx) -> None:
    originals: dict[str, bytes] = ctx.memo["originals"]
    now = _payloads(ctx, originals)
    restored = [i for i, raw in now.items() if raw == originals[i]]
    # every job the rollback could reach holds its original, byte for byte;
    # the others a worker took and acked since the redrive (payload gone)
    assert {i: raw for i, raw in now.items() if i not in restored} == dict.fromkeys(set(now) - set(restored))
    assert len(restored) >= len(originals) // 2, f"restored {len(restored)} of {len(originals)}"
    k = ReliableListKeys(ctx.queue)
    assert ctx.client.hmget(k.envelopes_before, restored) == [None] * len(restored)  # nothing left to roll back
    assert ctx.check_ok()


def _noisy_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert st["paused"] == 0
    assert ctx.check_ok()


def _retire_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert (st["ready"], st["scheduled"], st["migrating"]) == (0, 0, 0)
    assert ctx.check_ok()
    assert ctx.check_ok(f"{ctx.queue}-v2")


def _fresh_backlog(ctx: Ctx) -> bool:
    """The workers caught up: the oldest ready job is minutes old at most."""
    age = ctx.status().get("oldest_ready_age_ms")
    return age is None or age < 2 * MIN


def _dlq_prepare(ctx: Ctx) -> None:
    ctx.params.update(rate="100000", export_dir=str(ctx.tmp_path / "export"))


def _dlq_goal(ctx: Ctx) -> None:
    st = ctx.status()
    permanent = sum(n for (_, code), n in ctx.truth.dead_breakdown.items()
                    if code in ("HTTP_400", "DEADLINE_EXCEEDED"))
    assert (st["dead"], st["stuck"], st["suppressed"]) == (0, 0, permanent)
    assert (ctx.tmp_path / "export" / "_manifest.json").is_file()
    assert ctx.check_ok()


def _stuck_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert st["stuck"] == 0
    k = ReliableListKeys(ctx.queue)
    still = {i.decode() for i in ctx.client.zrangebyscore(k.deadline, "-inf", now_ms())}
    assert not (still & set(ctx.truth.stuck_ids))
    assert ctx.check_ok()


def _lag_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert st["scheduled_overdue_max_age_ms"] is None or st["scheduled_overdue_max_age_ms"] < MIN
    k = ReliableListKeys(ctx.queue)
    # every job overdue in the incident was promoted (a live worker may have
    # retried it since: then it waits for its new due time)
    scores = ctx.client.zmscore(k.scheduled, sorted(ctx.truth.overdue_ids))
    assert all(s is None or s > ctx.truth.now_ms for s in scores)
    assert ctx.check_ok()


def _storm_goal(ctx: Ctx) -> None:
    k = ReliableListKeys(ctx.queue)
    dead = [i.decode() for i in ctx.client.lrange(k.dead, 0, -1)]
    codes = {orjson.loads(raw).get("lastErrorCode") for raw in _payloads(ctx, dead).values() if raw}
    assert not codes & {"HTTP_503", "HTTP_429"}
    assert ctx.status()["stuck"] == 0
    assert ctx.check_ok()


def _poison_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert st["suppressed"] > 0 and st["stuck"] == 0
    k = ReliableListKeys(ctx.queue)
    dead = [i.decode() for i in ctx.client.lrange(k.dead, 0, -1)]
    for raw in _payloads(ctx, dead).values():
        doc = orjson.loads(raw)
        assert not (doc["attempt"] <= 1 and doc["lastErrorCode"] in ("HTTP_400", "SERIALIZATION_ERROR"))
    assert ctx.check_ok()


def _failover_prepare(ctx: Ctx) -> None:
    """A replica promoted while claims were half replicated: the LMOVE to
    processing reached it, the ZADD of the visibility deadline did not."""
    k = ReliableListKeys(ctx.queue)
    ctx.memo["torn"] = [ctx.client.lmove(k.ready, k.processing, "RIGHT", "LEFT").decode() for _ in range(3)]


def _failover_goal(ctx: Ctx) -> None:
    st = ctx.status()
    assert st["stuck"] == 0
    k = ReliableListKeys(ctx.queue)
    assert ctx.client.zmscore(k.deadline, ctx.memo["torn"]) == [None] * 3  # requeued, or taken again
    assert ctx.check_ok()


def _retention_cut_ms(ctx: Ctx) -> int:
    """A retention period in the widest gap between the dead jobs' ages
    (20 min to 3 h), so no job turns older than it while the runbook runs."""
    k = ReliableListKeys(ctx.queue)
    raws = _payloads(ctx, [i.decode() for i in ctx.client.lrange(k.dead, 0, -1)]).values()
    now = now_ms()
    ages = [now - orjson.loads(r)["lastAttemptAtEpochMs"] for r in raws if r]
    ages = sorted({20 * MIN, 180 * MIN, *(a for a in ages if 20 * MIN < a < 180 * MIN)})
    low, high = max(zip(ages, ages[1:]), key=lambda pair: pair[1] - pair[0])
    return (low + high) // 2 // 1000 * 1000


def _purge_prepare(ctx: Ctx) -> None:
    ctx.memo["cut_ms"] = cut = _retention_cut_ms(ctx)
    ctx.params.update(older_than=f"{cut // 1000}s", export_dir=str(ctx.tmp_path / "export"))
    ctx.capsys.readouterr()
    assert ctx.cli("suppress", ctx.queue, "--filter", "error = HTTP_400", "--reason", "triaged", "--yes") == 0
    ctx.capsys.readouterr()


def _purge_goal(ctx: Ctx) -> None:
    k = ReliableListKeys(ctx.queue)
    cutoff = now_ms() - ctx.memo["cut_ms"]
    dead = [i.decode() for i in ctx.client.lrange(k.dead, 0, -1)]
    for raw in _payloads(ctx, dead).values():
        assert orjson.loads(raw)["lastAttemptAtEpochMs"] > cutoff
    for state in ("dead", "suppressed"):
        assert (ctx.tmp_path / "export" / state / "_manifest.json").is_file()
    assert ctx.check_ok()


CASES: dict[str, Case] = {
    "dlq-spike": Case(
        "dlq-spike", size=300, load=dict(payload_ttl_s=1800), prepare=_dlq_prepare,
        pool=dict(behaviour=FIXED, rate=50, workers=2), ready=_fresh_backlog, goal=_dlq_goal),
    "stuck-processing": Case(
        "stuck-workers", size=300, pool=dict(behaviour=FIXED, rate=50, workers=2), goal=_stuck_goal),
    "scheduler-lag": Case(
        "scheduler-lag", size=300, prepare=lambda ctx: ctx.params.update(rate="100000"),
        pool=dict(behaviour=with_behaviour("healthy", ack=1.0, retry=0.0, dead=0.0, crash=0.0,
                                           delayed=0.3, scheduler=False), rate=50, workers=2),
        goal=_lag_goal),
    "retry-storm": Case(
        "dlq-spike", size=300, prepare=lambda ctx: ctx.params.update(rate="100000"),
        pool=dict(behaviour=FIXED, rate=50, workers=2), ready=_fresh_backlog, goal=_storm_goal),
    "poison-message": Case(
        "dlq-spike", size=300, pool=dict(behaviour=FIXED, rate=50, workers=2), goal=_poison_goal),
    "redis-failover": Case(
        "stuck-workers", size=300, prepare=_failover_prepare,
        pool=dict(behaviour=FIXED, rate=50, workers=2), goal=_failover_goal),
    "purge-with-export": Case(
        "dlq-spike", size=300, prepare=_purge_prepare,
        pool=dict(behaviour=FIXED, rate=50, workers=2), goal=_purge_goal),
    "noisy-tenant": Case(
        "healthy", size=300,
        prepare=lambda ctx: ctx.params.update(tenant="tenant_1"),
        pool=dict(behaviour=SLOW, rate=100, workers=2),
        manual=(("resume", None),), goal=_noisy_goal),
    "retire-or-split-queue": Case(
        "healthy", size=300,
        prepare=lambda ctx: ctx.params.update(tenant="tenant_1"),
        pool=dict(behaviour=CRAWL, rate=0, workers=1), others=(("email-v2", dict(behaviour=FIXED, rate=0)),),
        declared=("email", "email-v2"), manual=(("retire", None),), goal=_retire_goal),
    "unsupported-payload-version": Case(
        "dlq-spike", size=600, prepare=_upv_prepare,
        pool=dict(behaviour=SLOW, rate=20, workers=1),
        manual=(("rollback", _upv_operation),), goal=_upv_goal),
}


@pytest.mark.parametrize("name", Library().names())
def test_runbook_green_under_live_workers(name, redis_url, redis_client, tmp_path, capsys):
    case = CASES.get(name)
    assert case is not None, f"runbook {name} has no live case: add its incident and goal to CASES"
    book = Library().load(name)
    ctx = Ctx(redis_url, redis_client, case.queue, tmp_path, capsys)
    if case.declared:
        ctx.config = str(tmp_path / "jobctl.toml")
        (tmp_path / "jobctl.toml").write_text("".join(f'[queues.{q}]\nlayout = "reliable-list"\n'
                                                      for q in case.declared))
    ctx.truth = load_scenario(redis_client, case.scenario, queue=case.queue, size=case.size, seed=7, **case.load)
    if case.prepare:
        case.prepare(ctx)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(LivePool(redis_url, queue=case.queue, seed=7, **case.pool))
        others = [stack.enter_context(LivePool(redis_url, queue=q, seed=8, **kw)) for q, kw in case.others]
        ctx.pool = pool
        if case.ready:
            _wait(lambda: case.ready(ctx), READY_S, f"the moment runbook {name} is meant for")
        claimed = pool.counters["claimed"]
        code, steps = run_and_journal(ctx, name)
        assert pool.counters["claimed"] > claimed, "no worker took a job while the runbook ran"
        assert code == 0, f"runbook {name} exited {code}: {[(s['step'], s['result'], s['detail']) for s in steps]}"
        expected = [s.name for s in book.steps if not s.manual]
        assert [(s["step"], s["result"]) for s in steps] == [(n, "ok") for n in expected]
        for step, extra in case.manual:
            if extra:
                ctx.params.update(extra(ctx))
            code, steps = run_and_journal(ctx, name, "--step", step)
            assert code == 0, f"step {step} exited {code}: {[(s['result'], s['detail']) for s in steps]}"
            assert [(s["step"], s["result"]) for s in steps] == [(step, "ok")]
    for p in (pool, *others):
        assert p.counters["errors"] == 0, p.last_error
    if case.goal:
        case.goal(ctx)
    assert time.monotonic() - started < 300  # a guard against a hang, not a speed check (a loaded machine is slow)

