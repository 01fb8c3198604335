"""``jobctl check`` for the sidekiq layout: Sidekiq's invariants, report only.

* every member of ``schedule``, ``retry`` and ``dead`` and every element of
  a queue list is a JSON object with a ``jid`` (``malformed``: Sidekiq's
  poller and worker fail on it);
* no jid is in two places (``multiple_states``: e.g. dead and queued again
  by a non-atomic retry that crashed);
* every ``queue:<q>`` list that holds jobs is named in the ``queues`` set
  (``unregistered_queue``: Sidekiq's workers fetch only the queues they are
  started with, and its Web UI lists only the set's);
* the dead set is below Sidekiq's cap (``dead_at_cap``: older deaths are
  being dropped).

Nothing is repaired.  Cost: every set and list is read in windows of
1,000 and ``queue:*`` is SCANned: linear in the instance, bounded commands.
"""

from __future__ import annotations

from jobctl.cluster import scan_pages
from jobctl.layouts.common import text
from jobctl.layouts.reliable_list.check import CheckReport, Problem
from jobctl.layouts.sidekiq.status import DEAD_CAP
from jobctl.layouts.walks import WINDOW
from jobctl.model import State

__all__ = ["check_instance"]


def _places(layout, report: CheckReport) -> dict[str, list[str]]:
    """``{jid: [state key, ...]}`` of every job; malformed ones reported."""
    where: dict[str, list[str]] = {}
    for state in (State.READY, State.SCHEDULED, State.DEAD):
        for batch in layout.iter_batches(state, batch=WINDOW):
            for rec in batch:
                if rec.envelope.problems:
                    report.problems.append(Problem("malformed", "", rec.job_id,
                                                   f"{rec.meta['state_key']}: {rec.envelope.problems[0]}"))
                else:
                    where.setdefault(rec.job_id, []).append(rec.meta["state_key"])
    return where


def check_instance(layout) -> CheckReport:
    """The check report of a Sidekiq instance (every finding report only)."""
    report = CheckReport(queue=layout.queue_name, layout=layout.name)
    where = _places(layout, report)
    report.checked_ids = len(where)
    for jid, keys in sorted(where.items()):
        if len(keys) > 1:
            report.problems.append(Problem("multiple_states", "", jid, "in " + ", ".join(sorted(keys))))
    known = {layout.keys.queue(q) for q in layout.queue_names()}
    for found in scan_pages(layout.client, layout.keys.queue("*"), WINDOW):
        for key in map(text, found):
            if key not in known and layout.client.type(key) == b"list" and layout.client.llen(key):
                report.problems.append(Problem("unregistered_queue", "", key, "not in the queues set"))
    dead = layout.client.zcard(layout.keys.dead)
    if dead >= DEAD_CAP:
        report.problems.append(Problem("dead_at_cap", "", layout.keys.dead,
                                       f"{dead:,} dead jobs: Sidekiq drops the oldest on every new death"))
    return report
