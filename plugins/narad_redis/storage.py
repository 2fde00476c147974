"""Narad's state in a Redis-compatible server.

Key layout (``{...}`` is the cluster hash tag: one topic lives on one shard)::

    narad:topics                      zset   topic names, for keyset listing
    narad:schema_bytes                string bytes of every stored schema
    narad:{<t>}:meta                  hash   the topic record (with "parent",
                                             "fanout_delay_ms" on a child and
                                             "children" on a parent; one
                                             stored before modes has no
                                             "compatibility": BACKWARD; one
                                             stored before schema types no
                                             "schema_type", "encoding",
                                             "proto_message": JSON, json, "")
    narad:{<t>}:schemas               hash   version -> document; per version
                                             hc:<v> high-cost, id:<v> global
                                             schema id, fp:<v> identity,
                                             r:<v> references (a version
                                             stored before ids has no id:)
    narad:{<t>}:p<i>                  hash   next, oldest, cursor, floor, last_ts
    narad:{<t>}:p<i>:log              hash   offset -> "<ts>,<kind><keylen>:<key><body>"
    narad:{<t>}:p<i>:lease            zset   offsets in flight, scored by deadline
    narad:{<t>}:p<i>:nonce            hash   offset -> nonce of its last reservation
    narad:{<t>}:p<i>:acked            zset   offsets acked above the floor
    narad:{<t>}:idem                  hash   idempotency key -> digest
    narad:{<t>}:idem:at               zset   idempotency keys, scored by when stored
    narad:{<t>}:idem:bytes            string bytes the remembered keys count
    narad:{<t>}:waited                string until when consumers may wait (ms)
    narad:{<t>}:value:meta            hash   the standalone registry subject
                                             "<t>-value" (latest, count,
                                             schema_bytes, compatibility)
    narad:{<t>}:value:schemas         hash   its versions: as a topic's, and
                                             del:<v> when soft-deleted
    narad:{s:<subject>}:meta|schemas         any other standalone subject
    narad:{@schemas}:ids              hash   identity -> global schema id
    narad:{@schemas}:next             string the last global id assigned
    narad:{@schemas}:docs             hash   id -> document, t:<id> type,
                                             r:<id> references (while used)
    narad:{@schemas}:uses:<id>        set    "<subject>\n<version>" using it
    narad:{@schemas}:subjects         zset   standalone subjects with versions
    narad:{@schemas}:config           string the registry's default mode
    narad:{@users}                    zset   user names, for keyset listing
    narad:{@users}:admins             set    users holding admin on every topic
    narad:{@users}:u:<name>           hash   the user record

Users share the hash tag ``{@users}`` (no topic name holds ``@``), so every
user script runs on one shard and sees the admins set it must keep non-empty.

Global schema ids: every script that stores a version (create_topic,
alter_topic_schema, register_subject, assign_schema_ids) gives it its id in
the same step, the id its identity (:class:`narad.storage.SchemaIdentity`)
has or the next of ``next``; copies (create_child, attach_child) keep the
ids. Each id's ``uses`` set lists the versions holding it (a topic's subject
is ``<t>-value``); the id's document stays in ``docs`` while one does, and
the identity keeps its id for good, so an id is never reused. A standalone
subject ``<t>-value`` shares the tag of topic ``<t>``, so creating either
one refuses in one step while the other exists.

``cursor`` is the next offset never delivered, ``floor`` the lowest offset not
yet acked. An acked message keeps its nonce (and leaves the lease set): that
is how a retried ack is recognised, until retention drops the message. Every
write is one script from ``scripts/``; reads that need no atomicity are plain
pipelined commands.

A parent's ``children`` field lists its children as comma-separated
``<name>:<epoch>:<partitions>:<delay_ms>`` items (names and epochs hold no
``:`` or ``,``). A script that acts on the children is handed the field as the
caller read it, and the children's keys in KEYS; it refuses
(``stale_children``) when the stored field differs, so the caller reads again
and retries and no attach or detach is ever half-seen.

Fan-out and sharding: an append to a parent writes its children's keys in the
same script, and attach, detach and delete touch both topics' records; the
topic index, the schema byte budget and the global schema ids share scripts
with topic keys. On a single Redis or Valkey server, or a RedisRaft cluster
(one Raft log, every node holding every key), any keys can share a script.
On a sharded Valkey/Redis Cluster (``redis+cluster://``),
:class:`narad_redis.sharded.ClusterStorage` keeps each family in its
parent's slot, puts the global keys under ``{@schemas}`` and runs the writes
that touch both in ordered steps.

Notifications travel on pub/sub channels, published by the scripts
themselves (so an event is never lost between a write and its announcement):
``narad:events`` for topics and messages, ``narad:events:users`` for users,
so a worker that only watches users is not sent an event per message. Each
message is ``<event> <topic or user>``, the event being a
:class:`narad.storage.Event` value, or ``<event> <topic> <topic> ...`` for
several topics at once (an append to a parent and its children: one message
however many children, not one per child to every subscriber). ``messages``
is published only while a consumer may wait: each topic's ``waited`` mark
(:meth:`RedisStorage.mark_waiting`) is read by the scripts that append or
give back, one GET per topic (and per child for a parent's copies), and
nothing is published when every mark ran out.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis

from narad import metrics
from narad.errors import StorageError
from narad.storage import DEFAULT_COMPATIBILITY
from narad.storage import DEFAULT_ENCODING
from narad.storage import DEFAULT_FRAMING
from narad.storage import DEFAULT_IDEMPOTENCY
from narad.storage import DEFAULT_SCHEMA_TYPE
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
from narad.storage import PayloadKind
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
from narad_redis.client import ReplyLost
from narad_redis.client import RetryingClient
from narad_redis.client import detached
from narad_redis.client import run_script
from narad_redis.client import run_scripts

#: Scripts the client may always send again after the link failed mid-call:
#: a second reserve leases other messages, and those the first run leased
#: come back when their leases lapse; a second wait mark sets the same
#: max(mark, until) again. Others are replayable per call: an
#: append whose every entry is guarded by an idempotency key (the rerun finds
#: the keys and stores nothing), an ack (a rerun answers "repeated") or an
#: extend (it extends from now again). The rest could apply a write twice
#: (an unguarded append, a schema change) or answer as though the first run
#: had not happened (a give-back: "lapsed"): the client raises
#: StorageUncertain instead (503, "the write may have been applied").
REPLAYABLE = frozenset({"reserve", "mark_waiting"})

#: Partitions whose positions one script call reads at most (a call of
#: :meth:`RedisStorage.topic_stats`): the server runs each call alone.
STATS_PARTITIONS_PER_CALL = 512

#: Silence on the subscription before it is checked with a PING, and how long
#: the answer may take before the subscription counts as lost.
KEEPALIVE_S = 1.0
PING_WAIT_S = 5.0
#: Longest wait between tries to subscribe (while a new leader is elected).
SUBSCRIBE_BACKOFF_MAX_S = 0.2

# The settings a create writes; the scripts derive the other fields.
_SETTINGS = (
    "partitions",
    "retention_ms",
    "visibility_timeout_ms",
    "max_in_flight_per_partition",
    "max_acked_ahead_per_partition",
    "created_ms",
)
_INT_FIELDS = (*_SETTINGS, "schema_version", "schema_bytes", "fanout_delay_ms")


class RedisStorage:
    """The reference :class:`narad.storage.Storage` over redis-py."""

    TOPICS = "narad:topics"
    SCHEMA_BYTES = "narad:schema_bytes"
    USERS = "narad:{@users}"
    ADMINS = "narad:{@users}:admins"
    SCHEMA_IDS = "narad:{@schemas}:ids"
    SCHEMA_NEXT = "narad:{@schemas}:next"
    SCHEMA_DOCS = "narad:{@schemas}:docs"
    SCHEMA_USES = "narad:{@schemas}:uses:"
    SUBJECTS = "narad:{@schemas}:subjects"
    REGISTRY_CONFIG = "narad:{@schemas}:config"
    EVENTS = "narad:events"
    USER_EVENTS = "narad:events:users"
    capabilities = Capabilities(notifications=True, topic_stats=True)

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
        for name in self.scripts:  # every series from the start
            metrics.STORAGE_SCRIPT_SECONDS.labels(name)

    # -- keys ---------------------------------------------------------------

    @staticmethod
    def _topic(name: str) -> str:
        return f"narad:{{{name}}}"

    def _partition_keys(self, name: str, index: int) -> list[str]:
        base = f"{self._topic(name)}:p{index}"
        return [base, base + ":log", base + ":lease", base + ":nonce", base + ":acked"]

    def _subject(self, name: str) -> str:
        """The key prefix of a standalone subject: ``<t>-value`` shares the
        tag of topic ``<t>`` (so their creations exclude each other)."""
        topic = _value_topic(name)
        if topic:
            return self._topic(topic) + ":value"
        return f"narad:{{s:{name}}}"

    def _ids(self) -> list[str]:
        return [self.SCHEMA_IDS, self.SCHEMA_NEXT, self.SCHEMA_DOCS]

    def _apart(self, key: str, other: str) -> bool:
        """Whether two keys cannot share a script call (on a single server
        or RedisRaft any can; a sharded cluster overrides it)."""
        return False

    def _user(self, name: str) -> str:
        return f"{self.USERS}:u:{name}"

    def _channel(self, event: Event) -> str:
        return self.USER_EVENTS if event is Event.USER_CHANGED else self.EVENTS

    def _event(self, event: Event, *topics: str) -> list[str]:
        """The channel and message a script publishes ``event`` with."""
        return [self._channel(event), " ".join((event.value, *topics))]

    def _run(
        self,
        script: str,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        replayable: bool | None = None,
    ) -> Any:
        """Run ``script``; ``replayable`` (default: :data:`REPLAYABLE`) says
        whether the client may send it again after a link lost mid-call."""
        fn = self.scripts[script]
        if replayable is None:
            replayable = script in REPLAYABLE
        started = time.perf_counter()
        try:
            return self.client.call(
                lambda r: run_script(fn, keys, args, r), replayable=replayable
            )
        finally:
            metrics.TALLY.observe(
                metrics.STORAGE_SCRIPT_SECONDS,
                (script,),
                time.perf_counter() - started,
            )

    def _run_together(
        self,
        calls: Sequence[tuple[str, Sequence[str], Sequence[Any]]],
        *,
        replayable: bool,
    ) -> list[Any]:
        """Run each ``(script, keys, args)`` of ``calls`` in order, pipelined
        in one round trip (:func:`run_scripts`); each one's reply. A link
        lost mid-call loses them all, so they go again only if ``replayable``
        holds for them all."""
        loaded = [(self.scripts[script], keys, args) for script, keys, args in calls]
        started = time.perf_counter()
        try:
            return self.client.call(
                lambda r: run_scripts(loaded, r), replayable=replayable
            )
        finally:
            elapsed = time.perf_counter() - started
            for script, _, _ in calls:
                metrics.TALLY.observe(
                    metrics.STORAGE_SCRIPT_SECONDS, (script,), elapsed
                )

    # -- health -------------------------------------------------------------

    def ping(self) -> bool:
        # On connections of their own: readiness answers even while every
        # pooled connection is busy. On RedisRaft, only a leader counts.
        return self.client.leader_answers()

    def server_status(self) -> ServerStatus | None:
        # One round trip per node, tried once: callers poll it and must not
        # hang on retries. INFO works for a user without CONFIG; RedisRaft
        # answers INFO raft (any node: a follower knows it is durable, and
        # lists its peers), other servers an empty section.
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for section in ("memory", "persistence", "raft"):
                pipe.info(section)
            pipe.config_get("appendfsync")
            # Apart: a server before Redis 7 reads one parameter per CONFIG GET.
            pipe.config_get("no-appendfsync-on-rewrite")
            return pipe.execute(raise_on_error=False)

        replies = self.client.first_answer(read)
        if replies is None:
            return None
        memory, persistence, raft, fsync, on_rewrite = replies
        if isinstance(fsync, dict) and isinstance(on_rewrite, dict):
            fsync = {**fsync, **on_rewrite}
        if isinstance(memory, Exception):
            hint = ""
            if "'raft'" in str(memory):
                # RedisRaft runs every command through its RAFT command.
                hint = "; on RedisRaft, allow Narad's user +raft (conf/redisraft.conf)"
            return ServerStatus(False, f"INFO refused: {memory}{hint}", 0, 0)
        if isinstance(raft, dict):
            self.client.learn_raft(raft)
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
        reply = self._run(
            "create_topic",
            [
                self.TOPICS,
                self.SCHEMA_BYTES,
                topic + ":meta",
                topic + ":schemas",
                topic + ":value:meta",
                *self._ids(),
            ],
            [
                meta.name,
                schema.document if schema else b"",
                int(bool(schema and schema.high_cost)),
                limits.topic_bytes,
                limits.cluster_bytes,
                *self._event(Event.TOPIC_CHANGED, meta.name),
                *_identity_args(schema),
                self.SCHEMA_USES,
                *_record_fields(meta),
            ],
        )
        return _schema_result(reply)

    def create_child(
        self,
        meta: TopicMeta,
        parent: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        topic, above = self._topic(meta.name), self._topic(parent.name)
        reply = self._run(
            "create_child",
            [
                self.TOPICS,
                self.SCHEMA_BYTES,
                topic + ":meta",
                topic + ":schemas",
                above + ":meta",
                above + ":schemas",
                topic + ":value:meta",
            ],
            [
                meta.name,
                parent.name,
                parent.epoch,
                parent.schema_version,
                delay_ms,
                max_children,
                RETENTION_MARGIN_MS,
                limits.topic_bytes,
                limits.cluster_bytes,
                _child_item(Child(meta.name, meta.epoch, meta.partitions, delay_ms)),
                self.EVENTS,
                self._event(Event.TOPIC_CHANGED, meta.name)[1],
                self._event(Event.TOPIC_CHANGED, parent.name)[1],
                parent.compatibility,
                self.SCHEMA_USES,
                *_record_fields(meta),
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

    def list_topics(self, *, after: str, limit: int, prefix: str = "") -> Page:
        return self._page(self.TOPICS, after, limit, prefix)

    def topic_owners(self, names: Sequence[str]) -> list[str | None]:
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for name in names:
                # Every record has its name; records written before owners
                # existed have no owner field (so: none).
                pipe.hmget(self._topic(name) + ":meta", "name", "owner")
            return pipe.execute()

        return [
            None if stored is None else (owner or b"").decode()
            for stored, owner in self.client.call(read)
        ]

    def _page(self, key: str, after: str, limit: int, prefix: str = "") -> Page:
        low, high = b"-", b"+"
        if prefix:
            # Names are ASCII: every name starting with the prefix sorts
            # from it to before the prefix followed by byte 0xff.
            low, high = b"[" + prefix.encode(), b"(" + prefix.encode() + b"\xff"
        if after and after >= prefix:
            low = b"(" + after.encode()
        names = self.client.call(
            lambda r: r.zrangebylex(key, low, high, start=0, num=limit + 1)
        )
        names = [n.decode() for n in names]
        more = len(names) > limit
        names = names[:limit]
        return Page(names, names[-1] if more else None)

    def alter_topic(self, meta: TopicMeta, changes: TopicChanges) -> Status:
        # A new compatibility mode goes to every child (the script refuses
        # if the children moved on since they were read).
        children = meta.children if changes.compatibility is not None else ()
        keys = [self._topic(meta.name) + ":meta"]
        keys += [self._topic(child.name) + ":meta" for child in children]
        args: list[Any] = [
            meta.epoch,
            *self._event(Event.TOPIC_CHANGED, meta.name),
            RETENTION_MARGIN_MS,
            _children_field(meta.children),
            len(children),
            *(self._event(Event.TOPIC_CHANGED, child.name)[1] for child in children),
        ]
        for field, value in changes.items():
            args += [field, value]
        reply = self._run("alter_topic", keys, args)
        return Status(reply.decode())

    def _waited(self, name: str) -> str:
        return self._topic(name) + ":waited"

    def _idempotency_keys(self, name: str) -> list[str]:
        idem = self._topic(name) + ":idem"
        return [idem, idem + ":at", idem + ":bytes"]

    def delete_topic(self, meta: TopicMeta) -> Status:
        topic = self._topic(meta.name)
        linked = [meta.parent] if meta.parent else [c.name for c in meta.children]
        keys = [self.TOPICS, self.SCHEMA_BYTES, topic + ":meta", topic + ":schemas"]
        keys += [self.SCHEMA_DOCS]
        keys += [self._topic(name) + ":meta" for name in linked]
        keys += [self._waited(meta.name)]
        keys += self._idempotency_keys(meta.name)
        for index in range(meta.partitions):
            keys += self._partition_keys(meta.name, index)
        reply = self._run(
            "delete_topic",
            keys,
            [
                meta.name,
                meta.epoch,
                *self._event(Event.TOPIC_CHANGED, meta.name),
                meta.parent,
                _children_field(meta.children),
                len(linked),
                *(self._event(Event.TOPIC_CHANGED, name)[1] for name in linked),
                self.SCHEMA_USES,
            ],
        )
        return Status(reply.decode())

    def partition_stats(self, meta: TopicMeta, *, now_ms: int) -> list[PartitionStats]:
        partitions = [
            self._partition_keys(meta.name, i) for i in range(meta.partitions)
        ]

        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for state, _, lease, _, _ in partitions:
                pipe.hmget(state, "next", "oldest")
                pipe.zcard(lease)
            return pipe.execute()

        replies = self.client.call(read)
        nexts = [int(nxt or 0) for nxt, _ in replies[::2]]
        stored = [int(low or 0) for _, low in replies[::2]]
        in_flight = replies[1::2]
        oldest = stored
        if meta.retention_ms:
            # Only a write trims: leave out what retention no longer keeps
            # (what a replay or a consume would not get), and its leases.
            oldest = self._first_stamped_after(
                [log for _, log, *_ in partitions],
                [[low, high] for low, high in zip(stored, nexts, strict=True)],
                now_ms - meta.retention_ms,
            )
        aged = [i for i, held in enumerate(in_flight) if held and oldest[i] > stored[i]]
        if aged:

            def leases(r: redis.Redis) -> list[Any]:
                pipe = r.pipeline(transaction=False)
                for i in aged:
                    pipe.zrange(partitions[i][2], 0, -1)
                return pipe.execute()

            for i, held in zip(aged, self.client.call(leases), strict=True):
                in_flight[i] = sum(int(offset) >= oldest[i] for offset in held)
        return [
            PartitionStats(i, oldest[i], nexts[i], in_flight[i])
            for i in range(meta.partitions)
        ]

    def topic_stats(
        self, metas: Sequence[TopicMeta], *, now_ms: int
    ) -> list[TopicStats]:
        # A read-only script (the oldest unacked message's timestamp without
        # its payload), in calls of a bounded partition count, one pipeline.
        if not metas:
            return []
        calls: list[tuple[list[str], list[int]]] = [([], [now_ms])]
        for meta in metas:
            for index in range(meta.partitions):
                state, log, lease, _, acked = self._partition_keys(meta.name, index)
                held = calls[-1][0]
                if len(held) >= 4 * STATS_PARTITIONS_PER_CALL or (
                    held and self._apart(held[0], state)
                ):
                    calls.append(([], [now_ms]))
                calls[-1][0].extend((state, log, lease, acked))
                calls[-1][1].append(meta.retention_ms)
        script = self.scripts["topic_stats"]

        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for keys, args in calls:
                script(keys=keys, args=args, client=pipe)
            return pipe.execute()

        started = time.perf_counter()
        try:
            replies = [x for reply in self.client.call(read) for x in reply]
        finally:
            metrics.TALLY.observe(
                metrics.STORAGE_SCRIPT_SECONDS,
                ("topic_stats",),
                time.perf_counter() - started,
            )
        stats, at = [], 0
        for meta in metas:
            produced = delivered = acked = backlog = in_flight = 0
            oldest_unacked: int | None = None
            for _ in range(meta.partitions):
                nxt, cursor, floor, leased, ahead, ts = replies[at : at + 6]
                at += 6
                produced += nxt
                delivered += cursor
                acked += floor + ahead
                backlog += nxt - cursor
                in_flight += leased
                if ts >= 0 and (oldest_unacked is None or ts < oldest_unacked):
                    oldest_unacked = ts
            stats.append(
                TopicStats(
                    produced, delivered, acked, backlog, in_flight, oldest_unacked
                )
            )
        return stats

    # -- fan-out ------------------------------------------------------------

    def attach_child(
        self,
        parent: TopicMeta,
        child: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        above, below = self._topic(parent.name), self._topic(child.name)
        reply = self._run(
            "attach_child",
            [
                self.SCHEMA_BYTES,
                above + ":meta",
                above + ":schemas",
                below + ":meta",
                below + ":schemas",
            ],
            [
                parent.epoch,
                child.epoch,
                parent.schema_version,
                child.schema_version,
                delay_ms,
                max_children,
                RETENTION_MARGIN_MS,
                limits.topic_bytes,
                limits.cluster_bytes,
                _child_item(Child(child.name, child.epoch, child.partitions, delay_ms)),
                self.EVENTS,
                self._event(Event.TOPIC_CHANGED, parent.name)[1],
                self._event(Event.TOPIC_CHANGED, child.name)[1],
                parent.name,
                child.name,
                parent.compatibility,
                self.SCHEMA_USES,
            ],
        )
        return _schema_result(reply)

    def detach_child(self, parent: TopicMeta, child: str) -> Status:
        reply = self._run(
            "detach_child",
            [self._topic(parent.name) + ":meta", self._topic(child) + ":meta"],
            [
                parent.epoch,
                child,
                self.EVENTS,
                self._event(Event.TOPIC_CHANGED, parent.name)[1],
                self._event(Event.TOPIC_CHANGED, child)[1],
            ],
        )
        return Status(reply.decode())

    def count_not_due(self, metas: Sequence[TopicMeta], *, now_ms: int) -> list[int]:
        logs = [
            self._partition_keys(meta.name, index)[:2]
            for meta in metas
            for index in range(meta.partitions)
        ]

        def bounds(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for state, _ in logs:
                pipe.hmget(state, "oldest", "next")
            return pipe.execute()

        ranges = [
            [int(low or 0), int(high or 0)] for low, high in self.client.call(bounds)
        ]
        ends = [high for _, high in ranges]
        due = self._first_stamped_after([log for _, log in logs], ranges, now_ms)
        counts, at = [], 0
        for meta in metas:
            parts = range(at, at + meta.partitions)
            counts.append(sum(ends[i] - due[i] for i in parts))
            at += meta.partitions
        return counts

    def _first_stamped_after(
        self, logs: Sequence[str], ranges: list[list[int]], after_ms: int
    ) -> list[int]:
        """Per partition log, the first offset in its ``[low, high)`` range
        stamped after ``after_ms`` (``high`` when none is); a message trimmed
        meanwhile counts as stamped before. Stamps never decrease within a
        partition: a binary search of each, every partition a step at once,
        after a first step at ``low`` (most often the answer: then one round
        trip). ``ranges`` is used up."""
        first = True
        while searching := [i for i, (low, high) in enumerate(ranges) if low < high]:
            at = {i: ranges[i][0] if first else sum(ranges[i]) // 2 for i in searching}
            stamps = self._stamps([(logs[i], offset) for i, offset in at.items()])
            for (i, offset), stamp in zip(at.items(), stamps, strict=True):
                if stamp < 0 or stamp <= after_ms:  # -1: trimmed meanwhile
                    ranges[i][0] = offset + 1
                else:
                    ranges[i][1] = offset
            first = False
        return [low for low, _ in ranges]

    def _stamps(self, messages: Sequence[tuple[str, int]]) -> list[int]:
        """The timestamp of each ``(log, offset)`` message (-1: none there),
        read without the payloads, in calls of a bounded count, one
        pipeline."""
        script = self.scripts["stamps"]
        calls: list[list[tuple[str, int]]] = []
        for message in messages:
            if (
                not calls
                or len(calls[-1]) >= STATS_PARTITIONS_PER_CALL
                or self._apart(calls[-1][0][0], message[0])
            ):
                calls.append([])
            calls[-1].append(message)

        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for call in calls:
                keys, offsets = zip(*call, strict=True)
                script(keys=keys, args=offsets, client=pipe)
            return pipe.execute()

        started = time.perf_counter()
        try:
            return [stamp for reply in self.client.call(read) for stamp in reply]
        finally:
            metrics.TALLY.observe(
                metrics.STORAGE_SCRIPT_SECONDS,
                ("stamps",),
                time.perf_counter() - started,
            )

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
        keys = [topic + ":meta", topic + ":schemas", self.SCHEMA_BYTES, *self._ids()]
        args: list[Any] = [
            meta.epoch,
            expected_current,
            version.document,
            int(version.high_cost),
            limits.max_versions,
            limits.topic_bytes,
            limits.cluster_bytes,
            *self._event(Event.TOPIC_CHANGED, meta.name),
            _children_field(meta.children),
            RETENTION_MARGIN_MS,
            len(meta.children),
            meta.compatibility,
            *_identity_args(version),
            self.SCHEMA_USES,
            meta.name,
        ]
        for child in meta.children:
            keys += [
                self._topic(child.name) + ":meta",
                self._topic(child.name) + ":schemas",
            ]
            args += [child.name, self._event(Event.TOPIC_CHANGED, child.name)[1]]
        for field, value in (changes or TopicChanges()).items():
            args += [field, value]
        reply = self._run("alter_topic_schema", keys, args)
        return _schema_result(reply)

    def get_schema(self, name: str, version: int) -> SchemaVersion | None:
        fields = [str(version), *(f"{f}:{version}" for f in _VERSION_FIELDS)]
        raw = self.client.call(
            lambda r: r.hmget(self._topic(name) + ":schemas", fields)
        )
        if raw[0] is None:
            return None
        return _version(
            version, dict(zip([f.encode() for f in fields], raw, strict=True))
        )

    def schema_sizes(self, name: str) -> list[SchemaSize]:
        key = self._topic(name) + ":schemas"
        fields = self.client.call(lambda r: r.hkeys(key))
        versions = sorted(int(f) for f in fields if f.isdigit())

        def sizes(r: redis.Redis) -> list[int]:
            pipe = r.pipeline(transaction=False)
            for v in versions:
                pipe.hstrlen(key, v)
            return pipe.execute()

        return [
            SchemaSize(version, size)
            for version, size in zip(versions, self.client.call(sizes), strict=True)
        ]

    def get_schemas(self, name: str) -> list[SchemaVersion]:
        raw = self.client.call(lambda r: r.hgetall(self._topic(name) + ":schemas"))
        return _versions(raw)

    # -- global schema ids and registry subjects -----------------------------

    def assign_schema_ids(
        self, meta: TopicMeta, versions: Sequence[SchemaVersion]
    ) -> Status:
        topic = self._topic(meta.name)
        args: list[Any] = [meta.epoch, self.SCHEMA_USES, meta.name]
        for version in versions:
            if version.identity is None:
                raise ValueError("assigning an id needs the version's identity")
            identity = version.identity
            args += [version.version, identity.key, identity.schema_type]
        reply = self._run(
            "assign_schema_ids",
            [topic + ":meta", topic + ":schemas", *self._ids()],
            args,
            replayable=True,
        )
        return Status(reply.decode())

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hmget(self.SCHEMA_DOCS, schema_id, f"t:{schema_id}", f"r:{schema_id}")
            pipe.smembers(f"{self.SCHEMA_USES}{schema_id}")
            pipe.get(self.SCHEMA_NEXT)
            return pipe.execute()

        (document, schema_type, references), members, last = self.client.call(read)
        if schema_id < 1 or schema_id > int(last or 0):
            return None
        uses = []
        for member in members:
            subject, _, version = member.decode().rpartition("\n")
            uses.append((subject, int(version)))
        return StoredSchema(
            schema_id,
            (schema_type or b"").decode(),
            document or b"",
            references or b"",
            tuple(sorted(uses)),
        )

    def schema_id_of(self, identity: SchemaIdentity) -> int:
        found = self.client.call(lambda r: r.hget(self.SCHEMA_IDS, identity.key))
        return int(found) if found else 0

    def get_subject(self, name: str) -> Subject | None:
        prefix = self._subject(name)

        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hgetall(prefix + ":meta")
            pipe.hgetall(prefix + ":schemas")
            return pipe.execute()

        meta, raw = self.client.call(read)
        if not meta:
            return None
        return Subject(
            name,
            meta.get(b"compatibility", b"").decode(),
            tuple(_versions(raw)),
            int(meta.get(b"latest", 0)),
        )

    def list_subjects(self, *, prefix: str = "") -> list[str]:
        low = "[" + prefix if prefix else "-"
        found = self.client.call(lambda r: r.zrangebylex(self.SUBJECTS, low, "+"))
        names = [n.decode() for n in found]
        return [n for n in names if n.startswith(prefix)]

    def register_subject_version(
        self,
        name: str,
        version: SchemaVersion,
        *,
        expected_latest: int,
        topic: str,
        limits: SchemaLimits,
    ) -> SchemaWriteResult:
        prefix = self._subject(name)
        guard = self._topic(topic) + ":meta" if topic else prefix + ":meta"
        reply = self._run(
            "register_subject",
            [
                prefix + ":meta",
                prefix + ":schemas",
                guard,
                self.SCHEMA_BYTES,
                self.SUBJECTS,
                *self._ids(),
            ],
            [
                expected_latest,
                version.document,
                int(version.high_cost),
                limits.max_versions,
                limits.topic_bytes,
                limits.cluster_bytes,
                *_identity_args(version),
                self.SCHEMA_USES,
                name,
                int(bool(topic)),
            ],
        )
        return _schema_result(reply)

    def delete_subject_versions(
        self, name: str, versions: Sequence[int], *, permanent: bool
    ) -> Status:
        prefix = self._subject(name)
        reply = self._run(
            "delete_subject",
            [
                prefix + ":meta",
                prefix + ":schemas",
                self.SCHEMA_BYTES,
                self.SUBJECTS,
                self.SCHEMA_DOCS,
            ],
            [int(permanent), self.SCHEMA_USES, name, *versions],
            replayable=not permanent,
        )
        return Status(reply.decode())

    def set_subject_compatibility(self, name: str, mode: str) -> Status:
        reply = self._run(
            "subject_config", [self._subject(name) + ":meta"], [mode], replayable=True
        )
        return Status(reply.decode())

    def registry_config(self) -> str:
        found = self.client.call(lambda r: r.get(self.REGISTRY_CONFIG))
        return found.decode() if found else ""

    def set_registry_config(self, mode: str) -> Status:
        reply = self._run(
            "registry_config", [self.REGISTRY_CONFIG], [mode], replayable=True
        )
        return Status(reply.decode())

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
            self._waited(meta.name),
        ]
        slot_of: dict[int, int] = {}
        # Per entry its slot, route and record's length; the records go last,
        # in one argument (append.lua says why).
        entries_args: list[Any] = []
        records: list[bytes] = []
        routes = [e.partition if e.route is None else e.route for e in entries]
        # The record as stored, commit time included: the script stores it as
        # cut from the records argument, stamped again only when the
        # partition's clock is ahead of this node's or for a delay child's
        # copy. Its head by kind, told apart by identity (an Enum hashes in
        # Python).
        stamp = b"%d," % now_ms
        json_head, text_head, binary_head = (
            stamp + _KIND_CODES[kind]
            for kind in (PayloadKind.JSON, PayloadKind.TEXT, PayloadKind.BINARY)
        )
        for entry, route in zip(entries, routes, strict=True):
            partition, key, kind = entry.partition, entry.key, entry.kind
            slot = slot_of.get(partition)
            if slot is None:
                slot = slot_of[partition] = len(slot_of) + 1
                keys += self._partition_keys(meta.name, partition)
            if kind is PayloadKind.JSON:
                head = json_head
            elif kind is PayloadKind.TEXT:
                head = text_head
            else:
                head = binary_head
            record = b"%s%d:%s%s" % (head, len(key), key, entry.payload)
            entries_args += (slot, route, len(record))
            records.append(record)
        args: list[Any] = [
            meta.epoch,
            schema_version,
            now_ms,
            *self._event(Event.MESSAGES, meta.name, *(c.name for c in meta.children)),
            _children_field(meta.children),
            len(slot_of),
            len(entries),
            limits.window_ms,
            limits.max_keys,
            limits.max_bytes,
            limits.KEY_OVERHEAD,
            len(idempotency),
        ]
        for guard in idempotency:
            args += [guard.key, guard.digest, guard.start + 1, guard.stop]
        args += entries_args
        for child in meta.children:
            # The child's partitions the copies go to, in slot order.
            targets = list(dict.fromkeys(route % child.partitions for route in routes))
            keys += [self._topic(child.name) + ":meta", self._waited(child.name)]
            for index in targets:
                keys += self._partition_keys(child.name, index)
            args += [child.delay_ms, child.partitions, len(targets), *targets]
        args.append(b"".join(records))
        guarded = sum(guard.stop - guard.start for guard in idempotency)
        reply = self._run("append", keys, args, replayable=guarded == len(entries))
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
        keys, args = self._reserve_call(meta, partitions, nonces, now_ms, max_bytes)
        return _reserved(self._run("reserve", keys, args), nonces)

    def _reserve_call(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        nonces: Sequence[str],
        now_ms: int,
        max_bytes: int | None = None,
    ) -> tuple[list[str], list[Any]]:
        keys = [self._topic(meta.name) + ":meta"]
        for index in partitions:
            keys += self._partition_keys(meta.name, index)
        budget = -1 if max_bytes is None else max_bytes
        return keys, [meta.epoch, now_ms, budget, len(partitions), *partitions, *nonces]

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
        keys, args = self._settle_call(meta, leases, action, now_ms)
        reply = self._run("settle", keys, args, replayable=action is not Settle.RELEASE)
        return _settled(reply, len(leases))

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
        settled, reserved = self._run_together(
            [
                ("settle", *self._settle_call(meta, leases, action, now_ms)),
                ("reserve", *self._reserve_call(meta, partitions, nonces, now_ms)),
            ],
            replayable=action is not Settle.RELEASE,
        )
        return _settled(settled, len(leases)), _reserved(reserved, nonces)

    def _settle_call(
        self, meta: TopicMeta, leases: Sequence[Lease], action: Settle, now_ms: int
    ) -> tuple[list[str], list[Any]]:
        keys = [self._topic(meta.name) + ":meta", self._waited(meta.name)]
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
        return keys, args

    def mark_waiting(self, meta: TopicMeta, until_ms: int) -> Status:
        keys = [self._topic(meta.name) + ":meta", self._waited(meta.name)]
        reply = self._run("mark_waiting", keys, [meta.epoch, until_ms])
        return Status(reply.decode())

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
        if message.timestamp > now_ms:
            return None  # a copy in a delay child, not due yet
        return message

    # -- users --------------------------------------------------------------

    def create_user(self, user: UserRecord, *, only_if_none: bool = False) -> Status:
        reply = self._run(
            "create_user",
            [self.USERS, self.ADMINS, self._user(user.name)],
            [
                user.name,
                user.password_hash,
                _grants_text(user.grants),
                int(user.admin),
                user.created_ms,
                int(only_if_none),
                *self._event(Event.USER_CHANGED, user.name),
            ],
        )
        return Status(reply.decode())

    def get_user(self, name: str) -> UserRecord | None:
        return self.get_users([name])[0]

    def get_users(self, names: Sequence[str]) -> list[UserRecord | None]:
        def read(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for name in names:
                pipe.hgetall(self._user(name))
            return pipe.execute()

        return [_user_record(raw) for raw in self.client.call(read)]

    def list_users(self, *, after: str, limit: int) -> Page:
        return self._page(self.USERS, after, limit)

    def replace_grants(
        self, name: str, grants: Sequence[Grant], *, admin: bool, revision: int
    ) -> Status:
        reply = self._run(
            "replace_grants",
            [self.ADMINS, self._user(name)],
            [
                name,
                _grants_text(grants),
                int(admin),
                revision,
                *self._event(Event.USER_CHANGED, name),
            ],
        )
        return Status(reply.decode())

    def set_password(self, name: str, password_hash: str, *, revision: int) -> Status:
        reply = self._run(
            "set_password",
            [self._user(name)],
            [password_hash, revision, *self._event(Event.USER_CHANGED, name)],
        )
        return Status(reply.decode())

    def delete_user(self, name: str, *, revision: int) -> Status:
        reply = self._run(
            "delete_user",
            [self.USERS, self.ADMINS, self._user(name)],
            [name, revision, *self._event(Event.USER_CHANGED, name)],
        )
        return Status(reply.decode())

    # -- notifications ------------------------------------------------------

    def notifications(
        self, events: Collection[Event] | None = None
    ) -> Iterator[Notification | None]:
        wanted = Event if events is None else events
        channels = sorted(
            {self._channel(e) for e in wanted if e is not Event.LISTENING}
        )
        try:
            pubsub = self._subscribe(channels)
        except (redis.RedisError, OSError) as exc:
            raise StorageError(f"cannot subscribe to {channels}: {exc}") from exc
        try:
            yield Notification(Event.LISTENING)
            # Read straight from the subscription's connection: one wait on
            # the socket per burst of messages, where PubSub.get_message
            # polls it twice before reading each one (every worker hears
            # every append of a waited-on topic).
            connection = pubsub.connection
            heard = time.monotonic()  # last traffic from the server
            pinged = False
            while True:
                try:
                    reply = _next_reply(connection)
                    now = time.monotonic()
                    if reply is not None:
                        heard, pinged = now, False
                    elif now - heard >= KEEPALIVE_S + PING_WAIT_S and pinged:
                        # A dead host or a partition closes nothing: only the
                        # silence tells (RedisRaft itself drops subscribers
                        # of a node that stops being leader).
                        raise redis.ConnectionError(
                            f"no answer to PING within {PING_WAIT_S:g} s"
                        )
                    elif now - heard >= KEEPALIVE_S and not pinged:
                        pubsub.ping()
                        pinged = True
                except (redis.RedisError, OSError) as exc:
                    raise StorageError(f"{channels} subscription lost: {exc}") from exc
                # [b"message", channel, data], or [b"pong", b""] (RESP2)
                if reply is None or reply[0] != b"message":
                    yield None
                else:
                    code, *topics = reply[2].decode().split(" ")
                    event = _EVENTS.get(code)
                    if event is not None:  # a newer node's event: not ours
                        for topic in topics:
                            yield Notification(event, topic)
        finally:
            pubsub.close()

    def _subscribe(self, channels: list[str]) -> redis.client.PubSub:
        """A subscription the server confirmed, on the node that accepts writes.

        Until the confirmations arrive (one per channel) a publish could be
        missed, so the stream says LISTENING only after them. A RedisRaft
        follower refuses with MOVED to the leader, where the scripts publish;
        the client follows it, and asks the other nodes when the one it knows
        is gone, waiting at most :data:`SUBSCRIBE_BACKOFF_MAX_S` between
        tries: no request waits on this, and wake-ups should resume well
        within a second of a new leader's election.
        """

        def subscribe(r: redis.Redis) -> redis.client.PubSub:
            # On a connection of its own: the subscription must come up even
            # while every pooled connection is busy.
            pubsub = detached(r).pubsub()
            try:
                pubsub.subscribe(*channels)
                for _ in channels:
                    if pubsub.get_message(timeout=5.0) is None:
                        raise redis.TimeoutError("no subscription confirmation in 5 s")
                return pubsub
            except BaseException:
                pubsub.close()
                raise

        return self.client.call(subscribe, backoff_max_s=SUBSCRIBE_BACKOFF_MAX_S)


def _next_reply(connection: redis.connection.AbstractConnection) -> Any:
    """A subscription's next reply, or None when none came within
    :data:`KEEPALIVE_S`."""
    try:
        return connection.read_response(timeout=KEEPALIVE_S, disconnect_on_error=False)
    except redis.TimeoutError:
        return None
    except ReplyLost as exc:
        # Once a PING left, a read that times out counts as a reply lost; on a
        # subscription it only says that nothing came yet.
        if isinstance(exc.__cause__, redis.TimeoutError):
            return None
        raise


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
    if fsync.get("no-appendfsync-on-rewrite", "no") == "yes":
        # The server then skips the fsync, and still answers, while a child
        # rewrites its AOF or saves a snapshot.
        return False, (
            "no-appendfsync-on-rewrite is yes: writes made during an AOF rewrite "
            "are answered before they are on disk"
        )
    return True, "appendonly yes, appendfsync always"


def _record_fields(meta: TopicMeta) -> list[Any]:
    """The record fields a create writes: name, epoch, settings and owner."""
    fields: list[Any] = ["name", meta.name, "epoch", meta.epoch]
    fields += ["compatibility", meta.compatibility]
    fields += ["schema_type", meta.schema_type, "encoding", meta.encoding]
    fields += ["proto_message", meta.proto_message, "framing", meta.framing]
    for name in _SETTINGS:
        fields += [name, getattr(meta, name)]
    return [*fields, "owner", meta.owner]


def _topic_meta(raw: dict[bytes, bytes]) -> TopicMeta | None:
    if not raw:
        return None
    f = {k.decode(): v.decode() for k, v in raw.items()}
    return TopicMeta(
        name=f["name"],
        epoch=f["epoch"],
        schema_high_cost=f.get("schema_high_cost") == "1",
        parent=f.get("parent", ""),
        children=_children(f.get("children", "")),
        compatibility=f.get("compatibility", DEFAULT_COMPATIBILITY),
        owner=f.get("owner", ""),
        schema_type=f.get("schema_type", DEFAULT_SCHEMA_TYPE),
        encoding=f.get("encoding", DEFAULT_ENCODING),
        proto_message=f.get("proto_message", ""),
        framing=f.get("framing", DEFAULT_FRAMING),
        **{k: int(f.get(k, 0)) for k in _INT_FIELDS},
    )


def _child_item(child: Child) -> str:
    return f"{child.name}:{child.epoch}:{child.partitions}:{child.delay_ms}"


def _children_field(children: Sequence[Child]) -> str:
    """The ``children`` field of a record, exactly as the scripts write it."""
    return ",".join(_child_item(child) for child in children)


def _children(field: str) -> tuple[Child, ...]:
    children = []
    for item in filter(None, field.split(",")):
        name, epoch, partitions, delay = item.split(":")
        children.append(Child(name, epoch, int(partitions), int(delay)))
    return tuple(children)


def _grants_text(grants: Sequence[Grant]) -> str:
    return json.dumps([[g.action, list(g.patterns)] for g in grants])


def _user_record(raw: dict[bytes, bytes]) -> UserRecord | None:
    if not raw:
        return None
    f = {k.decode(): v.decode() for k, v in raw.items()}
    return UserRecord(
        name=f["name"],
        password_hash=f["password"],
        grants=tuple(
            Grant(action, tuple(patterns))
            for action, patterns in json.loads(f["grants"])
        ),
        admin=f["admin"] == "1",
        created_ms=int(f["created_ms"]),
        revision=int(f["revision"]),
    )


_KINDS = {kind.value.encode(): kind for kind in PayloadKind}
_KIND_CODES = {kind: code for code, kind in _KINDS.items()}
_STATUSES = {status.value.encode(): status for status in Status}
_EVENTS = {event.value: event for event in Event}


def _reserved(reply: list[Any], nonces: Sequence[str]) -> BatchReserveResult:
    """The reserve script's reply, its k-th message under ``nonces[k]``."""
    if reply[0] == b"no_topic":
        return BatchReserveResult(Status.NO_TOPIC)
    messages = tuple(
        _message(reply[i], reply[i + 1], reply[i + 2], nonces[k])
        for k, i in enumerate(range(3, len(reply), 3))
    )
    if messages:
        return BatchReserveResult(Status.OK, messages)
    expiry, due = int(reply[1]), int(reply[2])
    return BatchReserveResult(
        Status.OK,
        (),
        expiry if expiry >= 0 else None,
        due if due >= 0 else None,
    )


