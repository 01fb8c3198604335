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

    [profiles.cluster]                     # Redis Cluster: seed nodes (or url = "redis+cluster://h1:p1,h2:p2")
    cluster_nodes = ["10.0.0.1:6379", "10.0.0.2:6379"]
    password_env = "CLUSTER_PASSWORD"
    tls = true
    ca_cert = "/etc/ssl/redis-ca.pem"      # client_cert, client_key; tls_verify = false warns

    [profiles.ha]                          # Sentinel (or url = "redis+sentinel://s1:26379,s2:26379/jobs/0")
    sentinels = ["10.0.0.5:26379", "10.0.0.6:26379"]
    service = "jobs"
    sentinel_password_env = "SENTINEL_PASSWORD"
    read_from = "replicas"                 # status, ls, export, metrics read replicas (cluster, Sentinel)

    [queues.email]
    layout = "reliable-list"
    tag = "email"          # keys queue:{email}:ready, job:{email}:<id>, ...
    shards = 8             # tags email:00 .. email:07 form one logical queue
    priorities = 3         # ready:p0 .. ready:p2 instead of ready
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, NotFound

__all__ = ["Profile", "QueueConfig", "Config", "load_config", "config_path", "defaulted_visibility",
           "visibility_note", "READ_FROM"]

CONFIG_ENV = "JOBCTL_CONFIG"
CONFIG_FILENAME = "jobctl.toml"


@dataclass(frozen=True)
class Profile:
    """A named connection profile.

    ``url`` may omit the password; ``password_env`` names an environment
    variable that holds it.  ``environment`` is shown as a badge by the front
    ends ("production" in red).  ``read_only`` makes every mutating command
    refuse, as the global ``--read-only`` flag does.  ``prometheus_url``: a Prometheus scraping ``jobctl metrics`` (TUI history).
    """

    name: str
    url: str | None = None
    password_env: str | None = None
    environment: str | None = None
    read_only: bool = False
    #: Topology without a URL: Redis Cluster seeds, or Sentinels + service (``"host:port"`` each).
    cluster_nodes: tuple[str, ...] = ()
    sentinels: tuple[str, ...] = ()
    service: str | None = None
    db: int | None = None
    username: str | None = None
    sentinel_password_env: str | None = None
    #: TLS: ``tls`` turns it on for a ``redis://`` URL or the profile form;
    #: the paths are PEM files; ``tls_verify = false`` disables verification.
    tls: bool = False
    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    tls_verify: bool = True
    #: Where status, ls, export and the exporter read: ``"primary"`` or ``"replicas"`` (of a cluster, a Sentinel).
    read_from: str = "primary"
    prometheus_url: str | None = None

    @property
    def connect_url(self) -> str | None:
        """``url``, or the ``redis[s]+cluster://`` / ``redis[s]+sentinel://``
        URL the profile form describes (no password: see ``password_env``)."""
        if self.url is not None:
            return self.url
        base = "rediss" if self.tls else "redis"
        user = f"{self.username}@" if self.username else ""
        if self.cluster_nodes:
            return f"{base}+cluster://{user}{','.join(self.cluster_nodes)}"
        if self.sentinels:
            return f"{base}+sentinel://{user}{','.join(self.sentinels)}/{self.service}/{self.db or 0}"
        return None


@dataclass(frozen=True)
class QueueConfig:
    """One logical queue of the catalogue.

    ``tag`` is the hash tag without braces (defaults to the queue name);
    ``shards`` the number of shard tags ``<tag>:00..`` (``None``: unsharded);
    ``priorities`` the number of ``ready:pN`` lists (``None``: a plain ready
    list); ``visibility_timeout_ms`` is used by layouts that store no
    deadline (``None``: not configured; the layout's default is then used
    and commands say so on stderr); ``options`` keeps the other keys:
    ``slo``, ``dead_cap`` (the length the workers trim the dead-letter list
    to, e.g. ``LTRIM 0 49``: status warns when the DLQ reaches it) and the
    layout-specific ones its layout declares
    (:attr:`~jobctl.layouts.facts.LayoutFacts.config_options`).  Every key is checked
    on load: an unknown one is refused with the closest valid name.
    """

    name: str
    layout: str = field(default_factory=lambda: _default_layout())
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


#: Keys of a ``[profiles.NAME]`` table.
PROFILE_KEYS = ("url", "password_env", "environment", "read_only", "db", "username", "cluster_nodes", "sentinels",
                "service", "sentinel_password_env", "tls", "ca_cert", "client_cert", "client_key", "tls_verify",
                "read_from", "prometheus_url")
