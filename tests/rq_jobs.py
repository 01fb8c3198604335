"""Job functions RQ's own worker runs in tests/test_layout_rq.py (imported
by name, so this module must be importable by the worker)."""

from __future__ import annotations

from rq import get_current_job

#: While this key exists, :func:`fail_while_flag` raises.
FLAG = "rqtest:flag"


def fail_while_flag(name: str, big: int) -> int:
    """Fail while :data:`FLAG` exists; else count one run of ``name``
    (``rqtest:count:<name>``) and keep ``big`` as received (``rqtest:arg:<name>``)."""
    conn = get_current_job().connection
    if conn.exists(FLAG):
        raise RuntimeError(f"flag set for {name}")
    conn.incr(f"rqtest:count:{name}")
    conn.set(f"rqtest:arg:{name}", f"{type(big).__name__}:{big}")
    return big
