"""Where to connect, how, and how to say so without leaking a password.

URL precedence: ``--url``, else an explicit ``--profile``, else
``$JOBCTL_REDIS_URL``, else ``$REDIS_URL``, else the config's
``default_profile``, else ``redis://localhost:6379/0``.  Schemes (see
:mod:`jobctl.topology`): ``redis://``, ``rediss://`` (TLS), ``unix://``,
``redis+cluster://`` (Redis Cluster seed nodes) and ``redis+sentinel://``
(Sentinels and a service name), with optional ``user:password@``.

:func:`make_client` is the one place a client is built: ``redis.Redis``,
``redis.RedisCluster`` or a Sentinel-managed ``redis.Redis``, always with
bytes replies (``decode_responses=False``), ``surrogateescape`` decoding and
no silent retries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from .config import Config, Profile
from .errors import AuthFailed, ConnectionFailed, UsageError
from .topology import SCHEMES, TlsOptions, Topology, parse_url

__all__ = ["Target", "resolve_target", "redact_url", "connect", "make_client", "DEFAULT_URL"]

DEFAULT_URL = "redis://localhost:6379/0"


@dataclass(frozen=True)
class Target:
    """A resolved connection target.

    ``url`` may hold a password: never print it; use :attr:`display`.
    ``source`` says where the URL came from (``--url``, ``profile prod``,
    ``$REDIS_URL``...).
    """

    url: str
    source: str
    profile: Profile | None = None
    tls: TlsOptions = TlsOptions()
    sentinel_password: str | None = None

    @property
    def topology(self) -> Topology:
        """The parsed URL; raises :class:`UsageError`."""
        return parse_url(self.url, self.source)

    @property
    def display(self) -> str:
        """The URL with any password replaced by ``***``."""
        return redact_url(self.url)

    @property
    def read_only(self) -> bool:
        return bool(self.profile and self.profile.read_only)

    @property
    def environment(self) -> str | None:
        return self.profile.environment if self.profile else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never appear in output (the password, raw and quoted)."""
        found: list[str] = [self.sentinel_password] if self.sentinel_password else []
        try:
            parts = urlsplit(self.url)
            found += [pw for pw in parse_qs(parts.query).get("password", []) if pw]
            found += [m.group(1) for m in _QUERY_PASSWORD_RE_VALUE.finditer(parts.query) if m.group(1)]
            if parts.password:
                found.append(parts.password)
        except ValueError:
            pass
        if not _parses_cleanly(self.url):  # all after the user's first ":" up to the last "@"
            userinfo = self.url.partition("://")[2].rpartition("@")[0]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
        return tuple({form for pw in found for form in (pw, unquote(pw), quote(unquote(pw), safe=""))})


def redact_url(url: str) -> str:
    """``redis://u:secret@h:1/0`` -> ``redis://u:***@h:1/0``; never raises.

    A URL that does not parse cleanly (an ``@``, ``/``, ``?`` or ``#``
    written unescaped in the password, a bad port...) has everything
    between the scheme and its last ``@`` masked: ``redis://***@host/0``.
    ``password=`` and ``sentinel_password=`` query values are masked too.
    """
    if not isinstance(url, str):
        return "<not a URL>"
    head, sep, rest = url.partition("://")
    if not sep:
        before, at, after = url.rpartition("@")
        return f"***@{after}" if at else url
    if not _parses_cleanly(url):
        _, at, after = rest.rpartition("@")
        return f"{head}://***@{_mask_query(after)}" if at else f"{head}://{_mask_query(rest)}"
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hosts = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{hosts}"
    return f"{head}://{authority}{_mask_query(tail)}"


def _mask_query(text: str) -> str:
    path, q, query = text.partition("?")
    return path + q + _QUERY_PASSWORD_RE.sub(r"\1***", query) if q else text


def _parses_cleanly(url: str) -> bool:
    """True when ``url`` has at most one ``@``, inside its authority, and its
    hosts and ports parse (several hosts only for the cluster and Sentinel
    schemes)."""
    scheme, _, rest = url.partition("://")
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    if rest.count("@") > 1 or "@" in rest[cut:]:
        return False
    if "+" in scheme:
        try:
            parse_url(url, "url")
        except UsageError:
            return False
        return True
    try:
        urlsplit(url).port  # noqa: B018
    except ValueError:
        return False
    return True


#: A ``password=`` argument of a URL's query string (redis-py passes it on).
_QUERY_PASSWORD_RE = re.compile(r"((?:^|[&;?])(?:sentinel_)?password=)[^&;#]*", re.IGNORECASE)
_QUERY_PASSWORD_RE_VALUE = re.compile(r"(?:^|[&;])(?:sentinel_)?password=([^&;#]*)", re.IGNORECASE)


