"""A connection plus its queue catalogue: what both front ends start from.

:class:`Session` resolves the server (:mod:`jobctl.connection`), loads the
config (:mod:`jobctl.config`), and turns queue names into layouts, using the
catalogue or, when the catalogue names no queue, a bounded discovery
(:mod:`jobctl.discovery`).  It is headless: the CLI and the TUI both use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .config import Config, QueueConfig, load_config
from .connection import Target, connect, resolve_target, translate_redis_errors
from .topology import TlsOptions
from .errors import NotFound, ReadOnlyRefused

if TYPE_CHECKING:
    import redis

    from .discovery import Discovery
    from .layouts.base import Layout

__all__ = ["Session"]


@dataclass
class Session:
    """Lazily connected session.

    ``read_only`` (from ``--read-only`` or the profile) makes
    :meth:`require_writable` raise :class:`ReadOnlyRefused` before any write.
    ``on_connect()``, if given, is called each time :attr:`client` has
    connected (the CLI ends its start-up at the first).
    """

    config_file: str | None = None
    url: str | None = None
    profile: str | None = None
    read_only_flag: bool = False
    timeout_s: float = 5.0
    tls: TlsOptions = field(default_factory=TlsOptions)
    #: ``--read-from``: ``"primary"`` or ``"replicas"`` (None: the profile's ``read_from``).
    read_from_flag: str | None = None
    _config: Config | None = field(default=None, repr=False)
    _target: Target | None = field(default=None, repr=False)
    _client: "redis.Redis | None" = field(default=None, repr=False)
    _reader: "redis.Redis | None" = field(default=None, repr=False)
    discovery: "Discovery | None" = field(default=None, repr=False)
    on_connect: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_file)
        return self._config

    @property
    def target(self) -> Target:
        if self._target is None:
            self._target = resolve_target(self.config, url=self.url, profile=self.profile, tls=self.tls)
        return self._target

    @property
    def read_only(self) -> bool:
        return self.read_only_flag or self.target.read_only

    def require_writable(self, what: str) -> None:
        """Raise :class:`ReadOnlyRefused` when the session is read-only."""
        if self.read_only:
            raise ReadOnlyRefused(f"{what} refused: read-only mode (--read-only or profile setting)")

    @property
    def client(self) -> "redis.Redis":
        """The connected client; raises ConnectionFailed/AuthFailed on first use."""
        if self._client is None:
            target = self.target
            if not target.tls.verify:
                import sys

                print(f"jobctl: warning: TLS certificate verification is off for {target.display}: "
                      "the server is not authenticated", file=sys.stderr)
            if self.read_from == "replicas" and target.topology.kind == "single":
                from .errors import UsageError

                raise UsageError(f"{target.source}: reads from replicas need a Redis Cluster or Sentinel URL "
                                 "(one server has no replicas jobctl knows of)")
            self._client = connect(target, timeout_s=self.timeout_s)
            if self.on_connect is not None:
                self.on_connect()
        return self._client

    @property
    def read_from(self) -> str:
        """Where :attr:`reader` reads: ``--read-from``, else the profile's
        ``read_from``, else ``"primary"``."""
        profile = self.target.profile
        return self.read_from_flag or (profile.read_from if profile else "primary")

    @property
    def reader(self) -> "redis.Redis":
        """The client of the read-only commands (status, ls, export, the
        exporter): :attr:`client`, or with ``read_from = "replicas"`` a client
        whose reads go to the replicas (:func:`~jobctl.redis_client.make_client`).
        Raises :class:`~jobctl.errors.UsageError` on one server (no replicas)."""
        if self.read_from != "replicas":
            return self.client
        if self._reader is None:
            self._reader = connect(self.target, timeout_s=self.timeout_s, replicas=True)
        return self._reader

    def read_layout(self, queue: str | QueueConfig) -> "Layout":
        """:meth:`layout` over :attr:`reader`: for commands that only read."""
        from .layouts import layout_for

        q = self.queue(queue) if isinstance(queue, str) else queue
        return layout_for(self.reader, q)

    def errors(self) -> translate_redis_errors:
        """``with session.errors(): ...`` turns redis-py errors into JobctlErrors."""
        return translate_redis_errors(lambda: self._target)  # resolved lazily inside the block

    def catalogue(self) -> list[QueueConfig]:
        """Configured queues, else the discovered ones (sets :attr:`discovery`)."""
        if self.config.queues:
            return list(self.config.queues.values())
        if self.discovery is None:
            from .discovery import discover_reliable_lists

            with self.errors():
                self.discovery = discover_reliable_lists(self.client)
        return list(self.discovery.queues)

    def queue(self, name: str) -> QueueConfig:
        """The catalogue entry ``name``; raises :class:`NotFound` naming the known ones."""
        for q in self.catalogue():
            if q.name == name:
                return q
        known = ", ".join(q.name for q in self.catalogue()) or "none"
        src = "configured" if self.config.queues else "discovered"
        raise NotFound(f"unknown queue {name!r} ({src} queues: {known})")

    def queues(self, names: list[str] | tuple[str, ...] = ()) -> list[QueueConfig]:
        """``names`` resolved in order, or every catalogue queue when empty."""
        return [self.queue(n) for n in names] if names else self.catalogue()

    def layout(self, queue: str | QueueConfig) -> "Layout":
        from .layouts import layout_for

        q = self.queue(queue) if isinstance(queue, str) else queue
        return layout_for(self.client, q)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None
