"""URLs without leaking a password: redaction (:func:`redact_url`), the
passwords a URL holds (:func:`password_forms`, :func:`scrub`), and the
checks a URL passes before anything connects (:func:`check_url`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .errors import UsageError
from .topology import parse_url

if TYPE_CHECKING:
    from .connection import Target

__all__ = ["redact_url", "password_forms", "scrub", "scrub_secrets", "check_url", "ambiguous_userinfo",
           "check_host_name", "MAX_HOST_NAME", "MAX_HOST_LABEL"]


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


def check_url(url: str, source: str) -> str:
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
        raise UsageError(scrub_secrets(f"{exc} ({redact_url(url)})", password_forms(url))) from None
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


def scrub(text: str, target: "Target | None") -> str:
    """Remove the target's password from ``text`` (belt and braces)."""
    if target is None:
        return text
    return scrub_secrets(text, target.secrets)


def scrub_secrets(text: str, secrets) -> str:
    """``text`` with each of ``secrets`` (strings) replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def password_forms(url: str, *more: str | None) -> tuple[str, ...]:
    """The passwords of ``url`` (userinfo, ``password=`` and
    ``sentinel_password=`` query values, and for a URL that does not parse
    cleanly all after the user's first ``:`` up to the last ``@``) and
    ``more``, each raw, unquoted and quoted: the strings output must never hold."""
    found: list[str] = [m for m in more if m]
    try:
        parts = urlsplit(url)
        found += [pw for pw in parse_qs(parts.query).get("password", []) if pw]
        found += [m.group(1) for m in _QUERY_PASSWORD_RE_VALUE.finditer(parts.query) if m.group(1)]
        if parts.password:
            found.append(parts.password)
    except ValueError:
        pass
    if not _parses_cleanly(url):
        userinfo = url.partition("://")[2].rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    return tuple({form for pw in found for form in (pw, unquote(pw), quote(unquote(pw), safe=""))})
