"""What a plugin author (and Narad's own suite) needs to test against Narad.

Public and covered by the compatibility promise (docs/plugins.md), like
:mod:`narad.storage` and :mod:`narad.compatibility`. Needs the test extra
(``pip install narad[test]``: pytest, fakeredis).

- :func:`client` (and :func:`make_app`): the whole HTTP API in-process, over a
  private fakeredis server, with the built-in plugins and yours::

      import my_plugin
      from narad.testing import client

      def test_my_rule():
          http = client(plugins={"my_plugin": my_plugin})
          http.simulate_post("/v1/topics", json={"name": "t", "schema": {...}})

  Each app runs a listener thread; :func:`close_apps` (after each test, in
  an autouse fixture) ends those of every app made so far.

- :func:`load_plugins`: the checked plugin set (built-ins, the fakeredis
  backend, yours) without whatever else is installed.
- :func:`make_config`: a :class:`~narad.config.Config` for tests. Security
  is off unless asked for (``make_config(security__enabled=True)``); then
  :func:`client` sends the root admin's credentials
  (:data:`ADMIN_PASSWORD`) with every request, and :func:`basic_auth` makes
  the header for other users.
- :mod:`narad.testing.compatibility`: check a pair of schema texts as a
  schema change is checked, with your plugins
  (:func:`~narad.testing.compatibility.check_compatibility`).
- :mod:`narad.testing.storage_contract`: the test suite every storage
  backend must pass.
- The ``fakeredis://`` backend itself is the plugin module
  ``narad_redis.fakeredis`` (:data:`TEST_PLUGINS`).
"""

from __future__ import annotations

import atexit
import base64
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import falcon
import falcon.testing

from narad.config import Config
from narad.plugins import Plugins
from narad.plugins import load_plugins as _load_plugins

if TYPE_CHECKING:
    from narad.app import NaradApp

__all__ = (
    "ADMIN_PASSWORD",
    "basic_auth",
    "client",
    "close_apps",
    "load_plugins",
    "make_app",
    "make_config",
)

#: Plugins for tests only, by name: module names, imported as the host
#: imports the built-ins (:data:`narad.plugins.DEFAULT_PLUGINS`).
TEST_PLUGINS: dict[str, object] = {"narad_fakeredis": "narad_redis.fakeredis"}

#: The root admin's password in a test app with security on.
ADMIN_PASSWORD = "narad-test-admin"

# Apps made here and not closed yet (see close_apps).
_open_apps: weakref.WeakSet[NaradApp] = weakref.WeakSet()


def load_plugins(
    plugins: Mapping[str, object] | None = None,
    *,
    config: Config | None = None,
    entry_points: bool = False,
) -> Plugins:
    """The built-in plugins, the fakeredis backend and ``plugins``, checked.

    Args:
        plugins: Your plugins by name (a module, or any object with hook
            implementations), registered after the built-ins.
        config: Honoured for ``plugins.disabled``.
        entry_points: Also load installed plugins (off: a test sees only what
            it names).

    Raises:
        narad.errors.PluginError: as at a node's start-up.
    """
    return _load_plugins(
        config,
        load_entry_points=entry_points,
        extra={**TEST_PLUGINS, **(plugins or {})},
    )


def make_config(directory: str | Path | None = None, **settings: Any) -> Config:
    """Settings for a test: a private fakeredis server, files under ``directory``.

    Args:
        directory: Where the node's files go (a temporary directory, removed
            at exit, when not given).
        **settings: Overrides keyed ``section__name`` (``broker__max_wait_ms``,
            ``plugins__redis__retry_attempts``), already as their parsers
            would return them. Security is off, and password hashes cheap,
            unless overridden.
    """
    if directory is None:
        directory = tempfile.mkdtemp(prefix="narad-test-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    base = Path(directory)
    overrides = {
        "storage.url": f"fakeredis://{uuid.uuid4().hex}",
        # fakeredis keeps nothing on disk: strict durability would refuse it.
        "storage.durability": "relaxed",
        "storage.data_dir": str(base / "data"),
        "validation.capacity_dir": str(base / "capacity"),
        "security.enabled": False,
        "security.scrypt_log2_n": 10,
        "server.access_log": "off",
        **{key.replace("__", "."): value for key, value in settings.items()},
    }
    return Config.load(env={}, overrides=overrides)


def make_app(
    config: Config | None = None, *, plugins: Mapping[str, object] | None = None
) -> NaradApp:
    """The Narad WSGI app over ``config`` (:func:`make_config` by default),
    with the built-in plugins, the fakeredis backend and ``plugins``. With
    security on, the root admin exists, with :data:`ADMIN_PASSWORD`."""
    from narad.app import create_app
    from narad.plugins import connect_storage
    from narad.security.passwords import Scrypt
    from narad.security.passwords import hash_password
    from narad.security.seed import seed_root_admin

    config = config or make_config()
    loaded = load_plugins(plugins, config=config)
    config = loaded.configure(config)
    storage = connect_storage(config, loaded)
    if config.get("security.enabled"):
        params = Scrypt(log2_n=config.get("security.scrypt_log2_n"))
        seed_root_admin(
            storage, config, ADMIN_PASSWORD, lambda p: hash_password(p, params)
        )
    app = create_app(config, plugins=loaded, storage=storage)
    _open_apps.add(app)
    return app


def close_apps() -> None:
    """Close every app :func:`make_app` (or :func:`client`) made so far:
    their listener threads end within about a second, and stop writing
    their cache sizes into the process-wide metrics that a later test's app
    reports. Call it after each test (an autouse fixture)."""
    while _open_apps:
        _open_apps.pop().close()


def basic_auth(user: str, password: str) -> dict[str, str]:
    """The ``Authorization`` header of HTTP Basic credentials."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def client(
    config: Config | None = None, *, plugins: Mapping[str, object] | None = None
) -> falcon.testing.TestClient:
    """A :class:`falcon.testing.TestClient` over :func:`make_app`: requests
    run in-process (``simulate_get``, ``simulate_post``...), with the root
    admin's credentials when security is on (a request's own
    ``Authorization`` header wins)."""
    config = config or make_config()
    app = make_app(config, plugins=plugins)
    headers = (
        basic_auth("admin", ADMIN_PASSWORD) if config.get("security.enabled") else None
    )
    return falcon.testing.TestClient(app, headers=headers)
