"""The Lua scripts on a real Valkey, driven with explicit "now" values.

Retention needs hours to pass and lease expiry needs exact instants, so these
call the storage backend directly with chosen clocks, on the real server.
"""

from __future__ import annotations

import uuid

import pytest

import narad_redis
from narad.config import Config
from narad.storage import Entry
from narad.storage import SchemaVersion
from narad.storage import Status
from narad.storage import TopicMeta
from tests.nodes import tcp_url

HOUR = 3_600_000
BUDGET = (4 << 20, 256 << 20)


@pytest.fixture
def storage(valkey):
    backend = narad_redis.connect(tcp_url(valkey), Config.load(env={}))
    yield backend
    backend.close()


def new_topic(storage, **settings) -> TopicMeta:
    fields = {
        "partitions": 1,
        "retention_ms": 0,
        "visibility_timeout_ms": 1000,
        "max_in_flight_per_partition": 100,
        "max_acked_ahead_per_partition": 100,
        **settings,
    }
    meta = TopicMeta(name=f"s-{uuid.uuid4().hex}", epoch="e", created_ms=0, **fields)
    assert storage.create_topic(meta, None, budget=BUDGET).status is Status.OK
    return storage.get_topic(meta.name)


def put(storage, meta, payload: bytes, now: int, partition: int = 0):
    entry = Entry(partition, b"", payload, "t")
    return storage.append(meta, [entry], schema_version=0, now_ms=now)


def test_retention_trims_on_append_and_reserve(storage):
    meta = new_topic(storage, retention_ms=HOUR)
    for i in range(5):
        put(storage, meta, b"old%d" % i, now=1_000)
    lease = storage.reserve(meta, [0], nonce="n" * 16, now_ms=1_001).message
    put(storage, meta, b"new", now=1_000 + HOUR)
    [stats] = storage.partition_stats(meta, now_ms=1_000 + HOUR)
    assert (stats.oldest_offset, stats.next_offset, stats.in_flight) == (5, 6, 0)
    assert storage.read(meta, 0, 0, now_ms=1_000 + HOUR) is None
    assert (
        storage.settle(
            meta, 0, lease.offset, lease.nonce, action="ack", now_ms=1_000 + HOUR
        )
        is Status.GONE
    )
    got = storage.reserve(meta, [0], nonce="m" * 16, now_ms=1_000 + HOUR)
    assert got.message.payload == b"new"


def test_expired_messages_are_not_served_before_trimming(storage):
    meta = new_topic(storage, retention_ms=HOUR)
    put(storage, meta, b"old", now=1_000)
    assert storage.read(meta, 0, 0, now_ms=1_000 + HOUR) is None
    assert (
        storage.reserve(meta, [0], nonce="n" * 16, now_ms=1_000 + HOUR).message is None
    )


def test_retention_zero_keeps_forever(storage):
    meta = new_topic(storage, retention_ms=0)
    put(storage, meta, b"m", now=1)
    assert storage.read(meta, 0, 0, now_ms=10**12).payload == b"m"


def test_timestamps_never_go_backwards_within_a_partition(storage):
    meta = new_topic(storage)
    put(storage, meta, b"a", now=5_000)
    put(storage, meta, b"b", now=4_000)  # another node's clock, behind
    assert storage.read(meta, 0, 1, now_ms=6_000).timestamp == 5_000


