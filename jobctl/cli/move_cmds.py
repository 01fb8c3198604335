"""Commands that move jobs between queues or rewrite them in place:
``jobctl migrate`` (``SRC DST``, or ``SRC --transform FILE`` /
``--rollback``), ``jobctl drain`` (``--to QUEUE`` or ``--export-to DIR``),
``jobctl replay`` and ``jobctl reshard``.  Each runs through the operations
core (:func:`jobctl.cli.ops_cmds.execute`); a layout that does not declare
the operation refuses with a one-line error.  Listed with the recovery
commands (:mod:`jobctl.cli.recovery_cmds`).
"""

from __future__ import annotations

import click

from ..errors import UsageError
from ..model import State
from ..ops.request import OpRequest
from ..ops.spec import Operation
from ..session import Session
from . import options
from .ops_cmds import common_options, execute, filter_option

__all__ = ["migrate", "drain", "replay", "reshard"]

pass_session = click.make_pass_decorator(Session)


def _migrate_request(src: str, dst: str, state: str, filter_text, limit, dry_run) -> OpRequest:
    return OpRequest(Operation.MIGRATE, src, source=State(state), target=State(state), filter_text=filter_text,
                     limit=limit, dry_run=dry_run, destination=dst)


@click.command()
@click.argument("src", shell_complete=options.complete_queue)
@click.argument("dst", required=False, shell_complete=options.complete_queue)
@filter_option()
@click.option("--state", type=click.Choice(["ready", "scheduled", "dead", "paused"]), default=None,
              help="Which jobs (default ready; a move between queues takes ready or scheduled).")
@click.option("--transform", "transform_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Rewrite the matching envelopes of SRC in place with this TOML transformation (no DST).")
@click.option("--rollback", metavar="OPERATION",
              help="Put back the envelopes the --transform operation OPERATION replaced (no DST).")
@common_options
@pass_session
def migrate(session: Session, src, dst, filter_text, state, transform_file, rollback, limit, rate, batch, dry_run,
            yes, as_json) -> int:
    """Move matching jobs of SRC to DST, or rewrite SRC's envelopes (--transform).

    SRC DST (two reliable-list queues): the queues live in different hash
    slots, so each job moves by copy-then-delete with a crash journal in
    jobctl's own keys (queue:{src}:jobctl:migrating): a rerun after a crash
    or kill -9 finishes the jobs it left, and no job stays in both queues.
    Jobs keep their ids, payloads and order; ready jobs are pushed at DST's
    producers' end.

    SRC --transform FILE: set, rename and delete envelope fields, bump
    jobVersion (the file's format: docs/recovery.md, "Envelope
    transformations"), in place, each job only while its payload is the one
    the plan saw; the old envelope is kept (queue:{t}:jobctl:envelopes-before)
    for --rollback.  Transformations stack: roll them back newest first (a
    rollback under a newer live transformation exits 2, naming it).
    --dry-run prints a before/after diff of sample envelopes.
    """
    if transform_file or rollback:
        if dst:
            raise UsageError("--transform and --rollback rewrite SRC in place: no DST")
        if transform_file and rollback:
            raise UsageError("--transform and --rollback exclude each other")
        from ..ops.transform import Rollback, load_transform

        transform = load_transform(transform_file) if transform_file else Rollback(rollback)
        st = State(state or ("dead" if rollback else "ready"))
        req = OpRequest(Operation.TRANSFORM, src, source=st, target=st, filter_text=filter_text, limit=limit,
                        dry_run=dry_run, transform=transform)
        if dry_run and not as_json and transform_file:
            _print_samples(session, req)
        return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)
    if not dst:
        raise UsageError("migrate needs DST (or --transform FILE)")
    if state not in (None, "ready", "scheduled"):
        raise UsageError("a move between queues takes --state ready or scheduled")
    req = _migrate_request(src, dst, state or "ready", filter_text, limit, dry_run)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


def _print_samples(session: Session, req: OpRequest, n: int = 3) -> None:
    """The before/after diff of the first ``n`` planned envelopes."""
    from ..ops.core import OperationCore

    for line in OperationCore(session).prepare(req).samples:
        click.echo(line)


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--to", "to", metavar="QUEUE", default=None, help="The reliable-list queue to move the jobs to.")
@click.option("--export-to", metavar="DIR", type=options.OUT_DIR, default=None,
              help="Export the jobs to DIR first (as `jobctl export` does; an export already in DIR is used), "
                   "then remove exactly the exported jobs.")
