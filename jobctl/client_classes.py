"""The redis-py client classes jobctl talks through (made by
:func:`jobctl.redis_client.make_client`): ``redis.Redis`` and
``redis.RedisCluster`` with two additions.

* An ACL refusal names its command: redis-py words a refused command of a
  pipeline with the command, but a single command's ``NOPERM`` reply does
  not say which key was refused; the command's words are kept on the
  exception (``jobctl_command``), so :func:`jobctl.redis_errors.translate`
  can name the key (``may not read queue:{t}:dead``).
* On a cluster, an ``MGET`` rides out a slot being resharded.  While a slot
  migrates, a multi-key command whose keys are split between the source and
  the destination (some moved, some not, or absent) gets ``TRYAGAIN`` until
  the migration ends; redis-py retries it a few times, then gives up
  (``ClusterError: TTL exhausted``).  A single-key command is answered where
  its key lives (the source, or the destination after an ``ASK``), so an
  ``MGET`` refused that way is sent again as single-key ``GET``s in one
  pipeline: the same values, in order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["server_class", "cluster_class"]

_CLASSES: dict[str, Any] = {}


def server_class() -> Any:
    """The ``redis.Redis`` subclass for one server or a Sentinel service's node."""
    if "server" not in _CLASSES:
        import redis

        class JobctlRedis(redis.Redis):
            """``redis.Redis`` whose ACL refusals keep their command's words."""

            def execute_command(self, *args, **options):
                return _naming(super().execute_command, args, options)

        _CLASSES["server"] = JobctlRedis
    return _CLASSES["server"]


def cluster_class() -> Any:
    """The ``redis.RedisCluster`` subclass (made once, redis imported lazily)."""
    if "cluster" not in _CLASSES:
        import redis

        class JobctlCluster(redis.RedisCluster):
            """``redis.RedisCluster`` whose ACL refusals keep their command's
            words and whose :meth:`mget` falls back to pipelined single-key
            ``GET``s when the slot is migrating."""

            def execute_command(self, *args, **kwargs):
                return _naming(super().execute_command, args, kwargs)

            def mget(self, keys, *args):
                names = [*keys, *args] if isinstance(keys, (list, tuple)) else [keys, *args]
                try:
                    return super().mget(names)
                except redis.exceptions.RedisError as exc:
                    if not _migrating(exc):
                        raise
                pipe = self.pipeline(transaction=False)
                for name in names:
                    pipe.get(name)
                return pipe.execute()

        _CLASSES["cluster"] = JobctlCluster
    return _CLASSES["cluster"]


def _naming(call, args: tuple, options: dict):
    """``call(*args, **options)``; an ACL refusal it raises carries the
    command's name and first key (a script's: its sha, key count and first
    key), never a value."""
    import redis.exceptions as rx

    try:
        return call(*args, **options)
    except rx.NoPermissionError as exc:
        words = [_word(a) for a in args[:4]]
        exc.jobctl_command = " ".join(words if words and words[0].upper().startswith("EVAL") else words[:2])
        raise


def _word(arg: Any) -> str:
    if isinstance(arg, bytes):
        return arg.decode("utf-8", "backslashreplace")
    return str(arg)


def _migrating(exc: BaseException) -> bool:
    """Whether ``exc`` is how redis-py reports a multi-key command refused
    by a migrating slot: ``TRYAGAIN``, or its retries run out."""
    import redis.exceptions as rx

    return isinstance(exc, rx.TryAgainError) or (isinstance(exc, rx.ClusterError) and "TTL exhausted" in str(exc))