def _check_url(url: str, source: str) -> str:
    """``url`` when it parses (:func:`jobctl.topology.parse_url`); else
    :class:`UsageError` naming the redacted URL.  Its message never quotes
    the URL's userinfo: a ``/``, ``?``, ``#`` or ``@`` written unescaped in
    a password is refused before anything reads the URL's parts."""
    if not isinstance(url, str):
        raise UsageError(f"{source}: the URL must be a string, got {type(url).__name__}")
    if not url.strip():
        raise UsageError(f"{source}: the URL is empty")
    if ambiguous_userinfo(url):
        raise UsageError(f"{source}: malformed URL {redact_url(url)}: write a '/', '?', '#' or '@' of the user "
                         "name or password percent-encoded (%2F, %3F, %23, %40)")
    try:
        topo = parse_url(url, source)
        if topo.kind == "single" and not url.lower().startswith("unix"):
            urlsplit(url).port  # noqa: B018  (raises ValueError on a bad port)
        for host, _port in topo.nodes:
            check_host_name(host, source)
    except UsageError as exc:
        raise UsageError(scrub(f"{exc} ({redact_url(url)})", Target(url=url, source=source))) from None
    except ValueError:
        raise UsageError(f"{source}: malformed URL {redact_url(url)}") from None
    return url


def ambiguous_userinfo(url: str) -> bool:
    """True when ``url`` has an authority and an ``@`` after the first
    ``/``, ``?`` or ``#`` that follows it: a password holding one of those
    characters unescaped (``redis://u:a/b@host/0``), where no reading of
    the URL can tell the password from the host."""
    rest = url.partition("://")[2]
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    return cut > 0 and "@" in rest[cut:]


#: The longest DNS name and label (RFC 1035), in characters.
MAX_HOST_NAME, MAX_HOST_LABEL = 253, 63


def check_host_name(host: str, source: str) -> None:
    """Raise :class:`UsageError` unless ``host`` (an IP address or a DNS
    name, as the resolver will be asked) can be looked up: every label of
    1..63 characters, at most 253 in all, IDNA-encodable."""
    if ":" in host:  # an IPv6 address (the brackets are gone)
        return
    name = host[:-1] if host.endswith(".") else host
    shown = host if len(host) <= 40 else host[:37] + "..."
    if len(name) > MAX_HOST_NAME:
        raise UsageError(f"{source}: bad host name {shown!r}: longer than {MAX_HOST_NAME} characters")
    if any(not 0 < len(label) <= MAX_HOST_LABEL for label in name.split(".")):
        raise UsageError(f"{source}: bad host name {shown!r}: each dot-separated label must be 1 to "
                         f"{MAX_HOST_LABEL} characters")
    try:
        name.encode("idna")
    except UnicodeError:
        raise UsageError(f"{source}: bad host name {shown!r}") from None


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    if parts.password is not None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _env_secret(profile: Profile, var: str) -> str:
    value = os.environ.get(var)
    if value is None:
        raise UsageError(f"profile {profile.name!r}: ${var} is not set")
    return value


def _from_profile(profile: Profile, tls: TlsOptions) -> Target:
    url = profile.connect_url
    if not url:
        raise UsageError(f"profile {profile.name!r} has no url (nor cluster_nodes, nor sentinels)")
    url = _check_url(url, f"profile {profile.name}")
    if profile.password_env:
        url = _with_password(url, _env_secret(profile, profile.password_env))
    spw = _env_secret(profile, profile.sentinel_password_env) if profile.sentinel_password_env else None
    own = TlsOptions(ca_cert=profile.ca_cert, client_cert=profile.client_cert, client_key=profile.client_key,
                     verify=profile.tls_verify)
    if profile.tls and url.startswith("redis") and not url.startswith("rediss"):
        url = "rediss" + url[len("redis"):]
    return Target(url=url, source=f"profile {profile.name}", profile=profile, tls=own.merged(tls),
                  sentinel_password=spw)


def resolve_target(config: Config, *, url: str | None = None, profile: str | None = None,
                   tls: TlsOptions = TlsOptions()) -> Target:
    """Pick the server by the precedence in the module docstring; ``tls``
    (the global flags) overrides the profile's TLS settings.

    Raises :class:`UsageError` for a malformed URL and
    :class:`~jobctl.errors.NotFound` for an unknown profile.
    """
    if url is not None:
        return Target(url=_check_url(url, "--url"), source="--url", tls=tls)
    if profile:
        return _from_profile(config.profile(profile), tls)
    for var in ("JOBCTL_REDIS_URL", "REDIS_URL"):
        if os.environ.get(var):
            return Target(url=_check_url(os.environ[var], f"${var}"), source=f"${var}", tls=tls)
    if config.default_profile:
        return _from_profile(config.profile(config.default_profile), tls)
    return Target(url=DEFAULT_URL, source="default", tls=tls)


