"""Permission checks before an operation's first write.

An ACL may let a user read and write one queue's keys and not another's
(``~queue:{a}:*``).  An operation that writes a second queue (migrate,
drain ``--to``, reshard) checks every key pattern it will use there before
its first write anywhere, so a refusal leaves every job where it was.
"""

from __future__ import annotations

from typing import Any

from ..errors import AuthFailed

__all__ = ["require_access", "denied"]


def denied(exc: BaseException) -> bool:
    """Whether ``exc`` is an ACL refusal (``NOPERM``)."""
    import redis.exceptions as rx

    return isinstance(exc, rx.NoPermissionError) or str(exc).upper().startswith("NOPERM")


def require_access(client: Any, reads: list[str], writes: list[str], queue: str) -> None:
    """Check that ``client``'s user may read each key of ``reads`` (``EXISTS``)
    and write each key of ``writes`` (``PERSIST``: a write command that
    changes nothing on a key that does not exist; pass keys no job uses, of
    the patterns the operation writes).  One pipelined round trip.

    Raises:
        AuthFailed: (exit 4) naming the first key refused, the permission
            and ``queue``.
    """
    pipe = client.pipeline(transaction=False)
    for key in reads:
        pipe.exists(key)
    for key in writes:
        pipe.persist(key)
    replies = pipe.execute(raise_on_error=False)
    kinds = ["read"] * len(reads) + ["write"] * len(writes)
    for key, kind, reply in zip(reads + writes, kinds, replies):
        if isinstance(reply, Exception) and denied(reply):
            raise AuthFailed(f"permission denied: this user may not {kind} {key} (queue {queue}); "
                             "nothing was changed")
