"""Serve a :class:`~jobctl.metrics.collector.JobctlCollector` over HTTP, or
render it once.

Each exporter gets its own :class:`prometheus_client.CollectorRegistry`, so
nothing but jobctl's metrics is exposed (no process or GC metrics of the
exporting Python process).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from ..errors import UsageError
from .collector import JobctlCollector

__all__ = ["registry_for", "exposition", "start_exporter", "DEFAULT_PORT"]

#: Default listening port of ``jobctl metrics serve``.
DEFAULT_PORT = 9839


def registry_for(collector: JobctlCollector) -> CollectorRegistry:
    """A fresh registry holding only ``collector``."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def exposition(collector: JobctlCollector) -> bytes:
    """The Prometheus text exposition of one scrape."""
    return generate_latest(registry_for(collector))


def start_exporter(collector: JobctlCollector, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT):
    """Serve ``/metrics`` on ``host:port`` in a daemon thread.

    Returns ``(server, thread)``: ``server.server_port`` is the port (useful
    with ``port=0``); ``server.shutdown()`` stops it.  Raises
    :class:`UsageError` when the address cannot be bound.
    """
    try:
        return start_http_server(port, addr=host, registry=registry_for(collector))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
