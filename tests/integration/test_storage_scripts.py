"""What the Redis backend adds to the storage contract, on the session's
storage (a real Valkey unless ``$NARAD_TEST_STORAGE_URL`` says otherwise) and
on a 3-node RedisRaft cluster (seeded with a follower first).

The contract itself (every method, with chosen clocks) runs on every backend
in ``tests/contract``; these check the Redis key layout the scripts promise.
"""

from __future__ import annotations

import pytest
import redis

import narad_redis
from narad.config import Config
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.storage import SchemaVersion
from narad.storage import Status
from narad.testing.storage_contract import LIMITS
from narad.testing.storage_contract import new_meta
from tests.redisraft import redisraft_dir

SERVERS = ["session", "redisraft"] if redisraft_dir() is not None else ["session"]


@pytest.fixture(params=SERVERS)
def storage(request):
    if request.param == "redisraft":
        cluster = request.getfixturevalue("redisraft")
        url = cluster.url(first=cluster.follower())
    else:
        url = request.getfixturevalue("storage_url")
    backend = narad_redis.connect(url, Config.load(env={}))
    yield backend
    backend.close()


def writer(storage) -> redis.Redis:
    """The client of the node that takes writes (RedisRaft followers answer
    reads with MOVED too)."""
    storage.client.call(lambda r: r.exists(storage.TOPICS))
    return storage.client.redis


def test_delete_leaves_no_key_of_the_topic_and_returns_its_bytes(storage):
    redis = writer(storage)

    def total() -> int:
        return int(redis.get(storage.SCHEMA_BYTES) or 0)

    before = total()
    meta = new_meta(partitions=2)
    created = storage.create_topic(meta, SchemaVersion(1, b"{}", False), limits=LIMITS)
    assert created.status is Status.OK
    assert total() == before + 2
    entry = Entry(1, b"k", b"m", PayloadKind.TEXT)
    storage.append(meta, [entry], schema_version=1, now_ms=0)
    storage.reserve(meta, [1], nonce="n" * 16, now_ms=0)
    assert redis.keys(f"narad:{{{meta.name}}}*")
    assert storage.delete_topic(storage.get_topic(meta.name)) is Status.OK
    assert total() == before
    assert redis.keys(f"narad:{{{meta.name}}}*") == []
    assert redis.zscore(storage.TOPICS, meta.name) is None


def test_events_travel_on_one_channel_as_event_and_topic(storage):
    pubsub = writer(storage).pubsub()
    pubsub.subscribe(storage.EVENTS)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    meta = new_meta()
    storage.create_topic(meta)
    message = pubsub.get_message(timeout=5)
    assert message["data"] == f"topic_changed {meta.name}".encode()
    pubsub.close()
