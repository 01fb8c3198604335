"""Where to connect, how, and how to say so without leaking a password.

URL precedence: ``--url``, else an explicit ``--profile``, else
``$JOBCTL_REDIS_URL``, else ``$REDIS_URL``, else the config's
``default_profile``, else ``redis://localhost:6379/0``.  Schemes (see
:mod:`jobctl.topology`): ``redis://``, ``rediss://`` (TLS), ``unix://``,
``redis+cluster://`` (Redis Cluster seed nodes) and ``redis+sentinel://``
(Sentinels and a service name), with optional ``user:password@``.

:func:`make_client` (:mod:`jobctl.redis_client`) is the one place a client is
built: ``redis.Redis``, ``redis.RedisCluster`` or a Sentinel-managed
``redis.Redis``, always with bytes replies (``decode_responses=False``),
``surrogateescape`` decoding and no silent retries.  URL redaction and
checks live in :mod:`jobctl.urls`, error translation in
:mod:`jobctl.redis_errors`; this module re-exports their public names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from .redis_client import make_client
from .config import Config, Profile
from .errors import ConnectionFailed, UsageError
from .redis_errors import translate, translate_redis_errors
from .topology import TlsOptions, Topology, parse_url
from .urls import check_url, password_forms, redact_url, scrub

__all__ = ["Target", "resolve_target", "redact_url", "connect", "make_client", "DEFAULT_URL", "scrub", "translate",
           "translate_redis_errors"]

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
        """The URL with any password replaced by ``***``; ``rediss`` when
        TLS came from flags or the profile's files on a ``redis`` URL (as
        the client connects: :func:`~jobctl.redis_client.make_client`)."""
        url = self.url
        if self.tls.requested and url.lower().startswith(("redis://", "redis+")):
            url = "rediss" + url[len("redis"):]
        return redact_url(url)

    @property
    def read_only(self) -> bool:
        return bool(self.profile and self.profile.read_only)

    @property
    def environment(self) -> str | None:
        return self.profile.environment if self.profile else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never appear in output (the password, raw and quoted)."""
        return password_forms(self.url, self.sentinel_password)


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
    url = check_url(url, f"profile {profile.name}")
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
        return Target(url=check_url(url, "--url"), source="--url", tls=tls)
    if profile:
        return _from_profile(config.profile(profile), tls)
    for var in ("JOBCTL_REDIS_URL", "REDIS_URL"):
        if os.environ.get(var):
            return Target(url=check_url(os.environ[var], f"${var}"), source=f"${var}", tls=tls)
    if config.default_profile:
        return _from_profile(config.profile(config.default_profile), tls)
    return Target(url=DEFAULT_URL, source="default", tls=tls)


def connect(target: Target, *, timeout_s: float = 5.0, ping: bool = True, replicas: bool = False):
    """:func:`make_client` for ``target`` (``replicas``: its reads on
    replicas), pinged once unless ``ping=False``.

    Raises :class:`ConnectionFailed` when the server cannot be reached and
    :class:`AuthFailed` when authentication is refused; messages name the
    redacted URL only.
    """
    from redis.exceptions import NoPermissionError

    with translate_redis_errors(target):
        client = make_client(target, timeout_s=timeout_s, replicas=replicas)
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
