from __future__ import annotations

import pytest

from tests.nodes import Node
from tests.redisraft import RaftCluster
from tests.redisraft import redisraft_dir

if redisraft_dir() is None:
    # Nothing stands in for a RedisRaft cluster (the session header says so).
    collect_ignore_glob = ["test_redisraft_*.py"]

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


@pytest.fixture(scope="session")
def raft_node(redisraft: RaftCluster, tmp_path_factory) -> Node:
    """A node (gunicorn, 2 workers) given one RedisRaft follower's address
    only: it finds the leader and the other nodes by itself. A storage call
    gives up after 3 s (socket timeout) so outages answer 503 sooner."""
    started = Node(
        tmp_path_factory.mktemp("raft-node"),
        storage_url=f"redis://127.0.0.1:{redisraft.follower()}/0",
        env={"NARAD_PLUGINS_REDIS_SOCKET_TIMEOUT_MS": "3000"},
    )
    started.start()
    yield started
    started.stop()
