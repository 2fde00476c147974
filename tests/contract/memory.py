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
from narad.storage import DEFAULT_IDEMPOTENCY
from narad.storage import FAMILY_FIELDS
from narad.storage import RETENTION_MARGIN_MS
from narad.storage import AppendResult
from narad.storage import BatchReserveResult
from narad.storage import Capabilities
from narad.storage import Child
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Grant
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Lease
from narad.storage import Message
from narad.storage import Notification
from narad.storage import Page
from narad.storage import PartitionStats
from narad.storage import ReserveResult
from narad.storage import SchemaIdentity
from narad.storage import SchemaLimits
from narad.storage import SchemaSize
from narad.storage import SchemaVersion
from narad.storage import SchemaWriteResult
from narad.storage import ServerStatus
from narad.storage import Settle
from narad.storage import Status
from narad.storage import StoredSchema
from narad.storage import Subject
from narad.storage import TopicChanges
from narad.storage import TopicMeta
from narad.storage import TopicStats
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
    nonces: dict[int, str] = field(default_factory=dict)  # kept once acked
    acked: set[int] = field(default_factory=set)  # acked above the floor
    kept_from: int = 0  # lowest offset retention keeps, as of the last trim

    def trim(self, retention_ms: int, now_ms: int, budget: int) -> None:
        self.kept_from = self.oldest
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
        # What the budget left is passed over as if dropped (a reserve never
        # offers it); later calls drop it.
        self.kept_from = self.oldest
        while self.kept_from < self.next:
            message = self.log.get(self.kept_from)
            if message is not None and message.timestamp + retention_ms > now_ms:
                break
            self.kept_from += 1
        self.cursor = max(self.cursor, self.kept_from)
        if self.floor < self.kept_from:
            self.floor = self.kept_from
            self.acked = {o for o in self.acked if o >= self.kept_from}
            self.advance_floor()

    def advance_floor(self) -> None:
        while self.floor in self.acked:
            self.acked.remove(self.floor)
            self.floor += 1

    def pass_expired(self, retention_ms: int, now_ms: int) -> None:
        """Move the floor past what retention aged out untrimmed (at most
        to the cursor), as a trim would."""
        while self.floor < self.cursor and not _kept(
            self.log.get(self.floor), retention_ms, now_ms
        ):
            self.floor += 1
        self.acked = {o for o in self.acked if o >= self.floor}
        self.advance_floor()

    def put(self, message: Message, ts: int) -> int:
        """Store ``message`` at the next offset, stamped at least ``ts``."""
        self.last_ts = max(ts, self.last_ts)
        self.log[self.next] = message._replace(offset=self.next, timestamp=self.last_ts)
        self.next += 1
        return self.last_ts

    def due(self, now_ms: int) -> int | None:
        """When the message at the cursor falls due, if after ``now_ms``."""
        message = self.log.get(self.cursor)
        if message is not None and message.timestamp > now_ms:
            return message.timestamp
        return None

    def candidate(self, meta: TopicMeta, now_ms: int) -> int | None:
        fresh = (
            self.cursor < self.next
            and len(self.leases) < meta.max_in_flight_per_partition
            and self.due(now_ms) is None
        )
        if len(self.acked) >= meta.max_acked_ahead_per_partition:
            deadline = self.leases.get(self.floor)
            if deadline is not None:
                return self.floor if deadline <= now_ms else None
            return self.cursor if fresh and self.cursor == self.floor else None
        lapsed = [
            o for o, d in self.leases.items() if d <= now_ms and o >= self.kept_from
        ]
        if lapsed:
            # As a sorted set orders them: by deadline, then member (a string).
            return min(lapsed, key=lambda o: (self.leases[o], str(o)))
        return self.cursor if fresh else None

    def is_acked(self, offset: int) -> bool:
        return self.oldest <= offset < self.floor or offset in self.acked


def _kept(message: Message | None, retention_ms: int, now_ms: int) -> bool:
    """Whether retention keeps ``message`` at ``now_ms`` (a trimmed one: no)."""
    if retention_ms <= 0:
        return True
    return message is not None and message.timestamp + retention_ms > now_ms


