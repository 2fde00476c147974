"""Narad's state in a Redis-compatible server.

Key layout (``{...}`` is the cluster hash tag: one topic lives on one shard)::

    narad:topics                      zset   topic names, for keyset listing
    narad:schema_bytes                string bytes of every stored schema
    narad:{<t>}:meta                  hash   the topic record
    narad:{<t>}:schemas               hash   version -> document, hc:<version>
    narad:{<t>}:p<i>                  hash   next, oldest, cursor, floor, last_ts
    narad:{<t>}:p<i>:log              hash   offset -> "<ts>,<kind><keylen>:<key><body>"
    narad:{<t>}:p<i>:lease            zset   offsets in flight, scored by deadline
    narad:{<t>}:p<i>:nonce            hash   offset -> nonce of its last reservation
    narad:{<t>}:p<i>:acked            zset   offsets acked above the floor
    narad:{<t>}:idem                  hash   idempotency key -> digest
    narad:{<t>}:idem:at               zset   idempotency keys, scored by when stored
    narad:{<t>}:idem:bytes            string bytes the remembered keys count

``cursor`` is the next offset never delivered, ``floor`` the lowest offset not
yet acked. An acked message keeps its nonce (and leaves the lease set): that
is how a retried ack is recognised, until retention drops the message. Every
write is one script from ``scripts/``; reads that need no atomicity are plain
pipelined commands.

Notifications travel on one pub/sub channel, ``narad:events``, published by
the scripts themselves (so an event is never lost between a write and its
announcement): each message is ``<event> <topic>``, the event being a
:class:`narad.storage.Event` value.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis
from redis.exceptions import MovedError

from narad.errors import StorageError
from narad.storage import DEFAULT_IDEMPOTENCY
from narad.storage import AppendResult
from narad.storage import BatchReserveResult
from narad.storage import Capabilities
from narad.storage import Entry
from narad.storage import Event
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Lease
from narad.storage import Message
from narad.storage import Notification
from narad.storage import Page
from narad.storage import PartitionStats
from narad.storage import PayloadKind
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
from narad_redis.client import RetryingClient

_INT_FIELDS = (
    "partitions",
    "retention_ms",
    "visibility_timeout_ms",
    "max_in_flight_per_partition",
    "max_acked_ahead_per_partition",
    "created_ms",
    "schema_version",
    "schema_bytes",
)


class RedisStorage:
    """The reference :class:`narad.storage.Storage` over redis-py."""

    TOPICS = "narad:topics"
    SCHEMA_BYTES = "narad:schema_bytes"
    EVENTS = "narad:events"
    capabilities = Capabilities(notifications=True)

    def __init__(self, client: RetryingClient) -> None:
        self.client = client
        folder = resources.files("narad_redis") / "scripts"
        self.scripts = {
            item.name.removesuffix(".lua"): client.redis.register_script(
                item.read_text(encoding="utf-8")
            )
            for item in folder.iterdir()
            if item.name.endswith(".lua")
        }

    # -- keys ---------------------------------------------------------------

    @staticmethod
    def _topic(name: str) -> str:
        return f"narad:{{{name}}}"

    def _partition_keys(self, name: str, index: int) -> list[str]:
        base = f"{self._topic(name)}:p{index}"
        return [base, base + ":log", base + ":lease", base + ":nonce", base + ":acked"]

    def _event(self, event: Event, topic: str) -> list[str]:
        """The channel and message a script publishes ``event`` with."""
        return [self.EVENTS, f"{event.value} {topic}"]

    def _run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        fn = self.scripts[script]
        return self.client.call(lambda r: fn(keys=keys, args=args, client=r))

    # -- health -------------------------------------------------------------

    def _own_connection(self) -> redis.Redis:
        """A client on a connection of its own, outside the bounded pool, to
        the server the pool currently talks to."""
        pool = self.client.redis.connection_pool
        return redis.Redis(
            connection_pool=redis.ConnectionPool(
                connection_class=pool.connection_class, **pool.connection_kwargs
            )
        )

    def ping(self) -> bool:
        # Readiness answers even while every pooled connection is busy.
        probe = self._own_connection()
        try:
            return bool(probe.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            probe.connection_pool.disconnect()

    def server_status(self) -> ServerStatus | None:
        # One round trip, tried once: callers poll it and must not hang on
        # retries. INFO works for a user without CONFIG; RedisRaft answers
        # INFO raft, other servers an empty section.
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for section in ("memory", "persistence", "raft"):
                pipe.info(section)
            pipe.config_get("appendfsync")
            return pipe.execute(raise_on_error=False)

        try:
            memory, persistence, raft, fsync = read(self.client.redis)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return None
        if isinstance(memory, Exception):
            return ServerStatus(False, f"INFO refused: {memory}", 0, 0)
        used, limit = int(memory["used_memory"]), int(memory["maxmemory"])
        durable, detail = _durability(memory, persistence, raft, fsync)
        return ServerStatus(durable, detail, used, limit)

    def close(self) -> None:
        self.client.close()

    # -- topics -------------------------------------------------------------

    def create_topic(
        self,
        meta: TopicMeta,
        schema: SchemaVersion | None = None,
        *,
        limits: SchemaLimits | None = None,
    ) -> SchemaWriteResult:
        if schema is not None and limits is None:
            raise ValueError("a topic created with a schema needs its limits")
        limits = limits or SchemaLimits(0, 0, 0)
        topic = self._topic(meta.name)
        fields: list[Any] = ["name", meta.name, "epoch", meta.epoch]
        for name in _INT_FIELDS[:-2]:
            fields += [name, getattr(meta, name)]
        reply = self._run(
            "create_topic",
            [self.TOPICS, self.SCHEMA_BYTES, topic + ":meta", topic + ":schemas"],
            [
                meta.name,
                schema.document if schema else b"",
                int(bool(schema and schema.high_cost)),
                limits.topic_bytes,
                limits.cluster_bytes,
                *self._event(Event.TOPIC_CHANGED, meta.name),
                *fields,
            ],
        )
        return _schema_result(reply)

    def get_topic(self, name: str) -> TopicMeta | None:
        return self.get_topics([name])[0]

    def get_topics(self, names: Sequence[str]) -> list[TopicMeta | None]:
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self._topic(name) + ":meta")
            return pipe.execute()

        return [_topic_meta(raw) for raw in self.client.call(read)]

    def list_topics(self, *, after: str, limit: int) -> Page:
        low = "(" + after if after else "-"
        names = self.client.call(
            lambda r: r.zrangebylex(self.TOPICS, low, "+", start=0, num=limit + 1)
        )
        names = [n.decode() for n in names]
        more = len(names) > limit
        names = names[:limit]
        return Page(names, names[-1] if more else None)

    def alter_topic(self, meta: TopicMeta, changes: TopicChanges) -> Status:
        args: list[Any] = [meta.epoch, *self._event(Event.TOPIC_CHANGED, meta.name)]
        for field, value in changes.items():
            args += [field, value]
        reply = self._run("alter_topic", [self._topic(meta.name) + ":meta"], args)
        return Status(reply.decode())

    def _idempotency_keys(self, name: str) -> list[str]:
        idem = self._topic(name) + ":idem"
        return [idem, idem + ":at", idem + ":bytes"]

    def delete_topic(self, meta: TopicMeta) -> Status:
        topic = self._topic(meta.name)
        keys = [self.TOPICS, self.SCHEMA_BYTES, topic + ":meta", topic + ":schemas"]
        keys += self._idempotency_keys(meta.name)
        for index in range(meta.partitions):
            keys += self._partition_keys(meta.name, index)
        reply = self._run(
            "delete_topic",
            keys,
            [meta.name, meta.epoch, *self._event(Event.TOPIC_CHANGED, meta.name)],
        )
        return Status(reply.decode())

    def partition_stats(self, meta: TopicMeta, *, now_ms: int) -> list[PartitionStats]:
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for index in range(meta.partitions):
                state, _, lease, _, _ = self._partition_keys(meta.name, index)
                pipe.hmget(state, "next", "oldest")
                pipe.zcard(lease)
            return pipe.execute()

        replies = self.client.call(read)
        stats = []
        for index in range(meta.partitions):
            (nxt, oldest), in_flight = replies[2 * index], replies[2 * index + 1]
            stats.append(
                PartitionStats(index, int(oldest or 0), int(nxt or 0), in_flight)
            )
        return stats

    # -- schemas ------------------------------------------------------------

    def append_schema(
        self,
        meta: TopicMeta,
        version: SchemaVersion,
        *,
        expected_current: int,
        limits: SchemaLimits,
        changes: TopicChanges | None = None,
    ) -> SchemaWriteResult:
        topic = self._topic(meta.name)
        args: list[Any] = [
            meta.epoch,
            expected_current,
            version.document,
            int(version.high_cost),
            limits.max_versions,
            limits.topic_bytes,
            limits.cluster_bytes,
            *self._event(Event.TOPIC_CHANGED, meta.name),
        ]
        for field, value in (changes or TopicChanges()).items():
            args += [field, value]
        reply = self._run(
            "alter_topic_schema",
            [topic + ":meta", topic + ":schemas", self.SCHEMA_BYTES],
            args,
        )
        return _schema_result(reply)

    def get_schema(self, name: str, version: int) -> SchemaVersion | None:
        doc, high_cost = self.client.call(
            lambda r: r.hmget(self._topic(name) + ":schemas", version, f"hc:{version}")
        )
        if doc is None:
            return None
        return SchemaVersion(version, doc, high_cost == b"1")

    def schema_sizes(self, name: str) -> list[SchemaSize]:
        key = self._topic(name) + ":schemas"
        fields = self.client.call(lambda r: r.hkeys(key))
        versions = sorted(int(f) for f in fields if not f.startswith(b"hc:"))

        def sizes(r: redis.Redis) -> list[int]:
            pipe = r.pipeline(transaction=False)
            for v in versions:
                pipe.hstrlen(key, v)
            return pipe.execute()

        return [
            SchemaSize(version, size)
            for version, size in zip(versions, self.client.call(sizes), strict=True)
        ]

    # -- messages -----------------------------------------------------------

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
        keys = [
            self._topic(meta.name) + ":meta",
            *self._idempotency_keys(meta.name),
        ]
        args: list[Any] = [
            meta.epoch,
            schema_version,
            now_ms,
            *self._event(Event.MESSAGES, meta.name),
            limits.window_ms,
            limits.max_keys,
            limits.max_bytes,
            limits.KEY_OVERHEAD,
            len(idempotency),
        ]
        for guard in idempotency:
            args += [guard.key, guard.digest, guard.start + 1, guard.stop]
        slot_of: dict[int, int] = {}
        # The record as stored, commit time included: the script then stores
        # the argument without copying it (unless the partition's clock is
        # ahead of this node's).
        stamp = b"%d," % now_ms
        for entry in entries:
            slot = slot_of.get(entry.partition)
            if slot is None:
                slot = slot_of[entry.partition] = len(slot_of) + 1
                keys += self._partition_keys(meta.name, entry.partition)
            args.append(slot)
            args.append(
                b"%s%s%d:%s%s"
                % (
                    stamp,
                    _KIND_CODES[entry.kind],
                    len(entry.key),
                    entry.key,
                    entry.payload,
                )
            )
        reply = self._run("append", keys, args)
        status = Status(reply[0].decode())
        if status is Status.OK:
            stored, repeated, evicted = (int(x) for x in reply[1:4])
            return AppendResult(
                status, count=stored, repeated=repeated, evicted=evicted
            )
        if status is Status.STALE_SCHEMA:
            return AppendResult(status, schema_version=int(reply[1]))
        if status is Status.KEY_REUSED:
            return AppendResult(status, key_index=int(reply[1]))
        return AppendResult(status)

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
        return ReserveResult(batch.status, message, batch.next_lease_expiry_ms)

    def reserve_batch(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonces: Sequence[str],
        now_ms: int,
    ) -> BatchReserveResult:
        keys = [self._topic(meta.name) + ":meta"]
        for index in partitions:
            keys += self._partition_keys(meta.name, index)
        reply = self._run(
            "reserve",
            keys,
            [meta.epoch, now_ms, len(partitions), *partitions, *nonces],
        )
        if reply[0] == b"no_topic":
            return BatchReserveResult(Status.NO_TOPIC)
        messages = tuple(
            _message(reply[i], reply[i + 1], reply[i + 2], nonces[k])
            for k, i in enumerate(range(2, len(reply), 3))
        )
        expiry = int(reply[1])
        return BatchReserveResult(
            Status.OK, messages, expiry if expiry >= 0 and not messages else None
        )

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
        keys = [self._topic(meta.name) + ":meta"]
        args: list[Any] = [
            meta.epoch,
            action.value,
            now_ms,
            *self._event(Event.MESSAGES, meta.name),
        ]
        slot_of: dict[int, int] = {}
        for lease in leases:
            slot = slot_of.get(lease.partition)
            if slot is None:
                slot = slot_of[lease.partition] = len(slot_of) + 1
                keys += self._partition_keys(meta.name, lease.partition)
            args += [slot, lease.offset, lease.nonce]
        reply = self._run("settle", keys, args)
        if reply == [b"no_topic"]:
            return [Status.NO_TOPIC] * len(leases)
        return [_STATUSES[r] for r in reply]

    def read(
        self, meta: TopicMeta, partition: int, offset: int, *, now_ms: int
    ) -> Message | None:
        state, log, *_ = self._partition_keys(meta.name, partition)

        def fetch(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hget(state, "oldest")
            pipe.hget(log, offset)
            return pipe.execute()

        oldest, record = self.client.call(fetch)
        if record is None or offset < int(oldest or 0):
            return None
        message = _message(partition, offset, record, "")
        if meta.retention_ms and message.timestamp + meta.retention_ms <= now_ms:
            return None  # past retention; the next write trims it
        return message

    # -- notifications ------------------------------------------------------

    def notifications(self) -> Iterator[Notification | None]:
        try:
            pubsub = self._subscribe()
        except (redis.RedisError, OSError) as exc:
            raise StorageError(f"cannot subscribe to {self.EVENTS}: {exc}") from exc
        try:
            yield Notification(Event.LISTENING)
            while True:
                try:
                    message = pubsub.get_message(timeout=1.0)
                except (redis.RedisError, OSError) as exc:
                    raise StorageError(
                        f"{self.EVENTS} subscription lost: {exc}"
                    ) from exc
                if message is None:
                    yield None
                elif message["type"] == "message":
                    code, _, topic = message["data"].decode().partition(" ")
                    event = _EVENTS.get(code)
                    if event is not None:  # a newer node's event: not ours
                        yield Notification(event, topic)
        finally:
            pubsub.close()

    def _subscribe(self) -> redis.client.PubSub:
        """A subscription the server confirmed, on the node that accepts writes.

        Until the confirmation arrives a publish could be missed, so the
        stream says LISTENING only after it. A RedisRaft follower refuses
        with MOVED to the leader, where the scripts publish.
        """
        for _ in range(self.client.attempts + 1):
            # On a connection of its own: the subscription must come up even
            # while every pooled connection is busy.
            pubsub = self._own_connection().pubsub()
            try:
                pubsub.subscribe(self.EVENTS)
                if pubsub.get_message(timeout=5.0) is None:
                    raise redis.ConnectionError("no subscription confirmation in 5 s")
                return pubsub
            except MovedError as exc:
                pubsub.close()
                self.client.move_to(exc.host, exc.port)
            except BaseException:
                pubsub.close()
                raise
        raise redis.ConnectionError("MOVED on every attempt to subscribe")


def _durability(
    memory: dict[str, Any], persistence: Any, raft: Any, fsync: Any
) -> tuple[bool, str]:
    """Whether a reply means "on disk": AOF with fsync always, or a Raft commit."""
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        return False, f"maxmemory-policy is {policy}: the server may evict messages"
    if isinstance(raft, dict) and raft:
        return True, "RedisRaft: a write is answered once a majority has logged it"
    if isinstance(persistence, Exception):
        return False, f"INFO persistence refused: {persistence}"
    if persistence.get("aof_enabled") != 1:
        return False, "appendonly is off"
    if persistence.get("aof_last_write_status", "ok") != "ok":
        return False, "the last write to the append-only file failed"
    if isinstance(fsync, Exception):
        return False, (
            f"appendfsync cannot be read ({fsync}): allow Narad's user CONFIG GET "
            "(+config|get)"
        )
    policy = fsync.get("appendfsync", "unknown")
    if policy != "always":
        return False, f"appendfsync is {policy}, not always"
    return True, "appendonly yes, appendfsync always"


def _topic_meta(raw: dict[bytes, bytes]) -> TopicMeta | None:
    if not raw:
        return None
    f = {k.decode(): v.decode() for k, v in raw.items()}
    return TopicMeta(
        name=f["name"],
        epoch=f["epoch"],
        schema_high_cost=f.get("schema_high_cost") == "1",
        **{k: int(f.get(k, 0)) for k in _INT_FIELDS},
    )


_KINDS = {kind.value.encode(): kind for kind in PayloadKind}
_KIND_CODES = {kind: code for code, kind in _KINDS.items()}
_STATUSES = {status.value.encode(): status for status in Status}
_EVENTS = {event.value: event for event in Event}


def _message(partition: int, offset: int, record: bytes, nonce: str) -> Message:
    # "<ts>,<kind><key length>:<key><payload>", cut by index: one copy of
    # the payload (this runs once per message of a batch).
    comma = record.index(b",")
    colon = record.index(b":", comma + 2)
    start = colon + 1
    end = start + int(record[comma + 2 : colon])
    kind = _KINDS[record[comma + 1 : comma + 2]]
    timestamp = int(record[:comma])
    return Message(
        partition, offset, timestamp, record[start:end], record[end:], kind, nonce
    )


def _schema_result(reply: list[Any]) -> SchemaWriteResult:
    status = Status(reply[0].decode())
    numbers = [int(x) for x in reply[1:]]
    if status is Status.OK:
        return SchemaWriteResult(status, *numbers)
    if status in (Status.BASE_MISMATCH, Status.TOO_MANY_VERSIONS):
        return SchemaWriteResult(status, version=numbers[0])
    if status in (Status.TOPIC_BUDGET, Status.CLUSTER_BUDGET):
        return SchemaWriteResult(
            status, stored_bytes=numbers[0], cluster_bytes=numbers[1]
        )
    return SchemaWriteResult(status)
