"""Count client-server round trips made through redis-py.

Every request redis-py sends, a single command or a whole pipeline, goes
out through one ``AbstractConnection.send_packed_command`` call, which is
then answered before the next request on that connection: so the number of
calls is the number of round trips.  :func:`install` wraps that method (an
instrument on the client; the server is real and unchanged).

Command line: run ``jobctl`` under the counter and write the count to the
file named by ``$BENCH_ROUNDTRIPS_FILE``::

    BENCH_ROUNDTRIPS_FILE=/tmp/rt python3 bench/roundtrips.py --url URL status --json
"""

from __future__ import annotations

import os
import sys

__all__ = ["RoundTrips", "install"]


class RoundTrips:
    """``count``: round trips since :func:`install` (or the last :meth:`reset`)."""

    def __init__(self) -> None:
        self.count = 0

    def reset(self) -> None:
        self.count = 0


_COUNTER: RoundTrips | None = None


def install() -> RoundTrips:
    """Wrap redis-py's ``send_packed_command`` once per process; returns the
    process-wide counter."""
    global _COUNTER
    if _COUNTER is not None:
        return _COUNTER
    from redis.connection import AbstractConnection

    counter = RoundTrips()
    original = AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        counter.count += 1
        return original(self, command, check_health=check_health)

    AbstractConnection.send_packed_command = counted
    _COUNTER = counter
    return counter


def _main() -> int:
    counter = install()
    from jobctl.cli.main import main

    code = main(sys.argv[1:])
    path = os.environ.get("BENCH_ROUNDTRIPS_FILE")
    if path:
        with open(path, "w") as fh:
            fh.write(f"{counter.count}\n")
    return code


if __name__ == "__main__":
    sys.exit(_main())
