"""Read commands: ``status``, ``ls``, ``inspect``, ``attempts``, ``discover``.

None of them writes to Redis.  Malformed envelopes are reported on stderr
and the command carries on; keys of the wrong type make the command exit
with :attr:`ExitCode.DATA` after printing what it could read.
"""

from __future__ import annotations

import time

import click

from ..exitcodes import ExitCode
from ..model import State
from ..session import Session
from . import options, render

__all__ = ["COMMANDS"]

pass_session = click.make_pass_decorator(Session)

_STATES = click.Choice([s.value for s in State if s is not State.HISTORY])


def _discovery_note(session: Session) -> None:
    d = session.discovery
    if d is None:
        return
    from ..layouts import DEFAULT_LAYOUT  # a session without a catalogue discovers the default layout's queues

    bound = "" if d.complete else f" (stopped at its bound; the keyspace is larger)"
    render.note(f"no queue catalogue: discovered {len(d.queues)} {DEFAULT_LAYOUT} queue(s) by SCAN "
                f"of {d.scanned:,} key(s){bound}")


def collect_status(session: Session, names: tuple[str, ...]):
    """Status of each named (or every) queue, read at one ``now``.

    Raises :class:`~jobctl.errors.AccessDenied` for the first queue the ACL
    refuses (:func:`status_per_queue` reports them one by one)."""
    statuses, refused = status_per_queue(session, names)
    if refused:
        raise refused[0][1]
    return statuses


def status_per_queue(session: Session, names: tuple[str, ...]):
    """``(statuses, refused)`` of each named (or every) queue, read at one
    ``now``: ``refused`` holds ``(queue name, AccessDenied)`` for each queue
    the ACL lets this user not read, the refused key or command named."""
    from ..errors import AccessDenied
    from ..layouts.base import now_ms

    statuses, refused = [], []
    with session.errors():
        queues = session.queues(names)
        now = now_ms()
    for q in queues:
        try:
            with session.errors():
                statuses.append(session.read_layout(q).status_report(now))
        except AccessDenied as err:
            refused.append((q.name, _named_refusal(session, q, err)))
    return statuses, refused


def _named_refusal(session: Session, queue, err):
    """``err`` naming the key refused, probed among the queue's own keys
    when Redis did not name it (``NOPERM`` on a key never says which)."""
    from ..keys.common import fixed_key_names
    from ..redis_errors import first_refused, refusal

    if err.what is not None:
        return err
    layout = session.layout(queue)
    keys = [*layout.slot_keys(), *(k for shard in getattr(layout, "shards", ()) for k in fixed_key_names(shard)),
            layout.journal_key]
    with session.errors():
        key = first_refused(layout.client, keys)
    return err if key is None else refusal(err, session.target, key=key, access="read")


def queue_slos(session: Session) -> dict:
    """Queue name -> its :class:`~jobctl.dashboard.Slo` (``[queues.<name>.slo]``
    over the default bounds of :mod:`jobctl.thresholds`), for each queue of
    the config; raises :class:`~jobctl.errors.ConfigError` for a bad one."""
    from ..dashboard.slo import slo_for

    return {q.name: slo_for(q, session.config.path) for q in session.config.queues.values()}


def status_document(session: Session, statuses, refused=()) -> dict:
    """The ``status --json`` document (see README, "status JSON contract");
    ``refused``: ``(queue, error)`` pairs, listed under ``refused``."""
    doc = {
        "catalogue": "discovered" if session.discovery is not None else "config",
        "server": session.target.display,
        "queues": [s.to_json() for s in statuses],
    }
    if refused:
        doc["refused"] = [{"queue": q, "error": str(e)} for q, e in refused]
    return doc


def _report_problems(statuses) -> bool:
    bad = False
    for s in statuses:
        for w in s.warnings:
            render.note(f"warning: queue {s.queue}: {w}")
        for e in s.errors:
            render.note(f"error: queue {s.queue}: {e}")
            bad = True
    return bad


@click.command()
@click.argument("queues", nargs=-1, shell_complete=options.complete_queue)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document instead of a table.")
@click.option("--watch", type=options.Finite(0.2, 3600), metavar="SECONDS",
              help="Refresh every SECONDS until Ctrl-C.")
@pass_session
def status(session: Session, queues: tuple[str, ...], as_json: bool, watch: float | None) -> int:
    """Depth of every state of QUEUES (default: all).

    Per queue: ready (and per priority), oldest-ready age, scheduled, overdue
    (due but not moved: scheduler lag), next due, processing, stuck (past
    the visibility deadline), dead and suppressed.  One refresh costs two
    pipelined round trips per queue whatever the depth.
    """
    if watch is None:
        statuses, refused = status_per_queue(session, queues)
        _discovery_note(session)
        bad = _report_problems(statuses)
        if as_json:
            render.print_json(status_document(session, statuses, refused))
        elif statuses:
            render.console().print(render.status_table(statuses, slos=queue_slos(session)))
        for name, err in refused:  # the readable queues shown, each refused one named
            render.note(f"error: queue {name}: {err}")
        return int(ExitCode.AUTH if refused else ExitCode.DATA if bad else ExitCode.OK)
    return watch_status(session, queues, watch, as_json=as_json)


