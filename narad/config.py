"""Settings: defaults, then a TOML file, then ``NARAD_*`` environment variables.

Every setting is declared once in :data:`SETTINGS` with its default, its
parser and a one-line description; ``conf/narad.toml`` is the commented
example of all of them (a test keeps the two in step). A setting ``x`` in
section ``[s]`` is overridden by ``NARAD_S_X``. A value that does not parse
stops start-up with :class:`~narad.errors.InvalidConfiguration` naming the
setting in backticks.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narad.errors import InvalidConfiguration

CONFIG_ENV = "NARAD_CONFIG"


def _integer(low: int, high: int | None = None) -> Callable[[Any], int]:
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


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _url(value: Any) -> str:
    value = _text(value).strip()
    if value and "://" not in value:
        raise ValueError(f"expected a URL such as redis://host:6379/0, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        value = _text(value).strip()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}; got {value!r}")
        return value

    return parse


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
MIN_MEMORY = 1 << 20


def _memory_size(value: Any) -> int:
    """Bytes: an integer, a size with a unit (``512mb``, ``2GiB``), or a
    share of the machine's memory (``25%``); 0 means the default."""
    text = value.strip() if isinstance(value, str) else ""
    share = text.removesuffix("%").strip()
    if text.endswith("%") and share.isdigit() and 0 < int(share) <= 100:
        value = physical_memory() * int(share) // 100
    elif match := _SIZE.fullmatch(text):
        value = int(match[1]) * _UNITS[match[2].lower()]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected bytes, a size such as 512mb, or 25%; got {value!r}")
    if value and value < MIN_MEMORY:
        raise ValueError(f"must be 0 (the default) or at least 1mb, got {value}")
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


def _bind(value: Any) -> str:
    value = _text(value).strip()
    host, sep, port = value.rpartition(":")
    if value.startswith("unix:"):
        return value
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT or unix:PATH, got {value!r}")
    return value


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of names, got {value!r}")
    return tuple(v.strip() for v in value)


@dataclass(frozen=True)
class Setting:
    section: str
    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def env(self) -> str:
        return f"NARAD_{self.section}_{self.name}".upper()


SETTINGS: tuple[Setting, ...] = (
    Setting("server", "bind", "127.0.0.1:7942", _bind, "address gunicorn listens on"),
    Setting("server", "workers", 4, _integer(1, 256), "worker processes"),
    Setting(
        "server",
        "threads",
        128,
        _integer(1, 10_000),
        "threads per worker: each long-polling consumer holds one while it waits",
    ),
    Setting("server", "keepalive", 30, _integer(0, 3600), "keep-alive seconds"),
    Setting(
        "storage",
        "url",
        "",
        _url,
        "redis://, rediss:// or unix:// URL; empty starts the embedded Valkey",
    ),
    Setting(
        "storage",
        "data_dir",
        "narad-data",
        _text,
        "embedded Valkey's data directory (relative to the working directory)",
    ),
    Setting(
        "storage",
        "max_memory",
        0,
        _memory_size,
        "embedded Valkey's memory limit: bytes, or a size such as 512mb or 2gb, "
        "or a share of RAM such as 25%; 0 = a quarter of RAM",
    ),
    Setting(
        "storage",
        "durability",
        "strict",
        _choice("strict", "relaxed"),
        "strict: refuse to serve unless the storage fsyncs every write; "
        "relaxed: serve anyway",
    ),
    Setting(
        "storage",
        "retry_attempts",
        8,
        _integer(0, 100),
        "retries after MOVED, CLUSTERDOWN, TRYAGAIN or a lost connection",
    ),
    Setting(
        "storage",
        "retry_backoff_ms",
        20,
        _integer(1, 60_000),
        "first retry delay; doubles each attempt",
    ),
    Setting(
        "storage",
        "retry_backoff_max_ms",
        1000,
        _integer(1, 600_000),
        "cap on one retry delay",
    ),
    Setting(
        "storage",
        "socket_timeout_ms",
        15_000,
        _integer(100, 600_000),
        "storage socket timeout",
    ),
    Setting(
        "broker",
        "max_wait_ms",
        10_000,
        _integer(0, 600_000),
        "cap on a consume's ?wait=",
    ),
    Setting(
        "validation",
        "capacity_slots",
        0,
        _integer(0, 4096),
        "validations at once per node for large payloads/high-cost schemas; "
        "0 = one per CPU core",
    ),
    Setting(
        "validation",
        "capacity_wait_ms",
        5000,
        _integer(0, 600_000),
        "how long a produce waits for a validation slot before 503",
    ),
    Setting(
        "validation",
        "capacity_dir",
        "",
        _text,
        "node-local directory of the slot lock files; empty = <data_dir>/capacity",
    ),
    Setting("plugins", "disabled", (), _names, "plugin names never to load"),
)


class Config:
    """Resolved settings. Read them as ``config.get("storage.url")`` or via
    the typed properties for the common ones."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Config:
        """Defaults, then the TOML file (``path`` or ``$NARAD_CONFIG``), then
        environment variables, then ``overrides`` (``"section.name"`` keys)."""
        env = os.environ if env is None else env
        path = path or env.get(CONFIG_ENV)
        from_file = _read_toml(Path(path)) if path else {}
        unknown = {
            f"{section}.{name}"
            for section, table in from_file.items()
            for name in (table if isinstance(table, dict) else {"": None})
        } - {s.key for s in SETTINGS}
        if unknown:
            raise InvalidConfiguration(f"unknown setting `{sorted(unknown)[0]}`")
        values = {}
        for setting in SETTINGS:
            raw, origin = setting.default, "default"
            if setting.name in from_file.get(setting.section, {}):
                raw, origin = from_file[setting.section][setting.name], str(path)
            if setting.env in env:
                raw, origin = env[setting.env], f"${setting.env}"
            if overrides and setting.key in overrides:
                raw, origin = overrides[setting.key], "override"
            try:
                values[setting.key] = setting.parse(raw)
            except ValueError as exc:
                raise InvalidConfiguration(
                    f"`{setting.key}` ({origin}): {exc}"
                ) from None
        return cls(values)

    def get(self, key: str) -> Any:
        return self._values[key]

    def replace(self, **changes: Any) -> Config:
        """A copy with ``section__name=value`` changes (already parsed)."""
        values = dict(self._values)
        for name, value in changes.items():
            values[name.replace("__", ".")] = value
        return Config(values)

    @property
    def storage_url(self) -> str:
        return self._values["storage.url"]

    @property
    def data_dir(self) -> Path:
        return Path(self._values["storage.data_dir"]).resolve()

    @property
    def plugins_disabled(self) -> tuple[str, ...]:
        return self._values["plugins.disabled"]

    def as_env(self) -> dict[str, str]:
        """The settings as ``NARAD_*`` variables, to hand to worker processes."""
        out = {}
        for setting in SETTINGS:
            value = self._values[setting.key]
            out[setting.env] = (
                ",".join(value) if isinstance(value, tuple) else str(value)
            )
        return out


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
