"""Fixtures: a live Narad node started as the project's tests start one
(``tests/nodes.py``: ``narad serve`` on a free port, embedded storage,
security on with a known admin password), and clients of it."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# The checkout (for tests.nodes) and this distribution's sources: the tests
# run from the checkout without installing the client.
CLIENT = Path(__file__).resolve().parents[1]
ROOT = CLIENT.parents[1]
for where in (ROOT, CLIENT):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

from tests.httpclient import ADMIN  # noqa: E402
from tests.nodes import Node  # noqa: E402

from narad_client import Client  # noqa: E402


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One node for the tests that do not stop it."""
    started = Node(tmp_path_factory.mktemp("node"), workers=2).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(node: Node) -> Iterator[Client]:
    with Client(node.base, auth=ADMIN, retries=2, backoff=0.05) as narad:
        yield narad


@pytest.fixture
def topic(client: Client) -> Iterator[str]:
    """A fresh one-partition topic, deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    client.create_topic(name, partitions=1)
    yield name
    client.delete_topic(name)
