"""The Celery app whose own, unmodified worker tests/test_layout_celery_replay.py
runs (``celery -A celery_results_app worker``, with ``tests/`` on ``PYTHONPATH``).

Broker and result backend are both ``$CELTEST_BROKER`` (the fixture's Redis
URL), with ``result_extended = True`` so a failed task's result record holds
its name, arguments and queue.
"""

from __future__ import annotations

import os

from celery import Celery

#: While this key exists, :func:`flaky` fails.
FAIL = "celres:fail"

_URL = os.environ.get("CELTEST_BROKER", "redis://127.0.0.1:6379/0")
app = Celery("celres", broker=_URL, backend=_URL)
app.conf.result_extended = True
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True


def _redis():
    import redis

    return redis.Redis.from_url(app.conf.broker_url)


@app.task(name="celres.flaky")
def flaky(name: str, big: int, tag: str = "") -> int:
    """Count one run of ``name`` (``celres:count:<name>``), keep ``big`` as
    received (``celres:arg:<name>``), then fail while :data:`FAIL` exists."""
    r = _redis()
    r.incr(f"celres:count:{name}")
    r.set(f"celres:arg:{name}", f"{type(big).__name__}:{big}")
    if r.exists(FAIL):
        raise RuntimeError(f"flag set for {name}")
    return big