#: The values of a profile's ``read_from`` (and of ``--read-from``).
READ_FROM = ("primary", "replicas")
#: Keys every ``[queues.NAME]`` table may hold.
QUEUE_KEYS = ("layout", "tag", "shards", "priorities", "visibility_timeout_ms", "slo", "dead_cap")
#: Layout-specific keys (kept in :attr:`QueueConfig.options`) are declared by
#: each layout with their bounds (``config_options``).
#: Inclusive bounds of every integer key: a typo such as ``shards =
#: 100000000`` would otherwise make ``status`` read 10^8 shards.
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "shards": (1, 1024),
    "priorities": (1, 100),
    "visibility_timeout_ms": (1, 30 * 86_400_000),  # 30 days
    "dead_cap": (1, 1_000_000_000),
}
#: Keys whose value is a string, and at most how long.
STR_KEYS = {"url": 4096, "password_env": 256, "environment": 64, "layout": 64, "tag": 512}


def _default_layout() -> str:
    """:data:`jobctl.layouts.DEFAULT_LAYOUT` (imported late: the registry
    imports nothing, but config must not import the layouts at load)."""
    from .layouts import DEFAULT_LAYOUT

    return DEFAULT_LAYOUT


def _layout_class(name: str):
    """The registered class of the layout ``name`` (its declarations), or
    ``None`` for an unknown name."""
    from .layouts import known_layouts, layout_class  # late: keeps config import light

    return layout_class(name) if name in known_layouts() else None


def defaulted_visibility(queue: "QueueConfig") -> int | None:
    """The default visibility timeout (ms) ``queue`` falls back to, or
    ``None`` when it needs none or has one configured.  A defaulted timeout
    is a guess: against workers with a longer one, stuck counts are wrong
    and ``requeue --stuck`` would requeue live jobs (issue 12, item 2)."""
    if queue.visibility_timeout_ms is not None:
        return None
    cls = _layout_class(queue.layout)  # a layout that stores no deadline declares its default
    return None if cls is None else cls.visibility_default_ms


def visibility_note(queue: "QueueConfig") -> str | None:
    """The stderr line for a defaulted visibility timeout, or ``None``."""
    default = defaulted_visibility(queue)
    if default is None:
        return None
    return (f"queue {queue.name}: visibility_timeout_ms is not configured: stuck jobs are judged with the "
            f"{queue.layout} default of {default:,} ms; set it to your workers' timeout in [queues.{queue.name}]")


def _unknown_key(where: str, key: str, known: tuple[str, ...] | list[str]) -> ConfigError:
    """``unknown key 'visibility_ms' (did you mean 'visibility_timeout_ms'?)``."""
    import difflib

    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.5)
    if not close:  # the reference code's own names: visibility_ms -> visibility_timeout_ms
        close = [k for k in known if str(key).split("_")[0] and k.startswith(str(key).split("_")[0])][:1]
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(known)) or 'none'}"
    return ConfigError(f"{where}: unknown key {str(key)!r} ({hint})")


def _check_keys(where: str, raw: dict[str, Any], known: tuple[str, ...] | list[str]) -> None:
    for key in raw:
        if key not in known:
            raise _unknown_key(where, key, known)


