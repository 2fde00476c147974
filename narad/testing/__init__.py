"""What a plugin author (and Narad's own suite) needs to test against Narad.

Public and covered by the README's compatibility promise, like
:mod:`narad.storage` and :mod:`narad.compatibility`. Needs the test extra
(``pip install narad[test]``: pytest, fakeredis).

- :func:`client` (and :func:`make_app`): the whole HTTP API in-process, over a
  private fakeredis server, with the built-in plugins and yours::

      import my_plugin
      from narad.testing import client

      def test_my_rule():
          http = client(plugins={"my_plugin": my_plugin})
          http.simulate_post("/v1/topics", json={"name": "t", "schema": {...}})

- :func:`load_plugins`: the checked plugin set (built-ins, the fakeredis
  backend, yours) without whatever else is installed.
- :func:`make_config`: a :class:`~narad.config.Config` for tests.
- :mod:`narad.testing.compatibility`: check a pair of schema texts as a
  schema change is checked, with your plugins
  (:func:`~narad.testing.compatibility.check_compatibility`).
- :mod:`narad.testing.storage_contract`: the test suite every storage
  backend must pass.
- :mod:`narad.testing.fakeredis`: the ``fakeredis://`` backend itself.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import falcon
import falcon.testing

from narad.config import Config
from narad.plugins import Plugins
from narad.plugins import load_plugins as _load_plugins
from narad.testing import fakeredis

__all__ = ("client", "load_plugins", "make_app", "make_config")


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
        extra={fakeredis.NAME: fakeredis, **(plugins or {})},
    )


def make_config(directory: str | Path | None = None, **settings: Any) -> Config:
    """Settings for a test: a private fakeredis server, files under ``directory``.

    Args:
        directory: Where the node's files go (a temporary directory, removed
            at exit, when not given).
        **settings: Overrides keyed ``section__name`` (``broker__max_wait_ms``,
            ``plugins__redis__retry_attempts``), already as their parsers
            would return them.
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
        **{key.replace("__", "."): value for key, value in settings.items()},
    }
    return Config.load(env={}, overrides=overrides)


def make_app(
    config: Config | None = None, *, plugins: Mapping[str, object] | None = None
) -> falcon.App:
    """The Narad WSGI app over ``config`` (:func:`make_config` by default),
    with the built-in plugins, the fakeredis backend and ``plugins``."""
    from narad.app import create_app

    config = config or make_config()
    return create_app(config, plugins=load_plugins(plugins, config=config))


def client(
    config: Config | None = None, *, plugins: Mapping[str, object] | None = None
) -> falcon.testing.TestClient:
    """A :class:`falcon.testing.TestClient` over :func:`make_app`: requests
    run in-process (``simulate_get``, ``simulate_post``...)."""
    return falcon.testing.TestClient(make_app(config, plugins=plugins))
