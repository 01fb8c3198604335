"""The Lua scripts jobctl runs, registered once per client, wrapped in typed
functions.

Each script lives in its own file under ``jobctl/lua/`` with a KEYS / ARGV /
returns header.  :func:`script` loads the file once per process and
registers it once per client (``redis.Redis.register_script``: EVALSHA with a
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

SCRIPT_NAMES = ("rl_dead_window", "rl_dead_restore", "rl_zset_move", "rl_requeue", "rl_repair")

SCRIPT_NAMES += ("sg_replay",)  # stream-group replay
SCRIPT_NAMES += ("sg_pel_summary", "sg_count_after", "sg_requeue", "sg_zset_move", "sg_dead_move")  # stream-group
SCRIPT_NAMES += ("rl_pause_move", "rl_migrate_in", "rl_migrate_out", "rl_transform")  # reliable-list pause/resume, migrate
SCRIPT_NAMES += ("de_move",)  # delayed-events
SCRIPT_NAMES += ("dz_move",)  # delay-zset
SCRIPT_NAMES += ("hj_list_move", "hj_suppressed_move", "hj_repair")  # hash-job
SCRIPT_NAMES += ("jl_requeue", "jl_dead_window", "jl_dead_restore", "jl_suppressed_move", "jl_repair")  # json-list

_REGISTERED: "weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]]" = weakref.WeakKeyDictionary()


@cache
def source(name: str) -> str:
    """The text of ``jobctl/lua/<name>.lua``; raises FileNotFoundError."""
    return resources.files("jobctl").joinpath("lua", f"{name}.lua").read_text("utf-8")


def script(client: "redis.Redis", name: str) -> "Script":
    """The registered script ``name`` for ``client`` (registered on first use)."""
    per_client = _REGISTERED.setdefault(client, {})
    s = per_client.get(name)
    if s is None:
        s = per_client[name] = client.register_script(source(name))
    return s
