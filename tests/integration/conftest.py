from __future__ import annotations

import pytest

from tests.nodes import Node

# Short, so a stalled body is refused quickly in tests; real clients that send
# a whole request at once never come near it.
EDGE_BODY_TIMEOUT = 2


@pytest.fixture(scope="session")
def edge_node(tmp_path_factory) -> Node:
    """``narad serve`` on its embedded storage, as a new user runs it
    (password hashes at their default cost)."""
    started = Node(
        tmp_path_factory.mktemp("edge"),
        workers=2,
        env={
            "NARAD_SERVER_BODY_TIMEOUT": str(EDGE_BODY_TIMEOUT),
            "NARAD_SECURITY_SCRYPT_LOG2_N": "14",
        },
    )
    started.start()
    yield started
    started.stop()
