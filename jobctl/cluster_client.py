"""The Redis Cluster client jobctl reads through: ``redis.RedisCluster``
whose ``MGET`` rides out a slot being resharded.

While a slot migrates, a multi-key command whose keys are split between
the source and the destination (some moved, some not, or absent) gets
``TRYAGAIN`` until the migration ends; redis-py retries it a few times,
then gives up (``ClusterError: TTL exhausted``).  A single-key command is
answered where its key lives (the source, or the destination after an
``ASK``), so an ``MGET`` refused that way is sent again as single-key
``GET``s in one pipeline: the same values, in order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cluster_class"]

_CLASS: Any = None


def cluster_class() -> Any:
    """The ``redis.RedisCluster`` subclass (made once, redis imported lazily)."""
    global _CLASS
    if _CLASS is None:
        import redis

        class JobctlCluster(redis.RedisCluster):
            """``redis.RedisCluster`` whose :meth:`mget` falls back to
            pipelined single-key ``GET``s when the slot is migrating."""

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

        _CLASS = JobctlCluster
    return _CLASS


def _migrating(exc: BaseException) -> bool:
    """Whether ``exc`` is how redis-py reports a multi-key command refused
    by a migrating slot: ``TRYAGAIN``, or its retries run out."""
    import redis.exceptions as rx

    return isinstance(exc, rx.TryAgainError) or (isinstance(exc, rx.ClusterError) and "TTL exhausted" in str(exc))