@click.option("--export-format", type=click.Choice(["parquet", "jsonl", "csv"]), default="parquet",
              show_default=True, help="Format of the --export-to export.")
@click.option("--state", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True,
              help="Which state to empty.")
@common_options
@pass_session
def drain(session: Session, queue, to, export_to, export_format, state, limit, rate, batch, dry_run, yes,
          as_json) -> int:
    """Empty QUEUE's ready (or scheduled) state into another queue (--to) or
    into an export (--export-to), to retire a queue or move work away from
    a broken consumer.  Jobs that arrive meanwhile stay: run it again.

    --to QUEUE: `jobctl migrate QUEUE TO` without a filter.

    --export-to DIR: the jobs are first exported to DIR (the files and
    _manifest.json `jobctl export` writes; an interrupted export is
    finished, a complete one is used as it is), then exactly the exported
    jobs whose payload (and due time) is unchanged leave the queue, index
    entry and payload, in bounded fenced calls.  After Ctrl-C or kill -9 the
    same command finishes: nothing is exported twice, nothing removed that
    the export does not hold.  A new DIR drains the jobs that arrived since.
    """
    if (to is None) == (export_to is None):
        raise UsageError("drain needs exactly one of --to QUEUE and --export-to DIR")
    if to is not None:
        req = _migrate_request(queue, to, state, None, limit, dry_run)
    else:
        req = OpRequest(Operation.DRAIN, queue, source=State(state), limit=limit, dry_run=dry_run,
                        export_to=export_to, export_format=export_format)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--from", "from_", metavar="TIME|ID", default=None,
              help="First entry: an entry id, epoch ms, ISO-8601 time or a duration ago (2h); stream-group: "
                   "required.")
@click.option("--to", "to", metavar="TIME|ID", default=None, help="Last entry (default: the newest acknowledged).")
@filter_option()
@common_options
@pass_session
def replay(session: Session, queue, from_, to, filter_text, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Re-add acknowledged stream entries as new entries (stream-group
    layout), or send failed Celery tasks again from their result records
    (celery layout, opt-in: replay_results = 1; see docs/layouts.md).

    Each replayed entry keeps its fields and gets replayOf = the original
    entry id.  Each original is replayed once, whatever the runs (one after
    the other or at the same time): jobctl records it
    (queue:{t}:jobctl:replay-record) in the same atomic step.  An entry that
    carries replayOf is a replay and is never replayed.  Entries still
    pending or not yet delivered are not history and are left alone.
    """
    from ..ops.stream_bounds import replay_range

    bounds = replay_range(from_, to) if from_ is not None or to is not None else None
    req = OpRequest(Operation.REPLAY, queue, source=State.HISTORY, target=State.READY, filter_text=filter_text,
                    limit=limit, dry_run=dry_run, replay_range=bounds)
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)


@click.command()
@click.argument("queue", shell_complete=options.complete_queue)
@click.option("--shards", type=options.Count(1, 1024), required=True, help="The new number of shards.")
@click.option("--state", type=click.Choice(["ready", "scheduled"]), default="ready", show_default=True,
              help="Which jobs to move to their new shard (run once per state).")
@common_options
@pass_session
def reshard(session: Session, queue, shards, state, limit, rate, batch, dry_run, yes, as_json) -> int:
    """Move each job of a sharded reliable-list queue to the shard its id
    hashes to with --shards N shards, by the rule its
    producers use (shard_rule in the catalogue), copy-then-delete with the
    crash journal of `jobctl migrate`.  Jobs already in their shard stay.
    Switch the producers and workers to N shards, then run it for ready and
    scheduled, then set shards = N in the catalogue."""
    from ..layouts.sharding import reshard_destination

    with session.errors():
        layout = session.layout(queue)
    req = OpRequest(Operation.MIGRATE, queue, source=State(state), target=State(state), limit=limit,
                    dry_run=dry_run, destination=reshard_destination(layout, shards))
    return execute(session, req, yes=yes, as_json=as_json, rate=rate, batch=batch)
