"""Whether an operation's writes reached the primary Sentinel names now.

During a Sentinel failover both data nodes may answer as primary for a few
seconds: the demoted one keeps taking writes and discards them when it
becomes a replica.  A run that wrote there has not done its work, however
many jobs its replies counted, so before it reports success the engine asks
(:func:`lost_primary`): ``ROLE`` on the connection that wrote, and the
Sentinels' current primary (``SENTINEL GET-MASTER-ADDR-BY-NAME``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["lost_primary"]


def _role(client: Any) -> str | None:
    """``ROLE``'s first word on ``client``'s connection; ``None`` when the
    ACL refuses ``ROLE`` (it is ``@admin``)."""
    from .access import denied

    try:
        role = client.execute_command("ROLE")[0]
    except Exception as exc:
        if denied(exc):
            return None
        raise
    return role.decode() if isinstance(role, bytes) else str(role)


def lost_primary(client: Any) -> str | None:
    """``None`` when ``client`` is not Sentinel-managed, or when its
    connection (a single-connection client: the one that wrote) is on the
    primary the Sentinels name now and answers ``ROLE`` as master; else one
    sentence saying where the writes went.  Raises what redis-py raises for
    an unreachable node or Sentinel."""
    pool = getattr(client, "connection_pool", None)
    manager = getattr(pool, "sentinel_manager", None)
    conn = getattr(client, "connection", None)
    if manager is None or conn is None:
        return None
    wrote_to = (str(conn.host), int(conn.port))
    host, port = manager.discover_master(pool.service_name)
    named = (str(host), int(port))
    role = _role(client)
    if named == wrote_to and role in ("master", None):  # None: ROLE refused by the ACL, the address decides
        return None
    return (f"the writes went to {wrote_to[0]}:{wrote_to[1]} ({role or 'role not readable'}), while the Sentinels now name "
            f"{named[0]}:{named[1]} the primary of {pool.service_name}: a demoted primary discards them")
