"""What a connection URL says about the deployment: one server, a Redis
Cluster or a Sentinel-managed primary, with or without TLS.

URL forms (``rediss`` instead of ``redis`` turns TLS on)::

    redis://[user:password@]host:port[/db]            one server
    unix://[user:password@]/path/to/socket[?db=N]     one server, Unix socket
    redis+cluster://[user:password@]h1:p1[,h2:p2...]  Redis Cluster seed nodes (db 0 only)
    redis+sentinel://[user:password@]s1:p1[,s2:p2...]/service[/db][?sentinel_password=...]

The user and password of a Sentinel URL are the data nodes' credentials;
the Sentinels' own password comes from ``?sentinel_password=`` or the
profile's ``sentinel_password_env``.  :func:`parse_url` raises
:class:`~jobctl.errors.UsageError` with a message that never holds the
password.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from .errors import UsageError

__all__ = ["Topology", "TlsOptions", "parse_url", "SCHEMES", "MAX_DB"]

#: Every URL scheme jobctl accepts.
SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel")
#: The largest db index a URL may name (Redis' ``databases`` is a C int).
MAX_DB = 2**31 - 1


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings of the profile and the global flags (paths to PEM files).

    ``verify=False`` turns certificate verification off (the front ends warn
    on stderr).  Any option set turns TLS on even with a ``redis://`` URL.
    """

    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    verify: bool = True

    @property
    def requested(self) -> bool:
        return bool(self.ca_cert or self.client_cert or self.client_key or not self.verify)

    def merged(self, other: "TlsOptions") -> "TlsOptions":
        """``other``'s settings where given (flags over profile)."""
        return TlsOptions(ca_cert=other.ca_cert or self.ca_cert, client_cert=other.client_cert or self.client_cert,
                          client_key=other.client_key or self.client_key, verify=self.verify and other.verify)


@dataclass(frozen=True)
class Topology:
    """A parsed URL.

    ``kind`` is ``"single"``, ``"cluster"`` or ``"sentinel"``; ``nodes`` the
    ``(host, port)`` seeds (cluster) or Sentinels (sentinel), or the one
    server (single; empty for a Unix socket); ``service`` the Sentinel
    service name; ``db`` the database index (0 on a cluster).
    """

    kind: str
    tls: bool
    nodes: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    query: dict[str, list[str]] = field(default_factory=dict)


def _db(text: str, where: str) -> int:
    text = text.strip("/")
    if text == "":
        return 0
    if not text.isdigit() or int(text) > MAX_DB:
        raise UsageError(f"{where}: the db index must be an integer from 0 to {MAX_DB}, got {text[:20]!r}")
    return int(text)


def _hosts(text: str, where: str, default_port: int) -> tuple[tuple[str, int], ...]:
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):  # [ipv6]:port
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
        if not host or (port_text and not port_text.isdigit()):
            raise UsageError(f"{where}: bad host:port {item!r} in the URL")
        port = int(port_text) if port_text else default_port
        if not 0 < port < 65536:
            raise UsageError(f"{where}: port out of range in {item!r}")
        out.append((host, port))
    if not out:
        raise UsageError(f"{where}: the URL names no host")
    return tuple(out)


def parse_url(url: str, where: str) -> Topology:
    """The :class:`Topology` of ``url``; ``where`` (``--url``, ``profile
    prod``...) starts every error message.  Raises :class:`UsageError`.

    The caller redacts nothing: no message here quotes the userinfo.
    """
    if not isinstance(url, str):
        raise UsageError(f"{where}: the URL must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise UsageError(f"{where}: URL scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    base, _, kind = scheme.partition("+")
    tls = base == "rediss"
    if scheme == "unix":
        try:
            parts = urlsplit(url)
            q = parse_qs(parts.query)
        except ValueError:
            raise UsageError(f"{where}: malformed URL") from None
        return Topology("single", False, (), None, _db((q.get("db") or ["0"])[0], where),
                        unquote(parts.username) if parts.username else None,
                        unquote(parts.password) if parts.password is not None else None, query=q)
    authority, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    if "?" in authority:
        authority, _, query = authority.partition("?")
    query = query.partition("#")[0]
    userinfo, at, hostpart = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, pw = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(pw) if colon else None
    try:
        q = parse_qs(query)
    except ValueError:
        raise UsageError(f"{where}: malformed URL query") from None
    if kind == "":
        nodes = _hosts(hostpart, where, 6379)
        if len(nodes) > 1:
            raise UsageError(f"{where}: several hosts need redis+cluster:// or redis+sentinel://")
        db = _db(path, where) if path else _db((q.get("db") or ["0"])[0], where)
        return Topology("single", tls, nodes, None, db, username, password, query=q)
    if kind == "cluster":
        nodes = _hosts(hostpart, where, 6379)
        if _db(path, where) != 0:
            raise UsageError(f"{where}: a Redis Cluster has only db 0")
        return Topology("cluster", tls, nodes, None, 0, username, password, query=q)
    nodes = _hosts(hostpart, where, 26379)
    service, _, db_text = path.partition("/")
    if not service:
        raise UsageError(f"{where}: a redis+sentinel:// URL needs the service name: "
                         "redis+sentinel://host:26379/SERVICE[/db]")
    spw = (q.get("sentinel_password") or [None])[0]
    return Topology("sentinel", tls, nodes, unquote(service), _db(db_text, where), username, password,
                    sentinel_password=spw, query=q)
