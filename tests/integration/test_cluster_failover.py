"""A node over the local Valkey Cluster through the loss of a primary.

With ``storage.min_replicas = 1`` every write waits until the primary's
replica holds it, so when the primary holding the topic is killed
(``kill -9``) under producers and consumers, and its replica takes over,
every message answered 202 is still there: each is accounted for by its
unique id and its (partition, offset), as in ``test_durability.py``.
Meanwhile clients see 503s, never a 500. The killed node is restarted (it
rejoins as a replica of the new primary) and the cluster left whole.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.test_durability import Load
from tests.integration.test_durability import assert_wakes_promptly
from tests.integration.test_durability import drain_and_check
from tests.integration.test_durability import make
from tests.integration.test_durability import wait_for_progress
from tests.integration.test_redisraft_failover import OUTAGE
from tests.integration.test_redisraft_failover import codes
from tests.nodes import Node

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("valkey_cluster")]

VISIBILITY_MS = 1000
#: A guard against a hang, not a figure.
FAILOVER_S = 60.0


@pytest.fixture
def cluster(valkey_cluster):
    """The session's cluster, whole again after the test."""
    yield valkey_cluster
    for server in valkey_cluster.nodes:
        if server.process is None or server.process.poll() is not None:
            server.start()
    valkey_cluster.wait_ok()


def test_kill_9_of_a_primary_under_load_loses_no_202(cluster, tmp_path, topic):
    node = Node(
        tmp_path, storage_url=cluster.url, env={"NARAD_STORAGE_MIN_REPLICAS": "1"}
    ).start()
    http = node.client()
    try:
        make(http, topic, partitions=3, visibility_timeout_ms=VISIBILITY_MS)
        key = f"narad:{{{topic}}}:meta"
        with Load(node, topic, producers=4, consumers=4, limit=100_000) as load:
            wait_for_progress(load, 100, timeout=30)
            primary = cluster.primary_of(key)
            primary.kill()
            deadline = time.monotonic() + FAILOVER_S
            while cluster.primary_of(key) is primary:
                assert time.monotonic() < deadline, "no replica took over"
                time.sleep(0.05)
            # The new primary has no replica until the old one is back, and
            # with min_replicas = 1 it takes no write meanwhile (503s).
            primary.start()
            cluster.wait_ok()
            wait_for_progress(load, load.accepted() + 150, timeout=FAILOVER_S)
        statuses = load.ledger.statuses
        assert codes(statuses) <= OUTAGE, statuses
        drain_and_check(node, topic, load.ledger, VISIBILITY_MS)
        assert http.get("/readyz").status == 200
        # The workers' wake-up subscriptions survived a dead primary.
        assert_wakes_promptly(node, http, topic)
    finally:
        http.close()
        node.stop()
