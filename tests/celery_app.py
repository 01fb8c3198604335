"""The Celery app whose own, unmodified worker tests/test_layout_celery.py
runs (``celery -A celery_app worker``, with ``tests/`` on ``PYTHONPATH``).

The broker is ``$CELTEST_BROKER`` (the fixture's Redis URL) with kombu's
Redis transport; ``$CELTEST_VISIBILITY_S`` sets its visibility timeout
(seconds, default Celery's 3600).
"""

from __future__ import annotations

import os
import time

from celery import Celery

#: While this key exists, :func:`hang` blocks (its worker is killed meanwhile).
HANG = "celtest:hang"

app = Celery("celtest", broker=os.environ.get("CELTEST_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.broker_transport_options = {"visibility_timeout": int(os.environ.get("CELTEST_VISIBILITY_S", "3600"))}
app.conf.worker_prefetch_multiplier = 1
app.conf.broker_connection_retry_on_startup = True


def _redis():
    import redis

    return redis.Redis.from_url(app.conf.broker_url)


@app.task(name="celtest.count")
def count(name: str, big: int) -> int:
    """Count one run of ``name`` (``celtest:count:<name>``) and keep ``big`` as received."""
    r = _redis()
    r.incr(f"celtest:count:{name}")
    r.set(f"celtest:arg:{name}", f"{type(big).__name__}:{big}")
    return big


@app.task(name="celtest.hang", acks_late=True)
def hang(name: str, big: int) -> int:
    """Count one start of ``name`` (``celtest:count:<name>``), then block
    while :data:`HANG` exists (at most 120 s); acked only when it returns."""
    r = _redis()
    r.incr(f"celtest:count:{name}")
    r.set(f"celtest:arg:{name}", f"{type(big).__name__}:{big}")
    deadline = time.monotonic() + 120
    while r.exists(HANG) and time.monotonic() < deadline:
        time.sleep(0.05)
    return big
