"""Settings: defaults, then a TOML file, then ``NARAD_*`` environment variables.

Every core setting is declared once in :data:`SETTINGS` with its default, its
parser and a one-line description; a plugin declares its own through the
``narad_settings`` hook, under ``[plugins.<section>]``. ``conf/narad.toml`` is
the commented example of all of them, the built-in plugins' included (a test
keeps the two in step). A setting ``x`` in section ``[s]`` is overridden by
``NARAD_S_X``, and one in ``[plugins.p]`` by ``NARAD_PLUGINS_P_X``. A value
that does not parse stops start-up with
:class:`~narad.errors.InvalidConfiguration` naming the setting in backticks.

Core settings are resolved by :meth:`Config.load`; plugin settings once the
plugins are known, by :meth:`Config.with_plugin_settings` (the plugin host
calls it), since which plugins load is itself a setting (``plugins.disabled``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace
from pathlib import Path
from typing import Any

from narad import credentials
from narad.credentials import STORAGE_PASSWORD
from narad.errors import InvalidConfiguration

__all__ = (
    "SETTINGS",
    "Config",
    "Setting",
    "boolean",
    "integer",
    "names",
    "text",
    "url",
)

CONFIG_ENV = "NARAD_CONFIG"
PLUGINS = "plugins"
_SECTION_NAME = re.compile(r"[a-z][a-z0-9_]*")


# -- parsers: each takes a TOML or environment value and returns it parsed, or
# raises ValueError saying what was expected ------------------------------------


def integer(low: int, high: int | None = None) -> Callable[[Any], int]:
    """A parser of whole numbers from ``low`` to ``high`` (inclusive)."""

    def parse(value: Any) -> int:
        if isinstance(value, str):
            value = value.strip()
            if not value.lstrip("-").isdigit():
                raise ValueError(f"expected an integer, got {value!r}")
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f">= {low}"
            raise ValueError(f"must be {bound}, got {value}")
        return value

    return parse


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def boolean(value: Any) -> bool:
    """A parser of true/false (also ``1``/``0``, ``yes``/``no``, ``on``/``off``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected true or false, got {value!r}")


def text(value: Any) -> str:
    """A parser of strings."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def url(value: Any) -> str:
    """A parser of URLs (``scheme://...``) or the empty string."""
    value = text(value).strip()
    if value and "://" not in value:
        raise ValueError(f"expected a URL such as redis://host:6379/0, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        value = text(value).strip()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}; got {value!r}")
        return value

    return parse


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
MIN_MEMORY = 1 << 20
MAX_MEMORY = 1 << 60


def _memory_size(value: Any) -> int:
    """Bytes: an integer, a size with a unit (``512mb``, ``2GiB``), or a
    share of the machine's memory (``25%``); 0 means the default."""
    written = value.strip() if isinstance(value, str) else ""
    share = written.removesuffix("%").strip()
    if written.endswith("%") and share.isdigit() and 0 < int(share) <= 100:
        value = physical_memory() * int(share) // 100
    elif match := _SIZE.fullmatch(written):
        value = int(match[1]) * _UNITS[match[2].lower()]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected bytes, a size such as 512mb, or 25%; got {value!r}")
    if value and not MIN_MEMORY <= value <= MAX_MEMORY:
        # The server's own parser stops at 2**64, and dies saying nothing.
        raise ValueError(
            f"must be 0 (the default) or from 1mb to {MAX_MEMORY >> 40}tb, got {value}"
        )
    return value


def _cache_size(value: Any) -> int:
    """Bytes: an integer, or a size with a unit (``64mb``); at least 1mb."""
    written = value.strip() if isinstance(value, str) else ""
    if match := _SIZE.fullmatch(written):
        value = int(match[1]) * _UNITS[match[2].lower()]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected bytes or a size such as 64mb; got {value!r}")
    if value < MIN_MEMORY:
        raise ValueError(f"must be at least 1mb, got {value}")
    return value


def physical_memory() -> int:
    """The machine's memory in bytes, or its cgroup's limit when that is lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        # cgroup v2: "0::/<path>" names this process's group.
        group = Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip()
        limit = (Path("/sys/fs/cgroup") / group.lstrip("/") / "memory.max").read_text()
    except (OSError, IndexError):
        return total
    limit = limit.strip()
    return min(total, int(limit)) if limit.isdigit() else total


def names(value: Any) -> tuple[str, ...]:
    """A parser of name lists: a TOML array, or a comma-separated string."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of names, got {value!r}")
    return tuple(v.strip() for v in value)


def default_workers() -> int:
    """One worker per CPU core this process may run on, at least two.

    A gevent worker holds any number of connections, so more workers than
    cores only share the cores and split each worker's group commits into
    smaller ones (bench/messaging.py measures it). Two at
    least, so that a worker's restart or crash leaves another serving.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks (macOS)
        cores = os.cpu_count() or 1
    return max(cores, 2)


_worker_count = integer(0, 256)


def _workers(value: Any) -> int:
    return _worker_count(value) or default_workers()


def _bind(value: Any) -> str:
    value = text(value).strip()
    host, sep, port = value.rpartition(":")
    if value.startswith("unix:"):
        return value
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT or unix:PATH, got {value!r}")
    return value


def _addresses(value: Any) -> tuple[str, ...]:
    """A parser of IP addresses and networks (``10.0.0.0/8``), or ``*``."""
    listed = names(value)
    for address in listed:
        if address != "*":
            try:
                ipaddress.ip_network(address)
            except ValueError as exc:
                raise ValueError(
                    f"expected IP addresses or networks (10.0.0.0/8) or *: {exc}"
                ) from None
    return listed


@dataclass(frozen=True)
class Setting:
    """One setting: its name, default, parser and a one-line description.

    A plugin declares its settings without ``section``; the host places them
    under ``plugins.<the section the plugin claims>``.
    """

    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str
    section: str = ""

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env(self) -> str:
        return f"NARAD_{self.section}_{self.name}".replace(".", "_").upper()


def _section(section: str, *settings: Setting) -> tuple[Setting, ...]:
    return tuple(replace(s, section=section) for s in settings)


SETTINGS: tuple[Setting, ...] = (
    *_section(
        "server",
        Setting("bind", "127.0.0.1:7942", _bind, "address gunicorn listens on"),
        Setting(
            "workers",
            0,
            _workers,
            "worker processes; 0 = one per CPU core (at least two)",
        ),
        Setting(
            "max_connections",
            16_384,
            integer(1, 1_000_000),
            "open client connections per node (split evenly across workers); "
            "past it only /healthz and /readyz are answered, anything else 503",
        ),
        Setting("keepalive", 30, integer(0, 3600), "keep-alive seconds"),
        Setting(
            "header_timeout",
            10,
            integer(1, 3600),
            "seconds a request's line and headers may take to arrive, else 408",
        ),
        Setting(
            "body_timeout",
            10,
            integer(1, 3600),
            "seconds a request body may take, plus one per body_min_rate bytes "
            "received, else 408; responses are held to the same pace",
        ),
        Setting(
            "body_min_rate",
            8192,
            integer(1, 1 << 30),
            "bytes per second a body must keep up beyond body_timeout",
        ),
        Setting(
            "access_log",
            "text",
            _choice("text", "json", "off"),
            "one line per request on standard error: text, json (JSON lines) or off",
        ),
        Setting(
            "forwarded_allow_ips",
            (),
            _addresses,
            "addresses or networks of proxies whose forwarding headers are "
            "trusted (X-Forwarded-Proto..., SCRIPT_NAME); * = any; empty = none",
        ),
        Setting(
            "tls_cert",
            "",
            text,
            "PEM certificate (chain) to serve HTTPS with on server.bind; empty = "
            "plain HTTP",
        ),
        Setting("tls_key", "", text, "PEM private key of tls_cert"),
        Setting(
            "plain_requests",
            True,
            boolean,
            "read plain HTTP/1.1 request heads on Narad's own short path; "
            "false = every request through gunicorn's parser",
        ),
        Setting(
            "http_parser",
            "auto",
            _choice("auto", "fast", "python"),
            "gunicorn's parser for what the short path does not take: fast = "
            "its C parser (narad[fast], gunicorn-h1c), python, auto = fast if "
            "installed",
        ),
        Setting(
            "tls_client_ca",
            "",
            text,
            "PEM CA certificates: every request but /healthz and /readyz then "
            "needs a client certificate they verify; empty = none asked",
        ),
    ),
    *_section(
        "storage",
        Setting(
            "url",
            "",
            url,
            "storage URL, served by the plugin claiming its scheme; empty "
            "starts the embedded Valkey",
        ),
        Setting(
            "data_dir",
            "narad-data",
            text,
            "embedded Valkey's data directory (relative to the working directory)",
        ),
        Setting(
            "max_memory",
            0,
            _memory_size,
            "embedded Valkey's memory limit: bytes, or a size such as 512mb or "
            "2gb, or a share of RAM such as 25%; 0 = a quarter of RAM",
        ),
        Setting(
            "durability",
            "strict",
            _choice("strict", "relaxed"),
            "strict: refuse to serve unless the storage fsyncs every write; "
            "relaxed: serve anyway",
        ),
        Setting(
            "min_replicas",
            0,
            integer(0, 16),
            "replicas that must hold each write (WAIT) before it is answered; "
            "0 = the primary alone",
        ),
    ),
    *_section(
        "broker",
        Setting(
            "max_wait_ms", 10_000, integer(0, 600_000), "cap on a consume's ?wait="
        ),
        Setting(
            "batch_consume_max_bytes",
            4 * MIN_MEMORY,
            _cache_size,
            "key and payload bytes one batch consume answers at most, e.g. 4mb "
            "(it always takes one message; the rest come next, in order)",
        ),
        Setting(
            "idempotency_window_ms",
            600_000,
            integer(1_000, 7 * 86_400_000),
            "how long a topic remembers a produce's idempotency key: a retry "
            "with the key within it stores nothing new",
        ),
        Setting(
            "idempotency_max_keys",
            1_000_000,
            integer(1, 100_000_000),
            "most idempotency keys one topic remembers; past it the oldest are "
            "forgotten before their window closes",
        ),
        Setting(
            "idempotency_max_bytes",
            128 << 20,
            integer(1 << 10, 1 << 40),
            "most bytes of idempotency keys one topic remembers (each key counts "
            "its length + its digest's 22 + 64); past it the oldest are forgotten",
        ),
    ),
    *_section(
        "validation",
        Setting(
            "capacity_slots",
            0,
            integer(0, 4096),
            "validations at once per node for large payloads/high-cost schemas; "
            "0 = one per CPU core",
        ),
        Setting(
            "capacity_wait_ms",
            5000,
            integer(0, 600_000),
            "how long a produce waits for a validation slot before 503",
        ),
        Setting(
            "capacity_dir",
            "",
            text,
            "node-local directory of the slot lock files; empty = <data_dir>/capacity",
        ),
    ),
    *_section(
        "cache",
        Setting(
            "topics",
            10_000,
            integer(1, 10_000_000),
            "topics a worker keeps records, round-robin counters and long-poll "
            "state for (least recently used go first)",
        ),
        Setting(
            "validators",
            2048,
            integer(1, 1_000_000),
            "compiled validators a worker keeps (one per topic and schema "
            "version produced to)",
        ),
        Setting(
            "validator_memory",
            64 * MIN_MEMORY,
            _cache_size,
            "estimated bytes of the validators a worker keeps, e.g. 64mb",
        ),
        Setting(
            "patterns",
            8192,
            integer(1, 1_000_000),
            "compiled RE2 patterns a worker keeps, shared by its validators",
        ),
        Setting(
            "pattern_memory",
            16 * MIN_MEMORY,
            _cache_size,
            "estimated bytes of the compiled patterns a worker keeps, e.g. 16mb",
        ),
    ),
    *_section(
        "metrics",
        Setting(
            "requests",
            True,
            boolean,
            "count and time every HTTP request (narad_http_requests_total, "
            "narad_http_request_duration_seconds); false drops both",
        ),
        Setting(
            "max_topics",
            1000,
            integer(0, 1_000_000),
            "topics /metrics shows per-topic series for (the first in name "
            "order); past it narad_topic_metrics_truncated is 1",
        ),
        Setting(
            "topic_stats_ttl_s",
            10,
            integer(0, 3600),
            "seconds one read of the per-topic figures serves scrapes for",
        ),
        Setting(
            "topic_stats_wait_ms",
            2000,
            integer(0, 600_000),
            "how long a scrape waits for that read before answering with the "
            "previous one",
        ),
        Setting(
            "public",
            False,
            boolean,
            "/metrics without credentials; false (the default) asks for those "
            "of a user with a metrics grant or admin on *",
        ),
    ),
    *_section(
        "log",
        Setting(
            "format",
            "text",
            _choice("text", "json"),
            "log lines on standard error: text, or json (one JSON object a line)",
        ),
        Setting(
            "level",
            "info",
            _choice("debug", "info", "warning", "error"),
            "least severe level logged",
        ),
    ),
    *_section(
        "security",
        Setting(
            "enabled",
            True,
            boolean,
            "HTTP Basic credentials on every route but /healthz and /readyz "
            "(and /metrics if metrics.public); false opens every route to "
            "anyone (local development)",
        ),
        Setting(
            "auth_cache_s",
            60,
            integer(1, 3600),
            "seconds a worker reuses credentials it verified without reading "
            "the user again (then a read, and a hash only if the stored hash "
            "changed); a changed or deleted user is dropped at once through "
            "storage notifications",
        ),
        Setting(
            "failures_burst",
            10,
            integer(1, 1_000_000),
            "failed authentications per node for one user name from one client "
            "address before 429 (to that address only)",
        ),
        Setting(
            "failures_per_minute",
            10,
            integer(1, 1_000_000),
            "how fast that allowance comes back",
        ),
        Setting(
            "address_failures_burst",
            100,
            integer(1, 1_000_000),
            "failed authentications per node from one client address (IPv6: "
            "one /64) before 429",
        ),
        Setting(
            "address_failures_per_minute",
            100,
            integer(1, 1_000_000),
            "how fast that allowance comes back",
        ),
        Setting(
            "user_failures_burst",
            30,
            integer(1, 1_000_000),
            "failed authentications per node for one user name from any "
            "addresses before attempts from addresses that have been failing "
            "wait their turn (never one from an address that has not)",
        ),
        Setting(
            "user_failures_per_minute",
            30,
            integer(1, 1_000_000),
            "how fast that allowance comes back: the turns those attempts get",
        ),
        Setting(
            "scrypt_log2_n",
            14,
            integer(10, 20),
            "scrypt cost of new password hashes: n = 2**this, 2**this KiB of "
            "memory per hash (14: 16 MiB)",
        ),
    ),
    *_section(PLUGINS, Setting("disabled", (), names, "plugin names never to load")),
)


@dataclass(frozen=True)
class _Sources:
    """Where values come from, kept to resolve plugin settings later."""

    path: str | None
    tables: Mapping[str, Mapping[str, Any]]  # [plugins.<section>] tables of the file
    env: Mapping[str, str]
    overrides: Mapping[str, Any]


class Config:
    """Resolved settings. Read them as ``config.get("storage.url")``, a
    plugin's as ``config.plugin("redis")["retry_attempts"]``, or via the typed
    properties for the common ones."""

    def __init__(
        self,
        values: Mapping[str, Any],
        *,
        settings: Iterable[Setting] = SETTINGS,
        sources: _Sources | None = None,
    ) -> None:
        self._values = dict(values)
        self.settings: tuple[Setting, ...] = tuple(settings)
        self._sources = sources or _Sources(None, {}, {}, {})

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Config:
        """Defaults, then the TOML file (``path`` or ``$NARAD_CONFIG``), then
        environment variables, then ``overrides`` (``"section.name"`` keys).

        Plugin sections are kept unresolved for :meth:`with_plugin_settings`.
        """
        env = dict(os.environ if env is None else env)
        path = path or env.get(CONFIG_ENV)
        from_file = _read_toml(Path(path)) if path else {}
        for section, table in from_file.items():
            if not isinstance(table, dict):
                raise InvalidConfiguration(
                    f"`{section}` ({path}): expected a table of settings "
                    f"([{section}]), got {table!r}"
                )
        tables = {
            name: table
            for name, table in from_file.get(PLUGINS, {}).items()
            if isinstance(table, dict)
        }
        core_file = {
            section: (
                {k: v for k, v in table.items() if k not in tables}
                if section == PLUGINS
                else table
            )
            for section, table in from_file.items()
        }
        unknown = {
            f"{section}.{name}"
            for section, table in core_file.items()
            for name in table
        } - {s.key for s in SETTINGS}
        if unknown:
            key = sorted(unknown)[0]
            hint = (
                ": secrets are never read from the file; the root admin's "
                "password comes from $NARAD_ADMIN_PASSWORD"
                if "password" in key
                else ""
            )
            raise InvalidConfiguration(f"unknown setting `{key}`{hint}")
        _refuse_unknown_env(env, {s.env for s in SETTINGS}, _CORE_ENV_PREFIXES)
        sources = _Sources(
            str(path) if path else None, tables, env, dict(overrides or {})
        )
        values = {s.key: _resolve(s, core_file, sources) for s in SETTINGS}
        return cls(values, sources=sources)

    def with_plugin_settings(self, declared: Mapping[str, Iterable[Setting]]) -> Config:
        """This configuration with the plugins' settings resolved.

        Args:
            declared: Settings by the section each plugin claims (the
                ``plugins.<section>`` it reads).

        Raises:
            InvalidConfiguration: a value does not parse, or the file has a
                ``[plugins.<section>]`` table or key no loaded plugin declares.
        """
        placed = [
            replace(setting, section=f"{PLUGINS}.{section}")
            for section, settings in declared.items()
            for setting in settings
        ]
        known = {s.key for s in placed}
        for section, table in self._sources.tables.items():
            for name in table:
                key = f"{PLUGINS}.{section}.{name}"
                if key not in known:
                    raise InvalidConfiguration(
                        f"unknown setting `{key}`: no loaded plugin declares it"
                    )
        known_env = {s.env for s in (*SETTINGS, *placed)}
        _refuse_unknown_env(self._sources.env, known_env, (_PLUGINS_ENV_PREFIX,))
        core = [s for s in self.settings if not s.section.startswith(PLUGINS + ".")]
        values = {s.key: self._values[s.key] for s in core}
        file = {f"{PLUGINS}.{k}": v for k, v in self._sources.tables.items()}
        for setting in placed:
            # A value already here was resolved before, or set by replace().
            if setting.key in self._values:
                values[setting.key] = self._values[setting.key]
            else:
                values[setting.key] = _resolve(setting, file, self._sources)
        return Config(values, settings=[*core, *placed], sources=self._sources)

    def get(self, key: str) -> Any:
        return self._values[key]

    def plugin(self, section: str) -> dict[str, Any]:
        """The settings of ``[plugins.<section>]`` by name (empty if none)."""
        prefix = f"{PLUGINS}.{section}."
        return {
            key.removeprefix(prefix): value
            for key, value in self._values.items()
            if key.startswith(prefix)
        }

    def replace(self, **changes: Any) -> Config:
        """A copy with ``section__name=value`` changes (already parsed)."""
        values = dict(self._values)
        for name, value in changes.items():
            values[name.replace("__", ".")] = value
        return Config(values, settings=self.settings, sources=self._sources)

    @property
    def storage_url(self) -> str:
        """``storage.url``, with the ``storage-password`` credential in it
        when systemd passed one (:mod:`narad.credentials`)."""
        url = self._values["storage.url"]
        return credentials.with_password(url, credentials.read(STORAGE_PASSWORD))

    @property
    def data_dir(self) -> Path:
        return Path(self._values["storage.data_dir"]).resolve()

    @property
    def plugins_disabled(self) -> tuple[str, ...]:
        return self._values["plugins.disabled"]

    def as_env(self) -> dict[str, str]:
        """The settings as ``NARAD_*`` variables, to hand to worker processes."""
        out = {}
        for setting in self.settings:
            value = self._values[setting.key]
            out[setting.env] = (
                ",".join(value) if isinstance(value, tuple) else str(value)
            )
        return out


def valid_section(name: str) -> bool:
    """Whether a plugin may claim ``[plugins.<name>]``."""
    return bool(_SECTION_NAME.fullmatch(name)) and name not in {
        s.name for s in SETTINGS if s.section == PLUGINS
    }


# A NARAD_<SECTION>_ variable that names no setting is a typo or a setting
# that moved (the Redis ones went to [plugins.redis]): refused, not ignored.
_CORE_ENV_PREFIXES = tuple(
    f"NARAD_{section.upper()}_"
    for section in sorted({s.section for s in SETTINGS} - {PLUGINS})
)
_PLUGINS_ENV_PREFIX = f"NARAD_{PLUGINS.upper()}_"


def _refuse_unknown_env(
    env: Mapping[str, str], known: set[str], prefixes: tuple[str, ...]
) -> None:
    for name in sorted(env):
        if name.startswith(prefixes) and name not in known:
            raise InvalidConfiguration(
                f"unknown setting `${name}`: no setting of that name is declared "
                "(`narad config` lists them)"
            )


def _resolve(
    setting: Setting, file: Mapping[str, Mapping[str, Any]], sources: _Sources
) -> Any:
    raw, origin = setting.default, "default"
    table = file.get(setting.section, {})
    if isinstance(table, dict) and setting.name in table:
        raw, origin = table[setting.name], str(sources.path)
    if setting.env in sources.env:
        raw, origin = sources.env[setting.env], f"${setting.env}"
    if setting.key in sources.overrides:
        raw, origin = sources.overrides[setting.key], "override"
    try:
        return setting.parse(raw)
    except ValueError as exc:
        raise InvalidConfiguration(f"`{setting.key}` ({origin}): {exc}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise InvalidConfiguration(
            f"config file `{path}` cannot be read: {exc}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfiguration(f"config file `{path}` is not TOML: {exc}") from None
