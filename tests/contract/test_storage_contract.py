"""The storage contract suite on every backend this project knows.

fakeredis (in process), a real Valkey, a real 3-node RedisRaft cluster
(reached through a follower, so every write follows MOVED to the leader), a
real Valkey Cluster of 3 primaries and 3 replicas,
and a toy in-memory backend written from :mod:`narad.storage` alone, with
and without notifications.
"""

from __future__ import annotations

import uuid

import pytest
import redis

import narad_redis
from narad.config import Config
from narad.storage import Capabilities
from narad.testing.storage_contract import StorageContract
from narad_redis import fakeredis
from tests.contract.memory import MemoryStorage
from tests.nodes import tcp_url
from tests.redisraft import redisraft_dir

CONFIG = Config.load(env={})


REDIS = Capabilities(topic_stats=True)


class TestFakeRedis(StorageContract):
    capabilities = REDIS

    @pytest.fixture
    def storage(self):
        backend = fakeredis.connect(f"fakeredis://{uuid.uuid4().hex}", CONFIG)
        yield backend
        backend.close()


def flushed(url: str):
    """A backend on ``url`` whose database was emptied first."""
    redis.Redis.from_url(url).flushdb()
    return narad_redis.connect(url, CONFIG)


class TestValkey(StorageContract):
    capabilities = REDIS

    # The suite's own database: the session's nodes keep their users in 0.
    @pytest.fixture
    def storage(self, valkey):
        backend = narad_redis.connect(tcp_url(valkey)[:-1] + "1", CONFIG)
        yield backend
        backend.close()

    @pytest.fixture
    def users_storage(self, valkey):
        backend = flushed(tcp_url(valkey)[:-1] + "1")
        yield backend
        backend.close()


if redisraft_dir() is not None:

    class TestRedisRaft(StorageContract):
        capabilities = REDIS

        @pytest.fixture
        def storage(self, redisraft):
            url = f"redis://127.0.0.1:{redisraft.follower()}/0"
            backend = narad_redis.connect(url, CONFIG)
            yield backend
            backend.close()

        @pytest.fixture
        def users_storage(self, redisraft):
            # The cluster is the session's: emptied before and after, so the
            # nodes of later tests find no user and seed their root admin.
            backend = flushed(f"redis://127.0.0.1:{redisraft.leader()}/0")
            yield backend
            backend.close()
            redis.Redis.from_url(f"redis://127.0.0.1:{redisraft.leader()}/0").flushdb()


@pytest.mark.xdist_group("valkey_cluster")
class TestValkeyCluster(StorageContract):
    """A cluster of 3 primaries. A sharded storage attaches only a topic
    stored in the parent's hash slot, so each test's topics go in one slot
    (``placed_with``), a slot of their own; test_valkey_cluster.py has the
    tests of topics spread over the primaries."""

    capabilities = REDIS

    @pytest.fixture(autouse=True)
    def _family(self):
        self.family = f"family-{uuid.uuid4().hex}"

    def topic(self, storage, schema=b"", **settings):
        with storage.placed_with(self.family):
            return super().topic(storage, schema, **settings)

    @pytest.fixture
    def storage(self, valkey_cluster):
        backend = narad_redis.connect(valkey_cluster.url, CONFIG)
        yield backend
        backend.close()

    @pytest.fixture
    def users_storage(self, valkey_cluster):
        # The cluster is the session's: emptied before and after, so the
        # nodes of later tests find no user and seed their root admin.
        valkey_cluster.flush()
        backend = narad_redis.connect(valkey_cluster.url, CONFIG)
        yield backend
        backend.close()
        valkey_cluster.flush()


class TestMemory(StorageContract):
    capabilities = Capabilities(topic_stats=True)

    @pytest.fixture
    def storage(self):
        return MemoryStorage()


class TestMemoryWithoutNotifications(StorageContract):
    capabilities = Capabilities(notifications=False)

    @pytest.fixture
    def storage(self):
        return MemoryStorage(notifications=False, topic_stats=False)


def test_a_backend_without_notifications_leaves_their_tests_out():
    assert TestMemory.test_notifications_idle_with_none is not None
    assert TestMemoryWithoutNotifications.test_notifications_idle_with_none is None
    assert TestMemoryWithoutNotifications.test_give_back_and_extend is not None
    assert TestMemoryWithoutNotifications.test_topic_stats_follow_positions is None
