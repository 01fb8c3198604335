"""The Lua scripts jobctl runs, registered once per client, wrapped in typed
functions.

Each script lives in its own file under ``jobctl/lua/`` with a KEYS / ARGV /
returns header.  :func:`script` loads the file once per process and
registers it once per client; a line ``--@prelude`` in a script is replaced
by the shared prelude: ``jobctl/lua/prelude/checks.lua`` (type and argument
validation) then ``jobctl/lua/prelude/steps.lua`` (the per-job fences and
ordered writes), and a line ``--@prelude <name>`` by
``jobctl/lua/prelude/<name>.lua`` (``window``: the window calls' shared
steps; ``rl_step``; ``predicate``), so no script carries its own copy.  It (``redis.Redis.register_script``: EVALSHA with a
fallback to EVAL after a SCRIPT FLUSH or failover).  Every key a script
touches is passed in KEYS so that Redis Cluster can route the call.
"""

from __future__ import annotations

import weakref
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

__all__ = ["script", "source", "SCRIPT_NAMES"]

SCRIPT_NAMES = ("rl_zset_move", "rl_requeue", "rl_repair")
SCRIPT_NAMES += ("rl_recheck",)  # reliable-list: `check` re-reads each finding atomically

SCRIPT_NAMES += ("sg_replay",)  # stream-group replay
SCRIPT_NAMES += ("sg_pel_summary", "sg_count_after", "sg_requeue", "sg_zset_move", "sg_dead_move")  # stream-group
SCRIPT_NAMES += ("rl_pause_move", "rl_migrate_in", "rl_migrate_out", "rl_transform")  # reliable-list pause/resume, migrate
SCRIPT_NAMES += ("de_move",)  # delayed-events
SCRIPT_NAMES += ("dz_move",)  # delay-zset
SCRIPT_NAMES += ("hj_requeue",)  # hash-job: processing -> pending, bounded
SCRIPT_NAMES += ("hj_suppressed_move", "hj_repair")  # hash-job (failed list: hj_window)
SCRIPT_NAMES += ("list_restore", "lease")  # the walk driver's hold and lease (jobctl.ops.walk)
# the walk driver's window calls, one script per kind of list (and walk mode):
# jobctl.ops.walk.source.WINDOW_SCRIPTS; shared steps in prelude/window.lua
SCRIPT_NAMES += ("rl_window", "rl_tail", "jl_window", "hj_window", "hj_tail")
SCRIPT_NAMES += ("jl_tail",)  # json-list: an unfiltered redrive or purge (tail walk)
SCRIPT_NAMES += ("list_scan",)  # a filtered dead-list plan's server-side rule-out (jobctl.layouts.reliable_list.predicate_plan)
SCRIPT_NAMES += ("jl_requeue", "jl_suppressed_move", "jl_repair")  # json-list
SCRIPT_NAMES += ("rq_move", "rq_suppress", "bullmq_move", "bullmq_read", "bullmq_fence",
                 "bullmq_redrive")  # rq (failed registry), bullmq (failed jobs)
SCRIPT_NAMES += ("cel_requeue", "cel_purge")  # celery: overdue unacked messages back to their list; purge of ready ones
SCRIPT_NAMES += ("cel_replay",)  # celery: replay of failed tasks from their result records, once each
SCRIPT_NAMES += ("sk_move",)  # sidekiq: dead, retry and schedule sets

_REGISTERED: "weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]]" = weakref.WeakKeyDictionary()


#: The line a script writes where the shared prelude goes.
PRELUDE_MARK = "--@prelude"

#: The prelude's files under ``jobctl/lua/prelude/``, spliced in this order.
PRELUDE_FILES = ("checks.lua", "steps.lua")


@cache
def source(name: str) -> str:
    """The text of ``jobctl/lua/<name>.lua`` with the prelude inlined at its
    ``--@prelude`` line; raises FileNotFoundError."""
    lua = resources.files("jobctl").joinpath("lua")
    text = lua.joinpath(f"{name}.lua").read_text("utf-8")
    if PRELUDE_MARK in text:
        prelude = "\n".join(lua.joinpath("prelude", f).read_text("utf-8") for f in PRELUDE_FILES)
        text = "\n".join(prelude if line.strip() == PRELUDE_MARK else line for line in text.split("\n"))
    if PRELUDE_MARK + " " in text:  # "--@prelude <name>": prelude/<name>.lua
        lines = text.split("\n")
        for n, line in enumerate(lines):
            if line.startswith(PRELUDE_MARK + " "):
                lines[n] = lua.joinpath("prelude", f"{line.split()[1]}.lua").read_text("utf-8")
        text = "\n".join(lines)
    return text


def script(client: "redis.Redis", name: str) -> "Script":
    """The registered script ``name`` for ``client`` (registered on first use)."""
    per_client = _REGISTERED.setdefault(client, {})
    s = per_client.get(name)
    if s is None:
        from .cluster import is_cluster

        s = per_client[name] = _ClusterScript(client, source(name)) if is_cluster(client) \
            else client.register_script(source(name))
    return s


def _cluster_script_class():
    from redis.cluster import ClusterPipeline
    from redis.commands.core import Script

    class ClusterScript(Script):
        """A script on a Redis Cluster: called directly it routes by its
        first key (EVALSHA, reloaded on NOSCRIPT by redis-py); queued on a
        cluster pipeline (whose ``evalsha`` method redis-py blocks, and where
        a NOSCRIPT from a freshly promoted primary could not be retried) it is
        sent as a raw ``EVAL`` with its text, routed by key slot."""

        def __call__(self, keys=None, args=None, client=None):
            if isinstance(client, ClusterPipeline):
                keys = list(keys or [])
                return client.execute_command("EVAL", self.script, len(keys), *keys, *(args or []))
            return super().__call__(keys=keys, args=args, client=client)

    return ClusterScript


def _ClusterScript(client, text: str):  # noqa: N802 - a class built on first use (redis-py imported late)
    global _CLUSTER_SCRIPT
    if _CLUSTER_SCRIPT is None:
        _CLUSTER_SCRIPT = _cluster_script_class()
    return _CLUSTER_SCRIPT(client, text)


_CLUSTER_SCRIPT = None