@dataclass
class _Keys:
    """A topic's idempotency keys: key -> (digest, stored at), oldest first."""

    stored: dict[str, tuple[str, int]] = field(default_factory=dict)
    bytes: int = 0

    def remembered(self, key: str, limits: IdempotencyLimits, now_ms: int):
        seen = self.stored.get(key)
        if seen is None or seen[1] + limits.window_ms <= now_ms:
            return None
        return seen[0]

    def forget(self, key: str) -> None:
        digest, _ = self.stored.pop(key)
        self.bytes -= len(key) + len(digest) + IdempotencyLimits.KEY_OVERHEAD

    def remember(
        self,
        fresh: list[IdempotencyKey],
        limits: IdempotencyLimits,
        now_ms: int,
        budget: int,
    ) -> int:
        for key, (_, at) in list(self.stored.items()):
            if at + limits.window_ms > now_ms:
                break  # oldest first: the rest are younger
            self.forget(key)
        for guard in fresh:
            if guard.key in self.stored:
                self.forget(guard.key)
            self.stored[guard.key] = (guard.digest, now_ms)
            self.bytes += (
                len(guard.key) + len(guard.digest) + IdempotencyLimits.KEY_OVERHEAD
            )
        evicted = 0
        while (
            self.stored
            and evicted < budget
            and (len(self.stored) > limits.max_keys or self.bytes > limits.max_bytes)
        ):
            self.forget(next(iter(self.stored)))
            evicted += 1
        return evicted


@dataclass
class _Topic:
    meta: TopicMeta
    partitions: list[_Partition]
    schemas: dict[int, SchemaVersion] = field(default_factory=dict)
    keys: _Keys = field(default_factory=_Keys)
    waited_until: int = 0  # the latest mark_waiting until (ms)

    def waited(self, now_ms: int) -> bool:
        return self.waited_until >= now_ms


@dataclass
class _Subject:
    compatibility: str = ""
    versions: dict[int, SchemaVersion] = field(default_factory=dict)
    latest: int = 0

    @property
    def stored_bytes(self) -> int:
        return sum(len(v.document) for v in self.versions.values())


