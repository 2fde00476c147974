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

import hashlib
import time
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from typing import TypeVar

import pytest

from narad.storage import DEFAULT_COMPATIBILITY
from narad.storage import DEFAULT_ENCODING
from narad.storage import DEFAULT_SCHEMA_TYPE
from narad.storage import RETENTION_MARGIN_MS
from narad.storage import Capabilities
from narad.storage import Child
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Grant
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Lease
from narad.storage import Notification
from narad.storage import PayloadKind
from narad.storage import SchemaIdentity
from narad.storage import SchemaLimits
from narad.storage import SchemaVersion
from narad.storage import ServerStatus
from narad.storage import Settle
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicChanges
from narad.storage import TopicMeta
from narad.storage import TopicStats
from narad.storage import UserRecord


def schema_version(
    version: int, document: bytes, high_cost: bool = False
) -> SchemaVersion:
    """A version to write, with the identity a JSON Schema of ``document``
    would have (its bytes' digest: enough to tell documents apart here)."""
    digest = hashlib.sha256(document).hexdigest()
    return SchemaVersion(
        version, document, high_cost, identity=SchemaIdentity("JSON", digest)
    )


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
        version = schema_version(1, schema, False) if schema else None
        result = storage.create_topic(meta, version, limits=LIMITS)
        assert result.status is Status.OK
        stored = storage.get_topic(meta.name)
        assert stored is not None
        return stored

    @staticmethod
    def put(storage: Storage, meta: TopicMeta, payload: bytes, now: int, **kw: Any):
        entry = Entry(
            kw.pop("partition", 0),
            kw.pop("key", b""),
            payload,
            PayloadKind.TEXT,
            kw.pop("route", None),
        )
        version = kw.pop("schema_version", meta.schema_version)
        return storage.append(meta, [entry], schema_version=version, now_ms=now, **kw)

    def attach(
        self, storage: Storage, parent: TopicMeta, child: TopicMeta, delay_ms: int = 0
    ) -> tuple[TopicMeta, TopicMeta]:
        """Attach ``child``; both records as stored afterwards."""
        result = storage.attach_child(
            parent, child, delay_ms=delay_ms, limits=LIMITS, max_children=108
        )
        assert result.status is Status.OK, result
        return storage.get_topic(parent.name), storage.get_topic(child.name)

    @staticmethod
    def log(storage: Storage, meta: TopicMeta, now: int) -> list[list[Any]]:
        """Each partition's messages as (key, payload, kind, timestamp)."""
        return [
            [
                (m.key, m.payload, m.kind, m.timestamp)
                for m in (
                    storage.read(meta, p.index, offset, now_ms=now)
                    for offset in range(p.oldest_offset, p.next_offset)
                )
                if m is not None
            ]
            for p in storage.partition_stats(meta, now_ms=now)
        ]

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
        result = storage.create_topic(meta, schema_version(1, DOC, True), limits=LIMITS)
        assert (result.status, result.version) == (Status.OK, 1)
        assert result.stored_bytes == len(DOC)
        assert result.cluster_bytes >= len(DOC)
        stored = storage.get_topic(meta.name)
        assert (stored.schema_version, stored.schema_high_cost) == (1, True)
        assert stored.schema_bytes == len(DOC)
        assert storage.get_schema(meta.name, 1) == schema_version(1, DOC, True)
        assert [(s.version, s.size) for s in storage.schema_sizes(meta.name)] == [
            (1, len(DOC))
        ]

    def test_create_over_a_budget_stores_nothing(self, storage):
        small = replace(LIMITS, topic_bytes=len(DOC) - 1)
        meta = new_meta()
        result = storage.create_topic(meta, schema_version(1, DOC, False), limits=small)
        assert result.status is Status.TOPIC_BUDGET
        assert storage.get_topic(meta.name) is None
        # What every history holds now, learnt from a write that succeeds.
        total = self.topic_with_schema_cluster_bytes(storage)
        tight = replace(LIMITS, cluster_bytes=total + len(DOC) - 1)
        result = storage.create_topic(meta, schema_version(1, DOC, False), limits=tight)
        assert (result.status, result.cluster_bytes) == (Status.CLUSTER_BUDGET, total)
        assert storage.get_topic(meta.name) is None
        roomy = replace(LIMITS, cluster_bytes=total + len(DOC))
        ok = storage.create_topic(meta, schema_version(1, DOC, False), limits=roomy)
        assert (ok.status, ok.cluster_bytes) == (Status.OK, total + len(DOC))

    def topic_with_schema_cluster_bytes(self, storage: Storage) -> int:
        result = storage.create_topic(
            new_meta(), schema_version(1, b"{}", False), limits=LIMITS
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

    def test_topic_owners_answers_in_order(self, storage):
        owned = self.topic(storage, owner="alice")
        unowned = self.topic(storage)
        missing = new_meta().name
        names = [unowned.name, missing, owned.name, owned.name]
        assert storage.topic_owners(names) == ["", None, "alice", "alice"]
        assert storage.topic_owners([]) == []

    def test_topic_owners_follow_creates_and_deletes(self, storage):
        parent = self.topic(storage, owner="alice")
        child = new_meta(owner="bob")
        result = storage.create_child(
            child, parent, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert result.status is Status.OK
        assert storage.topic_owners([parent.name, child.name]) == ["alice", "bob"]
        assert storage.delete_topic(storage.get_topic(child.name)) is Status.OK
        assert storage.topic_owners([child.name]) == [None]
        again = new_meta(name=child.name, owner="carol")
        assert storage.create_topic(again).status is Status.OK
        assert storage.topic_owners([child.name]) == ["carol"]

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
            meta, schema_version(1, doc, False), limits=LIMITS
        )
        assert storage.delete_topic(storage.get_topic(meta.name)) is Status.OK
        after = storage.create_topic(
            new_meta(), schema_version(1, b"{}", False), limits=LIMITS
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
            old, schema_version(1, DOC, False), expected_current=0, limits=LIMITS
        )
        assert schema.status is Status.NO_TOPIC
        assert storage.get_topic(old.name) == new
        [stats] = storage.partition_stats(new, now_ms=0)
        assert (stats.next_offset, stats.in_flight) == (1, 0)

    # -- schemas -------------------------------------------------------------

    def test_append_schema_checks_base_count_and_budgets_in_order(self, storage):
        meta = self.topic(storage)
        doc = schema_version(1, DOC, False)
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
            meta, schema_version(7, second, True), expected_current=1, limits=LIMITS
        )
        assert (result.status, result.version) == (Status.OK, 2)
        assert result.stored_bytes == len(DOC) + len(second)
        assert storage.get_schema(meta.name, 2) == schema_version(2, second, True)
        assert storage.get_schema(meta.name, 3) is None
        stored = storage.get_topic(meta.name)
        assert (stored.schema_version, stored.schema_high_cost) == (2, True)
        assert stored.schema_bytes == len(DOC) + len(second)

    def test_append_schema_changes_settings_in_the_same_step(self, storage):
        meta = self.topic(storage, retention_ms=HOUR, visibility_timeout_ms=1000)
        changes = TopicChanges(retention_ms=0, visibility_timeout_ms=7)
        refused = storage.append_schema(
            meta,
            schema_version(1, DOC, False),
            expected_current=0,
            limits=replace(LIMITS, topic_bytes=1),
            changes=changes,
        )
        assert refused.status is Status.TOPIC_BUDGET
        assert storage.get_topic(meta.name) == meta
        done = storage.append_schema(
            meta,
            schema_version(1, DOC, False),
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

    def test_reserve_never_offers_what_retention_no_longer_keeps(self, storage):
        # More expired messages than one step drops, 1,500 of them leased
        # once (their leases lapsed long ago): none may be offered again.
        meta = self.topic(storage, retention_ms=HOUR, max_in_flight_per_partition=2000)
        old = [Entry(0, b"", b"old", PayloadKind.TEXT, None)] * 1000
        for _ in range(3):
            assert storage.append(meta, old, schema_version=0, now_ms=0).count == 1000
        for k in range(15):
            nonces = [nonce(100 * k + i) for i in range(100)]
            assert (
                len(storage.reserve_batch(meta, [0], nonces=nonces, now_ms=0).messages)
                == 100
            )
        later = 2 * HOUR
        self.put(storage, meta, b"fresh", now=later)
        nonces = [nonce(5000 + i) for i in range(100)]
        got = storage.reserve_batch(meta, [0], nonces=nonces, now_ms=later).messages
        assert [(m.offset, m.payload) for m in got] == [(3000, b"fresh")]
        assert (
            storage.reserve(meta, [0], nonce=nonce(6000), now_ms=later).message is None
        )

    def test_partition_stats_leave_out_what_retention_no_longer_keeps(self, storage):
        # Nothing wrote since the messages aged out: the stats still count
        # only what a replay or a consume could get.
        meta = self.topic(storage, partitions=2, retention_ms=HOUR)
        for i in range(5):
            self.put(storage, meta, b"old%d" % i, now=1_000 + i)
        self.put(storage, meta, b"new", now=2_000, partition=1)
        leased = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=2_000).message
            for i in range(2)
        ]
        assert [m.offset for m in leased] == [0, 1]
        stats = storage.partition_stats(meta, now_ms=1_002 + HOUR)
        assert [(s.oldest_offset, s.next_offset, s.in_flight) for s in stats] == [
            (3, 5, 0),
            (0, 1, 0),
        ]
        assert storage.read(meta, 0, 2, now_ms=1_002 + HOUR) is None
        assert storage.read(meta, 0, 3, now_ms=1_002 + HOUR).payload == b"old3"
        stats = storage.partition_stats(meta, now_ms=2_000 + HOUR)
        assert [(s.oldest_offset, s.next_offset) for s in stats] == [(5, 5), (1, 1)]
        # A read: nothing was trimmed.
        kept = storage.partition_stats(replace(meta, retention_ms=0), now_ms=0)
        assert (kept[0].oldest_offset, kept[0].in_flight) == (0, 2)

    # -- topic stats ---------------------------------------------------------

    @requires("topic_stats")
    def test_topic_stats_follow_positions(self, storage):
        meta = self.topic(storage, partitions=2, max_acked_ahead_per_partition=10)
        empty = self.topic(storage)
        assert storage.topic_stats([meta, empty], now_ms=0) == [
            TopicStats(),
            TopicStats(),
        ]
        for i in range(3):
            self.put(storage, meta, b"p0-%d" % i, now=100 + i, partition=0)
        self.put(storage, meta, b"p1", now=50, partition=1)
        # Partition 0: offsets 0 and 1 delivered, 1 acked (ahead of 0).
        first = storage.reserve(meta, [0], nonce=nonce(1), now_ms=200).message
        second = storage.reserve(meta, [0], nonce=nonce(2), now_ms=200).message
        assert (first.offset, second.offset) == (0, 1)
        ack = storage.settle(meta, 0, 1, nonce(2), action=Settle.ACK, now_ms=201)
        assert ack is Status.OK
        [stats] = storage.topic_stats([meta], now_ms=201)
        assert stats == TopicStats(
            produced=4,
            delivered=2,
            acked=1,
            backlog=2,
            in_flight=1,
            oldest_unacked_ms=50,  # partition 1's, never delivered
        )
        # Everything acked: nothing unacked is left.
        storage.settle(meta, 0, 0, nonce(1), action=Settle.ACK, now_ms=202)
        got = storage.reserve_batch(
            meta, [0, 1], nonces=[nonce(3), nonce(4)], now_ms=203
        ).messages
        leases = [Lease(m.partition, m.offset, m.nonce) for m in got]
        assert storage.settle_batch(meta, leases, action=Settle.ACK, now_ms=204) == [
            Status.OK,
            Status.OK,
        ]
        assert storage.topic_stats([meta], now_ms=204) == [
            TopicStats(produced=4, delivered=4, acked=4)
        ]

    @requires("topic_stats")
    def test_topic_stats_of_a_deleted_topic_are_empty(self, storage):
        meta = self.topic(storage)
        self.put(storage, meta, b"m", now=1)
        assert storage.delete_topic(meta) is Status.OK
        assert storage.topic_stats([meta], now_ms=1) == [TopicStats()]
        assert storage.topic_stats([], now_ms=1) == []

    @requires("topic_stats")
    def test_topic_stats_of_many_topics_in_order(self, storage):
        metas = [self.topic(storage, partitions=108) for _ in range(6)]
        for count, meta in enumerate(metas):
            for i in range(count):
                self.put(storage, meta, b"m", now=10 + count, partition=i)
        stats = storage.topic_stats(metas, now_ms=20)
        assert [s.produced for s in stats] == list(range(6))
        assert [s.oldest_unacked_ms for s in stats] == [None, 11, 12, 13, 14, 15]

    @requires("topic_stats")
    def test_topic_stats_count_a_lapsed_or_given_back_lease_in_flight(self, storage):
        meta = self.topic(storage, visibility_timeout_ms=100)
        self.put(storage, meta, b"a", now=0)
        self.put(storage, meta, b"b", now=0)
        lapsing = storage.reserve(meta, [0], nonce=nonce(1), now_ms=1).message
        given = storage.reserve(meta, [0], nonce=nonce(2), now_ms=1).message
        storage.settle(
            meta, 0, given.offset, given.nonce, action=Settle.RELEASE, now_ms=2
        )
        assert lapsing.offset == 0
        [stats] = storage.topic_stats([meta], now_ms=2)
        assert (stats.delivered, stats.backlog, stats.in_flight) == (2, 0, 2)
        assert stats.oldest_unacked_ms == 0

    @requires("topic_stats")
    def test_topic_stats_leave_out_what_retention_no_longer_keeps(self, storage):
        # Nothing wrote since offsets 0-3 aged out at HOUR: the figures are
        # those a write trimming them leaves, what a consumer could get.
        idle = self.topic(storage, retention_ms=HOUR)
        held = self.topic(storage, retention_ms=HOUR)
        for meta in (idle, held):
            for now in (0, 0, 0, 0, HOUR // 2, HOUR // 2, HOUR // 2):
                self.put(storage, meta, b"m", now=now)
        nonces = [nonce(i) for i in range(6)]
        got = storage.reserve_batch(held, [0], nonces=nonces, now_ms=HOUR // 2)
        leases = [Lease(0, m.offset, m.nonce) for m in got.messages]
        assert [lease.offset for lease in leases] == list(range(6))
        acks = [leases[1], leases[5]]  # above the floor, one of them retained
        assert storage.settle_batch(
            held, acks, action=Settle.ACK, now_ms=HOUR // 2
        ) == [Status.OK, Status.OK]
        expected = [
            TopicStats(7, 4, 4, 3, 0, HOUR // 2),
            TopicStats(7, 6, 5, 1, 1, HOUR // 2),  # 4 in flight, 5 acked
        ]
        assert storage.topic_stats([idle, held], now_ms=HOUR) == expected
        for meta in (idle, held):
            self.put(storage, meta, b"trims", now=HOUR)
        assert storage.topic_stats([idle, held], now_ms=HOUR) == [
            replace(stats, produced=8, backlog=stats.backlog + 1) for stats in expected
        ]

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
        assert settle(second, Settle.ACK, 1602) is Status.REPEATED

    def test_the_lease_that_lapsed_first_is_offered_first(self, storage):
        meta = self.topic(storage, visibility_timeout_ms=1000)
        for _ in range(2):
            self.put(storage, meta, b"m", now=0)
        held = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=0).message
            for i in range(2)
        ]
        # Offset 0's lease is renewed, so offset 1's lapses first.
        assert (
            storage.settle(meta, 0, 0, held[0].nonce, action=Settle.EXTEND, now_ms=500)
            is Status.OK
        )
        again = [
            storage.reserve(meta, [0], nonce=nonce(9 - i), now_ms=2000).message
            for i in range(2)
        ]
        assert [m.offset for m in again] == [1, 0]

    def test_acks_below_what_a_bounded_trim_passes_over_never_fill_the_cap(
        self, storage
    ):
        # More expired messages than one call drops: a reserve passes over the
        # rest (its floor jumps past them). Acks among them count no more
        # against max_acked_ahead than trimmed messages do.
        meta = self.topic(
            storage,
            retention_ms=HOUR,
            visibility_timeout_ms=3 * HOUR,
            max_acked_ahead_per_partition=2,
        )
        for _ in range(3):
            entries = [Entry(0, b"", b"old", PayloadKind.TEXT)] * 700
            storage.append(meta, entries, schema_version=0, now_ms=0)
        held = []
        while len(held) < 2100:
            got = storage.reserve_batch(
                meta, [0], nonces=[nonce(len(held) + i) for i in range(100)], now_ms=0
            ).messages
            held += got
            in_order = [Lease(0, m.offset, m.nonce) for m in got if m.offset < 2050]
            storage.settle_batch(meta, in_order, action=Settle.ACK, now_ms=0)
        ahead = [Lease(0, m.offset, m.nonce) for m in held[2051:2053]]
        assert (
            storage.settle_batch(meta, ahead, action=Settle.ACK, now_ms=0)
            == [Status.OK] * 2
        )
        for _ in range(2):
            self.put(storage, meta, b"new", now=HOUR + 1)
        got = storage.reserve_batch(
            meta, [0], nonces=[nonce(9000), nonce(9001)], now_ms=HOUR + 1
        )
        assert [m.offset for m in got.messages] == [2100, 2101]

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

    def test_long_runs_acked_ahead_move_the_floor_past_them(self, storage):
        """Acks above the floor, each run longer than a backend might read
        at once, or interleaved with the acks that free them: the floor
        passes them all, and they no longer count against the cap."""
        meta = self.topic(
            storage, max_in_flight_per_partition=1000, max_acked_ahead_per_partition=300
        )
        entries = [Entry(0, b"", b"%d" % i, PayloadKind.TEXT) for i in range(900)]
        storage.append(meta, entries, schema_version=0, now_ms=0)
        held = []
        for batch in range(9):
            nonces = [nonce(f"{batch}-{k}") for k in range(100)]
            held += storage.reserve_batch(meta, [0], nonces=nonces, now_ms=1).messages
        assert [m.offset for m in held] == list(range(900))

        def ack(messages):
            leases = [Lease(0, m.offset, m.nonce) for m in messages]
            return storage.settle_batch(meta, leases, action=Settle.ACK, now_ms=2)

        # 299 stored above the floor, then the one at it: the cap (300) would
        # refuse the next run unless the floor moved past all 300.
        assert set(ack(held[1:300])) == {Status.OK}
        assert ack(held[:1]) == [Status.OK]
        assert set(ack(held[301:600])) == {Status.OK}
        assert ack(held[300:301]) == [Status.OK]
        # Odd offsets stored, then the even ones in one call, in order.
        assert set(ack(held[601:900:2])) == {Status.OK}
        assert set(ack(held[600:900:2])) == {Status.OK}
        [stats] = storage.partition_stats(meta, now_ms=3)
        assert stats.in_flight == 0
        more = [Entry(0, b"", b"x", PayloadKind.TEXT)] * 301
        storage.append(meta, more, schema_version=0, now_ms=3)
        nonces = [nonce(f"late-{k}") for k in range(301)]
        late = []
        while len(late) < 301:
            got = storage.reserve_batch(meta, [0], nonces=nonces[len(late) :], now_ms=4)
            late += got.messages
        # Nothing acked before is left counting: 300 more fit above the floor.
        assert set(ack(late[1:])) == {Status.OK}

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

    # -- idempotent ack ------------------------------------------------------

    def test_an_ack_retried_with_its_nonce_is_repeated_while_retained(self, storage):
        meta = self.topic(storage, retention_ms=HOUR, max_acked_ahead_per_partition=1)
        for i in range(3):
            self.put(storage, meta, b"%d" % i, now=0)
        held = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=1).message
            for i in range(3)
        ]

        def settle(message, action=Settle.ACK, now=2):
            return storage.settle(
                meta, 0, message.offset, message.nonce, action=action, now_ms=now
            )

        assert settle(held[1]) is Status.OK  # acked ahead of the floor
        assert settle(held[0]) is Status.OK  # the floor moves past both
        for message in held[:2]:
            assert settle(message) is Status.REPEATED
            assert settle(message, now=10_000) is Status.REPEATED  # past its lease
            assert settle(message, Settle.EXTEND) is Status.GONE
            assert settle(message, Settle.RELEASE) is Status.GONE
        # A repeat changes nothing: the acked-ahead slot is free for offset 2.
        assert settle(held[1]) is Status.REPEATED
        [stats] = storage.partition_stats(meta, now_ms=3)
        assert stats.in_flight == 1
        assert storage.settle(meta, 0, 1, nonce("x"), action=Settle.ACK, now_ms=3) is (
            Status.GONE
        )
        assert settle(held[2], now=3) is Status.OK
        assert storage.reserve(meta, [0], nonce=nonce(9), now_ms=4).message is None
        # Once retention drops the message, the fact goes with it.
        self.put(storage, meta, b"new", now=HOUR)
        assert settle(held[0], now=HOUR) is Status.GONE

    def test_acks_of_messages_retention_aged_out_never_fill_the_acked_cap(
        self, storage
    ):
        # Leases outlive retention here, and nothing writes to trim: offsets
        # 0-2 age out at HOUR while leased. Their acks end the leases but
        # count no more against max_acked_ahead than trimmed messages do.
        meta = self.topic(
            storage,
            retention_ms=HOUR,
            visibility_timeout_ms=3 * HOUR,
            max_acked_ahead_per_partition=1,
        )
        for now in (0, 0, 0, HOUR // 2, HOUR // 2, HOUR // 2):
            self.put(storage, meta, b"m", now=now)
        held = [
            storage.reserve(meta, [0], nonce=nonce(i), now_ms=HOUR // 2).message
            for i in range(6)
        ]
        assert [m.offset for m in held] == list(range(6))

        def ack(message):
            return storage.settle(
                meta, 0, message.offset, message.nonce, action=Settle.ACK, now_ms=HOUR
            )

        assert ack(held[1]) is Status.OK
        assert ack(held[2]) is Status.OK
        assert ack(held[4]) is Status.OK
        assert ack(held[5]) is Status.ACKED_AHEAD_FULL  # live messages: capped
        assert ack(held[3]) is Status.OK
        assert ack(held[5]) is Status.OK
        assert [ack(m) for m in held[1:]] == [Status.REPEATED] * 5
        [stats] = storage.partition_stats(meta, now_ms=HOUR)
        assert stats.in_flight == 0
        assert storage.reserve(meta, [0], nonce=nonce(9), now_ms=HOUR).message is None

    def test_an_ack_of_a_lapsed_lease_taken_by_another_is_gone(self, storage):
        meta = self.topic(storage, visibility_timeout_ms=1000)
        self.put(storage, meta, b"m", now=0)
        first = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message
        second = storage.reserve(meta, [0], nonce=nonce(2), now_ms=1000).message
        assert second.offset == first.offset

        def ack(message):
            return storage.settle(
                meta, 0, 0, message.nonce, action=Settle.ACK, now_ms=1001
            )

        assert ack(first) is Status.GONE
        assert ack(second) is Status.OK
        assert ack(first) is Status.GONE  # acked, but under the other nonce
        assert ack(second) is Status.REPEATED

    def test_a_released_message_is_not_acked_by_its_old_nonce(self, storage):
        meta = self.topic(storage)
        self.put(storage, meta, b"m", now=0)
        held = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message
        assert (
            storage.settle(meta, 0, 0, held.nonce, action=Settle.RELEASE, now_ms=1)
            is Status.OK
        )
        for action in Settle:
            assert (
                storage.settle(meta, 0, 0, held.nonce, action=action, now_ms=2)
                is Status.GONE
            )

    # -- idempotent append ---------------------------------------------------

    @staticmethod
    def entries(*payloads: bytes) -> list[Entry]:
        return [Entry(0, b"", p, PayloadKind.TEXT) for p in payloads]

    @staticmethod
    def guard(key: str, digest: str = "d1", start: int = 0, stop: int = 1):
        return IdempotencyKey(key, digest, start, stop)

    @staticmethod
    def offsets(storage: Storage, meta: TopicMeta) -> int:
        return sum(s.next_offset for s in storage.partition_stats(meta, now_ms=0))

    def test_a_retried_append_with_its_key_stores_nothing_new(self, storage):
        meta = self.topic(storage)
        limits = IdempotencyLimits(window_ms=1000)

        def append(*guards, now=0, entries=None):
            return storage.append(
                meta,
                entries or self.entries(b"m"),
                schema_version=0,
                now_ms=now,
                idempotency=guards,
                limits=limits,
            )

        first = append(self.guard("k"))
        assert (first.status, first.count, first.repeated) == (Status.OK, 1, 0)
        again = append(self.guard("k"), now=999)
        assert (again.status, again.count, again.repeated) == (Status.OK, 0, 1)
        assert self.offsets(storage, meta) == 1
        other = append(self.guard("k", "d2"), now=999)
        assert (other.status, other.key_index) == (Status.KEY_REUSED, 0)
        assert self.offsets(storage, meta) == 1
        # The window closes at stored_at + window_ms: the key is new again.
        later = append(self.guard("k", "d2"), now=1000)
        assert (later.status, later.count) == (Status.OK, 1)
        assert append(self.guard("k", "d2"), now=1999).repeated == 1
        assert self.offsets(storage, meta) == 2

    def test_keys_guard_their_entries_and_a_reused_one_stores_nothing(self, storage):
        meta = self.topic(storage)
        entries = self.entries(b"a", b"b", b"c", b"d")

        def append(*guards):
            return storage.append(
                meta, entries, schema_version=0, now_ms=0, idempotency=guards
            )

        first = append(self.guard("a", "da", 0, 1), self.guard("bc", "dbc", 1, 3))
        assert (first.count, first.repeated) == (4, 0)
        # "a" and "bc" repeat, "x" is new, "d" is unguarded.
        second = append(
            self.guard("a", "da", 0, 1),
            self.guard("bc", "dbc", 1, 3),
            self.guard("x", "dx", 3, 4),
        )
        assert (second.status, second.count, second.repeated) == (Status.OK, 1, 3)
        third = append(self.guard("y", "dy", 0, 1), self.guard("x", "other", 3, 4))
        assert (third.status, third.key_index) == (Status.KEY_REUSED, 1)
        assert self.offsets(storage, meta) == 5
        # Nothing of the refused append was kept, its new key included.
        assert append(self.guard("y", "dz", 0, 1)).status is Status.OK
        read = [storage.read(meta, 0, o, now_ms=1).payload for o in range(9)]
        assert read == [b"a", b"b", b"c", b"d", b"d", b"a", b"b", b"c", b"d"]

    def test_a_retry_whose_keys_were_all_stored_outlives_a_schema_change(self, storage):
        meta = self.topic(storage, DOC)
        entry = [Entry(0, b"", b"{}", PayloadKind.JSON)]
        guard = self.guard("k")
        first = storage.append(
            meta, entry, schema_version=1, now_ms=0, idempotency=[guard]
        )
        assert first.count == 1
        storage.append_schema(
            meta, schema_version(2, DOC, False), expected_current=1, limits=LIMITS
        )
        retry = storage.append(
            meta, entry, schema_version=1, now_ms=1, idempotency=[guard]
        )
        assert (retry.status, retry.repeated) == (Status.OK, 1)
        stale = storage.append(
            meta, entry, schema_version=1, now_ms=1, idempotency=[self.guard("new")]
        )
        assert (stale.status, stale.schema_version) == (Status.STALE_SCHEMA, 2)
        # A refused append remembers nothing: the key is still free.
        fresh = storage.append(
            meta, entry, schema_version=2, now_ms=2, idempotency=[self.guard("new")]
        )
        assert (fresh.status, fresh.count) == (Status.OK, 1)

    def test_keys_past_the_bounds_are_forgotten_oldest_first(self, storage):
        per_key = 1 + 2 + IdempotencyLimits.KEY_OVERHEAD  # key "a", digest "d1"
        by_count = IdempotencyLimits(window_ms=HOUR, max_keys=2, max_bytes=1 << 20)
        by_bytes = IdempotencyLimits(
            window_ms=HOUR, max_keys=100, max_bytes=2 * per_key
        )
        for limits in (by_count, by_bytes):
            meta = self.topic(storage)

            def append(key, now, limits=limits, meta=meta):
                return storage.append(
                    meta,
                    self.entries(b"m"),
                    schema_version=0,
                    now_ms=now,
                    idempotency=[self.guard(key)],
                    limits=limits,
                )

            assert append("a", 0).evicted == 0
            assert append("b", 1).evicted == 0
            assert append("c", 2).evicted == 1
            assert append("b", 3).repeated == 1
            assert append("c", 3).repeated == 1
            assert append("a", 3).count == 1  # forgotten: stored again

    def test_lowered_bounds_forget_the_excess_a_bounded_number_at_a_time(self, storage):
        """An append forgets at most 2 keys per key it brings, plus 100, past
        the bounds: a topic holding many keys when the bounds are lowered
        (``broker.idempotency_max_keys``) gets back within them over several
        appends, none blocking the server while it drops them all."""
        meta = self.topic(storage)
        entries = self.entries(*[b"m"] * 500)
        for batch in range(2):
            keys = [IdempotencyKey(f"k{batch}-{i}", "d", i, i + 1) for i in range(500)]
            storage.append(meta, entries, schema_version=0, now_ms=0, idempotency=keys)
        lowered = IdempotencyLimits(window_ms=HOUR, max_keys=10, max_bytes=1 << 30)
        forgotten = [
            storage.append(
                meta,
                self.entries(b"m"),
                schema_version=0,
                now_ms=1,
                idempotency=[self.guard(f"new-{n}")],
                limits=lowered,
            ).evicted
            for n in range(10)
        ]
        assert forgotten[:9] == [102] * 9
        assert sum(forgotten) == 1_000  # then within the bounds again

    def test_expired_keys_free_their_room(self, storage):
        meta = self.topic(storage)
        limits = IdempotencyLimits(window_ms=10, max_keys=2, max_bytes=1 << 20)

        def append(key, now):
            return storage.append(
                meta,
                self.entries(b"m"),
                schema_version=0,
                now_ms=now,
                idempotency=[self.guard(key)],
                limits=limits,
            )

        append("a", 0)
        append("b", 1)
        later = append("c", 20)  # a and b expired: dropped, not evicted
        assert (later.count, later.evicted) == (1, 0)
        assert append("d", 21).evicted == 0
        assert append("c", 22).repeated == 1

    # -- batches -------------------------------------------------------------

    def test_reserve_batch_takes_a_partition_before_the_next(self, storage):
        meta = self.topic(storage, partitions=3)
        for partition, count in ((0, 2), (1, 1), (2, 3)):
            for i in range(count):
                self.put(
                    storage,
                    meta,
                    b"%d-%d" % (partition, i),
                    now=0,
                    **{"partition": partition},
                )
        nonces = [nonce(i) for i in range(4)]
        got = storage.reserve_batch(meta, [2, 0, 1], nonces=nonces, now_ms=1)
        assert got.status is Status.OK
        assert [(m.partition, m.offset, m.nonce) for m in got.messages] == [
            (2, 0, nonces[0]),
            (2, 1, nonces[1]),
            (2, 2, nonces[2]),
            (0, 0, nonces[3]),
        ]
        assert [m.payload for m in got.messages] == [b"2-0", b"2-1", b"2-2", b"0-0"]
        rest = storage.reserve_batch(
            meta, [0, 1, 2], nonces=[nonce(i) for i in range(10, 20)], now_ms=1
        )
        assert [(m.partition, m.offset) for m in rest.messages] == [(0, 1), (1, 0)]
        none = storage.reserve_batch(meta, [0, 1, 2], nonces=nonces, now_ms=2)
        assert (none.messages, none.next_lease_expiry_ms) == ((), 1001)
        for message in got.messages:
            assert (
                storage.settle(
                    meta,
                    message.partition,
                    message.offset,
                    message.nonce,
                    action=Settle.ACK,
                    now_ms=3,
                )
                is Status.OK
            )
        stale = replace(meta, epoch="stale")
        assert storage.reserve_batch(stale, [0], nonces=nonces, now_ms=3).status is (
            Status.NO_TOPIC
        )

    def test_reserve_batch_keeps_the_caps_per_message(self, storage):
        meta = self.topic(
            storage,
            visibility_timeout_ms=1000,
            max_in_flight_per_partition=3,
            max_acked_ahead_per_partition=1,
        )
        for i in range(6):
            self.put(storage, meta, b"%d" % i, now=0)
        nonces = [nonce(i) for i in range(10)]
        first = storage.reserve_batch(meta, [0], nonces=nonces, now_ms=0)
        assert [m.offset for m in first.messages] == [0, 1, 2]  # in-flight cap
        # Offset 1 given back, 0 lapses: both are taken again before anything new.
        assert (
            storage.settle(meta, 0, 1, nonces[1], action=Settle.RELEASE, now_ms=500)
            is Status.OK
        )
        again = storage.reserve_batch(meta, [0], nonces=nonces[3:], now_ms=1000)
        assert sorted(m.offset for m in again.messages) == [0, 1, 2]
        held = {m.offset: m.nonce for m in again.messages}
        assert (
            storage.settle(meta, 0, 2, held[2], action=Settle.ACK, now_ms=1001)
            is Status.OK
        )
        # Acked-ahead is full: only the frontier (0) may move, once it lapses.
        none = storage.reserve_batch(meta, [0], nonces=nonces, now_ms=1500)
        assert none.messages == ()
        frontier = storage.reserve_batch(meta, [0], nonces=nonces, now_ms=2000)
        assert [m.offset for m in frontier.messages] == [0]

    def test_reserve_batch_stops_before_the_byte_budget(self, storage):
        meta = self.topic(storage, partitions=2)
        # Each message counts 100 bytes: a 1-byte key and 99 of payload.
        for partition, count in ((0, 5), (1, 2)):
            for i in range(count):
                payload = b"%d-%d" % (partition, i)
                payload += b"." * (99 - len(payload))
                self.put(storage, meta, payload, now=0, partition=partition, key=b"k")
        nonces = [nonce(i) for i in range(10)]

        def batch(max_bytes):
            got = storage.reserve_batch(
                meta, [0, 1], nonces=nonces, now_ms=1, max_bytes=max_bytes
            )
            assert got.status is Status.OK
            return [(m.partition, m.offset, m.nonce) for m in got.messages]

        # Exactly the budget fits; the fourth message would go past it.
        assert batch(300) == [(0, 0, nonces[0]), (0, 1, nonces[1]), (0, 2, nonces[2])]
        # The budget spans partitions, and a batch stops at the first message
        # that does not fit: what is left comes next, in order.
        assert batch(250) == [(0, 3, nonces[0]), (0, 4, nonces[1])]
        # The first message is leased whatever its size.
        assert batch(1) == [(1, 0, nonces[0])]
        assert batch(None) == [(1, 1, nonces[0])]
        assert batch(None) == []

    def test_reserve_batch_budget_leaves_lapsed_leases_for_the_next(self, storage):
        meta = self.topic(
            storage,
            partitions=2,
            visibility_timeout_ms=1000,
            max_acked_ahead_per_partition=1,
        )
        for i in range(4):
            self.put(storage, meta, b"%d" % i + b"." * 99, now=0)
        self.put(storage, meta, b"p1" + b"." * 98, now=0, partition=1)
        nonces = [nonce(i) for i in range(10)]
        held = storage.reserve_batch(meta, [0], nonces=nonces[:3], now_ms=0)
        assert [m.offset for m in held.messages] == [0, 1, 2]
        # Lapsed leases are taken again first, within the budget.
        again = storage.reserve_batch(
            meta, [0], nonces=nonces[3:], now_ms=1000, max_bytes=250
        )
        assert [(m.offset, m.payload[:1]) for m in again.messages] == [
            (0, b"0"),
            (1, b"1"),
        ]
        rest = storage.reserve_batch(
            meta, [0], nonces=nonces[5:], now_ms=1000, max_bytes=250
        )
        assert [m.offset for m in rest.messages] == [2, 3]
        assert (
            storage.settle(meta, 0, 3, nonces[6], action=Settle.ACK, now_ms=1001)
            is Status.OK
        )
        # Acked-ahead is full: offset 0 alone may move once it lapses, and
        # only if the budget has room for it after partition 1's message.
        later = 2000
        first = storage.reserve_batch(
            meta, [1, 0], nonces=nonces, now_ms=later, max_bytes=150
        )
        assert [(m.partition, m.offset) for m in first.messages] == [(1, 0)]
        frontier = storage.reserve_batch(
            meta, [1, 0], nonces=nonces, now_ms=later, max_bytes=150
        )
        assert [(m.partition, m.offset, m.payload[:1]) for m in frontier.messages] == [
            (0, 0, b"0")
        ]

    def test_settle_batch_judges_each_lease_in_order(self, storage):
        meta = self.topic(storage, partitions=2, max_acked_ahead_per_partition=1)
        for partition in (0, 1):
            for _ in range(3):
                self.put(storage, meta, b"m", now=0, partition=partition)
        held = storage.reserve_batch(
            meta, [0, 1], nonces=[nonce(i) for i in range(6)], now_ms=0
        ).messages
        leases = [Lease(m.partition, m.offset, m.nonce) for m in held]
        p0, p1 = leases[:3], leases[3:]
        forged = Lease(0, 1, nonce("forged"))
        results = storage.settle_batch(
            meta,
            [p0[2], p0[1], forged, p1[0], p1[1], p1[0], p0[0]],
            action=Settle.ACK,
            now_ms=1,
        )
        assert results == [
            Status.OK,  # acked ahead of the floor: the one slot
            Status.ACKED_AHEAD_FULL,
            Status.GONE,
            Status.OK,
            Status.OK,
            Status.REPEATED,
            Status.OK,  # the floor moves past 0 and 2
        ]
        assert storage.settle_batch(meta, [p0[1]], action=Settle.ACK, now_ms=2) == [
            Status.OK
        ]
        extend = storage.settle_batch(
            meta, [p1[2], p1[0]], action=Settle.EXTEND, now_ms=500
        )
        assert extend == [Status.OK, Status.GONE]
        assert storage.reserve(meta, [1], nonce=nonce(9), now_ms=1200).message is None
        release = storage.settle_batch(
            meta, [p1[2], p1[2]], action=Settle.RELEASE, now_ms=1300
        )
        assert release == [Status.OK, Status.GONE]
        assert (
            storage.reserve(meta, [1], nonce=nonce(9), now_ms=1300).message.offset == 2
        )
        stale = replace(meta, epoch="stale")
        assert (
            storage.settle_batch(stale, p0, action=Settle.ACK, now_ms=3)
            == [Status.NO_TOPIC] * 3
        )
        assert storage.settle_batch(meta, [], action=Settle.ACK, now_ms=3) == []

    def test_settle_and_reserve_settles_first_then_reserves(self, storage):
        meta = self.topic(storage, partitions=2, max_in_flight_per_partition=2)
        for partition in (0, 1):
            for _ in range(3):
                self.put(storage, meta, b"m", now=0, partition=partition)
        held = storage.reserve_batch(
            meta, [0, 1], nonces=[nonce(i) for i in range(4)], now_ms=0
        ).messages
        assert [(m.partition, m.offset) for m in held] == [
            (0, 0),
            (0, 1),
            (1, 0),
            (1, 1),
        ]
        first, second = (Lease(m.partition, m.offset, m.nonce) for m in held[:2])
        forged = Lease(1, 0, nonce("forged"))
        # Both partitions are at their cap: only the ack lets the reserve
        # take a message, partition 0's third.
        statuses, reserved = storage.settle_and_reserve(
            meta,
            [first, forged, first],
            action=Settle.ACK,
            partitions=[0, 1],
            nonces=[nonce(10), nonce(11)],
            now_ms=1,
        )
        assert statuses == [Status.OK, Status.GONE, Status.REPEATED]
        assert reserved.status is Status.OK
        assert [(m.partition, m.offset, m.nonce) for m in reserved.messages] == [
            (0, 2, nonce(10))
        ]
        # An extend, then nothing left to lease: when a lease lapses.
        statuses, reserved = storage.settle_and_reserve(
            meta,
            [second],
            action=Settle.EXTEND,
            partitions=[0, 1],
            nonces=[nonce(12)],
            now_ms=500,
        )
        assert statuses == [Status.OK]
        assert reserved.messages == ()
        assert reserved.next_lease_expiry_ms == 1000  # (1, 0) leased at 0
        stale = replace(meta, epoch="stale")
        statuses, reserved = storage.settle_and_reserve(
            stale,
            [second],
            action=Settle.ACK,
            partitions=[0],
            nonces=[nonce(13)],
            now_ms=2,
        )
        assert statuses == [Status.NO_TOPIC]
        assert reserved.status is Status.NO_TOPIC

    # -- fan-out -------------------------------------------------------------

    def test_appends_after_an_attach_are_copied_to_the_keys_partition(self, storage):
        parent = self.topic(storage, partitions=3)
        child = self.topic(storage, partitions=5)
        self.put(storage, parent, b"before", now=10)
        parent, child = self.attach(storage, parent, child)
        assert parent.children == (Child(child.name, child.epoch, 5, 0),)
        assert (child.parent, child.fanout_delay_ms) == (parent.name, 0)
        entries = [
            Entry(1, b"k", b'{"a":1}', PayloadKind.JSON, route=12),
            Entry(2, b"", b"\xff", PayloadKind.BINARY),  # no route: by partition
            Entry(1, b"k", b"text", PayloadKind.TEXT, route=12),
        ]
        result = storage.append(parent, entries, schema_version=0, now_ms=20)
        assert (result.status, result.count) == (Status.OK, 3)
        assert self.log(storage, child, now=20) == [
            [],
            [],
            [
                (b"k", b'{"a":1}', PayloadKind.JSON, 20),
                (b"", b"\xff", PayloadKind.BINARY, 20),
                (b"k", b"text", PayloadKind.TEXT, 20),
            ],
            [],
            [],
        ]
        assert [len(p) for p in self.log(storage, parent, now=20)] == [1, 2, 1]

    def test_a_copy_keeps_its_parent_timestamp_or_the_childs_later_one(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        assert self.put(storage, child, b"direct", now=50).status is Status.OK
        self.put(storage, parent, b"early", now=40)  # another node's clock
        self.put(storage, parent, b"late", now=60)
        assert self.log(storage, child, now=60) == [
            [
                (b"", b"direct", PayloadKind.TEXT, 50),
                (b"", b"early", PayloadKind.TEXT, 50),
                (b"", b"late", PayloadKind.TEXT, 60),
            ]
        ]

    def test_an_append_given_stale_children_changes_nothing(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        linked, _ = self.attach(storage, parent, child)
        assert self.put(storage, parent, b"m", now=0).status is Status.STALE_CHILDREN
        assert storage.detach_child(linked, child.name) is Status.OK
        assert self.put(storage, linked, b"m", now=0).status is Status.STALE_CHILDREN
        assert self.log(storage, parent, now=0) == [[]]
        assert self.log(storage, child, now=0) == [[]]

    def test_detach_then_attach_again_starts_from_the_tail(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        self.put(storage, parent, b"1", now=1)
        assert storage.detach_child(parent, child.name) is Status.OK
        parent, child = storage.get_topic(parent.name), storage.get_topic(child.name)
        assert (parent.children, child.parent) == ((), "")
        self.put(storage, parent, b"2", now=2)
        parent, child = self.attach(storage, parent, child)
        self.put(storage, parent, b"3", now=3)
        assert [m[1] for m in self.log(storage, child, now=3)[0]] == [b"1", b"3"]

    def test_detach_checks_the_parent_and_the_link(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        other = self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        stale = replace(parent, epoch="stale")
        assert storage.detach_child(stale, child.name) is Status.NO_TOPIC
        assert storage.detach_child(parent, other.name) is Status.NOT_CHILD
        assert storage.get_topic(parent.name).children == parent.children

    def test_attach_checks_in_order(self, storage):
        parent, child = self.topic(storage), self.topic(storage)

        def attach(above, below, delay_ms=0, max_children=108, limits=LIMITS):
            return storage.attach_child(
                above,
                below,
                delay_ms=delay_ms,
                limits=limits,
                max_children=max_children,
            )

        gone = attach(replace(parent, epoch="stale"), child)
        assert (gone.status, gone.topic) == (Status.NO_TOPIC, parent.name)
        gone = attach(parent, replace(child, epoch="stale"))
        assert (gone.status, gone.topic) == (Status.NO_TOPIC, child.name)
        grand, _ = self.attach(storage, self.topic(storage), parent)
        parent = storage.get_topic(parent.name)
        assert attach(parent, child).status is Status.PARENT_IS_CHILD
        assert attach(self.topic(storage), grand).status is Status.CHILD_IS_PARENT
        taken = attach(self.topic(storage), parent)
        assert (taken.status, taken.topic) == (Status.ATTACHED, grand.name)
        full, _ = self.attach(storage, self.topic(storage), self.topic(storage))
        assert attach(full, child, max_children=1).status is Status.TOO_MANY_CHILDREN
        kept = self.topic(storage, retention_ms=2 * HOUR)
        short = attach(kept, child, delay_ms=HOUR + 1)
        assert short.status is Status.RETENTION_TOO_SHORT
        assert attach(kept, child, delay_ms=HOUR).status is Status.OK
        assert storage.get_topic(kept.name).children == (
            Child(child.name, child.epoch, child.partitions, HOUR),
        )

    def test_attach_refuses_schema_versions_read_before_a_change(self, storage):
        parent, child = self.topic(storage, DOC), self.topic(storage)
        storage.append_schema(
            parent, schema_version(2, b"{}", False), expected_current=1, limits=LIMITS
        )
        result = storage.attach_child(
            parent, child, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert result.status is Status.STALE_SCHEMA
        assert storage.get_topic(parent.name).children == ()

    def test_a_child_with_a_history_needs_as_many_versions(self, storage):
        child = self.topic(storage, b'{"type": "object"}')
        longer = self.topic(storage, DOC)
        storage.append_schema(
            longer, schema_version(2, b"{}", False), expected_current=1, limits=LIMITS
        )
        for parent in (self.topic(storage), storage.get_topic(longer.name)):
            mismatch = storage.attach_child(
                parent, child, delay_ms=0, limits=LIMITS, max_children=108
            )
            assert mismatch.status is Status.SCHEMA_MISMATCH
        # As many versions: the caller vouched for their contents.
        parent = self.topic(storage, DOC)
        result = storage.attach_child(
            parent, child, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert (result.status, result.version) == (Status.OK, 1)
        assert storage.get_schemas(child.name) == [
            schema_version(1, b'{"type": "object"}', False)
        ]

    def test_a_child_without_a_history_adopts_the_parents(self, storage):
        parent = self.topic(storage, DOC)
        second = b'{"type":["object","array"]}'
        storage.append_schema(
            parent, schema_version(2, second, True), expected_current=1, limits=LIMITS
        )
        parent = storage.get_topic(parent.name)
        child = self.topic(storage)
        result = storage.attach_child(
            parent, child, delay_ms=0, limits=LIMITS, max_children=108
        )
        size = len(DOC) + len(second)
        assert (result.status, result.version, result.stored_bytes) == (
            Status.OK,
            2,
            size,
        )
        stored = storage.get_topic(child.name)
        assert (stored.schema_version, stored.schema_high_cost) == (2, True)
        assert stored.schema_bytes == size
        assert storage.get_schemas(child.name) == storage.get_schemas(parent.name)
        assert storage.get_schemas(child.name) == [
            schema_version(1, DOC, False),
            schema_version(2, second, True),
        ]
        after = self.topic_with_schema_cluster_bytes(storage)
        assert after == result.cluster_bytes + 2

    def test_adopting_a_history_keeps_both_budgets(self, storage):
        parent = self.topic(storage, DOC)
        child = self.topic(storage)

        def attach(limits):
            return storage.attach_child(
                parent, child, delay_ms=0, limits=limits, max_children=108
            )

        small = attach(replace(LIMITS, topic_bytes=len(DOC) - 1))
        assert (small.status, small.stored_bytes, small.topic) == (
            Status.TOPIC_BUDGET,
            len(DOC),
            parent.name,
        )
        total = self.topic_with_schema_cluster_bytes(storage)
        tight = attach(replace(LIMITS, cluster_bytes=total + len(DOC) - 1))
        assert (tight.status, tight.cluster_bytes) == (Status.CLUSTER_BUDGET, total)
        assert storage.get_topic(child.name) == child
        assert storage.get_topic(parent.name).children == ()
        roomy = attach(replace(LIMITS, cluster_bytes=total + len(DOC)))
        assert (roomy.status, roomy.cluster_bytes) == (Status.OK, total + len(DOC))

    def test_create_child_creates_adopts_and_links_in_one_step(self, storage):
        parent = self.topic(storage, DOC, partitions=4)
        meta = new_meta(partitions=4, retention_ms=2 * HOUR, owner="bob")
        result = storage.create_child(
            meta, parent, delay_ms=HOUR, limits=LIMITS, max_children=108
        )
        assert (result.status, result.version, result.stored_bytes) == (
            Status.OK,
            1,
            len(DOC),
        )
        assert storage.get_topic(meta.name) == replace(
            meta,
            schema_version=1,
            schema_bytes=len(DOC),
            parent=parent.name,
            fanout_delay_ms=HOUR,
        )
        assert storage.get_schemas(meta.name) == [schema_version(1, DOC, False)]
        assert storage.get_topic(parent.name).children == (
            Child(meta.name, meta.epoch, 4, HOUR),
        )
        listed = storage.list_topics(after=meta.name[:-1], limit=5).names
        assert meta.name in listed

    def test_create_child_checks_in_order_and_creates_nothing_refused(self, storage):
        parent = self.topic(storage, DOC, retention_ms=2 * HOUR)

        def create(above, delay_ms=0, max_children=108, limits=LIMITS, **settings):
            meta = new_meta(**settings)
            result = storage.create_child(
                meta, above, delay_ms=delay_ms, limits=limits, max_children=max_children
            )
            if result.status is not Status.OK:
                assert storage.get_topic(meta.name) is None
                assert storage.get_topic(above.name).children == above.children
            return result

        existing = self.topic(storage)
        again = storage.create_child(
            existing, parent, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert again.status is Status.EXISTS
        gone = create(replace(parent, epoch="stale"))
        assert (gone.status, gone.topic) == (Status.NO_TOPIC, parent.name)
        grand, child = self.attach(storage, self.topic(storage), self.topic(storage))
        assert create(child).status is Status.PARENT_IS_CHILD
        assert create(grand, max_children=1).status is Status.TOO_MANY_CHILDREN
        assert create(parent, delay_ms=HOUR + 1).status is Status.RETENTION_TOO_SHORT
        stale = replace(parent, schema_version=0)
        assert create(stale).status is Status.STALE_SCHEMA
        small = create(parent, limits=replace(LIMITS, topic_bytes=len(DOC) - 1))
        assert (small.status, small.topic) == (Status.TOPIC_BUDGET, parent.name)
        total = self.topic_with_schema_cluster_bytes(storage)
        tight = replace(LIMITS, cluster_bytes=total + len(DOC) - 1)
        assert create(parent, limits=tight).status is Status.CLUSTER_BUDGET
        # A history-less parent adopts nothing, whatever the cluster holds.
        bare = self.topic(storage)
        assert create(bare, limits=replace(LIMITS, cluster_bytes=0)).status is (
            Status.OK
        )

    def test_copies_in_a_delay_child_fall_due_after_the_delay(self, storage):
        parent = self.topic(storage, partitions=2)
        child = self.topic(storage, partitions=2)
        parent, child = self.attach(storage, parent, child, delay_ms=1000)
        self.put(storage, parent, b"a", now=5_000, partition=0)
        self.put(storage, parent, b"b", now=5_500, partition=0)
        assert storage.read(child, 0, 0, now_ms=5_999) is None
        assert storage.count_not_due([child, parent], now_ms=5_999) == [2, 0]
        none = storage.reserve(child, [1, 0], nonce=nonce(1), now_ms=5_999)
        assert (none.message, none.next_lease_expiry_ms, none.next_due_ms) == (
            None,
            None,
            6_000,
        )
        first = storage.reserve(child, [0], nonce=nonce(2), now_ms=6_000).message
        assert (first.payload, first.timestamp) == (b"a", 6_000)
        held = storage.reserve(child, [0], nonce=nonce(3), now_ms=6_499)
        assert (held.message, held.next_due_ms) == (None, 6_500)
        assert held.next_lease_expiry_ms == 7_000
        assert storage.count_not_due([child], now_ms=6_499) == [1]
        assert storage.read(child, 0, 1, now_ms=6_500).payload == b"b"
        assert storage.count_not_due([child], now_ms=6_500) == [0]
        assert storage.count_not_due([], now_ms=0) == []
        # The parent's own messages are due at once.
        assert storage.read(parent, 0, 1, now_ms=5_500).payload == b"b"

    def test_a_batch_reserve_in_a_delay_child_stops_at_the_first_not_due(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child, delay_ms=1000)
        for now in (5_000, 5_000, 5_400):
            self.put(storage, parent, b"%d" % now, now=now)
        nonces = [nonce(i) for i in range(10)]
        none = storage.reserve_batch(child, [0], nonces=nonces, now_ms=5_999)
        assert (none.messages, none.next_due_ms, none.next_change_ms) == (
            (),
            6_000,
            6_000,
        )
        two = storage.reserve_batch(child, [0], nonces=nonces, now_ms=6_000)
        assert [m.offset for m in two.messages] == [0, 1]
        held = storage.reserve_batch(child, [0], nonces=nonces, now_ms=6_100)
        assert (held.messages, held.next_due_ms) == ((), 6_400)
        assert held.next_lease_expiry_ms == 7_000
        assert held.next_change_ms == 6_400
        last = storage.reserve_batch(child, [0], nonces=nonces, now_ms=6_400)
        assert [m.offset for m in last.messages] == [2]

    def test_a_retried_append_to_a_parent_is_copied_once(self, storage):
        parent, child = self.topic(storage), self.topic(storage, partitions=2)
        parent, child = self.attach(storage, parent, child)
        guard = [self.guard("k", "d", 0, 2)]
        entries = self.entries(b"a", b"b")
        for _ in range(2):
            result = storage.append(
                parent, entries, schema_version=0, now_ms=0, idempotency=guard
            )
            assert result.status is Status.OK
        assert (result.count, result.repeated) == (0, 2)
        assert self.offsets(storage, parent) == 2
        assert self.offsets(storage, child) == 2
        # A retry finds its key even once the children moved on.
        detached = storage.detach_child(parent, child.name)
        assert detached is Status.OK
        again = storage.append(
            parent, entries, schema_version=0, now_ms=1, idempotency=guard
        )
        assert (again.status, again.repeated) == (Status.OK, 2)
        assert self.offsets(storage, child) == 2
        # A produce to a delay child is refused, storing nothing; a retry of
        # what the topic stored before it became one stores nothing either.
        other = self.topic(storage)
        stored = storage.append(
            other, entries, schema_version=0, now_ms=2, idempotency=guard
        )
        assert stored.status is Status.OK
        other_parent = self.topic(storage)
        _, delayed = self.attach(storage, other_parent, other, delay_ms=10)
        retried = storage.append(
            delayed, entries, schema_version=0, now_ms=3, idempotency=guard
        )
        assert (retried.status, retried.count, retried.repeated) == (Status.OK, 0, 2)
        fresh = [self.guard("k2", "d", 0, 2)]
        refused = storage.append(
            delayed, entries, schema_version=0, now_ms=4, idempotency=fresh
        )
        assert refused.status is Status.DELAY_CHILD
        assert self.offsets(storage, delayed) == 2
        again = storage.append(
            delayed, entries, schema_version=0, now_ms=5, idempotency=fresh
        )
        assert again.status is Status.DELAY_CHILD  # the refused key is not kept

    def test_a_delay_child_takes_messages_only_from_its_parent(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, delayed = self.attach(storage, parent, child, delay_ms=1)
        assert self.put(storage, delayed, b"x", now=0).status is Status.DELAY_CHILD
        assert storage.detach_child(parent, child.name) is Status.OK
        free = storage.get_topic(child.name)
        assert free.fanout_delay_ms == 0
        assert self.put(storage, free, b"x", now=0).status is Status.OK

    def test_a_copy_held_back_holds_back_the_ones_after_it(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child, delay_ms=HOUR)
        self.put(storage, parent, b"held", now=0)
        assert storage.detach_child(parent, child.name) is Status.OK
        child = storage.get_topic(child.name)
        self.put(storage, child, b"direct", now=10)  # stamped after the copy
        assert storage.reserve(child, [0], nonce=nonce(1), now_ms=10).message is None
        got = storage.reserve(child, [0], nonce=nonce(2), now_ms=HOUR).message
        assert got.payload == b"held"
        assert storage.read(child, 0, 1, now_ms=HOUR).timestamp == HOUR

    def test_a_parents_schema_change_reaches_every_child(self, storage):
        parent = self.topic(storage, DOC)
        kids = [self.topic(storage) for _ in range(2)]
        for kid in kids:
            parent, _ = self.attach(storage, parent, kid)
        second = b'{"type":["object","null"]}'
        before = self.topic_with_schema_cluster_bytes(storage)
        result = storage.append_schema(
            parent, schema_version(2, second, True), expected_current=1, limits=LIMITS
        )
        assert (result.status, result.version) == (Status.OK, 2)
        assert result.cluster_bytes == before + 3 * len(second)
        for kid in kids:
            stored = storage.get_topic(kid.name)
            assert (stored.schema_version, stored.schema_high_cost) == (2, True)
            assert stored.schema_bytes == len(DOC) + len(second)
            assert storage.get_schemas(kid.name) == storage.get_schemas(parent.name)

    def test_a_childs_schema_belongs_to_its_parent(self, storage):
        parent, child = self.topic(storage, DOC), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        refused = storage.append_schema(
            child, schema_version(2, b"{}", False), expected_current=1, limits=LIMITS
        )
        assert (refused.status, refused.topic) == (Status.ATTACHED, parent.name)
        stale = replace(parent, children=())
        moved = storage.append_schema(
            stale, schema_version(2, b"{}", False), expected_current=1, limits=LIMITS
        )
        assert moved.status is Status.STALE_CHILDREN
        assert storage.detach_child(parent, child.name) is Status.OK
        child = storage.get_topic(child.name)
        own = storage.append_schema(
            child, schema_version(2, b"{}", False), expected_current=1, limits=LIMITS
        )
        assert own.status is Status.OK
        assert storage.get_topic(parent.name).schema_version == 1

    def test_a_parents_schema_change_keeps_every_childs_budget(self, storage):
        parent = self.topic(storage, DOC)
        roomy = self.topic(storage)
        parent, _ = self.attach(storage, parent, roomy)
        # A child attached with its own (equal-valued, longer) history.
        spaced = b'{"type": "object"}'
        wordy = self.topic(storage, spaced)
        parent, _ = self.attach(storage, parent, wordy)
        doc = schema_version(2, b"{}", False)
        limit = replace(LIMITS, topic_bytes=len(spaced) + 1)
        refused = storage.append_schema(parent, doc, expected_current=1, limits=limit)
        assert (refused.status, refused.stored_bytes, refused.topic) == (
            Status.TOPIC_BUDGET,
            len(spaced),
            wordy.name,
        )
        total = self.topic_with_schema_cluster_bytes(storage)
        cluster = storage.append_schema(
            parent,
            doc,
            expected_current=1,
            limits=replace(LIMITS, cluster_bytes=total + 3 * 2 - 1),
        )
        assert cluster.status is Status.CLUSTER_BUDGET
        assert [
            storage.get_topic(t).schema_version
            for t in (parent.name, roomy.name, wordy.name)
        ] == [1, 1, 1]
        ok = storage.append_schema(
            parent,
            doc,
            expected_current=1,
            limits=replace(LIMITS, cluster_bytes=total + 3 * 2),
        )
        assert (ok.status, ok.cluster_bytes) == (Status.OK, total + 3 * 2)

    def test_a_parent_keeps_its_messages_longer_than_any_delay(self, storage):
        parent = self.topic(storage, retention_ms=3 * HOUR)
        parent, _ = self.attach(storage, parent, self.topic(storage), delay_ms=HOUR)
        assert parent.min_retention_ms() == HOUR + RETENTION_MARGIN_MS
        short = TopicChanges(retention_ms=2 * HOUR - 1)
        assert storage.alter_topic(parent, short) is Status.RETENTION_TOO_SHORT
        with_schema = storage.append_schema(
            parent,
            schema_version(1, DOC, False),
            expected_current=0,
            limits=LIMITS,
            changes=short,
        )
        assert with_schema.status is Status.RETENTION_TOO_SHORT
        assert storage.get_topic(parent.name) == parent
        for ok in (2 * HOUR, 0):
            assert storage.alter_topic(parent, TopicChanges(retention_ms=ok)) is (
                Status.OK
            )

    def test_deleting_a_parent_detaches_its_children(self, storage):
        parent = self.topic(storage, DOC)
        child = self.topic(storage)
        parent, child = self.attach(storage, parent, child, delay_ms=5)
        self.put(storage, parent, b"m", now=0)
        assert storage.delete_topic(replace(parent, children=())) is (
            Status.STALE_CHILDREN
        )
        assert storage.delete_topic(parent) is Status.OK
        left = storage.get_topic(child.name)
        assert (left.parent, left.fanout_delay_ms, left.schema_version) == ("", 0, 1)
        assert storage.read(left, 0, 0, now_ms=5).payload == b"m"
        assert self.put(storage, left, b"own", now=6).status is Status.OK

    def test_deleting_a_child_detaches_it(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        assert storage.delete_topic(replace(child, parent="")) is (
            Status.STALE_CHILDREN
        )
        assert storage.delete_topic(child) is Status.OK
        parent = storage.get_topic(parent.name)
        assert parent.children == ()
        assert self.put(storage, parent, b"m", now=0).status is Status.OK

    # -- compatibility modes -------------------------------------------------

    def test_create_stores_the_compatibility_mode(self, storage):
        meta = new_meta(compatibility="FULL_TRANSITIVE")
        assert storage.create_topic(meta).status is Status.OK
        assert storage.get_topic(meta.name).compatibility == "FULL_TRANSITIVE"
        assert self.topic(storage).compatibility == DEFAULT_COMPATIBILITY

    def test_alter_gives_a_new_mode_to_the_topic_and_every_child(self, storage):
        parent = self.topic(storage, DOC, compatibility="FORWARD")
        kids = [self.topic(storage) for _ in range(2)]
        for kid in kids:
            before = parent
            parent, _ = self.attach(storage, parent, kid)
        full = TopicChanges(compatibility="FULL", visibility_timeout_ms=7)
        # Children read before the last attach: the mode would miss one.
        assert storage.alter_topic(before, full) is Status.STALE_CHILDREN
        assert storage.get_topic(parent.name) == parent
        assert storage.alter_topic(parent, full) is Status.OK
        stored = storage.get_topic(parent.name)
        assert (stored.compatibility, stored.visibility_timeout_ms) == ("FULL", 7)
        for kid in kids:
            assert storage.get_topic(kid.name).compatibility == "FULL"
        # Other settings need no fresh children.
        assert storage.alter_topic(before, TopicChanges(retention_ms=0)) is Status.OK

    def test_an_attached_childs_mode_is_its_parents(self, storage):
        parent, child = self.topic(storage, compatibility="NONE"), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        assert child.compatibility == "NONE"
        mode = TopicChanges(compatibility="BACKWARD", retention_ms=HOUR)
        assert storage.alter_topic(child, mode) is Status.ATTACHED
        assert storage.get_topic(child.name) == child
        assert storage.alter_topic(child, TopicChanges(retention_ms=HOUR)) is (
            Status.OK
        )
        assert storage.detach_child(parent, child.name) is Status.OK
        child = storage.get_topic(child.name)
        assert child.compatibility == "NONE"  # kept, and its own again
        assert storage.alter_topic(child, mode) is Status.OK
        assert storage.get_topic(child.name).compatibility == "BACKWARD"
        assert storage.get_topic(parent.name).compatibility == "NONE"

    def test_a_child_takes_its_parents_mode_as_read(self, storage):
        parent = self.topic(storage, DOC, compatibility="FULL")
        stale = replace(parent, compatibility="BACKWARD")
        meta = new_meta(compatibility="FORWARD")
        refused = storage.create_child(
            meta, stale, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert refused.status is Status.STALE_SCHEMA
        assert storage.get_topic(meta.name) is None
        created = storage.create_child(
            meta, parent, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert created.status is Status.OK
        assert storage.get_topic(meta.name).compatibility == "FULL"
        loose = self.topic(storage, compatibility="NONE")
        parent = storage.get_topic(parent.name)
        refused = storage.attach_child(
            replace(parent, compatibility="NONE"),
            loose,
            delay_ms=0,
            limits=LIMITS,
            max_children=108,
        )
        assert refused.status is Status.STALE_SCHEMA
        assert storage.get_topic(loose.name) == loose
        _, loose = self.attach(storage, parent, loose)
        assert (loose.compatibility, loose.schema_version) == ("FULL", 1)

    def test_append_schema_checks_the_mode_the_check_started_from(self, storage):
        meta = self.topic(storage, DOC)
        assert storage.alter_topic(meta, TopicChanges(compatibility="FULL")) is (
            Status.OK
        )
        doc = b'{"type":["object","null"]}'
        moved = storage.append_schema(
            meta, schema_version(2, doc, False), expected_current=1, limits=LIMITS
        )
        assert (moved.status, moved.version) == (Status.BASE_MISMATCH, 1)
        assert storage.get_topic(meta.name).schema_version == 1
        meta = storage.get_topic(meta.name)
        ok = storage.append_schema(
            meta, schema_version(2, doc, False), expected_current=1, limits=LIMITS
        )
        assert (ok.status, ok.version) == (Status.OK, 2)

    def test_a_new_mode_with_a_schema_change_reaches_every_child(self, storage):
        parent, child = self.topic(storage, DOC), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        result = storage.append_schema(
            parent,
            schema_version(2, b"{}", False),
            expected_current=1,
            limits=LIMITS,
            changes=TopicChanges(compatibility="FORWARD_TRANSITIVE"),
        )
        assert result.status is Status.OK
        for name in (parent.name, child.name):
            stored = storage.get_topic(name)
            assert (stored.schema_version, stored.compatibility) == (
                2,
                "FORWARD_TRANSITIVE",
            )

    # -- schema types ----------------------------------------------------------

    def test_create_stores_the_schema_settings(self, storage):
        avro = self.topic(storage, b'"string"', schema_type="AVRO", encoding="binary")
        assert (avro.schema_type, avro.encoding, avro.proto_message) == (
            "AVRO",
            "binary",
            "",
        )
        proto = self.topic(storage, schema_type="PROTOBUF", proto_message="shop.Order")
        assert (proto.schema_type, proto.proto_message) == ("PROTOBUF", "shop.Order")
        plain = self.topic(storage)
        assert (plain.schema_type, plain.encoding, plain.proto_message) == (
            DEFAULT_SCHEMA_TYPE,
            DEFAULT_ENCODING,
            "",
        )

    def test_a_child_takes_its_parents_schema_settings(self, storage):
        settings = {
            "schema_type": "PROTOBUF",
            "encoding": "json",
            "proto_message": "shop.Order",
        }
        parent = self.topic(storage, b'"x"', **settings)
        created = storage.create_child(
            new_meta(), parent, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert created.status is Status.OK
        [listed] = storage.get_topic(parent.name).children
        child = storage.get_topic(listed.name)
        assert {k: getattr(child, k) for k in settings} == settings
        # An attach copies them too, into a child without a history.
        parent = storage.get_topic(parent.name)
        _, loose = self.attach(storage, parent, self.topic(storage))
        assert {k: getattr(loose, k) for k in settings} == settings
        assert loose.schema_version == 1

    def test_schema_settings_with_a_version_reach_every_child(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        assert child.schema_type == DEFAULT_SCHEMA_TYPE
        first = TopicChanges(schema_type="AVRO", encoding="binary")
        result = storage.append_schema(
            parent,
            schema_version(1, b'"long"', False),
            expected_current=0,
            limits=LIMITS,
            changes=first,
        )
        assert result.status is Status.OK
        for name in (parent.name, child.name):
            stored = storage.get_topic(name)
            assert (stored.schema_version, stored.schema_type, stored.encoding) == (
                1,
                "AVRO",
                "binary",
            )

    @requires("notifications")
    def test_notifications_reach_children_and_linked_records(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        stream = self.listening(storage)
        try:
            parent, child = self.attach(storage, parent, child, delay_ms=5)
            for meta in (parent, child):
                assert storage.mark_waiting(meta, HOUR) is Status.OK
            self.expect(
                stream,
                [
                    Notification(Event.TOPIC_CHANGED, parent.name),
                    Notification(Event.TOPIC_CHANGED, child.name),
                ],
            )
            self.put(storage, parent, b"m", now=0)
            self.expect(
                stream,
                [
                    Notification(Event.MESSAGES, parent.name),
                    Notification(Event.MESSAGES, child.name),
                ],
            )
            storage.detach_child(parent, child.name)
            self.expect(
                stream,
                [
                    Notification(Event.TOPIC_CHANGED, parent.name),
                    Notification(Event.TOPIC_CHANGED, child.name),
                ],
            )
        finally:
            stream.close()

    # -- global schema ids and registry subjects ------------------------------

    @staticmethod
    def unique_doc() -> bytes:
        return b'{"title":"%s"}' % uuid.uuid4().hex.encode()

    def test_a_created_version_gets_a_global_id(self, storage):
        doc = self.unique_doc()
        meta = new_meta()
        result = storage.create_topic(meta, schema_version(1, doc), limits=LIMITS)
        assert result.status is Status.OK and result.schema_id >= 1
        [stored] = storage.get_schemas(meta.name)
        assert stored.schema_id == result.schema_id
        assert storage.get_schema(meta.name, 1).schema_id == result.schema_id
        found = storage.schema_by_id(result.schema_id)
        assert (found.schema_type, found.document, found.references) == (
            "JSON",
            doc,
            b"",
        )
        assert found.uses == ((f"{meta.name}-value", 1),)
        assert storage.schema_id_of(schema_version(1, doc).identity) == result.schema_id

    def test_the_same_schema_has_one_id_everywhere(self, storage):
        doc, other = self.unique_doc(), self.unique_doc()
        first = storage.create_topic(new_meta(), schema_version(1, doc), limits=LIMITS)
        again = storage.create_topic(new_meta(), schema_version(1, doc), limits=LIMITS)
        third = storage.create_topic(
            new_meta(), schema_version(1, other), limits=LIMITS
        )
        assert first.schema_id == again.schema_id
        assert third.schema_id > first.schema_id
        assert len(storage.schema_by_id(first.schema_id).uses) == 2

    def test_a_new_version_gets_its_id_in_every_child(self, storage):
        parent, child = self.topic(storage, DOC), self.topic(storage)
        parent, child = self.attach(storage, parent, child)
        assert storage.get_schemas(child.name)[0].schema_id == (
            storage.get_schemas(parent.name)[0].schema_id
        )
        doc = self.unique_doc()
        result = storage.append_schema(
            parent, schema_version(2, doc), expected_current=1, limits=LIMITS
        )
        assert result.status is Status.OK and result.schema_id >= 1
        for name in (parent.name, child.name):
            assert storage.get_schemas(name)[1].schema_id == result.schema_id
        assert storage.schema_by_id(result.schema_id).uses == tuple(
            sorted([(f"{parent.name}-value", 2), (f"{child.name}-value", 2)])
        )
        created = storage.create_child(
            new_meta(),
            storage.get_topic(parent.name),
            delay_ms=0,
            limits=LIMITS,
            max_children=108,
        )
        assert created.status is Status.OK
        [*_, listed] = storage.get_topic(parent.name).children
        assert storage.get_schema(listed.name, 2).schema_id == result.schema_id

    def test_an_id_outlives_its_uses_and_is_never_reused(self, storage):
        doc = self.unique_doc()
        meta = new_meta()
        first = storage.create_topic(meta, schema_version(1, doc), limits=LIMITS)
        assert storage.delete_topic(storage.get_topic(meta.name)) is Status.OK
        gone = storage.schema_by_id(first.schema_id)
        assert gone is not None and gone.uses == ()
        again = storage.create_topic(new_meta(), schema_version(1, doc), limits=LIMITS)
        assert again.schema_id == first.schema_id
        assert storage.schema_by_id(first.schema_id).document == doc
        fresh = storage.create_topic(
            new_meta(), schema_version(1, self.unique_doc()), limits=LIMITS
        )
        assert fresh.schema_id > first.schema_id

    def test_an_id_never_assigned_has_no_schema(self, storage):
        assert storage.schema_by_id(0) is None
        assert storage.schema_by_id(2**31 - 1) is None
        assert storage.schema_id_of(schema_version(1, self.unique_doc()).identity) == 0

    def test_assigning_ids_keeps_those_assigned(self, storage):
        meta = self.topic(storage, DOC)
        [stored] = storage.get_schemas(meta.name)
        assert storage.assign_schema_ids(meta, [schema_version(1, DOC)]) is Status.OK
        assert storage.get_schemas(meta.name)[0].schema_id == stored.schema_id
        stale = replace(meta, epoch="other")
        assert storage.assign_schema_ids(stale, []) is Status.NO_TOPIC

    def test_a_subject_takes_versions_with_ids(self, storage):
        name = f"subject-{uuid.uuid4().hex}"
        doc = self.unique_doc()
        assert storage.get_subject(name) is None
        result = storage.register_subject_version(
            name, schema_version(0, doc), expected_latest=0, topic="", limits=LIMITS
        )
        assert (result.status, result.version) == (Status.OK, 1)
        topic = storage.create_topic(new_meta(), schema_version(1, doc), limits=LIMITS)
        assert topic.schema_id == result.schema_id
        stale = storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=0, topic="", limits=LIMITS
        )
        assert (stale.status, stale.version) == (Status.BASE_MISMATCH, 1)
        second = storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=1, topic="", limits=LIMITS
        )
        assert (second.status, second.version) == (Status.OK, 2)
        subject = storage.get_subject(name)
        assert (subject.name, subject.latest, subject.compatibility) == (name, 2, "")
        assert [(v.version, v.document, v.schema_id) for v in subject.versions] == [
            (1, doc, result.schema_id),
            (2, DOC, second.schema_id),
        ]
        assert subject.versions[0].identity == schema_version(1, doc).identity
        assert (name, 1) in storage.schema_by_id(result.schema_id).uses
        assert name in storage.list_subjects()
        assert storage.list_subjects(prefix=name) == [name]
        assert storage.list_subjects(prefix=name + "x") == []

    def test_subject_versions_are_soft_then_permanently_deleted(self, storage):
        name = f"subject-{uuid.uuid4().hex}"
        docs = [self.unique_doc() for _ in range(3)]
        ids = []
        for latest, doc in enumerate(docs):
            result = storage.register_subject_version(
                name,
                schema_version(0, doc),
                expected_latest=latest,
                topic="",
                limits=LIMITS,
            )
            ids.append(result.schema_id)
        gone = storage.delete_subject_versions(name, [1, 9], permanent=False)
        assert gone is Status.NO_SUBJECT
        early = storage.delete_subject_versions(name, [1], permanent=True)
        assert early is Status.NOT_DELETED
        assert storage.delete_subject_versions(name, [1, 3], permanent=False) is (
            Status.OK
        )
        subject = storage.get_subject(name)
        assert [v.deleted for v in subject.versions] == [True, False, True]
        assert storage.delete_subject_versions(name, [3], permanent=True) is Status.OK
        assert [v.version for v in storage.get_subject(name).versions] == [1, 2]
        assert storage.schema_by_id(ids[2]).uses == ()
        # Numbering goes on after deletes.
        fourth = storage.register_subject_version(
            name,
            schema_version(0, self.unique_doc()),
            expected_latest=3,
            topic="",
            limits=LIMITS,
        )
        assert fourth.version == 4
        storage.delete_subject_versions(name, [2, 4], permanent=False)
        assert storage.delete_subject_versions(name, [1, 2, 4], permanent=True) is (
            Status.OK
        )
        assert storage.get_subject(name) is None
        assert name not in storage.list_subjects(prefix=name)
        fresh = storage.register_subject_version(
            name,
            schema_version(0, docs[0]),
            expected_latest=0,
            topic="",
            limits=LIMITS,
        )
        assert (fresh.version, fresh.schema_id) == (1, ids[0])

    def test_a_value_subject_and_its_topic_exclude_each_other(self, storage):
        meta = new_meta()
        subject = f"{meta.name}-value"
        result = storage.register_subject_version(
            subject,
            schema_version(0, DOC),
            expected_latest=0,
            topic=meta.name,
            limits=LIMITS,
        )
        assert result.status is Status.OK
        assert storage.create_topic(meta).status is Status.SUBJECT_EXISTS
        parent = self.topic(storage)
        child = storage.create_child(
            meta, parent, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert child.status is Status.SUBJECT_EXISTS
        assert storage.get_topic(meta.name) is None
        storage.delete_subject_versions(subject, [1], permanent=False)
        storage.delete_subject_versions(subject, [1], permanent=True)
        assert storage.create_topic(meta).status is Status.OK
        refused = storage.register_subject_version(
            subject,
            schema_version(0, DOC),
            expected_latest=0,
            topic=meta.name,
            limits=LIMITS,
        )
        assert refused.status is Status.EXISTS
        assert storage.get_subject(subject) is None

    def test_a_subject_keeps_the_cap_and_the_budgets(self, storage):
        name = f"subject-{uuid.uuid4().hex}"
        capped = replace(LIMITS, max_versions=1)
        storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=0, topic="", limits=capped
        )
        full = storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=1, topic="", limits=capped
        )
        assert (full.status, full.version) == (Status.TOO_MANY_VERSIONS, 1)
        small = replace(LIMITS, topic_bytes=len(DOC) * 2 - 1)
        over = storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=1, topic="", limits=small
        )
        assert (over.status, over.stored_bytes) == (Status.TOPIC_BUDGET, len(DOC))
        tight = replace(LIMITS, cluster_bytes=over.cluster_bytes + len(DOC) - 1)
        refused = storage.register_subject_version(
            name, schema_version(0, DOC), expected_latest=1, topic="", limits=tight
        )
        assert refused.status is Status.CLUSTER_BUDGET
        assert storage.get_subject(name).latest == 1

    def test_subject_and_registry_modes(self, storage):
        name = f"subject-{uuid.uuid4().hex}"
        assert storage.set_subject_compatibility(name, "FULL") is Status.OK
        subject = storage.get_subject(name)
        assert (subject.compatibility, subject.versions, subject.latest) == (
            "FULL",
            (),
            0,
        )
        assert name not in storage.list_subjects(prefix=name)
        assert storage.set_subject_compatibility(name, "") is Status.OK
        assert storage.get_subject(name) is None
        before = storage.registry_config()
        try:
            assert storage.set_registry_config("NONE") is Status.OK
            assert storage.registry_config() == "NONE"
            assert storage.set_registry_config("") is Status.OK
            assert storage.registry_config() == ""
        finally:
            storage.set_registry_config(before)

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
        assert storage.mark_waiting(meta, HOUR) is Status.OK
        stream = self.listening(storage)
        try:
            self.put(storage, meta, b"m", now=0)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
            lease = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message
            storage.settle(meta, 0, 0, lease.nonce, action=Settle.RELEASE, now_ms=0)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
            lease = storage.reserve(meta, [0], nonce=nonce(2), now_ms=0).message
            back = Lease(0, 0, lease.nonce)
            storage.settle_batch(meta, [back], action=Settle.RELEASE, now_ms=0)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
        finally:
            stream.close()

    @requires("notifications")
    @pytest.mark.parametrize("cap", ["max_in_flight", "max_acked_ahead"])
    def test_an_ack_that_frees_a_capped_partition_publishes(self, storage, cap):
        # Partition 0 holds a message no reserve may take until the ack.
        meta = self.topic(storage, **{f"{cap}_per_partition": 1})
        for _ in range(3):
            assert self.put(storage, meta, b"m", now=0).status is Status.OK
        first = storage.reserve(meta, [0], nonce=nonce(1), now_ms=0).message
        if cap == "max_acked_ahead":
            second = storage.reserve(meta, [0], nonce=nonce(2), now_ms=0).message
            status = storage.settle(
                meta, 0, second.offset, second.nonce, action=Settle.ACK, now_ms=0
            )
            assert status is Status.OK
        assert storage.reserve(meta, [0], nonce=nonce(3), now_ms=0).message is None
        assert storage.mark_waiting(meta, HOUR) is Status.OK
        stream = self.listening(storage)
        try:
            status = storage.settle(
                meta, 0, first.offset, first.nonce, action=Settle.ACK, now_ms=0
            )
            assert status is Status.OK
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
        finally:
            stream.close()
        assert storage.reserve(meta, [0], nonce=nonce(4), now_ms=0).message

    def test_mark_waiting_checks_the_epoch(self, storage):
        meta = self.topic(storage)
        assert storage.mark_waiting(meta, HOUR) is Status.OK
        stale = replace(meta, epoch="0123456789abcdef")
        assert storage.mark_waiting(stale, HOUR) is Status.NO_TOPIC
        assert storage.delete_topic(meta) is Status.OK
        assert storage.mark_waiting(meta, HOUR) is Status.NO_TOPIC
        assert storage.get_topic(meta.name) is None  # the mark made no topic

    @requires("notifications")
    def test_a_live_mark_publishes_every_append_and_give_back(self, storage):
        meta = self.topic(storage, partitions=2)
        assert storage.mark_waiting(meta, 100) is Status.OK
        ready = Notification(Event.MESSAGES, meta.name)
        stream = self.listening(storage)
        try:
            self.put(storage, meta, b"m", now=10)
            self.expect(stream, [ready])
            both = [Entry(p, b"", b"b", PayloadKind.TEXT, None) for p in (0, 1)]
            result = storage.append(meta, both, schema_version=0, now_ms=20)
            assert result.status is Status.OK
            self.expect(stream, [ready])
            lease = storage.reserve(meta, [0], nonce=nonce(1), now_ms=30).message
            status = storage.settle(
                meta, 0, lease.offset, lease.nonce, action=Settle.RELEASE, now_ms=40
            )
            assert status is Status.OK
            self.expect(stream, [ready])
            lease = storage.reserve(meta, [1], nonce=nonce(2), now_ms=50).message
            back = Lease(1, lease.offset, lease.nonce)
            storage.settle_batch(meta, [back], action=Settle.RELEASE, now_ms=100)
            self.expect(stream, [ready])  # live up to its until, inclusive
        finally:
            stream.close()

    @requires("notifications")
    def test_a_mark_keeps_the_latest_until(self, storage):
        meta = self.topic(storage)
        assert storage.mark_waiting(meta, 1000) is Status.OK
        assert storage.mark_waiting(meta, 500) is Status.OK  # changes nothing
        stream = self.listening(storage)
        try:
            self.put(storage, meta, b"m", now=900)
            self.expect(stream, [Notification(Event.MESSAGES, meta.name)])
        finally:
            stream.close()

    @requires("notifications")
    def test_a_mark_on_a_child_publishes_its_copies(self, storage):
        parent, child = self.topic(storage), self.topic(storage)
        parent, child = self.attach(storage, parent, child, delay_ms=5)
        assert storage.mark_waiting(child, 100) is Status.OK
        stream = self.listening(storage)
        try:
            self.put(storage, parent, b"m", now=50)
            self.expect(stream, [Notification(Event.MESSAGES, child.name)])
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
                meta, schema_version(1, DOC, False), expected_current=0, limits=LIMITS
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