def _bounded_int(where: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    lo, hi = INT_BOUNDS.get(key, (1, 2 ** 31 - 1))
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{where}: {key} must be an integer from {lo:,} to {hi:,}, got {_short(value)}")
    return value


def _positive_int(where: str, key: str, value: Any) -> int | None:
    return _bounded_int(where, key, value)


def _short(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def _check_values(where: str, raw: dict[str, Any], options: Any = None) -> None:
    """Type and bound every value of a table whose key has a known shape:
    the common keys' tables here, a layout's own keys by its declared
    ``options`` (name -> :class:`~jobctl.layouts.facts.Option`)."""
    options = options or {}
    for key, value in raw.items():
        opt = options.get(key)
        if key in INT_BOUNDS or (opt is not None and opt.kind == "int"):
            lo, hi = INT_BOUNDS[key] if key in INT_BOUNDS else (opt.lo, opt.hi)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
                raise ConfigError(f"{where}: {key} must be an integer from {lo:,} to {hi:,}, got {_short(value)}")
        elif (key in STR_KEYS or (opt is not None and opt.kind == "str")) and value is not None:
            longest = STR_KEYS[key] if key in STR_KEYS else opt.hi
            if not isinstance(value, str):
                raise ConfigError(f"{where}: {key} must be a string, got {_short(value)}")
            if len(value) > longest:
                raise ConfigError(f"{where}: {key} is longer than {longest} characters")


def _check_tag(where: str, tag: Any, braced: bool = True) -> None:
    """A queue's tag must be a non-empty string (an empty tag hashes every
    key of every queue to one slot); where the layout wraps it in ``{...}``
    (``braced``: the layout declares ``braced_tag``; the others use it
    verbatim, so a tag like ``{jobs}`` is how their keys share a slot) it
    must hold no brace (a brace ends the hash tag early)."""
    if tag is None:
        return
    if not isinstance(tag, str):
        raise ConfigError(f"{where}: tag must be a string, got {_short(tag)}")
    if not tag.strip():
        raise ConfigError(f"{where}: tag must not be empty (omit it to use the queue name)")
    if braced and ("{" in tag or "}" in tag):
        raise ConfigError(f"{where}: tag {_short(tag)} must not contain '{{' or '}}' (write it without braces)")


_PROFILE_STR = ("url", "password_env", "environment", "service", "username", "sentinel_password_env",
                 "ca_cert", "client_cert", "client_key", "prometheus_url")
_PROFILE_BOOL = ("read_only", "tls", "tls_verify")
_PROFILE_LIST = ("cluster_nodes", "sentinels")


def _profile(where: str, name: str, raw: dict[str, Any]) -> Profile:
    """A :class:`Profile` from its table; raises :class:`ConfigError` on a wrong type or combination."""
    for key in _PROFILE_STR:
        if key in raw and not isinstance(raw[key], str):
            raise ConfigError(f"{where}: {key} must be a string, got {type(raw[key]).__name__}")
    for key in _PROFILE_BOOL:
        if key in raw and not isinstance(raw[key], bool):
            raise ConfigError(f"{where}: {key} must be true or false, got {raw[key]!r}")
    for key in _PROFILE_LIST:
        if key in raw and (not isinstance(raw[key], list) or not raw[key]
                           or not all(isinstance(v, str) and v for v in raw[key])):
            raise ConfigError(f"{where}: {key} must be a non-empty list of \"host:port\" strings")
    db = raw.get("db")
    if db is not None and (isinstance(db, bool) or not isinstance(db, int) or not 0 <= db <= 2**31 - 1):
        raise ConfigError(f"{where}: db must be an integer from 0 to {2**31 - 1}, got {db!r}")
    if raw.get("read_from", "primary") not in READ_FROM:
        raise ConfigError(f"{where}: read_from must be one of {', '.join(READ_FROM)}, got {raw['read_from']!r}")
    forms = [k for k in ("url", "cluster_nodes", "sentinels") if k in raw]
    if len(forms) > 1:
        raise ConfigError(f"{where}: give only one of url, cluster_nodes, sentinels (got {', '.join(forms)})")
    if db is not None and "sentinels" not in raw:
        raise ConfigError(f"{where}: db applies to a sentinels profile only (put it in the url; "
                          "a Redis Cluster has only db 0)")
    if "sentinels" in raw and not raw.get("service"):
        raise ConfigError(f"{where}: sentinels needs service = \"<the Sentinel service name>\"")
    if ("service" in raw or "sentinel_password_env" in raw) and "sentinels" not in raw and \
            "+sentinel" not in str(raw.get("url", "")):
        raise ConfigError(f"{where}: service and sentinel_password_env apply to a Sentinel profile only")
    return Profile(name=name, url=raw.get("url"), password_env=raw.get("password_env"),
                   environment=raw.get("environment"), read_only=raw.get("read_only", False),
                   cluster_nodes=tuple(raw.get("cluster_nodes", ())), sentinels=tuple(raw.get("sentinels", ())),
                   service=raw.get("service"), db=db, username=raw.get("username"), prometheus_url=raw.get("prometheus_url"),
                   sentinel_password_env=raw.get("sentinel_password_env"), tls=raw.get("tls", False),
                   ca_cert=raw.get("ca_cert"), client_cert=raw.get("client_cert"),
                   client_key=raw.get("client_key"), tls_verify=raw.get("tls_verify", True),
                   read_from=raw.get("read_from", "primary"))


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Read the config file (see module docstring); raises :class:`ConfigError`."""
    from .layouts import DEFAULT_LAYOUT, known_layouts

    path = config_path(explicit)
    if path is None:
        return Config()
    import tomllib  # late: no config file, no TOML parser

    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc.__class__.__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path}: {exc}") from None

    _check_keys(f"config {path}", data, ("default_profile", "profiles", "queues"))
    for table in ("profiles", "queues"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"config {path}: {table} must be a table ([{table}.NAME] sections)")
    if not isinstance(data.get("default_profile", ""), str):
        raise ConfigError(f"config {path}: default_profile must be a string")
    cfg = Config(path=path, default_profile=data.get("default_profile"))
    for name, raw in (data.get("profiles") or {}).items():
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path}: [profiles.{name}] must be a table")
        _check_keys(f"config {path}: [profiles.{name}]", raw, PROFILE_KEYS)
        cfg.profiles[name] = _profile(f"config {path}: [profiles.{name}]", name, raw)
    layouts = known_layouts()
    for name, raw in (data.get("queues") or {}).items():
        where = f"config {path}: [queues.{name}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table")
        raw = dict(raw)
        layout = raw.pop("layout", DEFAULT_LAYOUT)
        if not isinstance(layout, str):  # a list or table is unhashable: refused before the lookup
            raise ConfigError(f"{where}: layout must be a string naming a layout, got {_short(layout)} "
                              f"(known: {', '.join(sorted(layouts))})")
        if layout not in layouts:
            raise ConfigError(f"{where}: unknown layout {_short(layout)} (known: {', '.join(sorted(layouts))})")
        cls = _layout_class(layout)
        _check_keys(where, raw, [k for k in QUEUE_KEYS if k != "layout"] + list(cls.config_options))
        _check_values(where, raw, cls.config_options)
        _check_tag(where, raw.get("tag"), cls.braced_tag)
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
