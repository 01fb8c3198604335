"""Where a Parquet export's Arrow memory comes from, so its peak RSS stays flat.

Two allocators, measured on 1M-job reliable-list exports (``bench/EXPORT.md``,
"Peak RSS"):

* :data:`POOL`, for every Arrow buffer the export builds from the windows
  (passed as ``memory_pool=`` to each pyarrow call that allocates): the C
  library's ``malloc`` (``pyarrow.system_memory_pool()``).
* Arrow's C++ default pool, which the Parquet encoder takes its page and
  compression buffers from, whatever ``memory_pool`` the writer is given
  (``pyarrow.set_memory_pool`` does not reach it either).  It is chosen from
  ``ARROW_DEFAULT_MEMORY_POOL`` when pyarrow is first imported, so
  :mod:`jobctl.export` sets that variable, unless the environment already
  does, before any of its modules imports pyarrow: jemalloc on Linux (the
  wheels there ship it), the system allocator elsewhere.

With pyarrow's default (mimalloc) for both, a 1M-job export peaked at
134-139 MiB, and at 151-159 MiB in 2 of 12 runs: mimalloc kept ~28 MiB of
freed encoder buffers resident, and the encoder's large buffers left holes
in glibc's heap.  With the system allocator for both, 125-128 MiB.  With
these two, 114-118 MiB at the same speed.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["POOL"]

#: The allocator of the Arrow buffers the export builds.
POOL = pa.system_memory_pool()
