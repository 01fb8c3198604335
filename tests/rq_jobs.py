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


def observe_self(queue_name: str) -> None:
    """Record what jobctl's rq layout reads while this job runs (the
    ``rqtest:seen`` key, JSON): the queue's status counts and this job's
    inspect state and deadline."""
    import json

    from jobctl.config import QueueConfig
    from jobctl.layouts import layout_for

    job = get_current_job()
    lay = layout_for(job.connection, QueueConfig(name=queue_name, layout="rq"))
    st = lay.status()
    rec = lay.inspect(job.id)
    listed = [r.job_id for r in lay.list_jobs(lay.states[2])]  # processing
    job.connection.set("rqtest:seen", json.dumps({
        "processing": st.processing, "stuck": st.stuck, "state": rec.state.value,
        "deadline": rec.deadline_ms, "listed": listed, "execution": rec.meta.get("execution")}))


def redrive_while_working(url: str, config: str, filter_text: str) -> int:
    """Run by RQ's worker: delete :data:`FLAG`, then ``jobctl redrive`` with
    ``filter_text`` while this worker is running; returns jobctl's exit code
    (kept in ``rqtest:redrive_code``)."""
    from jobctl.cli.main import main

    conn = get_current_job().connection
    conn.delete(FLAG)
    code = main(["--url", url, "--config", config, "redrive", "work", "--filter", filter_text, "--yes"])
    conn.set("rqtest:redrive_code", code)
    return code
