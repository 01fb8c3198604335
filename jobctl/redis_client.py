"""The one place a redis-py client is built (:func:`make_client`): one
server, a Redis Cluster or a Sentinel service's primary, with bytes replies,
``surrogateescape`` encoding, jobctl's client name and no silent retries."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .errors import UsageError
from .topology import Topology
from .urls import scrub

if TYPE_CHECKING:
    from .connection import Target

__all__ = ["make_client", "packer", "CLIENT_NAME", "name_connection", "connect_and_name"]


def _tls_kwargs(target: Target, topo: Topology) -> dict:
    opts = target.tls
    if not (topo.tls or opts.requested):
        return {}
    if topo.kind == "single" and not topo.nodes:
        raise UsageError(f"{target.source}: TLS options need a TCP URL, not unix://")
    for what, path in (("ca_cert", opts.ca_cert), ("client_cert", opts.client_cert),
                       ("client_key", opts.client_key)):
        if path and not os.path.isfile(path):
            raise UsageError(f"{target.source}: {what} file not found: {path}")
    if bool(opts.client_cert) != bool(opts.client_key):
        raise UsageError(f"{target.source}: client_cert and client_key go together")
    return {"ssl_ca_certs": opts.ca_cert, "ssl_certfile": opts.client_cert, "ssl_keyfile": opts.client_key,
            "ssl_cert_reqs": "required" if opts.verify else "none", "ssl_check_hostname": opts.verify}


def packer():
    """A command packer that encodes ``str`` arguments with
    ``surrogateescape``: hiredis's packer ignores ``encoding_errors``, so a
    job id read as bytes that are not UTF-8 (decoded with surrogateescape by
    :func:`jobctl.layouts.common.text`) would not go back as the same bytes.
    (redis-py's cluster client takes no packer: its node clients keep the
    default, and such ids fail there with a one-line error.)"""
    from redis.connection import Encoder, PythonRespSerializer

    try:
        from hiredis import pack_command
    except ImportError:
        return PythonRespSerializer(6000, Encoder("utf-8", "surrogateescape", False).encode)
    plain = frozenset({bytes, str, int, float})

    class Packer(PythonRespSerializer):
        """hiredis's packer (C: an MGET of 1,000 keys costs ~0.07 us a key
        instead of ~0.3) for the commands whose arguments are all plain
        ``bytes``, ``str``, ``int`` and ``float`` that it packs as redis-py
        would; redis-py's for the rest (a ``str`` with surrogate escapes,
        which hiredis refuses, memoryviews, subclasses)."""

        def pack(self, *args):
            if set(map(type, args)) <= plain:
                first = args[0]
                cmd = tuple(first.encode().split()) + args[1:] if type(first) is str else \
                    tuple(first.split()) + args[1:] if b" " in first else args
                try:
                    return [pack_command(cmd)]
                except UnicodeEncodeError:
                    pass
            return super().pack(*args)

    return Packer(6000, Encoder("utf-8", "surrogateescape", False).encode)


def _driver_info(redis) -> dict:
    """``driver_info``: what redis-py sends in ``CLIENT SETINFO`` (library
    ``redis-py``, its version), with the version read from
    ``redis.__version__``.  Without it redis-py looks its own version up in
    the installed packages' metadata (``importlib.metadata``) at every new
    connection: a scan of ``sys.path`` that costs a few ms at start-up.
    Empty for a redis-py without :class:`redis.DriverInfo` (before 7.1)."""
    info = getattr(redis, "DriverInfo", None)
    version = getattr(redis, "__version__", None)
    return {"driver_info": info(lib_version=version)} if info is not None and version else {}


#: The name jobctl's connections give themselves (``CLIENT SETNAME``).
CLIENT_NAME = "jobctl"


def name_connection(connection) -> None:
    """``CLIENT SETNAME jobctl`` on a redis-py ``connection`` that has just
    authenticated; a refusal (an ACL user without ``client|setname``, a
    server without the command) leaves the connection unnamed.  Raises
    what redis-py raises for a connection error."""
    from redis.exceptions import ResponseError

    connection.send_command("CLIENT", "SETNAME", CLIENT_NAME, check_health=False)
    try:
        connection.read_response()
    except ResponseError:
        pass


def connect_and_name(connection) -> None:
    """redis-py's ``redis_connect_func`` for one server or a Sentinel's
    primary: the connection's own handshake (AUTH, SELECT...), then
    :func:`name_connection`."""
    connection.on_connect()
    name_connection(connection)


def _replica_reads(replicas: bool) -> dict:
    """RedisCluster's arguments for reads on replicas (none: the primaries)."""
    if not replicas:
        return {}
    from redis.cluster import LoadBalancingStrategy

    return {"load_balancing_strategy": LoadBalancingStrategy.ROUND_ROBIN_REPLICAS}