def scrub(text: str, target: Target | None) -> str:
    """Remove the target's password from ``text`` (belt and braces)."""
    if target is None:
        return text
    for secret in target.secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


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


def _packer():
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


def make_client(target: Target, *, timeout_s: float = 5.0):
    """The client for ``target``: ``redis.Redis`` (one server),
    ``redis.RedisCluster`` (``redis+cluster://``: MOVED/ASK followed by
    redis-py) or the Sentinel service's primary (``redis+sentinel://``: a
    ``redis.Redis`` whose pool asks the Sentinels for the primary on every
    new connection).

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

    topo = target.topology
    tls = _tls_kwargs(target, topo)
    common = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s, "decode_responses": False,
              "encoding_errors": "surrogateescape", "redis_connect_func": connect_and_name, **_driver_info(redis)}
    try:
        if topo.kind == "cluster":
            from redis.cluster import ClusterNode

            # RedisCluster runs the connection's own handshake, then this
            return redis.RedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in topo.nodes], username=topo.username,
                password=topo.password, ssl=bool(tls), **tls, retry=Retry(NoBackoff(), 0),
                **{**common, "redis_connect_func": name_connection})
        if topo.kind == "sentinel":
            from redis.sentinel import Sentinel

            spw = target.sentinel_password or topo.sentinel_password
            sentinel_kwargs = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
                               "password": spw, **({"ssl": True, **tls} if tls else {})}
            sentinel = Sentinel(list(topo.nodes), sentinel_kwargs=sentinel_kwargs,
                                **({"ssl": True, **tls} if tls else {}), command_packer=_packer(), **common)
            return sentinel.master_for(topo.service, redis_class=redis.Redis, username=topo.username,
                                       password=topo.password, db=topo.db, retry=Retry(NoBackoff(), 0))
        url = target.url
        if tls and url.lower().startswith("redis://"):
            url = "rediss://" + url[len("redis://"):]
        return redis.Redis.from_url(url, **tls, retry=Retry(NoBackoff(), 0), command_packer=_packer(), **common)
    except (ValueError, TypeError) as exc:
        raise UsageError(scrub(f"{target.source}: {exc}", target).splitlines()[0]) from None


def connect(target: Target, *, timeout_s: float = 5.0, ping: bool = True):
    """:func:`make_client` for ``target``, pinged once unless ``ping=False``.

    Raises :class:`ConnectionFailed` when the server cannot be reached and
    :class:`AuthFailed` when authentication is refused; messages name the
    redacted URL only.
    """
    from redis.exceptions import NoPermissionError

    with translate_redis_errors(target):
        client = make_client(target, timeout_s=timeout_s)
        if ping:
            try:
                client.ping()
            except NoPermissionError:
                pass  # it answered, as an ACL user without PING (e.g. +@read only)
            except Exception as exc:
                if exc.__class__.__name__ == "MasterNotFoundError":
                    raise ConnectionFailed(_sentinel_failure(client, target)) from None
                raise
    return client


def _sentinel_failure(client, target: Target) -> str:
    """Why no Sentinel named a primary: each Sentinel pinged on its own, the
    first one's error (an untrusted certificate, a refused password...)
    named; one line, no secret."""
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    why = "no Sentinel answered with a primary for the service"
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    for sentinel in getattr(manager, "sentinels", []):
        kw = sentinel.connection_pool.connection_kwargs
        conn = sentinel.connection_pool.connection_class(**{**kw, "retry": Retry(NoBackoff(), 0)})
        try:
            conn.connect()  # once, without redis-py's retries: its error is the cause
            conn.disconnect()
        except Exception as exc:  # noqa: BLE001 - its words are the message
            detail = scrub(str(exc), target).splitlines()[0][:200] if str(exc) else exc.__class__.__name__
            return f"cannot reach {target.display}: {why}; Sentinel {kw.get('host')}:{kw.get('port')}: {detail}"
    return f"cannot reach {target.display}: {why} (the Sentinels answer, but know no primary of it)"


class translate_redis_errors:
    """Context manager: redis-py exceptions -> one-line :class:`JobctlError`.

    ``AuthenticationError``/``NoPermissionError``/``NOAUTH``/``WRONGPASS`` ->
    :class:`AuthFailed`; ``ConnectionError``/``TimeoutError`` ->
    :class:`ConnectionFailed`; ``WRONGTYPE`` -> :class:`DataError`.

    ``target`` may be a zero-argument callable returning the target, read
    when an error is translated (a session resolves its target lazily,
    inside the block).
    """

    def __init__(self, target: "Target | None | Callable[[], Target | None]") -> None:
        self.target = target

    def __enter__(self) -> "translate_redis_errors":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            return False
        target = self.target() if callable(self.target) else self.target
        err = translate(exc, target)
        if err is exc:
            return False
        raise err from None


#: How redis-py words an error raised by one command of a pipeline.
_PIPELINE_ERROR_RE = re.compile(r"^Command # \d+ \((.*)\) of pipeline caused error: (.*)$")


def translate(exc: BaseException, target: Target | None) -> BaseException:
    """The :class:`JobctlError` for a redis-py exception (``exc`` itself if none fits)."""
    import redis.exceptions as rx

    from .errors import DataError

    where = target.display if target else "the server"
    text = scrub(str(exc), target).splitlines()[0] if str(exc) else exc.__class__.__name__
    piped = _PIPELINE_ERROR_RE.match(text)
    if piped:  # redis-py prefixes errors inside a pipeline with the command
        command = piped.group(1) if len(piped.group(1)) <= 80 else piped.group(1)[:77] + "..."
        text = f"{piped.group(2)} ({command})"
    upper = text.upper()
    if isinstance(exc, (rx.AuthenticationError, rx.AuthenticationWrongNumberOfArgsError)) or \
            upper.startswith(("NOAUTH", "WRONGPASS", "INVALID USERNAME")):
        return AuthFailed(f"authentication failed at {where}: {text}")
    if isinstance(exc, rx.NoPermissionError) or upper.startswith("NOPERM"):
        return AuthFailed(f"permission denied at {where}: {text}")
    if isinstance(exc, rx.RedisClusterException) and any(m in upper for m in _AUTH_MARKERS):
        # redis-py words a refused AUTH on every seed node as "cannot be connected: <the refusal>"
        return AuthFailed(f"authentication failed at {where}: {text.rpartition(': ')[2] or text}")
    if upper.startswith("CROSSSLOT") or "MUST MAP TO THE SAME KEY SLOT" in upper:
        return UsageError(f"the keys of this command do not share a Redis Cluster slot at {where}: {text}")
    if "CLUSTER MODE IS NOT ENABLED" in upper:
        return UsageError(f"{where} is not a Redis Cluster node: use redis:// (or rediss://) for one server")
    if "DB INDEX IS OUT OF RANGE" in upper:
        return UsageError(f"{target.source if target else 'the URL'}: the db index is out of range at {where}")
    if isinstance(exc, rx.InvalidResponse):  # an HTTP, SSH... server on the port
        return ConnectionFailed(f"{where} does not answer in the Redis protocol (is it a Redis server, "
                                f"and the port the right one?): {text[:100]}")
    if _is_unreachable(exc):
        return ConnectionFailed(f"cannot reach {where}: {text[:200]}")
    if exc.__class__.__name__ == "MasterNotFoundError":
        return ConnectionFailed(f"cannot reach {where}: no Sentinel answered with a primary for the service "
                                f"({text.split(':', 1)[0]})")
    if isinstance(exc, _topology_changes()):  # failover, resharding, a primary gone: stop between calls
        return ConnectionFailed(f"the primary changed or is unavailable at {where} "
                                f"({exc.__class__.__name__}: {text})")
    if isinstance(exc, rx.TimeoutError):
        return ConnectionFailed(f"timed out talking to {where}")
    if isinstance(exc, rx.ConnectionError):
        return ConnectionFailed(f"cannot reach {where}: {text}")
    if isinstance(exc, rx.ResponseError) and upper.startswith("WRONGTYPE"):
        return DataError(f"a queue key holds the wrong Redis type at {where}: {text}")
    return exc


#: How a server words a refused AUTH (in upper case), inside redis-py's cluster errors.
_AUTH_MARKERS = ("WRONGPASS", "NOAUTH", "INVALID USERNAME-PASSWORD PAIR", "INVALID PASSWORD",
                 "INVALID USERNAME OR PASSWORD", "AUTHENTICATION REQUIRED")


def _topology_changes() -> tuple[type[BaseException], ...]:
    """redis-py errors that mean the node we talk to is no longer the one to
    talk to (after redis-py has followed what it can): exit 3, run again."""
    import redis.exceptions as rx

    return (rx.ClusterDownError, rx.TryAgainError, rx.MovedError, rx.AskError, rx.ReadOnlyError,
            rx.MasterDownError, rx.SlotNotCoveredError, rx.ClusterError)


def _is_unreachable(exc: BaseException) -> bool:
    import redis.exceptions as rx

    text = str(exc).lower()
    return isinstance(exc, rx.RedisClusterException) and any(
        t in text for t in ("cannot be connected", "slots are not covered", "could not agree", "has no redis_connection"))
