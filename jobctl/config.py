"""The TOML config file: connection profiles and the queue catalogue.

Lookup order of the file: ``--config PATH``, else ``$JOBCTL_CONFIG``, else
``./jobctl.toml``, else ``<user config dir>/jobctl/jobctl.toml`` (platformdirs).
A missing file is an empty config; an unreadable or malformed one raises
:class:`~jobctl.errors.ConfigError`.

Example::

    default_profile = "local"

    [profiles.prod]
    url = "rediss://ops@redis.prod.internal:6380/0"
    password_env = "PROD_REDIS_PASSWORD"   # the password never sits in the file
    environment = "production"
    read_only = true

    [queues.email]
    layout = "reliable-list"
    tag = "email"          # keys queue:{email}:ready, job:{email}:<id>, ...
    shards = 8             # tags email:00 .. email:07 form one logical queue
    priorities = 3         # ready:p0 .. ready:p2 instead of ready
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, NotFound

__all__ = ["Profile", "QueueConfig", "Config", "load_config", "config_path"]

CONFIG_ENV = "JOBCTL_CONFIG"
CONFIG_FILENAME = "jobctl.toml"


@dataclass(frozen=True)
class Profile:
    """A named connection profile.

    ``url`` may omit the password; ``password_env`` names an environment
    variable that holds it.  ``environment`` is shown as a badge by the front
    ends ("production" in red).  ``read_only`` makes every mutating command
    refuse, as the global ``--read-only`` flag does.
    """

    name: str
    url: str | None = None
    password_env: str | None = None
    environment: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class QueueConfig:
    """One logical queue of the catalogue.

    ``tag`` is the hash tag without braces (defaults to the queue name);
    ``shards`` the number of shard tags ``<tag>:00..`` (``None``: unsharded);
    ``priorities`` the number of ``ready:pN`` lists (``None``: a plain ready
    list); ``visibility_timeout_ms`` is used by layouts that store no
    deadline; ``options`` keeps any other layout-specific keys.
    """

    name: str
    layout: str = "reliable-list"
    tag: str | None = None
    shards: int | None = None
    priorities: int | None = None
    visibility_timeout_ms: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    discovered: bool = False

    @property
    def base_tag(self) -> str:
        return self.tag or self.name


@dataclass
class Config:
    """A loaded config file (possibly empty)."""

    path: Path | None = None
    default_profile: str | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    queues: dict[str, QueueConfig] = field(default_factory=dict)

    def profile(self, name: str) -> Profile:
        """The profile ``name``; raises :class:`NotFound` listing the known ones."""
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise NotFound(f"unknown profile {name!r} (known: {known})") from None


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to read, by the lookup order above; ``None`` if none exists.

    An explicit path (``--config`` or ``$JOBCTL_CONFIG``) that does not exist
    raises :class:`ConfigError`.
    """
    if explicit is None and os.environ.get(CONFIG_ENV):
        explicit = os.environ[CONFIG_ENV]
    if explicit is not None:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        return p
    local = Path.cwd() / CONFIG_FILENAME
    if local.is_file():
        return local
    from platformdirs import user_config_dir

    user = Path(user_config_dir("jobctl")) / CONFIG_FILENAME
    return user if user.is_file() else None


def _positive_int(where: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {key} must be a positive integer, got {value!r}")
    return value


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Read the config file (see module docstring); raises :class:`ConfigError`."""
    from .layouts import known_layouts  # late: keeps config import light

    path = config_path(explicit)
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path}: {exc}") from None

    for table in ("profiles", "queues"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"config {path}: {table} must be a table ([{table}.NAME] sections)")
    if not isinstance(data.get("default_profile", ""), str):
        raise ConfigError(f"config {path}: default_profile must be a string")
    cfg = Config(path=path, default_profile=data.get("default_profile"))
    for name, raw in (data.get("profiles") or {}).items():
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path}: [profiles.{name}] must be a table")
        unknown = set(raw) - {"url", "password_env", "environment", "read_only"}
        if unknown:
            raise ConfigError(f"config {path}: [profiles.{name}] unknown key {sorted(unknown)[0]!r}")
        cfg.profiles[name] = Profile(name=name, url=raw.get("url"), password_env=raw.get("password_env"),
                                     environment=raw.get("environment"),
                                     read_only=bool(raw.get("read_only", False)))
    layouts = known_layouts()
    for name, raw in (data.get("queues") or {}).items():
        where = f"config {path}: [queues.{name}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table")
        raw = dict(raw)
        layout = raw.pop("layout", "reliable-list")
        if layout not in layouts:
            raise ConfigError(f"{where}: unknown layout {layout!r} (known: {', '.join(sorted(layouts))})")
        vt = raw.pop("visibility_timeout_ms", None)
        cfg.queues[name] = QueueConfig(
            name=name,
            layout=layout,
            tag=raw.pop("tag", None),
            shards=_positive_int(where, "shards", raw.pop("shards", None)),
            priorities=_positive_int(where, "priorities", raw.pop("priorities", None)),
            visibility_timeout_ms=_positive_int(where, "visibility_timeout_ms", vt),
            options=raw,
        )
    if cfg.default_profile and cfg.default_profile not in cfg.profiles:
        raise ConfigError(f"config {path}: default_profile {cfg.default_profile!r} is not a profile")
    return cfg