def test_leases_caps_and_frontier(storage):
    meta = new_topic(
        storage, max_in_flight_per_partition=3, max_acked_ahead_per_partition=1
    )
    for i in range(5):
        put(storage, meta, b"%d" % i, now=10)
    held = [
        storage.reserve(meta, [0], nonce=f"{i:016d}", now_ms=20).message
        for i in range(3)
    ]
    assert [m.offset for m in held] == [0, 1, 2]
    assert storage.reserve(meta, [0], nonce="x" * 16, now_ms=20).message is None
    assert (
        storage.settle(meta, 0, 1, held[1].nonce, action="ack", now_ms=21) is Status.OK
    )
    assert (
        storage.settle(meta, 0, 2, held[2].nonce, action="ack", now_ms=21)
        is Status.ACKED_AHEAD_FULL
    )
    # Acked-ahead is full: only the message at the frontier (0) may move, and
    # it is leased until 1020.
    none = storage.reserve(meta, [0], nonce="y" * 16, now_ms=500)
    assert none.message is None
    assert none.next_lease_expiry_ms == 1020
    again = storage.reserve(meta, [0], nonce="z" * 16, now_ms=1020).message
    assert again.offset == 0
    assert (
        storage.settle(meta, 0, 0, again.nonce, action="ack", now_ms=1021) is Status.OK
    )
    assert storage.get_topic(meta.name) is not None
    [stats] = storage.partition_stats(meta, now_ms=1021)
    assert stats.in_flight == 1  # offset 2, lapsed, still unacked


def test_give_back_and_extend(storage):
    meta = new_topic(storage)
    put(storage, meta, b"m", now=0)
    first = storage.reserve(meta, [0], nonce="a" * 16, now_ms=0).message
    assert (
        storage.settle(meta, 0, 0, first.nonce, action="extend", now_ms=900)
        is Status.OK
    )
    assert storage.reserve(meta, [0], nonce="b" * 16, now_ms=1500).message is None
    assert (
        storage.settle(meta, 0, 0, first.nonce, action="release", now_ms=1600)
        is Status.OK
    )
    second = storage.reserve(meta, [0], nonce="c" * 16, now_ms=1600).message
    assert second.offset == 0
    assert (
        storage.settle(meta, 0, 0, first.nonce, action="ack", now_ms=1601)
        is Status.GONE
    )


def test_stale_epoch_and_schema_version_are_refused(storage):
    meta = new_topic(storage)
    stale = TopicMeta(**{**meta.__dict__, "epoch": "old"})
    assert put(storage, stale, b"m", now=0).status is Status.NO_TOPIC
    result = storage.append(
        meta, [Entry(0, b"", b"{}", "j")], schema_version=3, now_ms=0
    )
    assert result.status is Status.STALE_SCHEMA
    assert storage.partition_stats(meta, now_ms=0)[0].next_offset == 0


def test_schema_history_script_enforces_base_count_and_budgets(storage):
    meta = new_topic(storage)
    doc = SchemaVersion(1, b'{"type":"object"}', False)
    ok = storage.append_schema(
        meta, doc, expected_current=0, budget=BUDGET, max_versions=2
    )
    assert (ok.status, ok.version) == (Status.OK, 1)
    moved = storage.append_schema(
        meta, doc, expected_current=0, budget=BUDGET, max_versions=2
    )
    assert (moved.status, moved.version) == (Status.BASE_MISMATCH, 1)
    assert (
        storage.append_schema(
            meta, doc, expected_current=1, budget=BUDGET, max_versions=2
        ).status
        is Status.OK
    )
    full = storage.append_schema(
        meta, doc, expected_current=2, budget=BUDGET, max_versions=2
    )
    assert full.status is Status.TOO_MANY_VERSIONS
    small = storage.append_schema(
        meta, doc, expected_current=2, budget=(40, 1 << 30), max_versions=10
    )
    assert (small.status, small.stored_bytes) == (Status.TOPIC_BUDGET, 34)
    cluster = storage.append_schema(
        meta, doc, expected_current=2, budget=(1 << 20, 10), max_versions=10
    )
    assert cluster.status is Status.CLUSTER_BUDGET
    assert [v for v, _ in storage.schema_sizes(meta.name)] == [1, 2]


def test_delete_returns_schema_bytes_to_the_cluster(storage):
    meta = new_topic(storage)

    def total() -> int:
        return int(storage.client.redis.get("narad:schema_bytes") or 0)

    before = total()
    storage.append_schema(
        meta,
        SchemaVersion(1, b"{}", False),
        expected_current=0,
        budget=BUDGET,
        max_versions=10,
    )
    assert total() == before + 2
    assert storage.delete_topic(storage.get_topic(meta.name)) is Status.OK
    assert total() == before
    assert storage.client.redis.keys(f"narad:{{{meta.name}}}*") == []