def watch_status(session: Session, queues: tuple[str, ...], interval: float, *, as_json: bool = False,
                 stop=None, header=None) -> int:
    """Refresh the status table every ``interval`` s until Ctrl-C or ``stop()``;
    each refresh names the queues the ACL refuses (``refused`` in JSON) and
    shows the others."""
    from rich.live import Live

    if as_json:
        try:
            while stop is None or not stop():
                statuses, refused = status_per_queue(session, queues)
                render.print_json(status_document(session, statuses, refused), compact=True)
                time.sleep(interval)
        except KeyboardInterrupt:  # Ctrl-C is how --watch ends
            pass
        return int(ExitCode.OK)
    con = render.console()
    _discovery_note(session)

    def frame():
        from rich.console import Group
        from rich.text import Text

        statuses, refused = status_per_queue(session, queues)
        stamp = time.strftime("%H:%M:%S")
        title = f"{session.target.display}  {stamp}  (every {interval:g}s, Ctrl-C to stop)"
        parts = [render.status_table(statuses, title=title, slos=queue_slos(session))]
        for s in statuses:
            for w in s.warnings + s.errors:
                parts.append(Text(f"{s.queue}: {w}", style="yellow"))
        for name, err in refused:  # a queue the ACL refuses is named in each frame; the others go on
            parts.append(Text(f"{name}: {err}", style="red"))
        if header is not None:
            parts.insert(0, header())
        return Group(*parts)

    try:
        with Live(frame(), console=con, refresh_per_second=4, screen=False, auto_refresh=False) as live:
            while stop is None or not stop():
                deadline = time.monotonic() + interval
                while time.monotonic() < deadline and (stop is None or not stop()):
                    time.sleep(min(0.1, interval))
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        pass
    return int(ExitCode.OK)


