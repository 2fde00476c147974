"""Narad's state on a sharded Valkey/Redis Cluster (``redis+cluster://``).

A cluster runs a script only on keys of one hash slot. :class:`ClusterStorage`
is :class:`narad_redis.storage.RedisStorage` with the key layout and the
steps that arranges:

**A topic's keys** share its hash tag, ``narad:{<topic>}:...``, as
everywhere. **A fan-out family** (a parent and the children created under
it) shares the parent's slot, since an append to the parent writes every
child in the same script: a child created under ``<p>`` lives at
``narad:{<p>}/<child>:...`` (``/`` is in no topic name), and its name's own
record key ``narad:{<child>}:meta`` holds a stub, ``home`` (the family's tag),
``epoch`` and ``claimed_ms``, so that no other topic takes the name and a
read by name finds it (two reads for a child, one for any other topic).
Since a parent is never a child, a child's family tag is its parent's tag
(the parent's name, or for a former child its old family's). Attaching an
existing topic stored under another tag is refused
(:class:`narad.errors.ChildInAnotherSlot`: create it as a child instead).

**Global state** lives under one tag each: users and grants under
``{@users}`` (as everywhere), and under ``{@schemas}`` the topic index
``narad:{@schemas}:topics``, the cluster-wide schema byte budget
``narad:{@schemas}:schema_bytes``, the global schema ids, their documents and
uses, and the registry's subjects (a single server keeps ``narad:topics`` and
``narad:schema_bytes``, so its data needs no migration).

**Two slots, two steps.** Where a write touches a topic's (or a subject's)
slot and the global one, it runs as two or three steps in this order, the
scripts in the topic's slot unchanged but for the global keys, which they
see as stand-ins in their own slot (``narad:{<tag>}:g:<name>``: the
family's own index, byte count, ids, documents and uses, never read
elsewhere), and the cluster byte budget, which the global step checks:

1. Global, before: reserve the schema bytes the step will store
   (``cluster_bytes.lua``, refused over the budget), give each new version
   its global id and keep its document (``cluster_ids.lua``), record the
   uses of the ids (``cluster_uses.lua``), and for a delete, drop the name
   from the index.
2. The topic's slot: the script itself (create, create a child, attach,
   append a schema version, assign ids, register a subject version, delete).
   A child created under a parent first claims its name (``claim_name.lua``).
3. Global, after: list a created topic in the index; give back the bytes
   and the uses of a deleted topic; and when step 2 refused, undo step 1.

Invariants, whatever crash falls between the steps: every listed topic
exists; the budget counts at least the bytes stored; an id's uses include
every version using it (so its document is never dropped while used). A
crash leaves at worst a topic not listed (a retried create, which answers
409, lists it; a retried delete deletes it), bytes and uses counted that
nothing holds (the budget refuses sooner, never later), or a name claimed by
no topic (it reads as absent; a create of the name after
:data:`CLAIM_TIMEOUT_MS` takes it over). :meth:`ClusterStorage.repair` (``narad
storage repair``) recounts the index and the budget from the topics stored.

**Wake-ups** (where the servers have sharded pub/sub): a topic's
``messages`` events go on its family's shard channel with ``SPUBLISH``, and
``mark_waiting`` subscribes the worker there before a consumer looks
(:mod:`narad_redis.wakeups`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import redis

from narad.errors import ChildInAnotherSlot
from narad.storage import Event
from narad.storage import Notification
from narad.storage import SchemaLimits
from narad.storage import SchemaVersion
from narad.storage import SchemaWriteResult
from narad.storage import ServerStatus
from narad.storage import Status
from narad.storage import TopicChanges
from narad.storage import TopicMeta
from narad_redis.cluster import ClusterClient
from narad_redis.storage import RedisStorage
from narad_redis.storage import _topic_meta
from narad_redis.storage import _value_topic
from narad_redis.wakeups import ShardedWakeups
from narad_redis.wakeups import channel

#: How old a name's stub must be, its topic absent, before a create may take
#: the name over (a crash between the claim and the child's creation).
CLAIM_TIMEOUT_MS = 60_000
#: The cluster byte budget the scripts in a topic's slot check: none (the
#: global step checked the real one).
UNLIMITED = 1 << 53
#: Scripts that see global keys beside a topic's, and the (0-based) ARGV
#: index of their cluster byte budget (None: they check none).
CROSS_SLOT = {
    "create_topic": 4,
    "create_child": 8,
    "attach_child": 8,
    "alter_topic_schema": 6,
    "register_subject": 5,
    "delete_topic": None,
    "delete_subject": None,
    "assign_schema_ids": None,
}


#: The cluster byte budget a script in a topic's slot checks (see
#: :meth:`ClusterStorage._guarded`), per call (greenlet-local under gevent).
_BUDGET: ContextVar[int] = ContextVar("narad_cluster_budget", default=UNLIMITED)
#: The topic :meth:`ClusterStorage.placed_with` names, per call.
_PLACE: ContextVar[str | None] = ContextVar("narad_place", default=None)
#: Names whose hash tag a storage remembers at most (then it forgets all).
MAX_HOMES = 200_000
#: The results whose cluster byte count is reported (the global one).
_COUNTED = frozenset({Status.OK, Status.TOPIC_BUDGET, Status.CLUSTER_BUDGET})


def tag_of(key: str) -> str:
    """The hash tag of a key (``narad:{<tag>}...``)."""
    return key[key.index("{") + 1 : key.index("}")]


def prefix(name: str, tag: str) -> str:
    """The key prefix of topic ``name`` stored under hash tag ``tag``."""
    if name == tag:
        return f"narad:{{{name}}}"
    return f"narad:{{{tag}}}/{name}"


class ClusterStorage(RedisStorage):
    """:class:`RedisStorage` over a :class:`ClusterClient`."""

    TOPICS = "narad:{@schemas}:topics"
    SCHEMA_BYTES = "narad:{@schemas}:schema_bytes"

    def __init__(self, client: ClusterClient) -> None:
        super().__init__(client)
        client.scripts = list(self.scripts.values())
        self._global = {
            self.TOPICS,
            self.SCHEMA_BYTES,
            self.SCHEMA_IDS,
            self.SCHEMA_NEXT,
            self.SCHEMA_DOCS,
            self.SUBJECTS,
        }
        # name -> hash tag it is stored under: learnt from every record read
        # (a parent's names its children's), else read once.
        self._homes: dict[str, str] = {}
        self._wakeups: ShardedWakeups | None = None
        if _has_sharded_pubsub(client):
            self._wakeups = ShardedWakeups(
                client.node_of, lambda address: client.unpooled(address), client.refresh
            )

    # -- keys -----------------------------------------------------------------

    def _tag(self, name: str) -> str:
        """The hash tag topic ``name`` is stored under (read from its name's
        record key the first time)."""
        tag = self._homes.get(name)
        if tag is None:
            key = prefix(name, name) + ":meta"
            own, home = self.client.call(lambda r: r.hmget(key, "name", "home"))
            tag = home.decode() if home is not None and own is None else name
            self._remember(name, tag)
        return tag

    def _remember(self, name: str, tag: str) -> None:
        if len(self._homes) >= MAX_HOMES:
            self._homes.clear()
        self._homes[name] = tag

    def _topic(self, name: str) -> str:  # type: ignore[override]
        return prefix(name, self._tag(name))

    def _subject(self, name: str) -> str:  # type: ignore[override]
        # "<t>-value" stays in the slot of t's name (where its record or its
        # stub is), wherever t itself is stored.
        topic = _value_topic(name)
        if topic:
            return prefix(topic, topic) + ":value"
        return super()._subject(name)

    def _learn(self, meta: TopicMeta, tag: str) -> None:
        self._remember(meta.name, tag)
        for child in meta.children:
            self._remember(child.name, tag)

    @contextlib.contextmanager
    def placed_with(self, name: str) -> Iterator[None]:
        """Within it, :meth:`create_topic` stores each new topic in the hash
        slot of topic ``name`` (its family), as a child created under it is,
        so that it may be attached to ``name`` later."""
        token = _PLACE.set(name)
        try:
            yield
        finally:
            _PLACE.reset(token)

    def _standin(self, tag: str, key: str) -> str:
        return f"narad:{{{tag}}}:g:{key.rpartition('}:')[2]}"

    def _run(
        self,
        script: str,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        replayable: bool | None = None,
    ) -> Any:
        if script in CROSS_SLOT:
            local = next(k for k in keys if k not in self._global)
            tag = tag_of(local)
            keys = [self._standin(tag, k) if k in self._global else k for k in keys]
            uses = f"narad:{{{tag}}}:g:uses:"
            args = [uses if a == self.SCHEMA_USES else a for a in args]
            budget = CROSS_SLOT[script]
            if budget is not None:
                args[budget] = _BUDGET.get()
            if script == "register_subject" and args[11]:
                # A topic's record or stub, in the subject's slot.
                topic = _value_topic(args[10])
                keys[2] = prefix(topic, topic) + ":meta"
        return super()._run(script, keys, args, replayable=replayable)

    # -- health -----------------------------------------------------------------------

    def server_status(self) -> ServerStatus | None:
        """Every primary that answers, checked as a single server is:
        durable only if each is (the first that is not says why), and the
        memory of the fullest. A primary not answering (a failover) is
        left out: its slots answer 503 meanwhile; None if none answers."""
        statuses = []
        for address in self.client.primaries():
            with self.client.pinned(address):
                status = super().server_status()
            if status is not None:
                statuses.append((address, status))
        if not statuses:
            return None
        weak = [(a, s) for a, s in statuses if not s.durable]
        fullest = max(
            (s for _, s in statuses),
            key=lambda s: s.memory_used / s.memory_limit if s.memory_limit else 0,
        )
        if weak:
            (host, port), status = weak[0]
            detail = f"primary {host}:{port}: {status.detail}"
        else:
            detail = f"{len(statuses)} primaries: {statuses[0][1].detail}"
        return ServerStatus(not weak, detail, fullest.memory_used, fullest.memory_limit)

    # -- wake-ups -------------------------------------------------------------------

    def _event(self, event: Event, *topics: str) -> list[str]:
        if event is Event.MESSAGES and self._wakeups is not None:
            # SPUBLISHed on the family's shard channel (append.lua, settle.lua).
            return [channel(self._tag(topics[0])), " ".join((event.value, *topics))]
        return super()._event(event, *topics)

    def mark_waiting(self, meta: TopicMeta, until_ms: int) -> Status:
        status = super().mark_waiting(meta, until_ms)
        if status is Status.OK and self._wakeups is not None:
            # Subscribed (confirmed) before the consumer's look.
            self._wakeups.want(channel(self._tag(meta.name)))
        return status

    def notifications(
        self, events: Collection[Event] | None = None
    ) -> Iterator[Notification | None]:
        wanted = frozenset(Event if events is None else events)
        if self._wakeups is None or Event.MESSAGES not in wanted:
            return super().notifications(events)
        # Topic and user events stay on PUBLISH (at least one channel, for
        # the stream's LISTENING).
        plain = (wanted - {Event.MESSAGES}) or {Event.TOPIC_CHANGED}
        return self._wakeups.stream(super().notifications(plain), wanted)

    # -- global steps -----------------------------------------------------------

    def _reserve(self, size: int, limits: SchemaLimits) -> tuple[bool, int]:
        """Step 1: reserve ``size`` bytes; (reserved?, the budget's count)."""
        reply = self._run_global(
            "cluster_bytes", [self.SCHEMA_BYTES], [size, limits.cluster_bytes]
        )
        return reply[0] == b"ok", int(reply[1])

    def _give_back(self, size: int) -> None:
        """Give ``size`` bytes back (negative: count them, unchecked)."""
        if size:
            self._run_global("cluster_bytes", [self.SCHEMA_BYTES], [-size, UNLIMITED])

    def _assign(self, version: SchemaVersion, tag: str) -> int:
        """Step 1: the version's global id, then known under its identity in
        the family's stand-in too (where the script looks it up)."""
        identity = version.identity
        if identity is None:
            raise ValueError("a version written needs its identity")
        schema_id = int(
            self._run_global(
                "cluster_ids",
                [self.SCHEMA_IDS, self.SCHEMA_NEXT, self.SCHEMA_DOCS],
                [
                    identity.key,
                    identity.schema_type,
                    version.references,
                    version.document,
                ],
            )
        )
        standin = self._standin(tag, self.SCHEMA_IDS)
        self.client.call(lambda r: r.hset(standin, identity.key, schema_id))
        return schema_id

    def _uses(self, add: bool, uses: Sequence[tuple[int, str]]) -> None:
        if uses:
            args: list[Any] = [self.SCHEMA_USES, int(add)]
            for schema_id, use in uses:
                args += [schema_id, use]
            self._run_global("cluster_uses", [self.SCHEMA_DOCS], args)

    def _run_global(self, script: str, keys: list[str], args: list[Any]) -> Any:
        # Each is harmless run twice but the byte count's, whose rerun after
        # a lost reply counts its bytes twice: more, never fewer.
        return super()._run(script, keys, args, replayable=True)

    def _ids_of(self, key: str) -> dict[int, int]:
        """Version -> global id of a history hash (versions with one)."""
        raw = self.client.call(lambda r: r.hgetall(key))
        return {
            int(field[3:]): int(value)
            for field, value in raw.items()
            if field.startswith(b"id:") and value
        }

    # -- topics -----------------------------------------------------------------

    def get_topics(self, names: Sequence[str]) -> list[TopicMeta | None]:
        def read(r: redis.Redis, keys: list[str]) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for key in keys:
                pipe.hgetall(key)
            return pipe.execute()

        raws = self.client.call(
            lambda r: read(r, [prefix(n, n) + ":meta" for n in names])
        )
        tags = list(names)
        stubs = [i for i, raw in enumerate(raws) if raw and b"name" not in raw]
        if stubs:
            for i in stubs:
                tags[i] = raws[i][b"home"].decode()
            homes = [prefix(names[i], tags[i]) + ":meta" for i in stubs]
            found = self.client.call(lambda r: read(r, homes))
            for i, raw in zip(stubs, found, strict=True):
                epoch = raws[i].get(b"home_epoch")
                raws[i] = raw if raw.get(b"epoch") == epoch else {}
        metas = [_topic_meta(raw) for raw in raws]
        for name, meta, tag in zip(names, metas, tags, strict=True):
            if meta is not None:
                self._learn(meta, tag)
            else:
                self._homes.pop(name, None)
        return metas

    def topic_owners(self, names: Sequence[str]) -> list[str | None]:
        return [None if meta is None else meta.owner for meta in self.get_topics(names)]

    def _guarded(
        self,
        tag: str,
        size: int,
        limits: SchemaLimits,
        assign: Callable[[], list[tuple[int, str]]],
        write: Callable[[], SchemaWriteResult],
    ) -> SchemaWriteResult:
        """Step 1 (reserve ``size`` bytes; ``assign`` gives ids and records
        their uses), step 2 (``write``, in slot ``tag``), and step 1 undone
        if step 2 refused. Over the budget, step 2 still runs, told the room
        the global count leaves, so that its refusals keep their order (a
        base mismatch before a full budget)."""
        reserved, count = self._reserve(size, limits) if size else (True, 0)
        uses = assign()
        budget = UNLIMITED
        if not reserved:
            standin = self._standin(tag, self.SCHEMA_BYTES)
            family = int(self.client.call(lambda r: r.get(standin)) or 0)
            budget = family + limits.cluster_bytes - count
        token = _BUDGET.set(budget)
        try:
            result = write()
        finally:
            _BUDGET.reset(token)
        if result.status is Status.OK:
            if not reserved:  # the room grew meanwhile: count what it stored
                self._run_global(
                    "cluster_bytes", [self.SCHEMA_BYTES], [size, UNLIMITED]
                )
        else:
            if reserved:
                self._give_back(size)
            self._uses(False, uses)
        if result.status in _COUNTED:
            result = self._with_count(result)
        return result

    def create_topic(
        self,
        meta: TopicMeta,
        schema: SchemaVersion | None = None,
        *,
        limits: SchemaLimits | None = None,
    ) -> SchemaWriteResult:
        if schema is not None and limits is None:
            raise ValueError("a topic created with a schema needs its limits")
        near = _PLACE.get()
        tag = meta.name if near is None else self._tag(near)
        claimed = meta.name != tag
        if claimed:
            refused = self._claim(meta.name, tag, meta.epoch)
            if refused is not None:
                return refused
        self._remember(meta.name, tag)

        def assign() -> list[tuple[int, str]]:
            if schema is None:
                return []
            uses = [(self._assign(schema, tag), f"{meta.name}-value\n1")]
            self._uses(True, uses)
            return uses

        result = self._guarded(
            tag,
            len(schema.document) if schema else 0,
            limits or SchemaLimits(0, 0, 0),
            assign,
            lambda: super(ClusterStorage, self).create_topic(
                meta, schema, limits=limits
            ),
        )
        if result.status is Status.OK:
            self.client.call(lambda r: r.zadd(self.TOPICS, {meta.name: 0}))
            return result
        self._release(meta.name, meta.epoch, claimed)
        if result.status is Status.EXISTS:
            # A retry after a crash between the steps lists the topic.
            self._relist(meta.name)
        return result

    def create_child(
        self,
        meta: TopicMeta,
        parent: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        tag = self._tag(parent.name)
        claimed = meta.name != tag
        if claimed:
            refused = self._claim(meta.name, tag, meta.epoch)
            if refused is not None:
                return refused
        self._remember(meta.name, tag)
        result = self._guarded(
            tag,
            parent.schema_bytes if parent.schema_version else 0,
            limits,
            lambda: self._adopting(parent, meta.name),
            lambda: super(ClusterStorage, self).create_child(
                meta,
                parent,
                delay_ms=delay_ms,
                limits=limits,
                max_children=max_children,
            ),
        )
        if result.status is Status.OK:
            self.client.call(lambda r: r.zadd(self.TOPICS, {meta.name: 0}))
        else:
            self._release(meta.name, meta.epoch, claimed)
        return result

    def _adopting(self, parent: TopicMeta, child: str) -> list[tuple[int, str]]:
        """Record the uses of the parent's ids by a child adopting its history."""
        ids = self._ids_of(self._topic(parent.name) + ":schemas")
        uses = [(i, f"{child}-value\n{v}") for v, i in sorted(ids.items())]
        self._uses(True, uses)
        return uses

    def attach_child(
        self,
        parent: TopicMeta,
        child: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        tag = self._tag(parent.name)
        if self._tag(child.name) != tag:
            raise ChildInAnotherSlot(child.name, parent.name)
        adopting = child.schema_version == 0 and parent.schema_version != 0
        return self._guarded(
            tag,
            parent.schema_bytes if adopting else 0,
            limits,
            lambda: self._adopting(parent, child.name) if adopting else [],
            lambda: super(ClusterStorage, self).attach_child(
                parent,
                child,
                delay_ms=delay_ms,
                limits=limits,
                max_children=max_children,
            ),
        )

    def delete_topic(self, meta: TopicMeta) -> Status:
        topic = self._topic(meta.name)
        ids = self._ids_of(topic + ":schemas")
        stored = self.client.call(lambda r: r.hget(topic + ":meta", "schema_bytes"))
        self.client.call(lambda r: r.zrem(self.TOPICS, meta.name))
        status = super().delete_topic(meta)
        if status is not Status.OK:
            self._relist(meta.name)
            return status
        self._give_back(int(stored or 0))
        self._uses(False, [(i, f"{meta.name}-value\n{v}") for v, i in ids.items()])
        self._release(meta.name, meta.epoch, meta.name != self._tag(meta.name))
        return status

    def append_schema(
        self,
        meta: TopicMeta,
        version: SchemaVersion,
        *,
        expected_current: int,
        limits: SchemaLimits,
        changes: TopicChanges | None = None,
    ) -> SchemaWriteResult:
        tag = self._tag(meta.name)

        def assign() -> list[tuple[int, str]]:
            schema_id = self._assign(version, tag)
            number = expected_current + 1
            names = [meta.name, *(c.name for c in meta.children)]
            uses = [(schema_id, f"{name}-value\n{number}") for name in names]
            self._uses(True, uses)
            return uses

        return self._guarded(
            tag,
            len(version.document) * (1 + len(meta.children)),
            limits,
            assign,
            lambda: super(ClusterStorage, self).append_schema(
                meta,
                version,
                expected_current=expected_current,
                limits=limits,
                changes=changes,
            ),
        )

    def assign_schema_ids(
        self, meta: TopicMeta, versions: Sequence[SchemaVersion]
    ) -> Status:
        tag = self._tag(meta.name)
        uses = [
            (self._assign(v, tag), f"{meta.name}-value\n{v.version}") for v in versions
        ]
        self._uses(True, uses)
        status = super().assign_schema_ids(meta, versions)
        if status is not Status.OK:
            self._uses(False, uses)
        return status

    def register_subject_version(
        self,
        name: str,
        version: SchemaVersion,
        *,
        expected_latest: int,
        topic: str,
        limits: SchemaLimits,
    ) -> SchemaWriteResult:
        tag = tag_of(self._subject(name))

        def assign() -> list[tuple[int, str]]:
            uses = [(self._assign(version, tag), f"{name}\n{expected_latest + 1}")]
            self._uses(True, uses)
            return uses

        result = self._guarded(
            tag,
            len(version.document),
            limits,
            assign,
            lambda: super(ClusterStorage, self).register_subject_version(
                name,
                version,
                expected_latest=expected_latest,
                topic=topic,
                limits=limits,
            ),
        )
        if result.status is Status.OK:
            self._list_subject(name, tag)
        return result

    def _list_subject(self, name: str, tag: str) -> None:
        """Step 3 of a subject's write: list it globally iff the script
        listed it in its slot's stand-in (the script decides, as on a single
        server)."""
        standin = self._standin(tag, self.SUBJECTS)
        if self.client.call(lambda r: r.zscore(standin, name)) is None:
            self.client.call(lambda r: r.zrem(self.SUBJECTS, name))
        else:
            self.client.call(lambda r: r.zadd(self.SUBJECTS, {name: 0}))

    def delete_subject_versions(
        self, name: str, versions: Sequence[int], *, permanent: bool
    ) -> Status:
        key = self._subject(name)
        ids = self._ids_of(key + ":schemas")
        sizes = self._sizes(key + ":schemas", versions) if permanent else {}
        status = super().delete_subject_versions(name, versions, permanent=permanent)
        if status is Status.OK and permanent:
            self._give_back(sum(sizes.values()))
            self._uses(False, [(ids[v], f"{name}\n{v}") for v in versions if v in ids])
        if status is Status.OK:
            self._list_subject(name, tag_of(key))
        return status

    def _sizes(self, key: str, versions: Sequence[int]) -> dict[int, int]:
        def read(r: redis.Redis) -> list[int]:
            pipe = r.pipeline(transaction=False)
            for v in versions:
                pipe.hstrlen(key, v)
            return pipe.execute()

        return dict(zip(versions, self.client.call(read), strict=True))

    # -- helpers ------------------------------------------------------------------

    def _with_count(self, result: SchemaWriteResult) -> SchemaWriteResult:
        """The result with the global byte count, not the family's."""
        count = self.client.call(lambda r: r.get(self.SCHEMA_BYTES))
        return replace(result, cluster_bytes=int(count or 0))

    def _relist(self, name: str) -> None:
        """List ``name`` if it exists (repairs a crash between the steps)."""
        if self.get_topic(name) is not None:
            self.client.call(lambda r: r.zadd(self.TOPICS, {name: 0}))

    def _claim(self, name: str, tag: str, epoch: str) -> SchemaWriteResult | None:
        """Claim ``name`` for a topic stored under ``tag``; the refusal if it
        is taken (a stub older than :data:`CLAIM_TIMEOUT_MS` whose topic
        never came is taken over)."""
        keys = [prefix(name, name) + ":meta", prefix(name, name) + ":value:meta"]
        for _ in range(2):
            now = int(time.time() * 1000)
            reply = self._run("claim_name", keys, [tag, epoch, now])
            if reply[0] == b"ok":
                return None
            if reply[0] == b"subject_exists":
                return SchemaWriteResult(Status.SUBJECT_EXISTS)
            home, stub_epoch, claimed = (x.decode() for x in reply[1:4])
            if not home or now - int(claimed or 0) < CLAIM_TIMEOUT_MS:
                break
            found = self.client.call(
                lambda r, h=home: r.hget(prefix(name, h) + ":meta", "epoch")
            )
            if found is not None and found.decode() == stub_epoch:
                break
            self._run("release_name", keys[:1], [stub_epoch])
        self._relist(name)
        return SchemaWriteResult(Status.EXISTS)

    def _release(self, name: str, epoch: str, claimed: bool) -> None:
        self._homes.pop(name, None)
        if claimed:
            self._run("release_name", [prefix(name, name) + ":meta"], [epoch])

    # -- reads over several topics: one slot per script call --------------------

    def _apart(self, key: str, other: str) -> bool:
        keyslot = self.client.redis.keyslot
        return keyslot(key) != keyslot(other)

    # -- repair ---------------------------------------------------------------------

    def repair(self) -> dict[str, int]:
        """Recount the topic index and the schema byte budget from the
        topics and subjects stored (after a crash between two steps). What
        it changed.

        The index is recounted beside live creates and deletes: a name is
        listed or unlisted only if its record, read again after the scan,
        says so (a topic created after the scan reached its slot is stored
        before it is listed, so it is never taken for a ghost), and a ghost
        whose topic came between that read and the ``ZREM`` is listed again
        at once. The byte count is set to what the scan saw: run it while no
        schema is being written, or a write meanwhile goes uncounted."""
        names: set[str] = set()
        stored = 0
        for node in self.client.each_primary(_scan_records):
            if isinstance(node, Exception):
                raise node
            for name, size in node:
                if name:
                    names.add(name)
                stored += size
        listed = {
            n.decode() for n in self.client.call(lambda r: r.zrange(self.TOPICS, 0, -1))
        }
        missing = self._existing(names - listed)
        ghosts = (listed - names) - self._existing(listed - names)
        if missing:
            self.client.call(lambda r: r.zadd(self.TOPICS, dict.fromkeys(missing, 0)))
        if ghosts:
            self.client.call(lambda r: r.zrem(self.TOPICS, *ghosts))
            back = self._existing(ghosts)
            if back:
                self.client.call(lambda r: r.zadd(self.TOPICS, dict.fromkeys(back, 0)))
            ghosts -= back
        before = int(self.client.call(lambda r: r.get(self.SCHEMA_BYTES)) or 0)
        self.client.call(lambda r: r.set(self.SCHEMA_BYTES, stored))
        return {
            "listed": len(missing),
            "unlisted": len(ghosts),
            "bytes_released": before - stored,
        }

    def _existing(self, names: Collection[str]) -> set[str]:
        """Those of ``names`` whose topic is stored now."""
        order = sorted(names)
        metas = self.get_topics(order) if order else []
        return {n for n, meta in zip(order, metas, strict=True) if meta is not None}


def _has_sharded_pubsub(client: ClusterClient) -> bool:
    """Whether the cluster's servers have SSUBSCRIBE (Valkey, Redis 7+)."""

    def probe(r: redis.Redis) -> bool:
        try:
            return bool(r.execute_command("COMMAND", "INFO", "SSUBSCRIBE"))
        except (TypeError, redis.ResponseError):  # unknown: a nil redis-py trips on
            return False

    return bool(client.first_answer(probe))


def _scan_records(r: redis.Redis) -> list[tuple[str, int]]:
    """Every topic record and subject record on one primary: (the topic's
    name, or "" for a subject, and its schema bytes)."""
    found = []
    for key in r.scan_iter(match="narad:{*:meta", count=1000):
        text = key.decode()
        if text.startswith("narad:{@") or ":g:" in text:
            continue
        name, size = r.hmget(key, "name", "schema_bytes")
        if text.endswith(":value:meta") or text.startswith("narad:{s:"):
            found.append(("", int(size or 0)))
        elif name is not None:
            found.append((name.decode(), int(size or 0)))
    return found
