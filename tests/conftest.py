from __future__ import annotations

import re
import uuid

import falcon.testing
import pytest

from narad.config import Config
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.nodes import tcp_url


@pytest.fixture
def config(tmp_path) -> Config:
    return Config.load(
        env={},
        overrides={
            "storage.url": f"fakeredis://{uuid.uuid4().hex}",
            # fakeredis keeps nothing on disk: strict durability would refuse it.
            "storage.durability": "relaxed",
            "storage.data_dir": str(tmp_path / "data"),
            "validation.capacity_dir": str(tmp_path / "capacity"),
        },
    )


@pytest.fixture
def client(config) -> falcon.testing.TestClient:
    """The app over a private fakeredis, driven in-process."""
    from narad.app import create_app

    return falcon.testing.TestClient(create_app(config))


@pytest.fixture
def topic(request) -> str:
    """A topic name unique to the test, so tests can share one server."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:200]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def valkey(tmp_path_factory):
    """One real Valkey (append-only, fsync always) for the session."""
    server = start_valkey(tmp_path_factory.mktemp("valkey"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def node(valkey, tmp_path_factory) -> Node:
    """One real node (gunicorn, 2 workers) over the session's Valkey."""
    started = Node(tmp_path_factory.mktemp("node"), storage_url=tcp_url(valkey))
    started.start()
    yield started
    started.stop()


@pytest.fixture
def http(node):
    client = node.client()
    yield client
    client.close()