def _settled(reply: list[Any], count: int) -> list[Status]:
    """The settle script's reply: one status per lease."""
    if reply == [b"no_topic"]:
        return [Status.NO_TOPIC] * count
    return [_STATUSES[r] for r in reply]


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
    if status is Status.OK:
        version, stored, cluster, *rest = (int(x) for x in reply[1:])
        return SchemaWriteResult(
            status,
            version=version,
            stored_bytes=stored,
            cluster_bytes=cluster,
            schema_id=rest[0] if rest else 0,
        )
    if status in (Status.BASE_MISMATCH, Status.TOO_MANY_VERSIONS):
        return SchemaWriteResult(status, version=int(reply[1]))
    if status in (Status.TOPIC_BUDGET, Status.CLUSTER_BUDGET):
        topic = reply[3].decode() if len(reply) > 3 else ""
        return SchemaWriteResult(
            status,
            stored_bytes=int(reply[1]),
            cluster_bytes=int(reply[2]),
            topic=topic,
        )
    if status in (Status.NO_TOPIC, Status.ATTACHED) and len(reply) > 1:
        return SchemaWriteResult(status, topic=reply[1].decode())
    return SchemaWriteResult(status)


#: The per-version fields of a history hash besides the document.
_VERSION_FIELDS = ("hc", "id", "fp", "r", "del")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _value_topic(subject: str) -> str:
    """The topic whose name a subject ``<t>-value`` carries, or ``""``."""
    topic = subject.removesuffix("-value")
    if topic != subject and _TOPIC_NAME.fullmatch(topic):
        return topic
    return ""


def _identity_args(version: SchemaVersion | None) -> list[Any]:
    """A version's identity, type and references, as the scripts take them
    (empty strings for a topic created without a schema)."""
    if version is None:
        return ["", "", ""]
    if version.identity is None:
        raise ValueError("a version written needs its identity")
    identity = version.identity
    return [identity.key, identity.schema_type, version.references]


def _version(version: int, raw: dict[bytes, bytes]) -> SchemaVersion:
    """Version ``version`` of a history hash (fields of it in ``raw``)."""

    def field(name: str) -> bytes | None:
        return raw.get(f"{name}:{version}".encode())

    identity = None
    fp = field("fp")
    if fp:
        schema_type, _, digest = fp.decode().partition(":")
        identity = SchemaIdentity(schema_type, digest)
    return SchemaVersion(
        version,
        raw[str(version).encode()],
        field("hc") == b"1",
        schema_id=int(field("id") or 0),
        identity=identity,
        references=field("r") or b"",
        deleted=field("del") == b"1",
    )


def _versions(raw: dict[bytes, bytes]) -> list[SchemaVersion]:
    """Every version of a history hash, ascending."""
    return [_version(v, raw) for v in sorted(int(f) for f in raw if f.isdigit())]
