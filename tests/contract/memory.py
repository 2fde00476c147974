"""A toy storage backend that keeps everything in one process's memory.

Tests only: it shows that the storage contract can be met by something that
is not Redis, written from :mod:`narad.storage` alone, and it is a complete
plugin (``memory://<name>`` URLs). One lock makes every method one step.
``memory://<name>?notifications=0`` builds one that declares it has no
notifications, so the broker's polling path runs too.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from urllib.parse import parse_qs
from urllib.parse import urlsplit

from narad import hookimpl
from narad.config import Config
from narad.storage import AppendResult
from narad.storage import Capabilities
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Grant
from narad.storage import Message
from narad.storage import Notification
from narad.storage import Page
from narad.storage import PartitionStats
from narad.storage import ReserveResult
from narad.storage import SchemaLimits
from narad.storage import SchemaSize
from narad.storage import SchemaVersion
from narad.storage import SchemaWriteResult
from narad.storage import ServerStatus
from narad.storage import Settle
from narad.storage import Status
from narad.storage import TopicChanges
from narad.storage import TopicMeta
from narad.storage import UserRecord

TRIM_BUDGET = 1000


@dataclass
class _Partition:
    log: dict[int, Message] = field(default_factory=dict)
    next: int = 0  # offset of the next append
    oldest: int = 0  # lowest retained offset
    cursor: int = 0  # next offset never delivered
    floor: int = 0  # lowest offset not acked
    last_ts: int = 0
    leases: dict[int, int] = field(default_factory=dict)  # offset -> deadline
    nonces: dict[int, str] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)  # acked above the floor

    def trim(self, retention_ms: int, now_ms: int, budget: int) -> None:
        if retention_ms <= 0:
            return
        while self.oldest < self.next and budget > 0:
            message = self.log.get(self.oldest)
            if message is not None and message.timestamp + retention_ms > now_ms:
                break
            self.log.pop(self.oldest, None)
            self.leases.pop(self.oldest, None)
            self.nonces.pop(self.oldest, None)
            self.acked.discard(self.oldest)
            self.oldest += 1
            budget -= 1
        self.cursor = max(self.cursor, self.oldest)
        if self.floor < self.oldest:
            self.floor = self.oldest
            self.advance_floor()

    def advance_floor(self) -> None:
        while self.floor in self.acked:
            self.acked.remove(self.floor)
            self.floor += 1

    def candidate(self, meta: TopicMeta, now_ms: int) -> int | None:
        fresh = (
            self.cursor < self.next
            and len(self.leases) < meta.max_in_flight_per_partition
        )
        if len(self.acked) >= meta.max_acked_ahead_per_partition:
            deadline = self.leases.get(self.floor)
            if deadline is not None:
                return self.floor if deadline <= now_ms else None
            return self.cursor if fresh and self.cursor == self.floor else None
        lapsed = [o for o, d in self.leases.items() if d <= now_ms]
        if lapsed:
            return min(lapsed)
        return self.cursor if fresh else None


@dataclass
class _Topic:
    meta: TopicMeta
    partitions: list[_Partition]
    schemas: dict[int, SchemaVersion] = field(default_factory=dict)


class MemoryStorage:
    def __init__(self, *, notifications: bool = True) -> None:
        self.capabilities = Capabilities(notifications=notifications)
        self._lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        self._users: dict[str, UserRecord] = {}
        self._cluster_bytes = 0
        self._subscribers: list[
            tuple[Collection[Event] | None, queue.SimpleQueue[Notification]]
        ] = []

    def _live(self, meta: TopicMeta) -> _Topic | None:
        topic = self._topics.get(meta.name)
        return topic if topic is not None and topic.meta.epoch == meta.epoch else None

    def _publish(self, event: Event, topic: str) -> None:
        for events, inbox in self._subscribers:
            if events is None or event in events:
                inbox.put(Notification(event, topic))

    # -- health --------------------------------------------------------------

    def ping(self) -> bool:
        return True

    def server_status(self) -> ServerStatus | None:
        return ServerStatus(False, "in process memory: nothing outlives it", 0, 0)

    def close(self) -> None:
        pass

    # -- topics --------------------------------------------------------------

    def create_topic(
        self,
        meta: TopicMeta,
        schema: SchemaVersion | None = None,
        *,
        limits: SchemaLimits | None = None,
    ) -> SchemaWriteResult:
        with self._lock:
            if meta.name in self._topics:
                return SchemaWriteResult(Status.EXISTS)
            size = len(schema.document) if schema else 0
            if schema is not None and limits is not None:
                if self._cluster_bytes + size > limits.cluster_bytes:
                    return SchemaWriteResult(
                        Status.CLUSTER_BUDGET, cluster_bytes=self._cluster_bytes
                    )
                if size > limits.topic_bytes:
                    return SchemaWriteResult(
                        Status.TOPIC_BUDGET, cluster_bytes=self._cluster_bytes
                    )
            stored = replace(
                meta,
                schema_version=1 if schema else 0,
                schema_high_cost=bool(schema and schema.high_cost),
                schema_bytes=size,
            )
            topic = _Topic(stored, [_Partition() for _ in range(meta.partitions)])
            if schema is not None:
                topic.schemas[1] = replace(schema, version=1)
            self._topics[meta.name] = topic
            self._cluster_bytes += size
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return SchemaWriteResult(
                Status.OK, stored.schema_version, size, self._cluster_bytes
            )

    def get_topic(self, name: str) -> TopicMeta | None:
        with self._lock:
            topic = self._topics.get(name)
            return topic.meta if topic else None

    def get_topics(self, names: Sequence[str]) -> list[TopicMeta | None]:
        return [self.get_topic(name) for name in names]

    def list_topics(self, *, after: str, limit: int, prefix: str = "") -> Page:
        with self._lock:
            return _page(self._topics, after, limit, prefix)

    def alter_topic(self, meta: TopicMeta, changes: TopicChanges) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            topic.meta = replace(topic.meta, **dict(changes.items()))
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return Status.OK

    def delete_topic(self, meta: TopicMeta) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            self._cluster_bytes -= topic.meta.schema_bytes
            del self._topics[meta.name]
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return Status.OK

    def partition_stats(self, meta: TopicMeta, *, now_ms: int) -> list[PartitionStats]:
        with self._lock:
            topic = self._topics.get(meta.name)
            parts = topic.partitions if topic else [_Partition()] * meta.partitions
            return [
                PartitionStats(i, p.oldest, p.next, len(p.leases))
                for i, p in enumerate(parts)
            ]

    # -- schemas -------------------------------------------------------------

    def append_schema(
        self,
        meta: TopicMeta,
        version: SchemaVersion,
        *,
        expected_current: int,
        limits: SchemaLimits,
        changes: TopicChanges | None = None,
    ) -> SchemaWriteResult:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return SchemaWriteResult(Status.NO_TOPIC)
            current = topic.meta.schema_version
            if current != expected_current:
                return SchemaWriteResult(Status.BASE_MISMATCH, version=current)
            if current >= limits.max_versions:
                return SchemaWriteResult(Status.TOO_MANY_VERSIONS, version=current)
            stored, size = topic.meta.schema_bytes, len(version.document)
            if stored + size > limits.topic_bytes:
                return SchemaWriteResult(
                    Status.TOPIC_BUDGET, 0, stored, self._cluster_bytes
                )
            if self._cluster_bytes + size > limits.cluster_bytes:
                return SchemaWriteResult(
                    Status.CLUSTER_BUDGET, 0, stored, self._cluster_bytes
                )
            number = current + 1
            topic.schemas[number] = replace(version, version=number)
            topic.meta = replace(
                topic.meta,
                schema_version=number,
                schema_high_cost=version.high_cost,
                schema_bytes=stored + size,
                **dict((changes or TopicChanges()).items()),
            )
            self._cluster_bytes += size
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return SchemaWriteResult(
                Status.OK, number, stored + size, self._cluster_bytes
            )

    def get_schema(self, name: str, version: int) -> SchemaVersion | None:
        with self._lock:
            topic = self._topics.get(name)
            return topic.schemas.get(version) if topic else None

    def schema_sizes(self, name: str) -> list[SchemaSize]:
        with self._lock:
            topic = self._topics.get(name)
            schemas = topic.schemas if topic else {}
            return [SchemaSize(v, len(schemas[v].document)) for v in sorted(schemas)]

    # -- messages ------------------------------------------------------------

    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        *,
        schema_version: int,
        now_ms: int,
    ) -> AppendResult:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return AppendResult(Status.NO_TOPIC)
            if topic.meta.schema_version != schema_version:
                return AppendResult(
                    Status.STALE_SCHEMA, schema_version=topic.meta.schema_version
                )
            touched = {}
            for entry in entries:
                part = touched[entry.partition] = topic.partitions[entry.partition]
                part.last_ts = max(now_ms, part.last_ts)
                part.log[part.next] = Message(
                    entry.partition,
                    part.next,
                    part.last_ts,
                    entry.key,
                    entry.payload,
                    entry.kind,
                )
                part.next += 1
            for part in touched.values():
                part.trim(topic.meta.retention_ms, now_ms, 2 * len(entries) + 100)
            self._publish(Event.MESSAGES, meta.name)
            return AppendResult(Status.OK, count=len(entries))

    def reserve(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonce: str,
        now_ms: int,
    ) -> ReserveResult:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return ReserveResult(Status.NO_TOPIC)
            stored = topic.meta
            earliest = None
            for index in partitions:
                part = topic.partitions[index]
                part.trim(stored.retention_ms, now_ms, TRIM_BUDGET)
                offset = part.candidate(stored, now_ms)
                if offset is not None:
                    if offset == part.cursor:
                        part.cursor += 1
                    part.leases[offset] = now_ms + stored.visibility_timeout_ms
                    part.nonces[offset] = nonce
                    return ReserveResult(
                        Status.OK, replace(part.log[offset], nonce=nonce)
                    )
                if part.leases:
                    first = min(part.leases.values())
                    earliest = first if earliest is None else min(earliest, first)
            return ReserveResult(Status.OK, None, earliest)

    def settle(
        self,
        meta: TopicMeta,
        partition: int,
        offset: int,
        nonce: str,
        *,
        action: Settle,
        now_ms: int,
    ) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            part = topic.partitions[partition]
            deadline = part.leases.get(offset)
            if (
                deadline is None
                or deadline <= now_ms
                or part.nonces.get(offset) != nonce
            ):
                return Status.GONE
            if action is Settle.EXTEND:
                part.leases[offset] = now_ms + topic.meta.visibility_timeout_ms
                return Status.OK
            if action is Settle.RELEASE:
                part.leases[offset] = 0
                del part.nonces[offset]
                self._publish(Event.MESSAGES, meta.name)
                return Status.OK
            if offset != part.floor:
                if len(part.acked) >= topic.meta.max_acked_ahead_per_partition:
                    return Status.ACKED_AHEAD_FULL
                part.acked.add(offset)
            else:
                part.floor += 1
                part.advance_floor()
            del part.leases[offset]
            del part.nonces[offset]
            return Status.OK

    def read(
        self, meta: TopicMeta, partition: int, offset: int, *, now_ms: int
    ) -> Message | None:
        with self._lock:
            topic = self._topics.get(meta.name)
            if topic is None or offset < topic.partitions[partition].oldest:
                return None
            message = topic.partitions[partition].log.get(offset)
            retention = topic.meta.retention_ms
        if message is None or (retention and message.timestamp + retention <= now_ms):
            return None
        return message

    # -- users ---------------------------------------------------------------

    def _admins(self) -> int:
        return sum(user.admin for user in self._users.values())

    def create_user(self, user: UserRecord, *, only_if_none: bool = False) -> Status:
        with self._lock:
            if user.name in self._users or (only_if_none and self._users):
                return Status.EXISTS
            self._users[user.name] = replace(user, revision=1)
            self._publish(Event.USER_CHANGED, user.name)
            return Status.OK

    def get_user(self, name: str) -> UserRecord | None:
        with self._lock:
            return self._users.get(name)

    def get_users(self, names: Sequence[str]) -> list[UserRecord | None]:
        return [self.get_user(name) for name in names]

    def list_users(self, *, after: str, limit: int) -> Page:
        with self._lock:
            return _page(self._users, after, limit, "")

    def _check(self, name: str, revision: int, *, demotes: bool) -> Status:
        user = self._users.get(name)
        if user is None:
            return Status.NO_USER
        if user.revision != revision:
            return Status.STALE_USER
        if demotes and user.admin and self._admins() <= 1:
            return Status.LAST_ADMIN
        return Status.OK

    def replace_grants(
        self, name: str, grants: Sequence[Grant], *, admin: bool, revision: int
    ) -> Status:
        with self._lock:
            status = self._check(name, revision, demotes=not admin)
            if status is Status.OK:
                user = self._users[name]
                self._users[name] = replace(
                    user, grants=tuple(grants), admin=admin, revision=revision + 1
                )
                self._publish(Event.USER_CHANGED, name)
            return status

    def set_password(self, name: str, password_hash: str, *, revision: int) -> Status:
        with self._lock:
            status = self._check(name, revision, demotes=False)
            if status is Status.OK:
                user = self._users[name]
                self._users[name] = replace(
                    user, password_hash=password_hash, revision=revision + 1
                )
                self._publish(Event.USER_CHANGED, name)
            return status

    def delete_user(self, name: str, *, revision: int) -> Status:
        with self._lock:
            status = self._check(name, revision, demotes=True)
            if status is Status.OK:
                del self._users[name]
                self._publish(Event.USER_CHANGED, name)
            return status

    # -- notifications -------------------------------------------------------

    def notifications(
        self, events: Collection[Event] | None = None
    ) -> Iterator[Notification | None]:
        inbox: queue.SimpleQueue[Notification] = queue.SimpleQueue()
        subscriber = (events, inbox)
        with self._lock:
            self._subscribers.append(subscriber)
        try:
            yield Notification(Event.LISTENING)
            while True:
                try:
                    yield inbox.get(timeout=1.0)
                except queue.Empty:
                    yield None
        finally:
            with self._lock:
                self._subscribers.remove(subscriber)


def _page(names: Collection[str], after: str, limit: int, prefix: str) -> Page:
    found = sorted(n for n in names if n > after and n.startswith(prefix))
    more = len(found) > limit
    found = found[:limit]
    return Page(found, found[-1] if more else None)


_stores: dict[tuple[str, bool], MemoryStorage] = {}


def connect(url: str, config: Config) -> MemoryStorage:
    parts = urlsplit(url)
    notifications = parse_qs(parts.query).get("notifications", ["1"]) != ["0"]
    key = (parts.netloc, notifications)
    return _stores.setdefault(key, MemoryStorage(notifications=notifications))


@hookimpl
def narad_storage_backends():
    return {"memory": connect}