def make_client(target: Target, *, timeout_s: float = 5.0, replicas: bool = False):
    """The client for ``target``: ``redis.Redis`` (one server),
    ``redis.RedisCluster`` (``redis+cluster://``: MOVED/ASK followed by
    redis-py) or the Sentinel service's primary (``redis+sentinel://``: a
    ``redis.Redis`` whose pool asks the Sentinels for the primary on every
    new connection).

    ``replicas``: a client for reads on replicas: on a cluster, read
    commands go to each slot's replicas (``READONLY``; scripts and writes
    still to the primary), behind Sentinel to the service's replicas
    (``SENTINEL REPLICAS``, the primary when none answers).  One server has
    none: :class:`UsageError`.

    Every client: bytes replies, ``encoding_errors="surrogateescape"``,
    client name ``jobctl`` (set when the server's ACL allows ``CLIENT
    SETNAME``: :func:`name_connection`), socket timeouts of ``timeout_s``
    seconds and no silent retry (an operation must know whether its script
    ran).  Raises :class:`UsageError` for a bad URL or TLS option; connects
    lazily.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from .client_classes import cluster_class, server_class

    topo = target.topology
    tls = _tls_kwargs(target, topo)
    common = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "decode_responses": False,
              "encoding_errors": "surrogateescape", "redis_connect_func": connect_and_name, **_driver_info(redis)}
    try:
        if topo.kind == "cluster":
            from redis.cluster import ClusterNode

            # RedisCluster runs the connection's own handshake, then this
            try:
                return cluster_class()(
                    startup_nodes=[ClusterNode(h, p) for h, p in topo.nodes], username=topo.username,
                    password=topo.password, ssl=bool(tls), **tls, retry=Retry(NoBackoff(), 0),
                    **_replica_reads(replicas), **{**common, "redis_connect_func": name_connection})
            except redis.exceptions.RedisClusterException as exc:
                raise _slot_map_refusal(topo, tls, timeout_s) or exc
        if topo.kind == "sentinel":
            from redis.sentinel import Sentinel

            spw = target.sentinel_password or topo.sentinel_password
            sentinel_kwargs = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
                               "password": spw, **({"ssl": True, **tls} if tls else {})}
            sentinel = Sentinel(list(topo.nodes), sentinel_kwargs=sentinel_kwargs,
                                **({"ssl": True, **tls} if tls else {}), command_packer=packer(), **common)
            pick = sentinel.slave_for if replicas else sentinel.master_for
            return pick(topo.service, redis_class=server_class(), username=topo.username,
                        password=topo.password, db=topo.db, retry=Retry(NoBackoff(), 0))
        if replicas:
            raise UsageError(f"{target.source}: one server has no replicas to read from")
        url = target.url
        if tls and url.lower().startswith("redis://"):
            url = "rediss://" + url[len("redis://"):]
        return server_class().from_url(url, **tls, retry=Retry(NoBackoff(), 0), command_packer=packer(), **common)
    except (ValueError, TypeError) as exc:
        raise UsageError(scrub(f"{target.source}: {exc}", target).splitlines()[0]) from None


def _slot_map_refusal(topo, tls: dict, timeout_s: float) -> BaseException | None:
    """redis-py words every refused ``CLUSTER SLOTS`` "Cluster mode is not
    enabled": the ACL's refusal (``NoPermissionError``) when the first seed
    node refuses it to this user, else ``None``."""
    import redis

    host, port = topo.nodes[0]
    probe = redis.Redis(host=host, port=port, username=topo.username, password=topo.password,
                        socket_timeout=timeout_s, socket_connect_timeout=timeout_s, ssl=bool(tls), **tls)
    try:
        probe.execute_command("CLUSTER SLOTS")
    except redis.exceptions.NoPermissionError as refused:
        return refused
    except redis.exceptions.RedisError:
        return None
    finally:
        probe.close()
    return None
