"""redis-py's exceptions as jobctl's one-line errors (:func:`translate`,
:class:`translate_redis_errors`), never quoting a password."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import AccessDenied, AuthFailed, ConnectionFailed, UsageError
from .urls import scrub

if TYPE_CHECKING:
    from .connection import Target

__all__ = ["translate", "translate_redis_errors", "is_refusal", "refusal", "first_refused"]


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
    if is_refusal(exc):
        # the command's words or the key read, where jobctl's clients and reads kept them (jobctl.client_classes)
        return refusal(exc, target, key=getattr(exc, "jobctl_key", None), access="read",
                       command=piped.group(1) if piped else getattr(exc, "jobctl_command", None))
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


#: How Redis names a refused command: 7.0 "this user has no permissions to run the 'xadd' command",
#: 7.2+ "User u has no permissions to run the 'xadd' command".
_NOPERM_COMMAND_RE = re.compile(r"permissions to run the '([^']+)' command", re.I)
#: How Redis words a refusal met by a command a Lua script runs (an ERR reply, not NOPERM).
_SCRIPT_REFUSAL = "THE USER EXECUTING THE SCRIPT CAN'T"
#: Commands that only read their keys: a refusal of one of them is a missing read permission.
_READS = frozenset("""EXISTS GET MGET STRLEN TYPE TTL PTTL LLEN LRANGE LINDEX LPOS ZCARD ZCOUNT ZRANGE ZRANGEBYSCORE
ZREVRANGE ZREVRANGEBYSCORE ZSCORE ZMSCORE ZRANK HGET HMGET HGETALL HLEN HEXISTS HSCAN HKEYS XLEN XRANGE XREVRANGE
XINFO XPENDING SCARD SMEMBERS SSCAN SISMEMBER DUMP OBJECT MEMORY EVALSHA_RO EVAL_RO""".split())


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is an ACL refusal: a ``NOPERM`` reply, or a command a
    Lua script ran that the ACL refused."""
    import redis.exceptions as rx

    from .errors import JobctlError

    if isinstance(exc, JobctlError):  # already one of jobctl's messages
        return False
    text = str(exc).upper()
    return isinstance(exc, rx.NoPermissionError) or text.startswith("NOPERM") or _SCRIPT_REFUSAL in text


def refusal(exc: BaseException, target: Target | None, *, key: str | None = None, access: str | None = None,
            command: str | None = None) -> AccessDenied:
    """The one-line :class:`AccessDenied` (exit 4) for an ACL refusal ``exc``,
    naming what the user lacks: the command Redis names (``run XADD``), else
    ``access`` (``read``/``write``) of ``key``, else the first key of
    ``command`` (a pipelined command as redis-py words it, ``EXISTS k1 k2``)."""
    where = f" at {target.display}" if target else ""
    text = scrub(str(exc), target).splitlines()[0] if str(exc) else exc.__class__.__name__
    piped = _PIPELINE_ERROR_RE.match(text)
    text = piped.group(2) if piped else text
    named = _NOPERM_COMMAND_RE.search(text)
    if named:
        what = f"run {named.group(1).upper()}"
    elif key is None and command:
        what = _command_words(command)
    elif key is not None:
        what = f"{access or 'use'} {key}"
    else:
        return AccessDenied(f"permission denied{where}: {text}")
    how = "in a script: " if _SCRIPT_REFUSAL in text.upper() else ""
    return AccessDenied(f"permission denied{where}: this user may not {how}{what} (its ACL refuses it; "
                        f"the roles and their key patterns: docs/acl.md)", what=what)


def first_refused(client, keys: list[str]) -> str | None:
    """The first of ``keys`` that ``client``'s user may not read (one
    pipelined ``EXISTS`` per key, one round trip), or ``None``: names the
    key of a refusal whose reply did not."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    replies = pipe.execute(raise_on_error=False)
    return next((k for k, r in zip(keys, replies) if isinstance(r, Exception) and is_refusal(r)), None)


def _command_words(command: str) -> str:
    """``read KEY`` / ``write KEY`` / ``use one of K1, K2 (EVALSHA)`` for a
    command line as redis-py words it in a pipeline error."""
    words = command.split()
    name = words[0].upper() if words else "?"
    if name in ("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO") and len(words) > 2:
        n = int(words[2]) if words[2].isdigit() else 0
        keys = words[3:3 + min(n, 3)] + (["..."] if n > 3 else [])
        return f"use one of the keys of {name} ({', '.join(keys)})" if keys else f"run {name}"
    if len(words) < 2:
        return f"run {name}"
    return f"{'read' if name in _READS else 'write'} {words[1]} ({name})"


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
