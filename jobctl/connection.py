"""Where to connect, how, and how to say so without leaking a password.

URL precedence: ``--url``, else an explicit ``--profile``, else
``$JOBCTL_REDIS_URL``, else ``$REDIS_URL``, else the config's
``default_profile``, else ``redis://localhost:6379/0``.  Schemes:
``redis://``, ``rediss://`` (TLS) and ``unix://``, with optional
``user:password@`` and a db number, as redis-py parses them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from .config import Config, Profile
from .errors import AuthFailed, ConnectionFailed, UsageError

__all__ = ["Target", "resolve_target", "redact_url", "connect", "DEFAULT_URL"]

DEFAULT_URL = "redis://localhost:6379/0"
_SCHEMES = {"redis", "rediss", "unix"}


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
        parts = urlsplit(self.url)
        found = [pw for pw in parse_qs(parts.query).get("password", []) if pw]
        found += [m.group(1) for m in _QUERY_PASSWORD_RE_VALUE.finditer(parts.query) if m.group(1)]
        if parts.password:
            found.append(parts.password)
        return tuple({form for pw in found for form in (pw, unquote(pw), quote(unquote(pw), safe=""))})


def redact_url(url: str) -> str:
    """``redis://u:secret@h:1/0`` -> ``redis://u:***@h:1/0``; never raises."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable url>"
    query = _QUERY_PASSWORD_RE.sub(r"\1***", parts.query)  # redis-py takes ?password= too
    if password is None:
        head, sep, rest = url.partition("://")
        userinfo, at, host = rest.rpartition("@")
        if sep and at and ":" in userinfo:  # a raw "/", "?" or "#" in the password cut the netloc short
            host = _QUERY_PASSWORD_RE.sub(r"\1***", host)
            return f"{head}://{userinfo.split(':', 1)[0]}:***@{host}"
        return url if query == parts.query else urlunsplit(parts._replace(query=query))
    user = parts.username or ""
    # everything after the last "@", as written (``.port`` raises on a bad port)
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{user}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


#: A ``password=`` argument of a URL's query string (redis-py passes it on).
_QUERY_PASSWORD_RE = re.compile(r"((?:^|[&;?])password=)[^&;#]*", re.IGNORECASE)
_QUERY_PASSWORD_RE_VALUE = re.compile(r"(?:^|[&;])password=([^&;#]*)", re.IGNORECASE)


def _check_url(url: str, source: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        raise UsageError(f"{source}: malformed URL {redact_url(url)}") from None
    if parts.scheme not in _SCHEMES:
        raise UsageError(f"{source}: URL scheme must be redis://, rediss:// or unix://, "
                         f"got {redact_url(url)}")
    return url


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    if parts.password is not None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _from_profile(profile: Profile) -> Target:
    if not profile.url:
        raise UsageError(f"profile {profile.name!r} has no url")
    url = _check_url(profile.url, f"profile {profile.name}")
    if profile.password_env:
        pw = os.environ.get(profile.password_env)
        if pw is None:
            raise UsageError(f"profile {profile.name!r}: ${profile.password_env} is not set")
        url = _with_password(url, pw)
    return Target(url=url, source=f"profile {profile.name}", profile=profile)


def resolve_target(config: Config, *, url: str | None = None, profile: str | None = None) -> Target:
    """Pick the server by the precedence in the module docstring.

    Raises :class:`UsageError` for a malformed URL and
    :class:`~jobctl.errors.NotFound` for an unknown profile.
    """
    if url:
        return Target(url=_check_url(url, "--url"), source="--url")
    if profile:
        return _from_profile(config.profile(profile))
    for var in ("JOBCTL_REDIS_URL", "REDIS_URL"):
        if os.environ.get(var):
            return Target(url=_check_url(os.environ[var], f"${var}"), source=f"${var}")
    if config.default_profile:
        return _from_profile(config.profile(config.default_profile))
    return Target(url=DEFAULT_URL, source="default")


def scrub(text: str, target: Target | None) -> str:
    """Remove the target's password from ``text`` (belt and braces)."""
    if target is None:
        return text
    for secret in target.secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def connect(target: Target, *, timeout_s: float = 5.0, ping: bool = True):
    """A ``redis.Redis`` client (bytes responses) for ``target``.

    Pings once unless ``ping=False``.  Raises :class:`ConnectionFailed` when
    the server cannot be reached and :class:`AuthFailed` when authentication
    is refused; messages name the redacted URL only.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    try:
        # No silent retries: an operation must know whether its script ran.
        client = redis.Redis.from_url(
            target.url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            decode_responses=False,
            client_name="jobctl",
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as exc:
        raise UsageError(scrub(f"{target.source}: {exc}", target).splitlines()[0]) from None
    if ping:
        with translate_redis_errors(target):
            client.ping()
    return client


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
    if isinstance(exc, rx.TimeoutError):
        return ConnectionFailed(f"timed out talking to {where}")
    if isinstance(exc, rx.ConnectionError):
        return ConnectionFailed(f"cannot reach {where}: {text}")
    if isinstance(exc, rx.ResponseError) and upper.startswith("WRONGTYPE"):
        return DataError(f"a queue key holds the wrong Redis type at {where}: {text}")
    return exc