class MemoryStorage:
    def __init__(self, *, notifications: bool = True, topic_stats: bool = True) -> None:
        self.capabilities = Capabilities(
            notifications=notifications, topic_stats=topic_stats
        )
        self._lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        self._users: dict[str, UserRecord] = {}
        self._cluster_bytes = 0
        self._ids: dict[SchemaIdentity, int] = {}
        self._docs: dict[int, tuple[str, bytes, bytes]] = {}
        self._uses: dict[int, set[tuple[str, int]]] = {}
        self._subjects: dict[str, _Subject] = {}
        self._registry_mode = ""
        self._subscribers: list[
            tuple[Collection[Event] | None, queue.SimpleQueue[Notification]]
        ] = []

    def _live(self, meta: TopicMeta) -> _Topic | None:
        topic = self._topics.get(meta.name)
        return topic if topic is not None and topic.meta.epoch == meta.epoch else None

    def _intern(self, version: SchemaVersion, subject: str, number: int) -> int:
        """The global id of ``version``'s identity (a new one if it has none),
        now used by ``subject``'s version ``number``."""
        assert version.identity is not None, "a version written needs its identity"
        schema_id = self._ids.setdefault(version.identity, len(self._ids) + 1)
        uses = self._uses.setdefault(schema_id, set())
        if not uses:
            self._docs[schema_id] = (
                version.identity.schema_type,
                version.document,
                version.references,
            )
        uses.add((subject, number))
        return schema_id

    def _drop_use(self, version: SchemaVersion, subject: str) -> None:
        uses = self._uses.get(version.schema_id)
        if uses is not None:
            uses.discard((subject, version.version))

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
        meta = replace(meta, parent="", fanout_delay_ms=0, children=())
        with self._lock:
            if meta.name in self._topics:
                return SchemaWriteResult(Status.EXISTS)
            if self._value_subject_taken(meta.name):
                return SchemaWriteResult(Status.SUBJECT_EXISTS)
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
            schema_id = 0
            if schema is not None:
                schema_id = self._intern(schema, f"{meta.name}-value", 1)
                topic.schemas[1] = replace(
                    schema, version=1, schema_id=schema_id, identity=schema.identity
                )
            self._topics[meta.name] = topic
            self._cluster_bytes += size
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return SchemaWriteResult(
                Status.OK,
                stored.schema_version,
                size,
                self._cluster_bytes,
                schema_id=schema_id,
            )

    def _value_subject_taken(self, topic: str) -> bool:
        subject = self._subjects.get(f"{topic}-value")
        return subject is not None and bool(subject.versions)

    def create_child(
        self,
        meta: TopicMeta,
        parent: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        with self._lock:
            if meta.name in self._topics:
                return SchemaWriteResult(Status.EXISTS)
            if self._value_subject_taken(meta.name):
                return SchemaWriteResult(Status.SUBJECT_EXISTS)
            above = self._live(parent)
            if above is None:
                return SchemaWriteResult(Status.NO_TOPIC, topic=parent.name)
            refusal = (
                self._parent_refusal(above)
                or self._room_refusal(above, delay_ms, max_children)
                or self._stale_schema((above, parent))
                or self._stale_mode(above, parent)
                or self._adoption_refusal(above, limits)
            )
            if refusal is not None:
                return refusal
            created = replace(
                meta,
                schema_version=0,
                schema_high_cost=False,
                schema_bytes=0,
                parent="",
                fanout_delay_ms=0,
                children=(),
            )
            topic = _Topic(created, [_Partition() for _ in range(meta.partitions)])
            self._topics[meta.name] = topic
            return self._link(above, topic, delay_ms)

    @staticmethod
    def _parent_refusal(parent: _Topic) -> SchemaWriteResult | None:
        if parent.meta.parent:
            return SchemaWriteResult(Status.PARENT_IS_CHILD)
        return None

    @staticmethod
    def _room_refusal(
        parent: _Topic, delay_ms: int, max_children: int
    ) -> SchemaWriteResult | None:
        if len(parent.meta.children) >= max_children:
            return SchemaWriteResult(Status.TOO_MANY_CHILDREN)
        retention = parent.meta.retention_ms
        if retention and retention < delay_ms + RETENTION_MARGIN_MS:
            return SchemaWriteResult(Status.RETENTION_TOO_SHORT)
        return None

    @staticmethod
    def _stale_schema(*pairs: tuple[_Topic, TopicMeta]) -> SchemaWriteResult | None:
        for topic, known in pairs:
            if topic.meta.schema_version != known.schema_version:
                return SchemaWriteResult(Status.STALE_SCHEMA)
        return None

    @staticmethod
    def _stale_mode(parent: _Topic, known: TopicMeta) -> SchemaWriteResult | None:
        if parent.meta.compatibility != known.compatibility:
            return SchemaWriteResult(Status.STALE_SCHEMA)
        return None

    def _adoption_refusal(
        self, parent: _Topic, limits: SchemaLimits
    ) -> SchemaWriteResult | None:
        size = parent.meta.schema_bytes
        if not size:
            return None  # nothing to adopt
        if size > limits.topic_bytes:
            return SchemaWriteResult(
                Status.TOPIC_BUDGET, 0, size, self._cluster_bytes, parent.meta.name
            )
        if self._cluster_bytes + size > limits.cluster_bytes:
            return SchemaWriteResult(
                Status.CLUSTER_BUDGET, cluster_bytes=self._cluster_bytes
            )
        return None

    def _link(self, parent: _Topic, child: _Topic, delay_ms: int) -> SchemaWriteResult:
        """Attach ``child``, adopting the parent's history if it has none."""
        if not child.meta.schema_version and parent.meta.schema_version:
            child.schemas = dict(parent.schemas)
            for version in child.schemas.values():
                if version.schema_id:
                    self._uses[version.schema_id].add(
                        (f"{child.meta.name}-value", version.version)
                    )
            child.meta = replace(
                child.meta,
                schema_version=parent.meta.schema_version,
                schema_high_cost=parent.meta.schema_high_cost,
                schema_bytes=parent.meta.schema_bytes,
            )
            self._cluster_bytes += parent.meta.schema_bytes
        child.meta = replace(
            child.meta,
            parent=parent.meta.name,
            fanout_delay_ms=delay_ms,
            **_family(parent.meta),
        )
        listed = Child(
            child.meta.name, child.meta.epoch, child.meta.partitions, delay_ms
        )
        parent.meta = replace(parent.meta, children=(*parent.meta.children, listed))
        self._publish(Event.TOPIC_CHANGED, child.meta.name)
        self._publish(Event.TOPIC_CHANGED, parent.meta.name)
        return SchemaWriteResult(
            Status.OK,
            child.meta.schema_version,
            child.meta.schema_bytes,
            self._cluster_bytes,
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

    def topic_owners(self, names: Sequence[str]) -> list[str | None]:
        return [meta.owner if meta else None for meta in self.get_topics(names)]

    def alter_topic(self, meta: TopicMeta, changes: TopicChanges) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            mode = changes.compatibility
            if mode is not None and topic.meta.parent:
                return Status.ATTACHED
            if mode is not None and topic.meta.children != meta.children:
                return Status.STALE_CHILDREN
            if _breaks_margin(topic.meta, changes):
                return Status.RETENTION_TOO_SHORT
            topic.meta = replace(topic.meta, **dict(changes.items()))
            self._publish(Event.TOPIC_CHANGED, meta.name)
            if mode is not None:
                self._follow(topic, mode)
            return Status.OK

    def _follow(self, parent: _Topic, mode: str) -> None:
        """Give every child of ``parent`` its new compatibility mode."""
        for listed in parent.meta.children:
            child = self._topics[listed.name]
            child.meta = replace(child.meta, compatibility=mode)
            self._publish(Event.TOPIC_CHANGED, listed.name)

    def delete_topic(self, meta: TopicMeta) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            if (topic.meta.parent, topic.meta.children) != (meta.parent, meta.children):
                return Status.STALE_CHILDREN
            if meta.parent:
                self._unlink(self._topics[meta.parent], topic)
            for child in meta.children:
                self._unlink(topic, self._topics[child.name])
            self._cluster_bytes -= topic.meta.schema_bytes
            for version in topic.schemas.values():
                self._drop_use(version, f"{meta.name}-value")
            del self._topics[meta.name]
            self._publish(Event.TOPIC_CHANGED, meta.name)
            return Status.OK

    def _unlink(self, parent: _Topic, child: _Topic) -> None:
        parent.meta = replace(
            parent.meta,
            children=tuple(
                c for c in parent.meta.children if c.name != child.meta.name
            ),
        )
        child.meta = replace(child.meta, parent="", fanout_delay_ms=0)
        self._publish(Event.TOPIC_CHANGED, parent.meta.name)
        self._publish(Event.TOPIC_CHANGED, child.meta.name)

    def partition_stats(self, meta: TopicMeta, *, now_ms: int) -> list[PartitionStats]:
        with self._lock:
            topic = self._topics.get(meta.name)
            parts = topic.partitions if topic else [_Partition()] * meta.partitions
            stats = []
            for i, p in enumerate(parts):
                oldest = p.oldest  # only a write trims: leave out what it would
                while oldest < p.next and not _kept(
                    p.log.get(oldest), meta.retention_ms, now_ms
                ):
                    oldest += 1
                held = sum(offset >= oldest for offset in p.leases)
                stats.append(PartitionStats(i, oldest, p.next, held))
            return stats

    def topic_stats(
        self, metas: Sequence[TopicMeta], *, now_ms: int
    ) -> list[TopicStats]:
        with self._lock:
            return [
                self._stats(self._topics.get(meta.name), meta.retention_ms, now_ms)
                for meta in metas
            ]

    @staticmethod
    def _stats(topic: _Topic | None, retention_ms: int, now_ms: int) -> TopicStats:
        # Only a write trims: the positions a trim at now_ms would leave.
        parts = []
        for p in topic.partitions if topic else []:
            p = replace(
                p,
                log=dict(p.log),
                leases=dict(p.leases),
                nonces=dict(p.nonces),
                acked=set(p.acked),
            )
            p.trim(retention_ms, now_ms, budget=p.next)
            parts.append(p)
        unacked = [
            p.log[p.floor].timestamp
            for p in parts
            if p.floor < p.next and p.floor in p.log
        ]
        return TopicStats(
            produced=sum(p.next for p in parts),
            delivered=sum(p.cursor for p in parts),
            acked=sum(p.floor + len(p.acked) for p in parts),
            backlog=sum(p.next - p.cursor for p in parts),
            in_flight=sum(len(p.leases) for p in parts),
            oldest_unacked_ms=min(unacked, default=None),
        )

    # -- fan-out -------------------------------------------------------------

    def attach_child(
        self,
        parent: TopicMeta,
        child: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        with self._lock:
            above, below = self._live(parent), self._live(child)
            if above is None:
                return SchemaWriteResult(Status.NO_TOPIC, topic=parent.name)
            if below is None:
                return SchemaWriteResult(Status.NO_TOPIC, topic=child.name)
            refusal = self._parent_refusal(above)
            if refusal is not None:
                return refusal
            if below.meta.children:
                return SchemaWriteResult(Status.CHILD_IS_PARENT)
            if below.meta.parent:
                return SchemaWriteResult(Status.ATTACHED, topic=below.meta.parent)
            refusal = self._room_refusal(above, delay_ms, max_children)
            refusal = refusal or self._stale_schema((above, parent), (below, child))
            refusal = refusal or self._stale_mode(above, parent)
            if refusal is not None:
                return refusal
            versions = below.meta.schema_version
            if versions and versions != above.meta.schema_version:
                return SchemaWriteResult(Status.SCHEMA_MISMATCH)
            if not versions:
                refusal = self._adoption_refusal(above, limits)
                if refusal is not None:
                    return refusal
            return self._link(above, below, delay_ms)

    def detach_child(self, parent: TopicMeta, child: str) -> Status:
        with self._lock:
            above = self._live(parent)
            if above is None:
                return Status.NO_TOPIC
            if child not in {c.name for c in above.meta.children}:
                return Status.NOT_CHILD
            self._unlink(above, self._topics[child])
            return Status.OK

    def count_not_due(self, metas: Sequence[TopicMeta], *, now_ms: int) -> list[int]:
        with self._lock:
            counts = []
            for meta in metas:
                topic = self._topics.get(meta.name)
                parts = topic.partitions if topic else []
                counts.append(
                    sum(
                        1 for p in parts for m in p.log.values() if m.timestamp > now_ms
                    )
                )
            return counts

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
            if topic.meta.parent:
                return SchemaWriteResult(Status.ATTACHED, topic=topic.meta.parent)
            if topic.meta.children != meta.children:
                return SchemaWriteResult(Status.STALE_CHILDREN)
            current = topic.meta.schema_version
            if (current, topic.meta.compatibility) != (
                expected_current,
                meta.compatibility,
            ):
                return SchemaWriteResult(Status.BASE_MISMATCH, version=current)
            if current >= limits.max_versions:
                return SchemaWriteResult(Status.TOO_MANY_VERSIONS, version=current)
            size = len(version.document)
            children = [self._topics[c.name] for c in meta.children]
            for each in (topic, *children):
                if each.meta.schema_bytes + size > limits.topic_bytes:
                    return SchemaWriteResult(
                        Status.TOPIC_BUDGET,
                        0,
                        each.meta.schema_bytes,
                        self._cluster_bytes,
                        "" if each is topic else each.meta.name,
                    )
            added = size * (1 + len(children))
            if self._cluster_bytes + added > limits.cluster_bytes:
                return SchemaWriteResult(
                    Status.CLUSTER_BUDGET,
                    0,
                    topic.meta.schema_bytes,
                    self._cluster_bytes,
                )
            changes = changes or TopicChanges()
            if _breaks_margin(topic.meta, changes):
                return SchemaWriteResult(Status.RETENTION_TOO_SHORT)
            number = current + 1
            schema_id = 0
            for each in (topic, *children):
                schema_id = self._intern(version, f"{each.meta.name}-value", number)
                each.schemas[number] = replace(
                    version, version=number, schema_id=schema_id
                )
                each.meta = replace(
                    each.meta,
                    schema_version=number,
                    schema_high_cost=version.high_cost,
                    schema_bytes=each.meta.schema_bytes + size,
                )
                self._publish(Event.TOPIC_CHANGED, each.meta.name)
            topic.meta = replace(topic.meta, **dict(changes.items()))
            family = {
                name: value for name, value in changes.items() if name in FAMILY_FIELDS
            }
            for child in children:
                child.meta = replace(child.meta, **family)
            self._cluster_bytes += added
            return SchemaWriteResult(
                Status.OK,
                number,
                topic.meta.schema_bytes,
                self._cluster_bytes,
                schema_id=schema_id,
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

    def get_schemas(self, name: str) -> list[SchemaVersion]:
        with self._lock:
            topic = self._topics.get(name)
            schemas = topic.schemas if topic else {}
            return [schemas[v] for v in sorted(schemas)]

    # -- global schema ids and registry subjects ------------------------------

    def assign_schema_ids(
        self, meta: TopicMeta, versions: Sequence[SchemaVersion]
    ) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            for given in versions:
                stored = topic.schemas.get(given.version)
                if stored is not None and not stored.schema_id:
                    schema_id = self._intern(
                        replace(stored, identity=given.identity),
                        f"{meta.name}-value",
                        given.version,
                    )
                    topic.schemas[given.version] = replace(
                        stored, schema_id=schema_id, identity=given.identity
                    )
            return Status.OK

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        with self._lock:
            if schema_id not in self._uses:
                return None
            schema_type, document, references = self._docs[schema_id]
            uses = tuple(sorted(self._uses[schema_id]))
            return StoredSchema(schema_id, schema_type, document, references, uses)

    def schema_id_of(self, identity: SchemaIdentity) -> int:
        with self._lock:
            return self._ids.get(identity, 0)

    def get_subject(self, name: str) -> Subject | None:
        with self._lock:
            found = self._subjects.get(name)
            if found is None:
                return None
            versions = tuple(found.versions[v] for v in sorted(found.versions))
            return Subject(name, found.compatibility, versions, found.latest)

    def list_subjects(self, *, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(
                name
                for name, subject in self._subjects.items()
                if subject.versions and name.startswith(prefix)
            )

    def register_subject_version(
        self,
        name: str,
        version: SchemaVersion,
        *,
        expected_latest: int,
        topic: str,
        limits: SchemaLimits,
    ) -> SchemaWriteResult:
        with self._lock:
            if topic and topic in self._topics:
                return SchemaWriteResult(Status.EXISTS)
            subject = self._subjects.get(name) or _Subject()
            if subject.latest != expected_latest:
                return SchemaWriteResult(Status.BASE_MISMATCH, version=subject.latest)
            if len(subject.versions) >= limits.max_versions:
                return SchemaWriteResult(
                    Status.TOO_MANY_VERSIONS, version=subject.latest
                )
            size, stored = len(version.document), subject.stored_bytes
            if stored + size > limits.topic_bytes:
                return SchemaWriteResult(
                    Status.TOPIC_BUDGET, 0, stored, self._cluster_bytes
                )
            if self._cluster_bytes + size > limits.cluster_bytes:
                return SchemaWriteResult(
                    Status.CLUSTER_BUDGET, 0, stored, self._cluster_bytes
                )
            number = subject.latest + 1
            schema_id = self._intern(version, name, number)
            subject.versions[number] = replace(
                version, version=number, schema_id=schema_id, deleted=False
            )
            subject.latest = number
            self._subjects[name] = subject
            self._cluster_bytes += size
            return SchemaWriteResult(
                Status.OK,
                number,
                stored + size,
                self._cluster_bytes,
                schema_id=schema_id,
            )

    def delete_subject_versions(
        self, name: str, versions: Sequence[int], *, permanent: bool
    ) -> Status:
        with self._lock:
            subject = self._subjects.get(name)
            if subject is None or any(v not in subject.versions for v in versions):
                return Status.NO_SUBJECT
            if permanent and any(not subject.versions[v].deleted for v in versions):
                return Status.NOT_DELETED
            for number in set(versions):
                stored = subject.versions[number]
                if permanent:
                    self._drop_use(stored, name)
                    self._cluster_bytes -= len(stored.document)
                    del subject.versions[number]
                else:
                    subject.versions[number] = replace(stored, deleted=True)
            if not subject.versions:
                del self._subjects[name]
            return Status.OK

    def set_subject_compatibility(self, name: str, mode: str) -> Status:
        with self._lock:
            subject = self._subjects.setdefault(name, _Subject())
            subject.compatibility = mode
            if not mode and not subject.versions:
                del self._subjects[name]
            return Status.OK

    def registry_config(self) -> str:
        with self._lock:
            return self._registry_mode

    def set_registry_config(self, mode: str) -> Status:
        with self._lock:
            self._registry_mode = mode
            return Status.OK

    # -- messages ------------------------------------------------------------

    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        *,
        schema_version: int,
        now_ms: int,
        idempotency: Sequence[IdempotencyKey] = (),
        limits: IdempotencyLimits = DEFAULT_IDEMPOTENCY,
    ) -> AppendResult:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return AppendResult(Status.NO_TOPIC)
            skip: set[int] = set()
            fresh = []
            for index, guard in enumerate(idempotency):
                seen = topic.keys.remembered(guard.key, limits, now_ms)
                if seen is None:
                    fresh.append(guard)
                elif seen == guard.digest:
                    skip.update(range(guard.start, guard.stop))
                else:
                    return AppendResult(Status.KEY_REUSED, key_index=index)
            kept = [e for i, e in enumerate(entries) if i not in skip]
            if kept:
                if topic.meta.fanout_delay_ms:
                    return AppendResult(Status.DELAY_CHILD)
                if topic.meta.schema_version != schema_version:
                    return AppendResult(
                        Status.STALE_SCHEMA, schema_version=topic.meta.schema_version
                    )
                if topic.meta.children != meta.children:
                    return AppendResult(Status.STALE_CHILDREN)
                self._store(topic, meta.children, kept, now_ms)
            budget = 2 * len(idempotency) + 100  # as many as the scripts drop
            evicted = topic.keys.remember(fresh, limits, now_ms, budget)
            return AppendResult(
                Status.OK, count=len(kept), repeated=len(skip), evicted=evicted
            )

    def _store(
        self,
        topic: _Topic,
        children: Sequence[Child],
        entries: Sequence[Entry],
        now_ms: int,
    ) -> None:
        budget = 2 * len(entries) + 100
        stamps = []
        touched = {}
        for entry in entries:
            part = touched[entry.partition] = topic.partitions[entry.partition]
            message = Message(
                entry.partition, 0, 0, entry.key, entry.payload, entry.kind
            )
            stamps.append(part.put(message, now_ms))
        for part in touched.values():
            part.trim(topic.meta.retention_ms, now_ms, budget)
        if topic.waited(now_ms):
            self._publish(Event.MESSAGES, topic.meta.name)
        for listed in children:
            child = self._topics[listed.name]
            touched = {}
            for entry, stamp in zip(entries, stamps, strict=True):
                route = entry.partition if entry.route is None else entry.route
                index = route % listed.partitions
                part = touched[index] = child.partitions[index]
                message = Message(index, 0, 0, entry.key, entry.payload, entry.kind)
                part.put(message, stamp + listed.delay_ms)
            for part in touched.values():
                part.trim(child.meta.retention_ms, now_ms, budget)
            if child.waited(now_ms):
                self._publish(Event.MESSAGES, listed.name)

    def reserve(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonce: str,
        now_ms: int,
    ) -> ReserveResult:
        batch = self.reserve_batch(meta, partitions, nonces=[nonce], now_ms=now_ms)
        message = batch.messages[0] if batch.messages else None
        return ReserveResult(
            batch.status, message, batch.next_lease_expiry_ms, batch.next_due_ms
        )

    def reserve_batch(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonces: Sequence[str],
        now_ms: int,
        max_bytes: int | None = None,
    ) -> BatchReserveResult:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return BatchReserveResult(Status.NO_TOPIC)
            stored = topic.meta
            earliest = due = None
            taken: list[Message] = []
            spent = 0
            full = False
            for index in partitions:
                part = topic.partitions[index]
                part.trim(stored.retention_ms, now_ms, TRIM_BUDGET)
                # One message at a time, as that many single reserves would.
                while len(taken) < len(nonces):
                    offset = part.candidate(stored, now_ms)
                    if offset is None:
                        break
                    message = part.log[offset]
                    spent += len(message.key) + len(message.payload)
                    if taken and max_bytes is not None and spent > max_bytes:
                        full = True  # left where it is, offered next
                        break
                    if offset == part.cursor:
                        part.cursor += 1
                    nonce = nonces[len(taken)]
                    part.leases[offset] = now_ms + stored.visibility_timeout_ms
                    part.nonces[offset] = nonce
                    taken.append(message._replace(nonce=nonce))
                if len(taken) == len(nonces) or full:
                    break
                if taken:
                    continue
                if part.leases:
                    first = min(part.leases.values())
                    earliest = first if earliest is None else min(earliest, first)
                held = part.due(now_ms)
                if (
                    held is not None
                    and part.cursor < part.next
                    and len(part.leases) < stored.max_in_flight_per_partition
                ):
                    due = held if due is None else min(due, held)
            if taken:
                return BatchReserveResult(Status.OK, tuple(taken))
            return BatchReserveResult(Status.OK, (), earliest, due)

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
        lease = Lease(partition, offset, nonce)
        return self.settle_batch(meta, [lease], action=action, now_ms=now_ms)[0]

    def settle_batch(
        self,
        meta: TopicMeta,
        leases: Sequence[Lease],
        *,
        action: Settle,
        now_ms: int,
    ) -> list[Status]:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return [Status.NO_TOPIC] * len(leases)
            results = [self._settle(topic, lease, action, now_ms) for lease in leases]
            # Every give-back or ack (more often than the caps require, which
            # the contract allows) may let a waiting consumer reserve.
            freed = action is not Settle.EXTEND and Status.OK in results
            if freed and topic.waited(now_ms):
                self._publish(Event.MESSAGES, meta.name)
            return results

    def settle_and_reserve(
        self,
        meta: TopicMeta,
        leases: Sequence[Lease],
        *,
        action: Settle,
        partitions: Sequence[int],
        nonces: Sequence[str],
        now_ms: int,
    ) -> tuple[list[Status], BatchReserveResult]:
        settled = self.settle_batch(meta, leases, action=action, now_ms=now_ms)
        reserved = self.reserve_batch(meta, partitions, nonces=nonces, now_ms=now_ms)
        return settled, reserved

    def mark_waiting(self, meta: TopicMeta, until_ms: int) -> Status:
        with self._lock:
            topic = self._live(meta)
            if topic is None:
                return Status.NO_TOPIC
            topic.waited_until = max(topic.waited_until, until_ms)
            return Status.OK

    @staticmethod
    def _settle(topic: _Topic, lease: Lease, action: Settle, now_ms: int) -> Status:
        part = topic.partitions[lease.partition]
        offset, nonce = lease.offset, lease.nonce
        deadline = part.leases.get(offset)
        holder = part.nonces.get(offset)
        if deadline is None:
            if action is Settle.ACK and holder == nonce and part.is_acked(offset):
                return Status.REPEATED
            return Status.GONE
        if deadline <= now_ms or holder != nonce:
            return Status.GONE
        if action is Settle.EXTEND:
            part.leases[offset] = now_ms + topic.meta.visibility_timeout_ms
            return Status.OK
        if action is Settle.RELEASE:
            part.leases[offset] = 0
            del part.nonces[offset]
            return Status.OK
        cap = topic.meta.max_acked_ahead_per_partition
        if offset > part.floor and len(part.acked) >= cap:
            part.pass_expired(topic.meta.retention_ms, now_ms)
        if offset > part.floor:
            if len(part.acked) >= cap:
                return Status.ACKED_AHEAD_FULL
            part.acked.add(offset)
        elif offset == part.floor:
            part.floor += 1
            part.advance_floor()
        # Below the floor (retention passed it over): ending the lease is all.
        del part.leases[offset]  # the nonce stays: a retried ack is known by it
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
        return None if message.timestamp > now_ms else message

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


def _breaks_margin(meta: TopicMeta, changes: TopicChanges) -> bool:
    """Whether ``changes`` give a parent a retention below its children's margin."""
    retention = changes.retention_ms
    return bool(retention) and retention < meta.min_retention_ms()


_stores: dict[tuple[str, bool], MemoryStorage] = {}


def connect(url: str, config: Config) -> MemoryStorage:
    parts = urlsplit(url)
    notifications = parse_qs(parts.query).get("notifications", ["1"]) != ["0"]
    key = (parts.netloc, notifications)
    return _stores.setdefault(key, MemoryStorage(notifications=notifications))


@hookimpl
def narad_storage_backends():
    return {"memory": connect}


def _family(meta: TopicMeta) -> dict[str, str]:
    """The fields a child copies from its parent ``meta``."""
    return {name: getattr(meta, name) for name in FAMILY_FIELDS}
