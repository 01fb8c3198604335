"""Where a Parquet export's Arrow memory comes from, so its peak RSS stays flat.

Every jobctl module that uses pyarrow imports it from here (``from
.arrow_memory import pa, pc, pq``: pyarrow, its compute functions and its
Parquet module), so pyarrow is loaded with these allocators:

* :data:`POOL`, for every Arrow buffer the export builds from the windows
  (passed as ``memory_pool=`` to each pyarrow call that allocates): the C
  library's ``malloc`` (``pyarrow.system_memory_pool()``).
* Arrow's C++ default pool, which the Parquet encoder takes its page and
  compression buffers from whatever ``memory_pool`` the writer is given
  (``pyarrow.set_memory_pool`` does not reach it).  Arrow chooses it from
  ``ARROW_DEFAULT_MEMORY_POOL`` while pyarrow loads: this module sets that
  variable to :data:`ENCODER_POOL` for the import alone, then restores the
  environment (child processes see it unchanged).  An operator's own
  ``ARROW_DEFAULT_MEMORY_POOL`` wins, and so does an earlier import of
  pyarrow by someone else.

Measured on 1M-job reliable-list exports (docs/performance.md, "Export: the column path, Arrow, and its allocator"):
with pyarrow's default (mimalloc) for both, peaks of 134-139 MiB, and
151-159 MiB in 2 of 12 runs (mimalloc kept ~28 MiB of freed encoder buffers
resident, and the encoder's large buffers left holes in glibc's heap); with
the system allocator for both, 125-128 MiB; with these two, 114-118 MiB at
the same speed.
"""

from __future__ import annotations

import os
import sys

__all__ = ["POOL", "ENCODER_POOL", "pa", "pc", "pq"]

#: The Parquet encoder's allocator: jemalloc on Linux (pyarrow's wheels
#: there ship it; decayed pages go back to the kernel within a second), the
#: system allocator elsewhere.
ENCODER_POOL = "jemalloc" if sys.platform.startswith("linux") else "system"
_VAR = "ARROW_DEFAULT_MEMORY_POOL"


def _load_pyarrow():
    if "pyarrow" in sys.modules or _VAR in os.environ:
        import pyarrow

        return pyarrow
    os.environ[_VAR] = ENCODER_POOL
    try:
        import pyarrow

        pyarrow.default_memory_pool()  # chosen now, from the variable
        return pyarrow
    finally:
        os.environ.pop(_VAR, None)


pa = _load_pyarrow()

import pyarrow.compute as pc  # noqa: E402  (pyarrow is loaded)
import pyarrow.parquet as pq  # noqa: E402

#: The allocator of the Arrow buffers the export builds.
POOL = pa.system_memory_pool()
