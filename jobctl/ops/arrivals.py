"""Wake a hold loop when a queue's ready lists change, without reading
them in a loop: server-assisted client tracking (``CLIENT TRACKING ON
REDIRECT <id> BCAST PREFIX <key>...``, Redis 6+ / Valkey), whose
invalidation messages arrive on a second connection subscribed to
``__redis__:invalidate``.  Every write to a ready list (a producer's push,
a worker's pop) sends one, so a hold cycle starts about a round trip after
a job is pushed instead of up to an interval later.

Nothing is written: tracking only sends messages to this client.  Where
the server or the client cannot do it (Redis Cluster clients, an ACL
without ``CLIENT``, Redis < 6) :meth:`Arrivals.wait` simply sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["Arrivals", "SLICE_S", "CHANNEL"]

#: Where the server sends the invalidation messages of tracking (RESP2 redirect).
CHANNEL = "__redis__:invalidate"

#: The longest single wait (seconds): ``stopped()`` is polled this often.
SLICE_S = 0.05


class Arrivals:
    """Use as a context manager over ``client`` (a redis-py client with a
    ``connection_pool``) for the keys ``keys`` (each a prefix: a ready list
    and its priority lists).  :attr:`tracking` says whether the server
    sends the messages (else :meth:`wait` only sleeps)."""

    def __init__(self, client: Any, keys: list[str]) -> None:
        self.client, self.keys = client, keys
        self.pool = getattr(client, "connection_pool", None)
        self._ps = self._ctl = None

    @property
    def tracking(self) -> bool:
        return self._ctl is not None

    def __enter__(self) -> "Arrivals":
        if self.pool is None or not self.keys:
            return self
        try:
            self._ps = self.client.pubsub()
            self._ps.subscribe(CHANNEL)
            self._ps.get_message(timeout=1.0)  # the confirmation
            port = self._ps.connection._sock.getsockname()[1]
            client_id = next(c["id"] for c in self.client.client_list(_type="pubsub")
                             if str(c.get("addr", "")).endswith(f":{port}"))
            self._ctl = self.pool.get_connection()
            prefixes = [w for key in self.keys for w in ("PREFIX", key)]
            self._ctl.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", client_id, "BCAST", *prefixes)
            self._ctl.read_response()
        except Exception:  # noqa: BLE001 - no tracking here: the loop sleeps instead
            self.__exit__()
        return self

    def wait(self, timeout_s: float, stopped: Callable[[], bool]) -> bool:
        """Wait until a tracked key is written (``True``), ``timeout_s``
        seconds pass or ``stopped()`` (``False``).  Reads every message
        that arrived (one wake-up for many writes)."""
        end = time.monotonic() + timeout_s
        while not stopped():
            left = end - time.monotonic()
            if left <= 0:
                return False
            if self._ctl is None:
                time.sleep(min(SLICE_S, left))
                continue
            try:
                conn = self._ps.connection
                if conn.can_read(timeout=min(SLICE_S, left)):
                    while conn.can_read(timeout=0):
                        self._ps.parse_response(block=False, timeout=0)
                    return True
            except Exception:  # noqa: BLE001 - the connection broke: sleep from now on
                self.__exit__()
        return False

    def __exit__(self, *exc: Any) -> None:
        if self._ctl is not None:
            try:
                self._ctl.disconnect()  # tracking ends with the connection
                self.pool.release(self._ctl)
            except Exception:  # noqa: BLE001 - nothing to give back
                pass
        if self._ps is not None:
            try:
                self._ps.close()
            except Exception:  # noqa: BLE001 - nothing to give back
                pass
        self._ps = self._ctl = None
