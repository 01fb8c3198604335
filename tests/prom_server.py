"""A Prometheus-compatible HTTP server for tests: serves one recorded
``/api/v1/query_range`` reply (or a status code, or bytes) on 127.0.0.1 at
a free port, from a thread, and keeps the paths it was asked for."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["RECORDED_REPLY", "prometheus_server"]

#: A recorded query_range reply: email and billing over the three hours before TUI_T0.
RECORDED_REPLY = Path(__file__).resolve().parent / "golden" / "prometheus_query_range.json"


@contextmanager
def prometheus_server(body: bytes | None = None, status: int = 200):
    """Yield ``(base URL, requested paths)`` of a server answering every GET
    with ``status`` and ``body`` (default: :data:`RECORDED_REPLY`)."""
    payload = RECORDED_REPLY.read_bytes() if body is None else body
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
