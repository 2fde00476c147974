"""What the Redis backend adds to the storage contract, on the session's
storage (a real Valkey unless ``$NARAD_TEST_STORAGE_URL`` says otherwise) and
on a 3-node RedisRaft cluster (seeded with a follower first).

The contract itself (every method, with chosen clocks) runs on every backend
in ``tests/contract``; these check the Redis key layout the scripts promise,
and what a retried script does.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress

import pytest
import redis
from redis import exceptions as redis_errors

import narad_redis
from narad.config import Config
from narad.errors import StorageUncertain
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.storage import Status
from narad.testing.storage_contract import LIMITS
from narad.testing.storage_contract import new_meta
from narad.testing.storage_contract import schema_version
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
    created = storage.create_topic(meta, schema_version(1, b"{}", False), limits=LIMITS)
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


class ReplyDropper:
    """A TCP proxy to the storage that, once armed, lets the next script call
    through and closes its connection instead of passing the reply back: the
    script ran, and the client saw a lost connection."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.armed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            doomed = threading.Event()  # this link's next reply is dropped
            for args in (
                (client, server, doomed, False),
                (server, client, doomed, True),
            ):
                threading.Thread(target=self._pipe, args=args, daemon=True).start()

    def _pipe(self, source, sink, doomed, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and doomed.is_set():
                    break
                if not replies and b"EVALSHA" in data and self.armed.is_set():
                    self.armed.clear()
                    doomed.set()
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def dropping(valkey):
    proxy = ReplyDropper(valkey.port)
    backend = narad_redis.connect(
        f"redis://127.0.0.1:{proxy.port}/0",
        Config.load(env={"NARAD_PLUGINS_REDIS_RETRY_BACKOFF_MS": "1"}),
    )
    backend.proxy = proxy
    yield backend
    backend.close()
    proxy.close()


def test_a_script_retried_after_a_lost_reply_is_safe_with_keys(dropping):
    """The storage client resends a script whose reply was lost only where a
    rerun is harmless: with a key the second run finds the first's work;
    without one it is not resent (it was applied once), and the caller
    learns the write may have been applied."""
    storage = dropping
    meta = new_meta()
    assert storage.create_topic(meta).status is Status.OK
    entry = [Entry(0, b"", b"m", PayloadKind.TEXT)]
    key = [IdempotencyKey("k", "digest", 0, 1)]
    storage.append(meta, entry, schema_version=0, now_ms=0)  # scripts loaded
    storage.proxy.armed.set()
    keyed = storage.append(meta, entry, schema_version=0, now_ms=1, idempotency=key)
    assert not storage.proxy.armed.is_set()  # the first reply was dropped
    assert (keyed.status, keyed.count, keyed.repeated) == (Status.OK, 0, 1)
    storage.proxy.armed.set()
    with pytest.raises(StorageUncertain, match="may have been applied"):
        storage.append(meta, entry, schema_version=0, now_ms=2)
    assert not storage.proxy.armed.is_set()
    assert storage.partition_stats(meta, now_ms=3)[0].next_offset == 3  # 1+1+1

    held = storage.reserve(meta, [0], nonce="n" * 16, now_ms=3).message
    unknown = storage.settle(meta, 0, 9, "x" * 16, action=Settle.ACK, now_ms=3)
    assert unknown is Status.GONE  # and the script is loaded
    storage.proxy.armed.set()
    acked = storage.settle(
        meta, 0, held.offset, held.nonce, action=Settle.ACK, now_ms=4
    )
    assert not storage.proxy.armed.is_set()
    assert acked is Status.REPEATED
    assert storage.partition_stats(meta, now_ms=5)[0].in_flight == 0


def test_fan_out_fields_of_the_records(storage):
    redis = writer(storage)
    parent, child = new_meta(partitions=2), new_meta(partitions=3)
    for meta in (parent, child):
        assert storage.create_topic(meta).status is Status.OK
    result = storage.attach_child(
        parent, child, delay_ms=7, limits=LIMITS, max_children=108
    )
    assert result.status is Status.OK
    assert redis.hget(f"narad:{{{parent.name}}}:meta", "children") == (
        f"{child.name}:{child.epoch}:3:7".encode()
    )
    assert redis.hmget(f"narad:{{{child.name}}}:meta", "parent", "fanout_delay_ms") == [
        parent.name.encode(),
        b"7",
    ]
    assert storage.detach_child(storage.get_topic(parent.name), child.name) is (
        Status.OK
    )
    assert not redis.hexists(f"narad:{{{parent.name}}}:meta", "children")
    assert redis.hmget(f"narad:{{{child.name}}}:meta", "parent", "fanout_delay_ms") == [
        None,
        None,
    ]


def test_an_append_refused_for_a_bad_fan_out_plan_writes_nothing(storage):
    """A script's writes are not undone by a later error, so append.lua plans
    the whole fan-out before its first write: a copy routed to a partition
    the caller gave no keys for fails the script before it writes."""
    parent, child = new_meta(partitions=1), new_meta(partitions=2)
    for meta in (parent, child):
        assert storage.create_topic(meta).status is Status.OK
    storage.attach_child(parent, child, delay_ms=0, limits=LIMITS, max_children=108)
    parent = storage.get_topic(parent.name)
    keys = [
        f"narad:{{{parent.name}}}:meta",
        *storage._idempotency_keys(parent.name),
        *storage._partition_keys(parent.name, 0),
    ]
    keys += [f"narad:{{{child.name}}}:meta", *storage._partition_keys(child.name, 0)]
    args = [
        parent.epoch,
        0,
        1000,
        storage.EVENTS,
        f"messages {parent.name} {child.name}",
        f"{child.name}:{child.epoch}:2:0",
        1,
        1,
        600_000,  # idempotency: window, most keys, most bytes, bytes per key
        1000,
        1 << 20,
        64,
        0,  # no keys
        1,
        1,  # route 1: the child's partition 1, which has no slot below
        len(b"1000,t0:m"),
        0,  # the child: delay, 2 partitions, 1 slot: partition 0
        2,
        1,
        0,
        b"1000,t0:m",  # the records
    ]
    append = storage.scripts["append"]
    with pytest.raises(redis_errors.ResponseError, match="no slot"):
        storage.client.call(lambda r: append(keys=keys, args=args, client=r))
    for meta in (parent, child):
        assert [s.next_offset for s in storage.partition_stats(meta, now_ms=0)] == [
            0
        ] * meta.partitions


def test_an_append_announces_its_topic_and_children_in_one_message(storage):
    parent, child = new_meta(), new_meta()
    for meta in (parent, child):
        assert storage.create_topic(meta).status is Status.OK
    storage.attach_child(parent, child, delay_ms=0, limits=LIMITS, max_children=108)
    pubsub = writer(storage).pubsub()
    pubsub.subscribe(storage.EVENTS)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    entry = Entry(0, b"", b"m", PayloadKind.TEXT)
    meta = storage.get_topic(parent.name)
    assert storage.append(meta, [entry], schema_version=0, now_ms=0).count == 1
    message = pubsub.get_message(timeout=5)
    assert message["data"] == f"messages {parent.name} {child.name}".encode()
    pubsub.close()
