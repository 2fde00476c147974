"""The storage contract suite on every backend this project knows.

fakeredis (in process), a real Valkey, a real 3-node RedisRaft cluster
(reached through a follower, so every write follows MOVED to the leader),
and a toy in-memory backend written from :mod:`narad.storage` alone, with
and without notifications.
"""

from __future__ import annotations

import uuid

import pytest

import narad_redis
from narad.config import Config
from narad.storage import Capabilities
from narad.testing import fakeredis
from narad.testing.storage_contract import StorageContract
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


class TestValkey(StorageContract):
    capabilities = REDIS

    @pytest.fixture
    def storage(self, valkey):
        backend = narad_redis.connect(tcp_url(valkey), CONFIG)
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
