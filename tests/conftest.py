from __future__ import annotations

import os
import re
import uuid

import falcon.testing
import pytest

from narad import datastack
from narad import testing
from narad.config import Config
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.nodes import tcp_url
from tests.redisraft import RaftCluster
from tests.redisraft import redisraft_dir
from tests.valkeycluster import ValkeyCluster

# The tests validate in this process, as a worker does.
datastack.install()

# The storage contract suite is written with plain asserts.
pytest.register_assert_rewrite("narad.testing.storage_contract")


@pytest.fixture(autouse=True)
def _close_apps():
    """Each test's in-process apps stop their listener threads after it."""
    yield
    testing.close_apps()


@pytest.fixture
def config(tmp_path) -> Config:
    """Settings over a private fakeredis server, files under ``tmp_path``."""
    return testing.make_config(tmp_path)


@pytest.fixture
def client(config) -> falcon.testing.TestClient:
    """The app over a private fakeredis, driven in-process."""
    return testing.client(config)


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
def redisraft(tmp_path_factory) -> RaftCluster:
    """One 3-node RedisRaft cluster for the session (see tests/redisraft.py)."""
    directory = redisraft_dir()
    assert directory is not None, "collected without RedisRaft binaries"
    cluster = RaftCluster(directory, tmp_path_factory.mktemp("redisraft")).up()
    yield cluster
    cluster.down()


@pytest.fixture(scope="session")
def valkey_cluster(tmp_path_factory) -> ValkeyCluster:
    """One local Valkey Cluster (3 primaries, 3 replicas) for the session
    (see tests/valkeycluster.py). Its tests share the xdist group
    ``valkey_cluster``, so the suite's two processes start one between them."""
    cluster = ValkeyCluster(tmp_path_factory.mktemp("valkeycluster")).up()
    yield cluster
    cluster.down()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Keep each ``xdist_group`` on one worker under ``--dist loadgroup``.

    xdist groups a test by suffixing its node id with ``@<group>`` on the
    worker that collected it (the scheduler splits the ids the workers
    report). xdist 3.8 writes ``item._nodeid``, which pytest 9.2 no longer
    reads (pytest-dev/pytest-xdist#1386), so the suffix was lost without a
    word: the cluster group's tests were spread over both workers, each
    starting a cluster of its own, and ran in no set order. The suffix is set
    here where pytest reads it when xdist's did not take; a pytest where
    neither takes stops the run instead of splitting the group.
    """
    if not config.getoption("loadgroup", default=False):
        return  # only xdist's workers under --dist loadgroup
    for item in items:
        names = {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue
        from _pytest.nodeid import NodeId  # pytest >= 9.2: the id is item._id

        item._id = NodeId.parse(item.nodeid + suffix)
        if not item.nodeid.endswith(suffix):
            raise pytest.UsageError(
                f"{item.nodeid}: its xdist_group would not keep it on one worker"
            )


def pytest_report_header(config) -> str:
    directory = redisraft_dir()
    if directory is None:
        return "redisraft: no runnable binaries; tests on a RedisRaft cluster left out"
    return f"redisraft: {directory}"


@pytest.fixture(scope="session")
def storage_url(request) -> str:
    """The storage the integration tests' nodes share: ``$NARAD_TEST_STORAGE_URL``
    (any Valkey, Redis or RedisRaft cluster, e.g.
    ``redis://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003/0``), else the
    session's Valkey. Tests that kill or reconfigure a server start their own."""
    return os.environ.get("NARAD_TEST_STORAGE_URL") or tcp_url(
        request.getfixturevalue("valkey")
    )


@pytest.fixture(scope="session")
def node(storage_url, tmp_path_factory) -> Node:
    """One real node (gunicorn, 2 workers) over the session's storage."""
    started = Node(tmp_path_factory.mktemp("node"), storage_url=storage_url)
    started.start()
    yield started
    started.stop()


@pytest.fixture
def http(node):
    client = node.client()
    yield client
    client.close()
