"""The storage contract as tests: what every backend must pass.

:mod:`narad.storage` documents each method; these tests hold a backend to it,
through the public interface only, with chosen clocks (``now_ms``), so they
run the same on any backend. A backend's own test module subclasses
:class:`StorageContract` and provides a ``storage`` fixture::

    import pytest
    from narad.testing.storage_contract import StorageContract

    class TestMyBackend(StorageContract):
        @pytest.fixture
        def storage(self):
            backend = connect("mine://test")  # a fresh or shared store
            yield backend
            backend.close()

Tests name their topics uniquely, so one store may serve the whole run.
The user tests are the exception: they need a store with no user at all
(seeding the first admin, keeping the last one), so they take the
``users_storage`` fixture, which is ``storage`` unless the subclass overrides
it; a backend whose ``storage`` is shared overrides it with a store emptied
for the test (the suite's own database, flushed).
A backend that cannot offer a feature says so in one place, the class
attribute ``capabilities`` (the same :class:`~narad.storage.Capabilities`
the backend reports): the tests of that feature are then left out of the
subclass, not skipped. Assertions are plain ``assert``; call
``pytest.register_assert_rewrite("narad.testing.storage_contract")`` in your
conftest for readable failures.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from typing import TypeVar

import pytest

from narad.storage import Capabilities
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Grant
from narad.storage import Notification
from narad.storage import PayloadKind
from narad.storage import SchemaLimits
from narad.storage import SchemaVersion
from narad.storage import ServerStatus
from narad.storage import Settle
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicChanges
from narad.storage import TopicMeta
from narad.storage import UserRecord

__all__ = ("StorageContract", "requires")

HOUR = 3_600_000
LIMITS = SchemaLimits(topic_bytes=4 << 20, cluster_bytes=256 << 20, max_versions=1000)
NOTIFICATION_WAIT_S = 10.0
DOC = b'{"type":"object"}'

F = TypeVar("F", bound=Callable[..., Any])


def requires(*capabilities: str) -> Callable[[F], F]:
    """Mark a test as needing these :class:`~narad.storage.Capabilities`."""

    def mark(test: F) -> F:
        test.narad_requires = capabilities  # type: ignore[attr-defined]
        return test

    return mark


def new_meta(**settings: Any) -> TopicMeta:
    """A topic record with a unique name and small, test-friendly settings."""
    fields: dict[str, Any] = {
        "partitions": 1,
        "retention_ms": 0,
        "visibility_timeout_ms": 1000,
        "max_in_flight_per_partition": 100,
        "max_acked_ahead_per_partition": 100,
        "created_ms": 0,
        "name": f"contract-{uuid.uuid4().hex}",
        "epoch": uuid.uuid4().hex[:16],
        **settings,
    }
    return TopicMeta(**fields)


def nonce(n: int | str) -> str:
    return f"{n}".rjust(16, "n")


ADMIN = (Grant("admin", ("*",)),)


def new_user(*, admin: bool = False, **fields: Any) -> UserRecord:
    """A user record with a unique name."""
    values: dict[str, Any] = {
        "name": f"u-{uuid.uuid4().hex[:12]}",
        "password_hash": "scrypt$test",
        "grants": ADMIN if admin else (Grant("produce", ("a.*", "b")),),
        "admin": admin,
        "created_ms": 5,
        **fields,
    }
    return UserRecord(**values)


class StorageContract:
    """Every behaviour of :class:`narad.storage.Storage`, as tests."""

    capabilities = Capabilities()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in dir(cls):
            test = getattr(cls, name)
            needed = getattr(test, "narad_requires", ())
            if not all(getattr(cls.capabilities, c) for c in needed):
                setattr(cls, name, None)  # not collected: the backend lacks it

    @pytest.fixture
    def users_storage(self, storage: Storage) -> Storage:
        """A store with no user, for the user tests (see the module's doc)."""
        return storage

    # -- helpers -------------------------------------------------------------

    def topic(
        self, storage: Storage, schema: bytes = b"", **settings: Any
    ) -> TopicMeta:
        meta = new_meta(**settings)
        version = SchemaVersion(1, schema, False) if schema else None
        result = storage.create_topic(meta, version, limits=LIMITS)
        assert result.status is Status.OK
        stored = storage.get_topic(meta.name)
        assert stored is not None
        return stored

    @staticmethod
    def put(storage: Storage, meta: TopicMeta, payload: bytes, now: int, **kw: Any):
        entry = Entry(
            kw.pop("partition", 0), kw.pop("key", b""), payload, PayloadKind.TEXT
        )
        return storage.append(meta, [entry], schema_version=0, now_ms=now, **kw)

    # -- health --------------------------------------------------------------

    def test_ping_answers_while_the_backend_serves(self, storage):
        assert storage.ping() is True

    def test_server_status_reports_durability_and_memory(self, storage):
        status = storage.server_status()
        assert isinstance(status, ServerStatus)
        assert isinstance(status.durable, bool) and status.detail
        assert status.memory_used >= 0
        assert status.memory_limit >= 0

    def test_capabilities_are_the_declared_ones(self, storage):
        assert storage.capabilities == self.capabilities

    # -- topics --------------------------------------------------------------

    def test_create_stores_the_record_once(self, storage):
        meta = new_meta(partitions=3, retention_ms=HOUR, created_ms=1234)
        meta = replace(meta, schema_version=9, schema_bytes=9)
        result = storage.create_topic(meta)
        assert (result.status, result.version, result.stored_bytes) == (Status.OK, 0, 0)
        assert storage.get_topic(meta.name) == replace(
            meta, schema_version=0, schema_bytes=0
        )
        again = replace(meta, epoch="other")
        assert storage.create_topic(again).status is Status.EXISTS
        assert storage.get_topic(meta.name).epoch == meta.epoch

    def test_create_with_a_schema_stores_version_one(self, storage):
        meta = new_meta()
        result = storage.create_topic(meta, SchemaVersion(1, DOC, True), limits=LIMITS)
        assert (result.status, result.version) == (Status.OK, 1)
        assert result.stored_bytes == len(DOC)
        assert result.cluster_bytes >= len(DOC)
        stored = storage.get_topic(meta.name)
        assert (stored.schema_version, stored.schema_high_cost) == (1, True)
        assert stored.schema_bytes == len(DOC)
        assert storage.get_schema(meta.name, 1) == SchemaVersion(1, DOC, True)
        assert [(s.version, s.size) for s in storage.schema_sizes(meta.name)] == [
            (1, len(DOC))
        ]

    def test_create_over_a_budget_stores_nothing(self, storage):
        small = replace(LIMITS, topic_bytes=len(DOC) - 1)
        meta = new_meta()
        result = storage.create_topic(meta, SchemaVersion(1, DOC, False), limits=small)
        assert result.status is Status.TOPIC_BUDGET
        assert storage.get_topic(meta.name) is None
        # What every history holds now, learnt from a write that succeeds.
        total = self.topic_with_schema_cluster_bytes(storage)
        tight = replace(LIMITS, cluster_bytes=total + len(DOC) - 1)
        result = storage.create_topic(meta, SchemaVersion(1, DOC, False), limits=tight)
        assert (result.status, result.cluster_bytes) == (Status.CLUSTER_BUDGET, total)
        assert storage.get_topic(meta.name) is None
        roomy = replace(LIMITS, cluster_bytes=total + len(DOC))
        ok = storage.create_topic(meta, SchemaVersion(1, DOC, False), limits=roomy)
        assert (ok.status, ok.cluster_bytes) == (Status.OK, total + len(DOC))

    def topic_with_schema_cluster_bytes(self, storage: Storage) -> int:
        result = storage.create_topic(
            new_meta(), SchemaVersion(1, b"{}", False), limits=LIMITS
        )
        assert result.status is Status.OK
        return result.cluster_bytes

    def test_get_topics_answers_in_order(self, storage):
        a, b = self.topic(storage), self.topic(storage)
        missing = new_meta().name
        assert storage.get_topics([b.name, missing, a.name]) == [b, None, a]
        assert storage.get_topics([]) == []
        assert storage.get_topic(missing) is None

    def test_list_topics_pages_in_name_order(self, storage):
        prefix = f"contract-list-{uuid.uuid4().hex}"
        for suffix in ("c", "a", "b"):
            self.put_topic_named(storage, f"{prefix}-{suffix}")
        first = storage.list_topics(after=prefix, limit=2)
        assert first.names == [f"{prefix}-a", f"{prefix}-b"]
        assert first.next_token == f"{prefix}-b"
        second = storage.list_topics(after=first.next_token, limit=2)
        assert second.names[0] == f"{prefix}-c"
        last = storage.list_topics(after=f"{prefix}-c", limit=1)
        assert f"{prefix}-c" not in last.names
        everything = storage.list_topics(after="", limit=10**6)
        assert everything.next_token is None
        assert everything.names == sorted(everything.names)
        assert f"{prefix}-a" in everything.names

    def test_list_topics_keeps_to_a_prefix(self, storage):
        base = f"contract-prefix-{uuid.uuid4().hex}"
        for name in ("a", "a.1", "a.2", "a0", "a.2.x", "b"):
            self.put_topic_named(storage, f"{base}-{name}")
        page = storage.list_topics(after="", limit=10, prefix=f"{base}-a.")
        assert page.names == [f"{base}-a.1", f"{base}-a.2", f"{base}-a.2.x"]
        assert page.next_token is None
        first = storage.list_topics(after="", limit=2, prefix=f"{base}-a.")
        assert first.next_token == f"{base}-a.2"
        rest = storage.list_topics(after=first.next_token, limit=2, prefix=f"{base}-a.")
        assert rest == type(rest)([f"{base}-a.2.x"], None)
        # ``after`` below the prefix starts at the prefix; past it, nothing.
        low = storage.list_topics(after=f"{base}-", limit=1, prefix=f"{base}-a0")
        assert low.names == [f"{base}-a0"]
        assert storage.list_topics(after=f"{base}-c", limit=5, prefix=base).names == []

    def test_create_keeps_the_owner(self, storage):
        meta = new_meta(owner="alice")
        assert storage.create_topic(meta).status is Status.OK
        assert storage.get_topic(meta.name).owner == "alice"
        unowned = self.topic(storage)
        assert unowned.owner == ""

    def put_topic_named(self, storage: Storage, name: str) -> TopicMeta:
        meta = new_meta(name=name)
        assert storage.create_topic(meta).status is Status.OK
        return meta

    def test_alter_changes_only_the_named_settings(self, storage):
        meta = self.topic(storage, retention_ms=HOUR)
        changes = TopicChanges(visibility_timeout_ms=5, max_in_flight_per_partition=7)
        assert storage.alter_topic(meta, changes) is Status.OK
        assert storage.get_topic(meta.name) == replace(
            meta, visibility_timeout_ms=5, max_in_flight_per_partition=7
        )
        stale = replace(meta, epoch="stale")
        assert (
            storage.alter_topic(stale, TopicChanges(retention_ms=0)) is Status.NO_TOPIC
        )
        assert storage.get_topic(meta.name).retention_ms == HOUR

    def test_delete_removes_everything_and_frees_the_name(self, storage):
        meta = self.topic(storage, DOC)
        self.put(storage, meta, b"m", now=0)
        assert storage.delete_topic(replace(meta, epoch="stale")) is Status.NO_TOPIC
        assert storage.delete_topic(meta) is Status.OK
        assert storage.get_topic(meta.name) is None
        assert storage.get_schema(meta.name, 1) is None
        assert storage.schema_sizes(meta.name) == []
        assert storage.read(meta, 0, 0, now_ms=0) is None
        assert meta.name not in storage.list_topics(after=meta.name[:-1], limit=5).names
        assert storage.delete_topic(meta) is Status.NO_TOPIC
        again = replace(new_meta(name=meta.name), partitions=1)
        assert storage.create_topic(again).status is Status.OK
        assert storage.partition_stats(again, now_ms=0)[0].next_offset == 0

    def test_delete_gives_schema_bytes_back_to_the_cluster(self, storage):
        doc = b'{"description":"' + b"x" * 1000 + b'"}'
        meta = new_meta()
        created = storage.create_topic(
            meta, SchemaVersion(1, doc, False), limits=LIMITS
        )
        assert storage.delete_topic(storage.get_topic(meta.name)) is Status.OK
        after = storage.create_topic(
            new_meta(), SchemaVersion(1, b"{}", False), limits=LIMITS
        )
        assert after.cluster_bytes == created.cluster_bytes - len(doc) + 2

    def test_every_write_with_a_stale_epoch_changes_nothing(self, storage):
        old = self.topic(storage)
        self.put(storage, old, b"m", now=0)
        lease = storage.reserve(old, [0], nonce=nonce(1), now_ms=0).message
        assert storage.delete_topic(old) is Status.OK
        new = self.topic(storage, name=old.name)
        assert self.put(storage, new, b"n", now=0).status is Status.OK
        assert self.put(storage, old, b"x", now=0).status is Status.NO_TOPIC
        assert storage.reserve(old, [0], nonce=nonce(2), now_ms=0).status is (
            Status.NO_TOPIC
        )
        for action in Settle:
            assert (
                storage.settle(
                    old, 0, lease.offset, lease.nonce, action=action, now_ms=0
                )
                is Status.NO_TOPIC
            )
        assert storage.alter_topic(old, TopicChanges(retention_ms=1)) is Status.NO_TOPIC
        schema = storage.append_schema(
            old, SchemaVersion(1, DOC, False), expected_current=0, limits=LIMITS
        )
        assert schema.status is Status.NO_TOPIC
        assert storage.get_topic(old.name) == new
        [stats] = storage.partition_stats(new, now_ms=0)
        assert (stats.next_offset, stats.in_flight) == (1, 0)

    # -- schemas -------------------------------------------------------------

    def test_append_schema_checks_base_count_and_budgets_in_order(self, storage):
        meta = self.topic(storage)
        doc = SchemaVersion(1, DOC, False)
        two = replace(LIMITS, max_versions=2)

        def append(expected: int, limits: SchemaLimits = two):
            return storage.append_schema(
                meta, doc, expected_current=expected, limits=limits
            )

        ok = append(0)
        assert (ok.status, ok.version, ok.stored_bytes) == (Status.OK, 1, len(DOC))
        moved = append(0)
        assert (moved.status, moved.version) == (Status.BASE_MISMATCH, 1)
        assert append(1).status is Status.OK
        full = append(2)
        assert (full.status, full.version) == (Status.TOO_MANY_VERSIONS, 2)
        small = append(2, replace(LIMITS, topic_bytes=3 * len(DOC) - 1))
        assert (small.status, small.stored_bytes) == (Status.TOPIC_BUDGET, 2 * len(DOC))
        cluster = append(2, replace(LIMITS, cluster_bytes=small.cluster_bytes))
        assert cluster.status is Status.CLUSTER_BUDGET
        assert cluster.cluster_bytes == small.cluster_bytes
        assert [s.version for s in storage.schema_sizes(meta.name)] == [1, 2]
        assert storage.get_topic(meta.name).schema_version == 2

    def test_append_schema_writes_the_version_as_given(self, storage):
        meta = self.topic(storage, DOC)
        second = b'{"type":["object","array"]}'
        result = storage.append_schema(
            meta, SchemaVersion(7, second, True), expected_current=1, limits=LIMITS
        )
        assert (result.status, result.version) == (Status.OK, 2)
        assert result.stored_bytes == len(DOC) + len(second)
        assert storage.get_schema(meta.name, 2) == SchemaVersion(2, second, True)
        assert storage.get_schema(meta.name, 3) is None
        stored = storage.get_topic(meta.name)
        assert (stored.schema_version, stored.schema_high_cost) == (2, True)
        assert stored.schema_bytes == len(DOC) + len(second)

    def test_append_schema_changes_settings_in_the_same_step(self, storage):
        meta = self.topic(storage, retention_ms=HOUR, visibility_timeout_ms=1000)
        changes = TopicChanges(retention_ms=0, visibility_timeout_ms=7)
        refused = storage.append_schema(
            meta,
            SchemaVersion(1, DOC, False),
            expected_current=0,
            limits=replace(LIMITS, topic_bytes=1),
            changes=changes,
        )
        assert refused.status is Status.TOPIC_BUDGET
        assert storage.get_topic(meta.name) == meta
        done = storage.append_schema(
            meta,
            SchemaVersion(1, DOC, False),
            expected_current=0,
            limits=LIMITS,
            changes=changes,
        )
        assert done.status is Status.OK
        stored = storage.get_topic(meta.name)
        assert (stored.retention_ms, stored.visibility_timeout_ms) == (0, 7)
        assert stored.schema_version == 1

    def test_unknown_schemas_read_as_absent(self, storage):
        meta = self.topic(storage)
        assert storage.get_schema(meta.name, 1) is None
        assert storage.schema_sizes(meta.name) == []
        assert storage.schema_sizes(new_meta().name) == []

    # -- messages ------------------------------------------------------------

    def test_append_gives_each_partition_its_offsets_in_order(self, storage):
        meta = self.topic(storage, partitions=3)
        entries = [
            Entry(2, b"k1", b'{"a":1}', PayloadKind.JSON),
            Entry(0, b"", b"text", PayloadKind.TEXT),
            Entry(2, b"k2", b"\xff\x00", PayloadKind.BINARY),
        ]
        result = storage.append(meta, entries, schema_version=0, now_ms=500)
        assert (result.status, result.count) == (Status.OK, 3)
        first, second = (storage.read(meta, 2, i, now_ms=501) for i in (0, 1))
        assert (first.key, first.payload, first.kind) == (
            b"k1",
            b'{"a":1}',
            PayloadKind.JSON,
        )
        assert (second.key, second.payload, second.kind) == (
            b"k2",
            b"\xff\x00",
            PayloadKind.BINARY,
        )
        assert (first.timestamp, first.nonce, first.partition) == (500, "", 2)
        assert storage.read(meta, 0, 0, now_ms=501).payload == b"text"
        assert storage.read(meta, 1, 0, now_ms=501) is None
        assert storage.read(meta, 2, 2, now_ms=501) is None
        stats = storage.partition_stats(meta, now_ms=501)
        assert [(s.index, s.oldest_offset, s.next_offset) for s in stats] == [
            (0, 0, 1),
            (1, 0, 0),
            (2, 0, 2),
        ]

    def test_timestamps_never_go_backwards_within_a_partition(self, storage):
        meta = self.topic(storage)
        self.put(storage, meta, b"a", now=5_000)
        self.put(storage, meta, b"b", now=4_000)  # another node's clock, behind
        assert storage.read(meta, 0, 1, now_ms=6_000).timestamp == 5_000

    def test_append_refuses_a_stale_schema_version(self, storage):
        meta = self.topic(storage, DOC)
        entry = Entry(0, b"", b"{}", PayloadKind.JSON)
        stale = storage.append(meta, [entry], schema_version=0, now_ms=0)
        assert (stale.status, stale.schema_version) == (Status.STALE_SCHEMA, 1)
        assert storage.partition_stats(meta, now_ms=0)[0].next_offset == 0
        assert storage.append(meta, [entry], schema_version=1, now_ms=0).count == 1

    def test_retention_trims_on_append_and_reserve(self, storage):
        meta = self.topic(storage, retention_ms=HOUR)
        for i in range(5):
            self.put(storage, meta, b"old%d" % i, now=1_000)
        lease = storage.reserve(meta, [0], nonce=nonce(1), now_ms=1_001).message
        self.put(storage, meta, b"new", now=1_000 + HOUR)
        [stats] = storage.partition_stats(meta, now_ms=1_000 + HOUR)
        assert (stats.oldest_offset, stats.next_offset, stats.in_flight) == (5, 6, 0)
        assert storage.read(meta, 0, 0, now_ms=1_000 + HOUR) is None
        gone = storage.settle(
            meta, 0, lease.offset, lease.nonce, action=Settle.ACK, now_ms=1_000 + HOUR
        )
        assert gone is Status.GONE
        got = storage.reserve(meta, [0], nonce=nonce(2), now_ms=1_000 + HOUR)
        assert got.message.payload == b"new"

    def test_reserve_trims_what_retention_no_longer_keeps(self, storage):
        meta = self.topic(storage, retention_ms=HOUR)
        self.put(storage, meta, b"old", now=1_000)
        assert storage.read(meta, 0, 0, now_ms=1_000 + HOUR) is None
        none = storage.reserve(meta, [0], nonce=nonce(1), now_ms=1_000 + HOUR)
        assert (none.status, none.message) == (Status.OK, None)
        [stats] = storage.partition_stats(meta, now_ms=1_000 + HOUR)
        assert (stats.oldest_offset, stats.next_offset) == (1, 1)

    def test_retention_zero_keeps_forever(self, storage):
        meta = self.topic(storage, retention_ms=0)
        self.put(storage, meta, b"m", now=1)
        assert storage.read(meta, 0, 0, now_ms=10**12).payload == b"m"

    def test_reserve_looks_at_partitions_in_the_order_given(self, storage):
        meta = self.topic(storage, partitions=3)
        self.put(storage, meta, b"p0", now=0, partition=0)
        self.put(storage, meta, b"p2", now=0, partition=2)
        got = storage.reserve(meta, [1, 2, 0], nonce=nonce(1), now_ms=1).message
        assert (got.partition, got.offset, got.payload, got.nonce) == (
            2,
            0,
            b"p2",
            nonce(1),
        )
        assert storage.reserve(meta, [1], nonce=nonce(2), now_ms=1).message is None

    def test_a_lease_lapses_after_the_visibility_timeout(self, storage):
        meta = self.topic(storage, visibility_timeout_ms=1000)
        self.put(storage, meta, b"m", now=0)
        first = storage.reserve(meta, [0], nonce=nonce(1), now_ms=100).message
        waiting = storage.reserve(meta, [0], nonce=nonce(2), now_ms=1099)
        assert (waiting.message, waiting.next_lease_expiry_ms) == (None, 1100)
        again = storage.reserve(meta, [0], nonce=nonce(3), now_ms=1100).message
        assert (again.offset, again.nonce) == (first.offset, nonce(3))
        ack = storage.settle(meta, 0, 0, first.nonce, action=Settle.ACK, now_ms=1101)
        assert ack is Status.GONE
        assert (
            storage.settle(meta, 0, 0, again.nonce, action=Settle.ACK, now_ms=1101)
            is Status.OK
        )
        empty = storage.reserve(meta, [0], nonce=nonce(4), now_ms=1102)
        assert (empty.message, empty.next_lease_expiry_ms) == (None, None)

    def test_in_flight_cap_holds_back_new_deliveries(self, storage):
        meta = self.topic(storage, max_in_flight_per_partition=2)
        for i in range(3):
            self.put(storage, meta, b"%d" % i, now=0)
        held = [storage.reserve(meta, [0], nonce=nonce(i), now_ms=1) for i in range(3)]
        assert [r.message.offset for r in held[:2]] == [0, 1]
        assert held[2].message is None
        assert held[2].next_lease_expiry_ms == 1001
        first = held[0].message
        assert (
            storage.settle(meta, 0, 0, first.nonce, action=Settle.ACK, now_ms=2)
            is Status.OK
        )
        assert storage.reserve(meta, [0], nonce=nonce(9), now_ms=3).message.offset == 2

    def test_acked_ahead_cap_leaves_only_the_frontier_free(self, storage):
        meta = self.topic(
            storage, max_in_flight_per_partition=3, max_acked_ahead_per_partition=1
        )
        for i in range(5):
            self.put(storage, meta, b"%d" % i, now=10)
        held = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=20).message
            for i in range(3)
        ]
        assert [m.offset for m in held] == [0, 1, 2]
        assert storage.reserve(meta, [0], nonce=nonce("x"), now_ms=20).message is None

        def ack(message, now):
            return storage.settle(
                meta, 0, message.offset, message.nonce, action=Settle.ACK, now_ms=now
            )

        assert ack(held[1], 21) is Status.OK
        assert ack(held[2], 21) is Status.ACKED_AHEAD_FULL
        # Acked-ahead is full: only the message at the frontier (0) may move,
        # and it is leased until 1020.
        none = storage.reserve(meta, [0], nonce=nonce("y"), now_ms=500)
        assert (none.message, none.next_lease_expiry_ms) == (None, 1020)
        again = storage.reserve(meta, [0], nonce=nonce("z"), now_ms=1020).message
        assert again.offset == 0
        assert ack(again, 1021) is Status.OK
        [stats] = storage.partition_stats(meta, now_ms=1021)
        assert stats.in_flight == 1  # offset 2, lapsed, still unacked
        assert (
            storage.reserve(meta, [0], nonce=nonce("w"), now_ms=1022).message.offset
            == 2
        )

    def test_give_back_and_extend(self, storage):
        meta = self.topic(storage)
        self.put(storage, meta, b"m", now=0)
        first = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message

        def settle(message, action, now):
            return storage.settle(meta, 0, 0, message.nonce, action=action, now_ms=now)

        assert settle(first, Settle.EXTEND, 900) is Status.OK
        assert storage.reserve(meta, [0], nonce=nonce(2), now_ms=1500).message is None
        assert settle(first, Settle.RELEASE, 1600) is Status.OK
        assert settle(first, Settle.ACK, 1600) is Status.GONE
        second = storage.reserve(meta, [0], nonce=nonce(3), now_ms=1600).message
        assert second.offset == 0
        assert settle(first, Settle.ACK, 1601) is Status.GONE
        assert settle(second, Settle.ACK, 1601) is Status.OK
        assert settle(second, Settle.ACK, 1602) is Status.GONE

    def test_settling_what_was_never_leased_is_gone(self, storage):
        meta = self.topic(storage)
        self.put(storage, meta, b"m", now=0)
        for action in Settle:
            assert (
                storage.settle(meta, 0, 0, nonce(1), action=action, now_ms=0)
                is Status.GONE
            )
            assert (
                storage.settle(meta, 0, 7, nonce(1), action=action, now_ms=0)
                is Status.GONE
            )

    def test_acks_in_any_order_leave_nothing_in_flight(self, storage):
        meta = self.topic(storage)
        for i in range(4):
            self.put(storage, meta, b"%d" % i, now=0)
        held = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=1).message
            for i in range(4)
        ]
        for message in (held[2], held[0], held[3], held[1]):
            assert (
                storage.settle(
                    meta, 0, message.offset, message.nonce, action=Settle.ACK, now_ms=2
                )
                is Status.OK
            )
        [stats] = storage.partition_stats(meta, now_ms=3)
        assert (stats.next_offset, stats.in_flight) == (4, 0)
        assert storage.reserve(meta, [0], nonce=nonce(9), now_ms=5_000).message is None

    # -- users ---------------------------------------------------------------

    def test_create_user_stores_it_once(self, users_storage):
        storage = users_storage
        user = new_user(revision=7)
        assert storage.create_user(user) is Status.OK
        assert storage.get_user(user.name) == replace(user, revision=1)
        again = replace(user, password_hash="other")
        assert storage.create_user(again) is Status.EXISTS
        assert storage.get_user(user.name).password_hash == user.password_hash
        missing = new_user().name
        assert storage.get_user(missing) is None
        assert storage.get_users([missing, user.name]) == [
            None,
            replace(user, revision=1),
        ]

    def test_seeding_creates_only_the_first_user(self, users_storage):
        storage = users_storage
        assert storage.list_users(after="", limit=1).names == []
        first = new_user(admin=True)
        assert storage.create_user(first, only_if_none=True) is Status.OK
        second = new_user(admin=True)
        assert storage.create_user(second, only_if_none=True) is Status.EXISTS
        assert storage.get_user(second.name) is None
        assert storage.create_user(second) is Status.OK

    def test_list_users_pages_in_name_order(self, users_storage):
        storage = users_storage
        names = sorted(new_user().name for _ in range(3))
        for name in reversed(names):
            assert storage.create_user(new_user(name=name)) is Status.OK
        first = storage.list_users(after="", limit=2)
        assert (first.names, first.next_token) == (names[:2], names[1])
        rest = storage.list_users(after=first.next_token, limit=2)
        assert (rest.names, rest.next_token) == (names[2:], None)

    def test_user_writes_check_existence_then_revision(self, users_storage):
        storage = users_storage
        user = new_user()
        storage.create_user(user)
        grants = (Grant("consume", ("x",)), Grant("create", ("y.*",)))
        missing = new_user().name
        for write in (
            lambda name, rev: storage.replace_grants(
                name, grants, admin=False, revision=rev
            ),
            lambda name, rev: storage.set_password(name, "scrypt$new", revision=rev),
        ):
            assert write(missing, 1) is Status.NO_USER
            assert write(user.name, 0) is Status.STALE_USER
        assert storage.get_user(user.name) == replace(user, revision=1)
        assert storage.delete_user(missing, revision=1) is Status.NO_USER
        assert storage.delete_user(user.name, revision=2) is Status.STALE_USER

    def test_each_user_write_raises_the_revision(self, users_storage):
        storage = users_storage
        user = new_user()
        storage.create_user(user)
        grants = (Grant("consume", ("x", "y.*")),)
        assert (
            storage.replace_grants(user.name, grants, admin=False, revision=1)
            is Status.OK
        )
        assert storage.set_password(user.name, "scrypt$new", revision=2) is Status.OK
        assert storage.get_user(user.name) == replace(
            user, grants=grants, password_hash="scrypt$new", revision=3
        )
        assert storage.delete_user(user.name, revision=3) is Status.OK
        assert storage.get_user(user.name) is None
        assert user.name not in storage.list_users(after="", limit=10**6).names
        assert storage.create_user(user) is Status.OK  # the name is free again

    def test_the_last_admin_stays(self, users_storage):
        storage = users_storage
        first = new_user(admin=True)
        assert storage.create_user(first) is Status.OK
        plain = new_user()
        storage.create_user(plain)
        # Neither delete nor demotion may leave no admin.
        assert storage.delete_user(first.name, revision=1) is Status.LAST_ADMIN
        demote = (Grant("produce", ("*",)),)
        assert (
            storage.replace_grants(first.name, demote, admin=False, revision=1)
            is Status.LAST_ADMIN
        )
        # Granting admin to another user frees the first.
        assert (
            storage.replace_grants(plain.name, ADMIN, admin=True, revision=1)
            is Status.OK
        )
        assert (
            storage.replace_grants(first.name, demote, admin=False, revision=1)
            is Status.OK
        )
        assert storage.delete_user(plain.name, revision=2) is Status.LAST_ADMIN
        second = new_user(admin=True)
        storage.create_user(second)
        assert storage.delete_user(plain.name, revision=2) is Status.OK
        assert storage.delete_user(second.name, revision=1) is Status.LAST_ADMIN
        # A user who is not an admin goes, whatever the count.
        assert storage.delete_user(first.name, revision=2) is Status.OK

    # -- notifications -------------------------------------------------------

    @staticmethod
    def listening(
        storage: Storage, events: frozenset[Event] | None = None
    ) -> Iterator[Notification | None]:
        stream = storage.notifications(events)
        assert next(stream) == Notification(Event.LISTENING)
        return stream

    @staticmethod
    def expect(
        stream: Iterator[Notification | None], wanted: list[Notification]
    ) -> None:
        """Read ``stream`` until every notification in ``wanted`` arrived."""
        missing = list(wanted)
        deadline = time.monotonic() + NOTIFICATION_WAIT_S
        while missing and time.monotonic() < deadline:
            note = next(stream)
            if note in missing:
                missing.remove(note)
        assert not missing, f"never notified: {missing}"

    @requires("notifications")
    def test_notifications_say_when_a_topic_may_have_a_message(self, storage):
        meta = self.topic(storage)
        stream = self.listening(storage)
        try:
            self.put(storage, meta, b"m", now=0)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
            lease = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message
            storage.settle(meta, 0, 0, lease.nonce, action=Settle.RELEASE, now_ms=0)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
        finally:
            stream.close()

    @requires("notifications")
    def test_notifications_say_when_a_topic_record_changed(self, storage):
        stream = self.listening(storage)
        try:
            meta = self.topic(storage)
            changed = Notification(Event.TOPIC_CHANGED, meta.name)
            self.expect(stream, [changed])
            storage.alter_topic(meta, TopicChanges(retention_ms=HOUR))
            self.expect(stream, [changed])
            storage.append_schema(
                meta, SchemaVersion(1, DOC, False), expected_current=0, limits=LIMITS
            )
            self.expect(stream, [changed])
            storage.delete_topic(meta)
            self.expect(stream, [changed])
        finally:
            stream.close()

    @requires("notifications")
    def test_notifications_say_when_a_user_changed(self, users_storage):
        storage = users_storage
        stream = self.listening(storage, frozenset({Event.USER_CHANGED}))
        try:
            user = new_user(admin=True)
            changed = Notification(Event.USER_CHANGED, user.name)
            storage.create_user(user)
            self.expect(stream, [changed])
            storage.set_password(user.name, "scrypt$new", revision=1)
            self.expect(stream, [changed])
            storage.create_user(new_user(admin=True))
            storage.replace_grants(user.name, (), admin=False, revision=2)
            self.expect(stream, [changed])
            storage.delete_user(user.name, revision=3)
            self.expect(stream, [changed])
        finally:
            stream.close()

    @requires("notifications")
    def test_a_stream_for_some_events_carries_those(self, storage):
        meta = self.topic(storage)
        stream = self.listening(storage, frozenset({Event.TOPIC_CHANGED}))
        try:
            self.put(storage, meta, b"m", now=0)
            storage.alter_topic(meta, TopicChanges(retention_ms=HOUR))
            # A backend may carry more than asked; it must carry what was.
            self.expect(stream, [Notification(Event.TOPIC_CHANGED, meta.name)])
        finally:
            stream.close()

    @requires("notifications")
    def test_notifications_idle_with_none(self, storage):
        stream = self.listening(storage)
        try:
            deadline = time.monotonic() + NOTIFICATION_WAIT_S
            while time.monotonic() < deadline:
                if next(stream) is None:
                    break
            else:
                raise AssertionError("no idle tick within the wait")
        finally:
            stream.close()