@click.command(name="ls")
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--state", type=_STATES, default="ready", show_default=True)
@click.option("--limit", type=options.Count(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_session
def ls(session: Session, queue: str, state: str, limit: int, as_json: bool) -> int:
    """List up to --limit jobs of QUEUE in --state, in serving order.

    ready: next to be claimed first; scheduled: earliest due first;
    processing: oldest claim first; dead and suppressed: newest first.
    """
    from ..layouts.base import now_ms

    with session.errors():
        layout = session.read_layout(queue)
        records = layout.list_jobs(State(state), limit)
    if state == "processing":  # deadlines shown from a guessed timeout: say so
        from ..config import visibility_note

        if (line := visibility_note(layout.queue)) is not None:
            render.note(f"warning: {line}")
    now = now_ms()
    for r in records:
        _truncate(r, False)
        if r.envelope.problems:
            render.note(f"warning: job {render.shown(r.job_id)}: malformed envelope: {'; '.join(r.envelope.problems)}")
    if as_json:
        render.print_json({"queue": queue, "state": state, "jobs": [r.to_json() for r in records]})
    else:
        render.console().print(render.jobs_table(records, now))
    return int(ExitCode.OK)


#: Bytes of a value ``inspect`` shows without ``--full``.
INSPECT_MAX_BYTES = 64 * 1024


def _truncate(record, full: bool) -> None:
    """Cut ``record.raw`` to :data:`INSPECT_MAX_BYTES` unless ``full`` (a note says so)."""
    raw = record.raw
    if full or raw is None or len(raw) <= INSPECT_MAX_BYTES:
        return
    record.raw = raw[:INSPECT_MAX_BYTES]
    record.meta["truncated"] = f"showing {INSPECT_MAX_BYTES:,} of {len(raw):,} bytes (--full shows all)"
    record.envelope.document = None  # the cut value is shown as raw text
    render.note(f"value of {len(raw):,} bytes truncated to {INSPECT_MAX_BYTES:,} (--full shows all)")


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--full", is_flag=True, help=f"Show values over {INSPECT_MAX_BYTES // 1024} KiB whole.")
@pass_session
def inspect(session: Session, queue: str, job_id: str, as_json: bool, full: bool) -> int:
    """Show one job: state, position or score, deadline, envelope (or raw bytes).

    A JOB_ID with bytes that are not UTF-8 may be typed as ls shows it
    (``job_\\xff``).  Values over 64 KiB are cut unless --full.
    """
    from ..errors import NotFound
    from ..layouts.base import now_ms

    with session.errors():
        layout = session.read_layout(queue)
        try:
            record = layout.inspect(job_id)
        except NotFound:
            from ..escape import unshown

            raw_id = unshown(job_id)  # typed as ls shows it: job_\\xff
            if raw_id == job_id:
                raise
            record = layout.inspect(raw_id)
    for p in record.envelope.problems:
        render.note(f"warning: job {render.shown(record.job_id)}: {p}")
    _truncate(record, full)
    if as_json:
        render.print_json(record.to_json())
    else:
        render.console().print(render.job_panel(record, now_ms()))
    return int(ExitCode.OK)


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--state", type=_STATES, default="dead", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_session
def attempts(session: Session, queue: str, state: str, as_json: bool) -> int:
    """The attempt histogram of QUEUE's --state.

    Exact up to 100,000 jobs in the state; beyond that 40 random windows of
    500 jobs are read and the counts scaled (marked "sampled", "~").
    """
    from ..attempts import attempt_histogram

    with session.errors():
        hist = attempt_histogram(session.read_layout(queue), State(state))
    if hist.sampled:
        render.note(f"{hist.depth:,} jobs in {state}: histogram sampled from {hist.read:,} jobs")
    if hist.unknown:
        render.note(f"warning: {hist.unknown:,} job(s) without a readable attempt field")
    if as_json:
        render.print_json(hist.to_json())
    else:
        render.console().print(render.histogram_table(hist))
    return int(ExitCode.OK)


#: Evidence keys listed per queue by ``discover --json`` (``evidence_total`` counts them all).
EVIDENCE_CAP = 20


def _evidence(keys: list[str]) -> list[str]:
    """The state keys first (lists, zsets, streams), then per-job keys, at most :data:`EVIDENCE_CAP`."""
    jobs = [k for k in keys if ":job:" in k or k.startswith("job:")]
    rest = [k for k in keys if k not in set(jobs)]
    return [render.shown(k) for k in (rest + jobs)[:EVIDENCE_CAP]]


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", type=options.Count(1000, 100_000_000), default=200_000, show_default=True,
              help="Examine at most this many keys.")
@click.option("--write-config", "write_config", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write what was found as a [queues] catalogue (TOML) to FILE (must not exist).")
@pass_session
def discover(session: Session, as_json: bool, limit: int, write_config: str | None) -> int:
    """Find queues of every layout by a bounded SCAN with TYPE checks.

    Prints each queue with its layout, config and the keys that are its
    evidence (jobctl.discovery).
    """
    import os

    from ..discovery import catalogue_toml
    from ..discovery import discover as run_discovery
    from ..errors import UsageError

    if write_config and os.path.exists(write_config):
        raise UsageError(f"--write-config: {write_config} exists; remove it or choose another file")
    with session.errors():
        d = run_discovery(session.client, limit=limit)
    if write_config:
        header = "\n".join([f"queues found by `jobctl discover` on {session.target.display}", *d.scan_notes()])
        try:
            with open(write_config, "w", encoding="utf-8") as fh:
                fh.write(catalogue_toml(d.queues, header=header))
        except OSError as exc:
            raise UsageError(f"--write-config: cannot write {write_config}: {exc.strerror or exc}") from None
        render.note(f"wrote {len(d.queues)} queue(s) to {write_config}")
    if as_json:
        render.print_json({"scanned": d.scanned, "complete": d.complete, **d.scan_json(),
                           "queues": [{"queue": q.name, "layout": q.layout, "tag": q.tag, "shards": q.shards,
                                       "priorities": q.priorities, "options": q.options,
                                       "evidence": _evidence(d.evidence[q.name]),
                                       "evidence_total": len(d.evidence[q.name]),
                                       **({"cluster_note": d.cluster_notes[q.name]}
                                          if q.name in d.cluster_notes else {})}
                                      for q in d.queues],
                           "rejected": d.rejected})
        return int(ExitCode.OK)
    for q in d.queues:
        extra = "".join([f" shards={q.shards}" if q.shards else "", f" priorities={q.priorities}"
                         if q.priorities else ""] + [f" {k}={v}" for k, v in q.options.items()])
        ev = d.evidence[q.name]
        shown = ", ".join(ev[:3]) + (", ..." if len(ev) > 3 else "")
        click.echo(f"{q.name}\t{q.layout}\t{'tag=' + q.tag if q.tag else '-'}{extra}\t({len(ev)} keys: {shown})")
        if q.name in d.cluster_notes:
            render.note(d.cluster_notes[q.name])
    for line in d.scan_notes():
        render.note(line)
    render.note(f"{len(d.queues)} queue(s)")
    return int(ExitCode.OK)


COMMANDS = [status, ls, inspect, attempts, discover]
